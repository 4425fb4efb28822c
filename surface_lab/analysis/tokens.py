"""Token counts with their source: the usage a log recorded for each model request (dsh
`usage` chunks and message usage, the usage importers carry over from Claude Code, Codex,
pi and ATIF logs), a caller's tokenizer, or the 4-characters estimate.

A tokenizer is any callable from text to a token count. The adapters wrap an encoder the
caller has already built (`tiktoken.get_encoding(...)`, `tokenizers.Tokenizer.from_file`):
nothing here downloads a vocabulary."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, NamedTuple

import msgspec

from ..events import Event, mapping_at
from ..jsonvalue import MAX_SAFE_INTEGER, as_int
from ..messages import blocks_chars, blocks_text, message_text, text_tokens
from ..reading.lines import TYPE_NAMES
from ..reading.sequences import LogEvents, decode_line
from ..surface import APPEND, LOG_ONLY, REPLACE, Plan, PlanList

__all__ = [
    "AroundReplace",
    "PathRequest",
    "RequestColumns",
    "RequestTokens",
    "Tokenizer",
    "around_replaces",
    "count_tokens",
    "hf_tokenizer",
    "path_request_columns",
    "path_requests",
    "recorded_usage",
    "request_tokens",
    "tiktoken_tokenizer",
]

Tokenizer = Callable[[str], int]
# dict first: most mappings here are dicts, which answers without the Mapping ABC's check
_MAPPINGS = (dict, Mapping)
# per-message overhead the estimate adds (role and framing), kept for the tokenizer too
_MESSAGE_OVERHEAD = 4


def tiktoken_tokenizer(encoding: Any) -> Tokenizer:
    """A tokenizer from a `tiktoken.Encoding` (special tokens are counted as text)."""
    return lambda text: len(encoding.encode(text, disallowed_special=()))


def hf_tokenizer(tokenizer: Any) -> Tokenizer:
    """A tokenizer from a Hugging Face `tokenizers.Tokenizer` (no special tokens added)."""
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


def count_tokens(event: Mapping[str, Any], tokenizer: Tokenizer | None = None
                 ) -> tuple[int, str]:
    """`(tokens, source)` of one surface event's text: `"tokenizer"` with one (plus the
    estimate's per-message overhead), else `"estimate"` (4 characters a token)."""
    text = message_text(event)
    if tokenizer is None:
        return text_tokens(text), "estimate"
    return _MESSAGE_OVERHEAD + int(tokenizer(text)), "tokenizer"


_USAGE_KEYS = (("inputTokens", "input"), ("outputTokens", "output"),
               ("cacheReadTokens", "cache_read"), ("cacheWriteTokens", "cache_write"),
               ("reasoningTokens", "reasoning"))


def recorded_usage(events: Sequence[Event], seq: int, types: Sequence[str] | None = None
                   ) -> tuple[dict[str, int], str | None]:
    """The usage recorded for the model response `events[seq]` (an assistant message):
    its own `usage` field (`"message"`), else the last `usage` chunk it cites
    (`"chunk"`); `({}, None)` when the log has none. `types` (each event's type) saves
    reading events that are not chunks."""
    event = events.raw(seq) if isinstance(events, LogEvents) else events[seq]  # unfrozen
    usage = mapping_at(event, "data").get("usage")
    source: str | None = "message" if isinstance(usage, Mapping) else None
    if source is None:
        cited = event.get("sourceEventSeqs")
        for s in reversed(cited if isinstance(cited, list) else []):
            if not isinstance(s, int) or not 0 <= s < seq or (
                    types is not None and types[s] != "assistant/chunk"):
                continue
            cited_event = events.raw(s) if isinstance(events, LogEvents) else events[s]
            chunk = mapping_at(cited_event.get("data"), "chunk")
            if cited_event["type"] == "assistant/chunk" and chunk.get("type") == "usage":
                usage, source = chunk.get("usage"), "chunk"
                break
    if not isinstance(usage, Mapping):
        return {}, None
    out = _figures(usage)
    return out, source if out else None


@dataclass(frozen=True)
class RequestTokens:
    """The tokens of one model request, as far as the log tells.

    Attributes:
        seq: the assistant message the request produced.
        surface_entries: entries on the surface when it was sent.
        estimated: the surface's tokens by the 4-characters estimate.
        counted: the surface's tokens by the tokenizer (None without one).
        recorded: the usage recorded (`input`, `output`, `cache_read`, `cache_write`).
        usage_source: where `recorded` came from (`message`, `chunk`) or None.
        input_tokens: the best figure for the request's input.
        input_source: `usage` (recorded input plus cache reads and writes, which add up
            to the prompt as Anthropic reports them; a provider whose input already
            includes cached tokens reports none separately), `tokenizer` or `estimate`.
    """

    seq: int
    surface_entries: int
    estimated: int
    counted: int | None
    recorded: dict[str, int]
    usage_source: str | None
    input_tokens: int
    input_source: str


def request_tokens(events: Sequence[Event], nodes_before: Sequence[int], seq: int,
                   tokenizer: Tokenizer | None = None,
                   cache: dict[int, tuple[int, int | None]] | None = None) -> RequestTokens:
    """The `RequestTokens` of the response `events[seq]`, sent with the surface
    `nodes_before` (what was on it just before the response was committed).

    Args:
        cache: per-seq `(estimate, tokenizer count)`, reused across calls.
    """
    cache = {} if cache is None else cache
    estimated = counted = 0
    for n in nodes_before:
        if n not in cache:
            text_est = count_tokens(events[n])[0]
            cache[n] = (text_est, count_tokens(events[n], tokenizer)[0]
                        if tokenizer is not None else None)
        est, cnt = cache[n]
        estimated += est
        counted += cnt or 0
    recorded, source = recorded_usage(events, seq)
    if "input" in recorded:
        best = recorded["input"] + recorded.get("cache_read", 0) + recorded.get(
            "cache_write", 0)
        best_source = "usage"
    elif tokenizer is not None:
        best, best_source = counted, "tokenizer"
    else:
        best, best_source = estimated, "estimate"
    return RequestTokens(seq, len(nodes_before), estimated,
                         counted if tokenizer is not None else None, recorded, source, best,
                         best_source)


@dataclass(frozen=True, slots=True)
class PathRequest:
    """One model request on the imported path (a step: the assistant messages of one
    response), with the surface it was sent with and the usage recorded for it.

    Attributes:
        seq: the request's first assistant message; `last_seq` its last.
        turn, step: the step's `data.turn` and `data.step`.
        request_id: `responseId:requestId` where the source kept them (Claude Code),
            else the response id, else `turn.step`.
        model: the model that answered.
        surface_entries, estimated, counted: the surface just before `seq`: its
            entries, its tokens by the 4-characters estimate and by the tokenizer.
        recorded: the usage of the request's last message (`input` uncached,
            `cache_read`, `cache_write`, `output`, `reasoning`), as recorded.
        usage_source: `message` or `chunk` (None: nothing recorded).
        input_total: recorded input, cache reads and writes added (OpenTelemetry).
        input_tokens, input_source: the best input figure and its source
            (`usage`: input_total; else `tokenizer` or `estimate` of the surface).
    """

    seq: int
    last_seq: int
    turn: int | None
    step: int | None
    request_id: str
    model: str | None
    surface_entries: int
    estimated: int
    counted: int | None
    recorded: dict[str, int]
    usage_source: str | None
    input_total: int | None
    input_tokens: int
    input_source: str


class _TextBlock(msgspec.Struct, gc=False):
    """A content block decoded for its text alone: the fields `blocks_text` reads (the
    estimate needs no ids)."""

    type: Any = None
    text: Any = msgspec.UNSET
    name: Any = None
    arguments: Any = None
    content: list[_TextBlock] | None = None  # a tool result's own blocks


class _Message(msgspec.Struct, gc=False):
    content: list[_TextBlock] | None = None
    source: Any = None  # a mapping, or what the log holds


class _Data(msgspec.Struct, gc=False):
    turn: Any = None
    step: Any = None
    usage: Any = None
    message: _Message | None = None


# the seqs a message cites, kept as their bytes: most messages carry their usage in one
# of the last few, so the rest of a long array is never turned into integers
_NO_CITED = msgspec.Raw(b"null")


class _Reply(msgspec.Struct, gc=False):
    """What a request reads of an assistant message's line."""

    data: _Data | None = None
    sourceEventSeqs: msgspec.Raw = _NO_CITED


_REPLY = msgspec.json.Decoder(_Reply)


class _Chunk(msgspec.Struct, gc=False):
    type: Any = None
    usage: Any = None


class _ChunkData(msgspec.Struct, gc=False):
    chunk: _Chunk | None = None


class _ChunkLine(msgspec.Struct, gc=False):
    """What a request reads of a cited chunk's line: its chunk type and usage."""

    data: _ChunkData | None = None


_CHUNK = msgspec.json.Decoder(_ChunkLine)


def _line_view(events: Sequence[Event], seq: int) -> memoryview | None:
    return events.line_view(seq) if isinstance(events, LogEvents) else None


def _line_views(events: Sequence[Event], seqs: list[int]) -> list[memoryview | None]:
    """Each seq's line (None: read it from memory), found in one pass for a packed log."""
    return events.line_views(seqs) if isinstance(events, LogEvents) else [None] * len(seqs)


def _chunk_usage(events: Sequence[Event], seq: int, view: memoryview | None
                 ) -> tuple[bool, Any]:
    """(is a usage chunk, its usage) of the chunk `events[seq]`, whose line is `view`;
    a packed row's member is a delta, never usage."""
    if isinstance(events, LogEvents):
        if view is None:  # a delta
            return False, None
        line = view.tobytes()
        if b"usage" not in line and b"\\u" not in line:  # (an escape may spell it)
            return False, None
    return _decoded_chunk(events, seq, view)


def _decoded_chunk(events: Sequence[Event], seq: int, view: memoryview | None
                   ) -> tuple[bool, Any]:
    """(is a usage chunk, its usage) of the chunk `events[seq]`, decoded from its line
    `view` where it has one and the types take it, else read from memory."""
    line = decode_line(_CHUNK, view)
    if line is not None:
        chunk = line.data.chunk if line.data is not None else None
        return (chunk is not None and chunk.type == "usage",
                chunk.usage if chunk is not None else None)
    data = mapping_at(events[seq].get("data"), "chunk")
    return data.get("type") == "usage", data.get("usage")


class _Unit(NamedTuple):  # a tuple: one is built per assistant message
    turn: int | None
    step: int | None
    usage: Any
    source: Mapping[str, Any]
    cited: Any


def _unit(events: Sequence[Event], seq: int, view: memoryview | None) -> _Unit:
    """An assistant message's turn, step, usage, model source and cited seqs (see
    `_read_unit`)."""
    return _read_unit(events, seq, view)[0]


def _read_unit(events: Sequence[Event], seq: int, view: memoryview | None
               ) -> tuple[_Unit, Any]:
    """An assistant message's `_Unit` and its content (its typed blocks, None: none; or
    its text where the line is read whole: see `_text_of`): decoded from its line
    `view` alone where the reader kept the log packed, else read from memory. (The
    content apart, so that a caller that only measures it lets it go.)"""
    line = decode_line(_REPLY, view)
    if line is not None and line.data is not None:
        message = line.data.message
        return _typed_unit(line.data, line.sourceEventSeqs), (
            message.content if message is not None else None)
    event = events.raw(seq) if isinstance(events, LogEvents) else events[seq]
    return _event_unit(event), message_text(event)


def _typed_unit(data: Any, cited: Any) -> _Unit:
    """The `_Unit` of an assistant message's `data` decoded typed (by `_REPLY` or
    `_STEP`), its cited seqs `cited`."""
    source = data.message.source if data.message is not None else None
    return _Unit(as_int(data.turn), as_int(data.step), data.usage,
                 source if isinstance(source, _MAPPINGS) else {}, cited)


def _event_unit(event: Event) -> _Unit:
    """The `_Unit` of an assistant message read from memory."""
    data = mapping_at(event, "data")
    return _Unit(as_int(data.get("turn")), as_int(data.get("step")), data.get("usage"),
                 mapping_at(mapping_at(data, "message"), "source"),
                 event.get("sourceEventSeqs"))


def _text_of(content: Any) -> str:
    """`message_text` of a message whose content is `content` (`_read_unit`'s)."""
    return content if type(content) is str else blocks_text(content)


def _chars_of(content: Any) -> int:
    """`len(_text_of(content))`, the text not built."""
    return len(content) if type(content) is str else blocks_chars(content)


_CODES = {name: k for k, name in enumerate(TYPE_NAMES)}
_MESSAGE, _CHUNK_CODE = _CODES["assistant/message"], _CODES["assistant/chunk"]


def _types(events: Sequence[Event]) -> bytes:
    """Each event's type as an index into `TYPE_NAMES` (255: a type it does not know):
    the reader's own codes for a packed log, nothing parsed."""
    if isinstance(events, LogEvents):
        return events.type_codes
    return bytes(_CODES.get(e["type"], 255) for e in events)


class _TextMessage(msgspec.Struct, gc=False):
    content: list[_TextBlock] | None = None


class _TextData(msgspec.Struct, gc=False):
    message: _TextMessage | None = None  # assistant messages and tool results
    content: list[_TextBlock] | None = None  # user and context messages


class _TextLine(msgspec.Struct, gc=False):
    """What the estimate reads of a surface entry's line: its type and message content
    (`LogEvents.message_texts` also decodes the source and the blocks' ids)."""

    type: str
    data: _TextData | None = None


_TEXT = msgspec.json.Decoder(_TextLine)
_NESTED = frozenset({"assistant/message", "tool/result"})  # `data.message` (message_of)


def _entry_content(events: Sequence[Event], seq: int, view: memoryview | None) -> Any:
    """The content of the event `seq`'s message as `_read_unit` gives it: its typed
    blocks, decoded from its line `view` alone where the reader kept the log packed, or
    its `message_text` where the line is read whole (one the types do not take)."""
    line = decode_line(_TEXT, view)
    if line is None:  # no line, or one the types do not take: read whole
        return message_text(events.raw(seq) if isinstance(events, LogEvents) else events[seq])
    data = line.data
    if data is None:
        return None
    if line.type in _NESTED:
        return None if data.message is None else data.message.content
    return data.content


_DIGITS_AND_COMMAS = b"0123456789,"


def _cited_last_first(cited: Any, last: int | None = None) -> list[Any]:
    """The seqs a message cites (its `sourceEventSeqs`, as decoded or as its bytes),
    last first: the `last` of them, or all. An array of plain integers, as the writer
    puts it, is read from its end only; any other value is decoded whole (nothing at
    all unless it is an array)."""
    if isinstance(cited, msgspec.Raw):
        raw = bytes(cited)
        body = raw[1:-1]
        # msgspec checked the JSON: an array of nothing but digits and commas is one of
        # integers, each between two commas
        if raw[:1] == b"[" and not body.strip(_DIGITS_AND_COMMAS):
            if not body:
                return []
            pieces = body.split(b",") if last is None else body.rsplit(b",", last)
            if last is not None and len(pieces) > last:
                del pieces[0]  # the rest of the array, before the last `last`
            return [int(piece) for piece in reversed(pieces)]
        cited = msgspec.json.decode(raw)
    if not isinstance(cited, list):
        return []
    return cited[::-1] if last is None else cited[:-last - 1:-1]


def _request_id(source: Mapping[str, Any], turn: int | None, step: int | None,
                seq: int) -> str:
    response, request = source.get("responseId"), source.get("requestId")
    if isinstance(response, str) and isinstance(request, str):
        return f"{response}:{request}"
    if isinstance(response, str):
        return response
    return f"{turn}.{step}" if step is not None else f"seq-{seq}"


def _chunks_of(seq: int, cited: list[Any], types: bytes) -> list[int]:
    """Of the seqs the message `seq` cites, the chunks before it: where its usage may
    be."""
    return [s for s in cited if isinstance(s, int) and 0 <= s < seq and types[s] == _CHUNK_CODE]


def _further(events: Sequence[Event], seq: int, unit: _Unit, types: bytes, skip: int
             ) -> Iterator[tuple[int, memoryview | None]]:
    """The chunks the message cites, last first, but its last `skip` cited seqs, each
    with its line: the rest of the walk for a usage not among the last few."""
    cited = _cited_last_first(unit.cited)
    for s in _chunks_of(seq, cited[skip:], types):
        yield s, _line_view(events, s)


def _first_usage(events: Sequence[Event], chunks: Iterable[tuple[int, memoryview | None]]
                 ) -> tuple[bool, Any]:
    """(found, its usage) of the first usage chunk among `chunks` (seq, line); (False,
    None) when none is one."""
    for s, view in chunks:
        is_usage, found = _chunk_usage(events, s, view)
        if is_usage:
            return True, found
    return False, None


def _as_recorded(usage: Any, source: str | None) -> tuple[dict[str, int], str | None]:
    if usage is None or not isinstance(usage, _MAPPINGS):
        return {}, None
    out = _figures(usage)
    return out, source if out else None


def _recorded(events: Sequence[Event], unit: _Unit,
              chunks: Iterable[tuple[int, memoryview | None]]
              ) -> tuple[dict[str, int], str | None]:
    """`recorded_usage` of a decoded message: its own usage, else that of the first
    usage chunk among `chunks` (its cited chunks, last first, with their lines)."""
    if isinstance(unit.usage, _MAPPINGS):
        return _as_recorded(unit.usage, "message")
    return _as_recorded(_first_usage(events, chunks)[1], "chunk")


def _usage_of(events: Sequence[Event], seq: int, unit: _Unit, types: bytes
              ) -> tuple[dict[str, int], str | None]:
    """`recorded_usage` of an assistant message whose line is decoded already."""
    return _recorded(events, unit, _further(events, seq, unit, types, 0))


# the cited seqs per message looked at first, their lines found together: a usage chunk
# comes last or just before the finish chunk
_TAIL = 3


def _cited_tail(cited: Any) -> tuple[list[Any], bool]:
    """The last `_TAIL` seqs a message cites, last first, and whether it cites more.
    Of an array as the writer puts it (its bytes) only the end is read: when its last
    pieces between commas are plain digits, they are its last elements (a comma inside
    a string or a nested value would leave a quote or a bracket in a later piece)."""
    if type(cited) is msgspec.Raw:
        # (copying a short array costs less than slicing a view of it)
        end = bytes(cited) if len(cited) <= _TAIL_BYTES else bytes(
            memoryview(cited)[-_TAIL_BYTES:])
        pieces = end.rsplit(b",", _TAIL)
        if len(pieces) > _TAIL and end[-1:] == b"]":
            del pieces[0]  # (what comes before them, cut anywhere)
            pieces[-1] = pieces[-1][:-1]
            # (valid JSON has no empty piece, so all digits means each is digits)
            if b"".join(pieces).isdigit():
                return [int(piece) for piece in reversed(pieces)], True
    found = _cited_last_first(cited, _TAIL)
    return found, len(found) == _TAIL


# the bytes at the end of a message's `sourceEventSeqs` that `_cited_tail` reads first
_TAIL_BYTES = 64


def _usages(events: Sequence[Event], seqs: list[int], units: Mapping[int, _Unit],
            types: bytes) -> list[tuple[dict[str, int], str | None]]:
    """`_usage_of` of each of these messages: the lines of the chunks among the last
    few seqs each cites found in one pass and searched for a usage in place (only a
    line that may hold one is decoded), the rest (should its usage be further back)
    one at a time. (Written out inline: it runs once per request.)"""
    chunk_code = _CHUNK_CODE
    tails = []
    ahead: list[int] = []
    for seq in seqs:
        unit = units[seq]
        usage = unit.usage
        if usage is not None and isinstance(usage, _MAPPINGS):
            tails.append((unit, -1, False))
            continue
        cited, more = _cited_tail(unit.cited)
        near = [s for s in cited  # (`_chunks_of`)
                if isinstance(s, int) and 0 <= s < seq and types[s] == chunk_code]
        tails.append((unit, len(near), more))
        ahead += near
    if isinstance(events, LogEvents):
        packed = True
        data, begins, ends = events.line_spans(ahead)
    else:
        packed, data, begins, ends = False, b"", [-1] * len(ahead), [-1] * len(ahead)
    view = memoryview(data)
    out = []
    at = 0
    for seq, (unit, n, more) in zip(seqs, tails, strict=True):
        if n < 0:
            out.append(_as_recorded(unit.usage, "message"))
            continue
        found, usage = False, None
        for k in range(at, at + n):
            if not packed:
                found, usage = _decoded_chunk(events, ahead[k], None)
            else:
                begin, end = begins[k], ends[k]
                if begin < 0 or (data.find(b"usage", begin, end) < 0
                                 and data.find(b"\\u", begin, end) < 0):
                    continue  # a delta, or a line with no usage (`_chunk_usage`)
                found, usage = _decoded_chunk(events, ahead[k], view[begin:end])
            if found:
                break
        at += n
        if not found:
            usage = _first_usage(events, _further(events, seq, unit, types, _TAIL))[
                1] if more else None
        out.append(_as_recorded(usage, "chunk"))
    return out


def _figures(usage: Mapping[str, Any]) -> dict[str, int]:
    """The usage's figures that are integers, by their names here."""
    out = {}
    for key, name in _USAGE_KEYS:
        value = usage.get(key)
        if value is None:
            continue
        if type(value) is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            out[name] = value  # (`as_int`'s first case, the common one, inline)
        elif (n := as_int(value)) is not None:
            out[name] = n
    return out


class RequestColumns(NamedTuple):
    """`path_requests` as columns, one list per `PathRequest` attribute (`counted`
    None without a tokenizer): what `tokens_df` builds its frame from, without a row
    object per request."""

    seq: list[int]
    last_seq: list[int]
    turn: list[int | None]
    step: list[int | None]
    request_id: list[str]
    model: list[str | None]
    surface_entries: list[int]
    estimated: list[int]
    counted: list[int] | None
    recorded: list[dict[str, int]]
    usage_source: list[str | None]
    input_total: list[int | None]
    input_tokens: list[int]
    input_source: list[str]


def path_requests(events: Sequence[Event], plans: Sequence[Plan], *,
                  skip: Collection[int] = (), tokenizer: Tokenizer | None = None
                  ) -> list[PathRequest]:
    """Every model request on the log's path, once: the appended assistant messages
    (but those in `skip`, e.g. an importer's copies) grouped by step, each with the
    surface its first message was sent with and its last message's usage.

    The surface is kept as running sums as the plans apply, each entry's text counted
    once (read from its line alone where the log is packed): `path_request_columns`,
    one object per request."""
    c = path_request_columns(events, plans, skip=skip, tokenizer=tokenizer)
    counted = c.counted if c.counted is not None else [None] * len(c.seq)
    return [PathRequest(*row) for row in zip(
        c.seq, c.last_seq, c.turn, c.step, c.request_id, c.model, c.surface_entries,
        c.estimated, counted, c.recorded, c.usage_source, c.input_total, c.input_tokens,
        c.input_source, strict=True)]


def path_request_columns(events: Sequence[Event], plans: Sequence[Plan], *,
                         skip: Collection[int] = (), tokenizer: Tokenizer | None = None
                         ) -> RequestColumns:
    """`path_requests`, as columns. Each surface entry's line is decoded once, an
    assistant message's for its content and its request, any other's for its content
    (without a tokenizer each text is measured, not built); the surface's sums are
    numpy cumulative sums over the entries."""
    import numpy as np

    types = _types(events)
    kinds = plans.kinds if isinstance(plans, PlanList) else bytes(p.kind for p in plans)
    replaces = (plans.replaces if isinstance(plans, PlanList)
                else {p.seq: p for p in plans if p.kind == REPLACE})
    codes = np.frombuffer(bytes(kinds), dtype=np.uint8)
    at = np.flatnonzero(codes != LOG_ONLY)  # the surface entries, in order
    entries = at.tolist()
    flags = ((codes[at] == APPEND)
             & (np.frombuffer(types, dtype=np.uint8)[at] == _MESSAGE)).tolist()
    if skip:
        flags = [flag and seq not in skip for seq, flag in zip(entries, flags, strict=True)]
    units: dict[int, _Unit] = {}
    chars = []
    texts: list[str] | None = [] if tokenizer is not None else None
    for seq, view, is_message in zip(entries, _line_views(events, entries), flags,
                                     strict=True):
        if is_message:  # an assistant message: read for its request too
            units[seq], content = _read_unit(events, seq, view)
        else:
            content = _entry_content(events, seq, view)
        if texts is None:  # the estimate needs only the length
            chars.append(_chars_of(content))
        else:
            texts.append(text := _text_of(content))
            chars.append(len(text))
    n = len(entries)
    estimate = 4 + (np.array(chars, dtype=np.int64) + 3) // 4  # `text_tokens`
    counts = (np.array([_MESSAGE_OVERHEAD + int(tokenizer(t)) for t in texts],
                       dtype=np.int64)
              if tokenizer is not None and texts is not None
              else np.zeros(n, dtype=np.int64))
    # the surface as running sums: each entry adds itself, a replace first takes off
    # what it shadows; a message sees the sums of the entries before it
    added = np.ones(n, dtype=np.int64)
    tokens, counted = estimate.copy(), counts.copy()
    at_replace = np.flatnonzero(codes[at] == REPLACE)
    if len(at_replace):
        shadowed = [replaces[entries[i]].shadowed for i in at_replace.tolist()]
        sizes = np.array([len(s) for s in shadowed], dtype=np.int64)
        flat = np.fromiter(chain.from_iterable(shadowed), dtype=np.int64,
                           count=int(sizes.sum()))
        where = np.minimum(np.searchsorted(at, flat), n - 1)
        if (at[where] != flat).any():  # (a fold never shadows what is not on it)
            raise KeyError(f"a replace shadows seqs that are not surface entries: "
                           f"{sorted(set(flat.tolist()) - set(entries))[:5]}")
        owner = np.repeat(at_replace, sizes)
        added[at_replace] -= sizes
        np.subtract.at(tokens, owner, estimate[where])
        np.subtract.at(counted, owner, counts[where])
    messages = list(units)
    where_message = np.searchsorted(at, np.array(messages, dtype=np.int64))
    before = [(np.cumsum(column) - column)[where_message].tolist()
              for column in (added, tokens, counted)]
    groups: dict[Any, list[Any]] = {}
    for seq, size, total, count in zip(messages, *before, strict=True):
        unit = units[seq]
        key = (unit.turn, unit.step) if unit.step is not None else ("seq", seq)
        if key in groups:
            groups[key][1] = seq
        else:
            groups[key] = [seq, seq, size, total, count]
    rows = list(groups.values())
    usages = _usages(events, [g[1] for g in rows], units, types)
    recorded = [u[0] for u in usages]
    heads = [units[g[0]] for g in rows]
    tails = [units[g[1]].source for g in rows]
    totals = [r["input"] + r.get("cache_read", 0) + r.get("cache_write", 0)
              if "input" in r else None for r in recorded]
    best = [(total, "usage") if total is not None else
            (g[4], "tokenizer") if tokenizer is not None else (g[3], "estimate")
            for total, g in zip(totals, rows, strict=True)]
    models = [source.get("model") for source in tails]
    return RequestColumns(
        [g[0] for g in rows], [g[1] for g in rows], [h.turn for h in heads],
        [h.step for h in heads],
        [_request_id(source, h.turn, h.step, g[0])
         for source, h, g in zip(tails, heads, rows, strict=True)],
        [m if isinstance(m, str) else None for m in models], [g[2] for g in rows],
        [g[3] for g in rows], [g[4] for g in rows] if tokenizer is not None else None,
        recorded, [u[1] for u in usages], totals, [b[0] for b in best],
        [b[1] for b in best])


@dataclass(frozen=True, slots=True)
class AroundReplace:
    """The requests just before and just after a replace, as the log records them.

    Attributes:
        before, after: their recorded input (`input_total`; None where the log records
            no usage for them, or there is no such request).
        next_cache_write: the cache write the request after made: the prefix the
            replace forced the provider to cache again.
        before_request, after_request: their request ids.
        before_time, after_time: when the request before ended and the one after began
            (its last and first messages' times).
        after_usage, after_model: the request after's usage and model (to price its
            cache write).
    """

    before: int | None
    after: int | None
    next_cache_write: int | None
    before_request: str | None
    after_request: str | None
    before_time: int | None = None
    after_time: int | None = None
    after_usage: Mapping[str, int] | None = None
    after_model: str | None = None


class _SourceOnly(msgspec.Struct, gc=False):
    source: Any = None


class _StepData(msgspec.Struct, gc=False):
    turn: Any = None
    step: Any = None
    usage: Any = None
    message: _SourceOnly | None = None


class _Step(msgspec.Struct, gc=False):
    """What `around_replaces` reads of an assistant message's line: `_Reply` but the
    message's content (its text is not read there), and the message's time."""

    time: Any = None
    data: _StepData | None = None
    sourceEventSeqs: msgspec.Raw = _NO_CITED


_STEP = msgspec.json.Decoder(_Step)


def _step_unit(events: Sequence[Event], seq: int) -> tuple[_Unit, int | None]:
    """`_unit` of an assistant message without its text, and its time (`as_int`)."""
    line = decode_line(_STEP, _line_view(events, seq))
    if line is not None and line.data is not None:
        return _typed_unit(line.data, line.sourceEventSeqs), as_int(line.time)
    event = events.raw(seq) if isinstance(events, LogEvents) else events[seq]
    return _event_unit(event), as_int(event.get("time"))  # (its text not read)


def around_replaces(events: Sequence[Event], seqs: Sequence[int], *,
                    skip: Collection[int] = ()) -> list[AroundReplace]:
    """An `AroundReplace` for each replace seq. Only the assistant messages next to
    each replace are read (found by their type codes), each decoded once, so this costs
    the replaces, not the log; `skip` as in `path_requests`."""
    from bisect import bisect_left

    import numpy as np

    types = _types(events)
    messages = [int(s) for s in np.flatnonzero(np.frombuffer(types, dtype=np.uint8)
                                                 == _MESSAGE) if int(s) not in skip]
    units: dict[int, _Unit] = {}
    times: dict[int, int | None] = {}

    def unit_of(seq: int) -> _Unit:
        got = units.get(seq)
        if got is None:
            got, times[seq] = _step_unit(events, seq)
            units[seq] = got
        return got

    def request(k: int, step: int) -> tuple[int, int, _Unit]:
        """The first and last message of the step of `messages[k]`, walking forward
        (`step` 1) or back (-1), and the unit of its last message when forward."""
        first = unit = unit_of(messages[k])
        j = k
        while 0 <= j + step < len(messages):
            nxt = unit_of(messages[j + step])
            if nxt.step is None or (nxt.turn, nxt.step) != (first.turn, first.step):
                break
            j += step
            unit = nxt
        return min(messages[k], messages[j]), max(messages[k], messages[j]), (
            unit if step > 0 else first)

    # the requests next to each replace, then the usage of their last messages, whose
    # cited chunks are looked for together (`_usages`)
    found: list[tuple[tuple[int, int] | None, tuple[int, int] | None]] = []
    for seq in seqs:
        k = bisect_left(messages, seq)
        before = after = None
        if k > 0:
            start, end, _ = request(k - 1, -1)
            unit_of(end)
            before = (start, end)
        if k < len(messages):
            start, end, _ = request(k, +1)  # (its last message's unit is kept)
            after = (start, end)
        found.append((before, after))
    ends = sorted({pair[1] for both in found for pair in both if pair is not None})
    usage_of = dict(zip(ends, [u for u, _ in _usages(events, ends, units, types)],
                        strict=True))

    def total(usage: Mapping[str, int]) -> int | None:
        return (usage["input"] + usage.get("cache_read", 0) + usage.get("cache_write", 0)
                if "input" in usage else None)

    out = []
    for before_pair, after_pair in found:
        before_total = before_request = before_time = None
        after_total = after_request = after_time = after_usage = after_model = None
        next_cache_write = None
        if before_pair is not None:
            start, end = before_pair
            last = units[end]
            before_total = total(usage_of[end])
            before_request = _request_id(last.source, last.turn, last.step, start)
            before_time = times[end]
        if after_pair is not None:
            start, end = after_pair
            last = units[end]
            after_usage = usage_of[end]
            after_total = total(after_usage)
            after_request = _request_id(last.source, last.turn, last.step, start)
            after_time = times[start]
            model = last.source.get("model")
            after_model = model if isinstance(model, str) else None
            next_cache_write = after_usage.get("cache_write")
        out.append(AroundReplace(before_total, after_total, next_cache_write,
                                 before_request, after_request, before_time, after_time,
                                 after_usage, after_model))
    return out
