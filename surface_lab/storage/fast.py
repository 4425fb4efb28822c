"""The fast reader of a stored JSONL log: one typed msgspec pass over the lines, a few
MB at a time, the checks of the load pipeline written for the common case, and events
left packed in the file's bytes until someone asks for one.

`fast_check` accepts a log only when every line passes checks at least as strict as
the full pipeline's (`scan_bytes` + `check_log`); for anything else (a torn or crash
tail, the fixture form, legacy shapes, unknown types, a linear log, an integral float
where an integer belongs, any broken rule) it returns None and the caller runs that
pipeline, which finds and names the problem. So the two agree on every log the fast
reader takes; `tests/test_fast_read.py` compares them log by log.

What is checked here is what the full pipeline checks: the envelope, the packed rows,
the message shapes (SPEC 5.1), the legacy triggers and every surface rule. Rules a type
can state (safe integers, non-empty names, roles and source kinds, the fields each
event type may carry) are msgspec types, so a line that breaks one does not decode; the
rest are checked a stretch of lines at a time: seqs across lines and row members,
legacy shapes, tool call ids, the appends' sources all at once, and each replace
through `plan_event`. Text the checks do not need (message content, tool output, chunk
text) is skipped by msgspec, which still checks its JSON syntax; UTF-8 is checked
separately, only where the bytes are not ASCII. One difference is left: msgspec
skips numbers without converting them, so a number too large for a double (`1e400`)
inside skipped text is reported, as `line-unparsable` with its file, line and seq, when
that event is first read rather than by `read_log` itself. `read_log(path, check="full")`
and `surface-lab validate` run the full pipeline and report it up front.
"""

from __future__ import annotations

import operator
import sys
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import reduce
from itertools import accumulate, chain, compress, count, islice, pairwise, repeat
from types import FrameType
from typing import Annotated, Any, Literal, cast

import msgspec
from msgspec import UNSET, Meta, Raw, Struct, UnsetType

from ..chunks import expand_row, member_chunk
from ..errors import AdmissionError, CorruptLogError
from ..events import KNOWN_TYPES, ROW_TAGS, SURFACE_SET, Event, freeze_event
from ..gcpause import gc_paused
from ..jsonvalue import MAX_SAFE_INTEGER, as_int, dumps
from ..legacy import upgrade_reason
from ..messages import message_text
from ..repair import interrupted_turn_closers
from ..surface import (
    APPEND,
    REPLACE,
    FoldResult,
    Plan,
    Replacement,
    apply_plan,
    plan_event,
)
from ..views import ReadOnlySequence
from .jsonl import MAX_LINE_BYTES, _BadLine, _parse
from .load import note_open_turn

__all__ = ["TYPE_NAMES", "LogEvents", "PlanList", "fast_check"]

# Every type the fast reader takes, in the order of the frames' categories.
TYPE_NAMES: tuple[str, ...] = tuple(sorted(KNOWN_TYPES))
_CODE = {name: code for code, name in enumerate(TYPE_NAMES)}
_CHUNK = _CODE["assistant/chunk"]
_TURN_START, _TURN_END = _CODE["turn/start"], _CODE["turn/end"]
_ASSISTANT, _TOOL_RESULT = _CODE["assistant/message"], _CODE["tool/result"]
# A line nested deeper than this goes to the full pipeline (whose `freeze` refuses past
# MAX_DEPTH 400); see `_decoded` for how it is found.
_MAX_DEPTH = 300
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_UTF8_BLOCK = 1 << 14
_ROW = 255  # the code of a packed row's line


# -- the typed records --------------------------------------------------------------------
#
# The check pass decodes every line into one of these: the envelope, and of the data only
# what a rule reads. Constraints msgspec can state (safe integers, non-empty names, the
# message roles and source kinds, no field a type may not carry) are stated here, so a
# line that breaks one fails the decode and the full pipeline names the problem.

_SAFE = Annotated[int, Meta(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)]
_SEQ = Annotated[int, Meta(ge=0, le=MAX_SAFE_INTEGER)]
_NAME = Annotated[str, Meta(min_length=1)]
# The gaps of a packed row's member times, taken here only in [0, 2**31): then a member
# time is safe whenever `time0 + members * 2**31` is (other gaps go to the full pipeline).
_GAP_LIMIT = 1 << 31
_GAP = Annotated[int, Meta(ge=0, lt=_GAP_LIMIT)]
# No value is of this type: a field so typed must be absent.
_ABSENT = Annotated[int, Meta(ge=1, le=0)]


class _Plain(Struct, gc=False):
    """The base of every record: never in a reference cycle, so the garbage collector
    need not track the few hundred thousand of them a log makes."""


class _Object(_Plain):
    """Any JSON object: its fields are skipped (their syntax still checked)."""


class _TurnStart(_Plain):
    trigger: _ABSENT | UnsetType = UNSET  # a legacy field (SPEC 7.3 step 2)


class _TurnEnd(_Plain):
    reason: Any = UNSET


class _RequestHeader(_Plain):
    reason: Any = UNSET  # "fallback" is retired


class _Source(_Plain):
    kind: _NAME


class _ModelSource(_Plain):
    kind: Literal["model"]
    provider: _NAME
    model: _NAME


class _ToolSource(_Plain):
    kind: Literal["tool"]
    callId: str


class _Message(_Plain):
    """The data of a user/message or context/message (SPEC 5.1)."""

    id: _NAME
    role: Literal["user"]
    source: _Source
    content: list[Raw]


class _AssistantMessage(_Plain):
    id: _NAME
    role: Literal["assistant"]
    source: _ModelSource
    content: list[Raw]


class _ToolBlock(_Plain):
    type: Literal["tool-result"]
    content: list[Raw]
    toolCallId: str


class _ToolMessage(_Plain):
    id: _NAME
    role: Literal["user"]
    source: _ToolSource
    content: Annotated[list[_ToolBlock], Meta(min_length=1, max_length=1)]


class _AssistantData(_Plain):
    message: _AssistantMessage


class _ToolResultData(_Plain):
    message: _ToolMessage


class _Replace(_Plain, forbid_unknown_fields=True):
    op: Literal["replace"]
    start: _SEQ
    end: _SEQ


class _TextRow(_Plain, forbid_unknown_fields=True):
    turn: _SAFE
    step: _SAFE
    index: _SAFE
    dt: list[_GAP]
    items: Annotated[list[str], Meta(min_length=1)] = msgspec.field(name="texts")


class _ToolRow(_TextRow, forbid_unknown_fields=True, kw_only=True):
    id: str
    items: Annotated[list[str], Meta(min_length=1)] = msgspec.field(name="args")
    name: str | UnsetType = UNSET


_DATA_OF_TYPE: dict[str, Any] = {
    "turn/start": _TurnStart | None,
    "turn/end": _TurnEnd | None,
    "request/header": _RequestHeader | None,
    "user/message": _Message,
    "context/message": _Message,
    "assistant/message": _AssistantData,
    "tool/result": _ToolResultData,
}


def _event_struct(name: str) -> type[Struct]:
    """A line of type `name`; its class attribute `code` is the type's index."""
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = [
        ("seq", int), ("time", _SAFE), ("data", _DATA_OF_TYPE.get(name, _Object | None))]
    if name in SURFACE_SET:  # only integers in sourceEventSeqs (no integral floats)
        fields += [("surfaceOp", Literal["append"] | _Replace),
                   ("sourceEventSeqs", list[_SEQ] | UnsetType, UNSET)]
    fields.append(("ignorable", Literal[True] | UnsetType, UNSET))
    return msgspec.defstruct(f"Event_{_CODE[name]}", fields, tag_field="type", tag=name,
                             forbid_unknown_fields=True, gc=False, namespace={"code": _CODE[name]})


def _row_struct(tag: str) -> type[Struct]:
    """A packed row, its seq0 and time0 under the names of an event's seq and time."""
    data = _ToolRow if tag == "tool-call-chunks" else _TextRow
    return msgspec.defstruct(f"Row_{tag.replace('-', '_')}", [
        ("seq", int, msgspec.field(name="seq0")), ("time", _SAFE, msgspec.field(name="time0")),
        ("data", data)], tag_field="type", tag=tag, forbid_unknown_fields=True, gc=False,
        namespace={"code": _ROW})


_DECODER = msgspec.json.Decoder(reduce(operator.or_, [
    *map(_event_struct, TYPE_NAMES), *map(_row_struct, sorted(ROW_TAGS))]))


# The column pass (run for each frame): each line's time and data (as its bytes), a
# surface event's marker and sources, and a packed row's fields; nothing is checked again.


class _ColumnRow(_Plain):
    turn: int
    step: int
    index: int
    dt: list[int]
    items: list[str] = msgspec.field(name="texts")


class _ColumnToolRow(_ColumnRow, kw_only=True):
    id: str
    items: list[str] = msgspec.field(name="args")
    name: str | UnsetType = UNSET


def _column_struct(tag: str) -> type[Struct]:
    if tag in ROW_TAGS:
        data = _ColumnToolRow if tag == "tool-call-chunks" else _ColumnRow
        return msgspec.defstruct(f"Column_{tag.replace('-', '_')}", [
            ("time", int, msgspec.field(name="time0")), ("data", data)], tag_field="type",
            tag=tag, gc=False, namespace={"tag": tag})
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = [("time", int), ("data", Raw)]
    if tag in SURFACE_SET:
        fields += [("surfaceOp", Any, UNSET), ("sourceEventSeqs", Any, UNSET)]
    return msgspec.defstruct(f"Column_{_CODE[tag]}", fields, tag_field="type", tag=tag,
                             gc=False, namespace={"code": _CODE[tag]})


_COLUMN_DECODER = msgspec.json.Decoder(reduce(operator.or_, map(
    _column_struct, [*TYPE_NAMES, *sorted(ROW_TAGS)])))
_SURFACE_CODES = frozenset(_CODE[name] for name in SURFACE_SET)
_LEGACY_CODES = frozenset(_CODE[name] for name in ("turn/end", "request/header"))


def _mask(codes: frozenset[int]) -> bytes:
    """A `bytes.translate` table: 1 for the codes given, 0 for every other."""
    return bytes(int(code in codes) for code in range(256))


_IS_ROW = _mask(frozenset({_ROW}))
_EMPTY: dict[str, Any] = {}
_ROW_AS_CHUNK = bytes(range(255)) + bytes((_CHUNK,))  # a row's members are chunks
_NOT = bytes((1, 0)) + bytes(254)  # turns a 0/1 mask over
_IS_SURFACE = _mask(_SURFACE_CODES)
_IS_LEGACY = _mask(_LEGACY_CODES)
_CODE_OF = operator.attrgetter("code")
_SEQ_OF = operator.attrgetter("seq")
_TIME_OF = operator.attrgetter("time")


# The message pass (`LogEvents.message_texts`): a line's type and its message content only.


class _TextMessage(_Plain):
    content: Any = None


class _TextData(_Plain):
    message: _TextMessage | None = None
    content: Any = None


class _TextLine(_Plain):
    type: str
    data: _TextData | None = None


_TEXT_DECODER = msgspec.json.Decoder(_TextLine)
_NESTED_MESSAGE = frozenset({"assistant/message", "tool/result"})  # `data.message`


# -- events kept packed in the file's bytes ----------------------------------------------


@dataclass(slots=True)
class _Records:
    """What the reader keeps of each line: where it starts, its type code (ROW for a
    packed row) and its first seq."""

    starts: list[int]  # byte offset of each line, and one past the last
    codes: bytes | bytearray  # (a bytearray while the reader fills it in)
    first_seq: list[int]  # and the event count after the last line


@dataclass(slots=True)
class EventColumns:
    """Envelope columns of every event, as numpy arrays: `turn` and `step` hold 0 where
    the `*_missing` mask is set (absent, or not an integer)."""

    time: Any
    turn: Any
    turn_missing: Any
    step: Any
    step_missing: Any
    data_bytes: Any  # len(dumps(event["data"]))
    surface: dict[int, Any]  # what `on_surface` gave for each surface event, by seq


@dataclass(slots=True)
class _ColumnLists:
    """What the column pass collects, stretch by stretch: of the event lines (in order)
    their times, turns, steps and data sizes; of the packed rows their turns and steps
    (one per row) and their members' times and data sizes (one per member); and what
    the caller's function made of each surface event, by seq."""

    times: list[int]
    turns: list[int | None]
    steps: list[int | None]
    sizes: list[int]
    row_turns: list[int]
    row_steps: list[int]
    member_times: list[int]
    member_sizes: list[int]
    surface: dict[int, Any]


class LogEvents(ReadOnlySequence[Event]):
    """The logical events of a log read by the fast reader: a read-only sequence whose
    events are parsed from the file's bytes when asked for (a packed row is expanded
    whole and the last few kept). `type_codes` (into `TYPE_NAMES`), `types`, `lines`
    and `first_seqs` need no parsing; `columns()` reads times, turns, steps and data
    sizes in one pass over the lines."""

    _what = "event"

    def __init__(self, data: bytes, path: str, records: _Records) -> None:
        self._data = data
        self._path = path
        self._records = records
        self._row_cache: dict[int, list[Event]] = {}
        self._type_codes: bytes | None = None

    def __len__(self) -> int:
        return self._records.first_seq[-1]

    def _record(self, seq: int) -> int:
        return bisect_right(self._records.first_seq, seq) - 1

    def _parse(self, record: int) -> Any:
        """Line `record` parsed as the full pipeline parses it (msgspec, like the
        standard library, keeps integers of any size exactly, so no line needs the
        pipeline's second parse for long digit runs)."""
        starts = self._records.starts
        line = memoryview(self._data)[starts[record] : starts[record + 1] - 1]
        try:
            return msgspec.json.decode(line)
        except msgspec.DecodeError:  # only a number too large for a double gets here
            pass
        try:
            return _parse(bytes(line))
        except _BadLine as bad:
            raise CorruptLogError(f"line {record + 2}: {bad.message}", code=bad.code,
                                  path=self._path, line=record + 2,
                                  seq=self._records.first_seq[record]) from None

    def _item(self, seq: int) -> Event:
        record = self._record(seq)
        if self._records.codes[record] != _ROW:
            return freeze_event(self._parse(record))
        members = self._row_cache.get(record)
        if members is None:
            members = list(expand_row(self._parse(record)))
            if len(self._row_cache) >= 8:
                self._row_cache.pop(next(iter(self._row_cache)))
            self._row_cache[record] = members
        return members[seq - self._records.first_seq[record]]

    def __repr__(self) -> str:
        return f"LogEvents({len(self)} events of {self._path})"

    @property
    def type_codes(self) -> bytes:
        """Each event's type as an index into `TYPE_NAMES`."""
        if self._type_codes is None:
            import numpy as np

            r = self._records
            per_line = np.frombuffer(r.codes.translate(_ROW_AS_CHUNK), dtype=np.uint8)
            self._type_codes = np.repeat(per_line, np.diff(r.first_seq)).tobytes()
        return self._type_codes

    @property
    def types(self) -> list[str]:
        return [TYPE_NAMES[c] for c in self.type_codes]

    def columns(self, on_surface: Callable[[Event], Any] | None = None) -> EventColumns:
        """The envelope columns of every event, from one pass over the lines; with
        `on_surface`, also its answer for each surface event (given its type, seq, data,
        surfaceOp and sourceEventSeqs), by seq, in `.surface`."""
        import numpy as np

        r = self._records
        lists = _ColumnLists([], [], [], [], [], [], [], [], {})
        view = memoryview(self._data)
        with gc_paused():
            for first, end in _stretches(r.starts):
                lines = _COLUMN_DECODER.decode_lines(view[r.starts[first] : r.starts[end]])
                _collect(lists, lines, r.codes[first:end], r.first_seq[first:end],
                         on_surface)
        n = len(self)
        line_seqs = np.array(r.first_seq, dtype=np.int64)
        is_row = np.frombuffer(r.codes, dtype=np.uint8) == _ROW
        members = np.diff(line_seqs)[is_row]
        in_row = np.ones(n, dtype=bool)
        in_row[line_seqs[:-1][~is_row]] = False

        def spread(events: Any, rows: Any, dtype: Any = np.int64) -> Any:
            """One value per event: the event lines' values and the row members'."""
            column = np.empty(n, dtype=dtype)
            column[~in_row] = events
            column[in_row] = rows
            return column

        def nullable(events: list[int | None], rows: list[int]) -> tuple[Any, Any]:
            values = np.array(events, dtype=object)
            missing = values == None  # noqa: E711  # elementwise: which values are missing
            values[missing] = 0
            return (spread(values.astype(np.int64), np.repeat(rows, members)),
                    spread(missing.astype(bool), False, dtype=bool))

        turn, turn_missing = nullable(lists.turns, lists.row_turns)
        step, step_missing = nullable(lists.steps, lists.row_steps)
        return EventColumns(spread(lists.times, lists.member_times), turn, turn_missing,
                            step, step_missing, spread(lists.sizes, lists.member_sizes),
                            lists.surface)

    @property
    def times(self) -> list[int]:
        return cast(list[int], self.columns().time.tolist())

    @property
    def turns(self) -> list[int | None]:
        """`data.turn` of each event as an integer, None when absent or not one."""
        c = self.columns()
        return [None if m else v for v, m in zip(c.turn.tolist(), c.turn_missing.tolist(),
                                                 strict=True)]

    @property
    def steps(self) -> list[int | None]:
        c = self.columns()
        return [None if m else v for v, m in zip(c.step.tolist(), c.step_missing.tolist(),
                                                 strict=True)]

    @property
    def lines(self) -> LineNumbers:
        return LineNumbers(self._records.first_seq)

    @property
    def first_seqs(self) -> list[int]:
        """The first seq of each line after the header, then the event count."""
        return self._records.first_seq

    def raw(self, seq: int) -> Mapping[str, Any]:
        """Event `seq` as parsed, not frozen: cheaper when only some fields are read.
        (An integral float `surfaceOp` endpoint stays a float here.)"""
        record = self._record(seq)
        return self._item(seq) if self._records.codes[record] == _ROW else self._parse(record)

    def message_texts(self, seqs: Iterable[int]) -> list[str]:
        """`message_text` of each of these events, decoding of each line only its message
        content (not its sources, ids or other fields): what an audit reads of the
        entries a replace hid, at a fraction of `raw`'s cost."""
        starts, codes = self._records.starts, self._records.codes
        view = memoryview(self._data)
        out = []
        for seq in seqs:
            record = self._record(seq)
            if codes[record] == _ROW:  # a chunk: no message
                out.append(message_text(self._item(seq)))
                continue
            try:
                line = _TEXT_DECODER.decode(view[starts[record] : starts[record + 1] - 1])
            except msgspec.DecodeError:  # a number too large for a double: the full parse
                out.append(message_text(self.raw(seq)))
                continue
            data = line.data
            message = data.message if line.type in _NESTED_MESSAGE and data else data
            out.append(message_text({"type": "user/message", "data": {
                "content": message.content if message is not None else None}}))
        return out

    def lookup(self, seq: int) -> Mapping[str, Any] | None:
        """`raw(seq)`, or None outside the log: the planner's lookup, which reads data."""
        return self.raw(seq) if 0 <= seq < len(self) else None

    def surface_seqs(self) -> list[int]:
        """The seqs of the surface-type events, in order."""
        first = self._records.first_seq
        return [first[k] for k in compress(count(), self._records.codes.translate(_IS_SURFACE))]

    def data_sizes(self) -> list[int]:
        """`len(dumps(event["data"]))` of every event."""
        return cast(list[int], self.columns().data_bytes.tolist())


def _collect(lists: _ColumnLists, lines: list[Any], codes: bytes | bytearray,
             seqs: list[int], on_surface: Callable[[Event], Any] | None) -> None:
    """Add a stretch of column-pass records to `lists`. The event lines' data is parsed
    at once, as one array, and encoded again: when that gives back the very bytes of
    the file (the usual case) each line's data size is its length in the file, else
    each is encoded alone. A packed row's members are sized from their texts, the rest
    of their data being the same for the whole row."""
    is_row = codes.translate(_IS_ROW)
    is_event = is_row.translate(_NOT)
    events = list(compress(lines, is_event))
    raws = [e.data for e in events]
    joined = b"[" + b",".join(raws) + b"]"
    datas = msgspec.json.decode(joined)
    lists.sizes += (map(len, raws) if dumps(datas) == joined
                    else (len(dumps(d)) for d in datas))
    lists.times += map(_TIME_OF, events)
    objects = [_EMPTY if d is None else d for d in datas]  # data is an object or null
    lists.turns += _ints(map(dict.get, objects, repeat("turn")))
    lists.steps += _ints(map(dict.get, objects, repeat("step")))
    if on_surface is not None:
        on = codes.translate(_IS_SURFACE)
        of_events = bytes(compress(on, is_event))  # which event lines are surface ones
        for seq, e, d in zip(compress(seqs, on), compress(events, of_events),
                             compress(datas, of_events), strict=True):
            event = {"type": TYPE_NAMES[e.code], "seq": seq, "data": d}
            if e.surfaceOp is not UNSET:
                event["surfaceOp"] = e.surfaceOp
            if e.sourceEventSeqs is not UNSET:
                event["sourceEventSeqs"] = e.sourceEventSeqs
            lists.surface[seq] = on_surface(event)
    rows = list(compress(lines, is_row))
    lists.row_turns += (w.data.turn for w in rows)
    lists.row_steps += (w.data.step for w in rows)
    for w in rows:
        lists.member_times += accumulate(w.data.dt, initial=w.time)
    texts = [item for w in rows for item in w.data.items]
    # Encoded, a list of texts takes 3 bytes per text besides the characters (quotes and
    # comma) and 1 more ("[]" less a comma) exactly when every character is ASCII and
    # none is escaped: then each text's size is its length plus the quotes.
    plain = len(dumps(texts)) == sum(map(len, texts)) + 3 * len(texts) + 1
    for w in rows:
        base = _member_base(w.data, w.tag)
        items = w.data.items
        lists.member_sizes += (map(operator.add, map(len, items), repeat(base + 2)) if plain
                               else (base + len(dumps(item)) for item in items))


def _ints(values: Iterable[Any]) -> list[int | None]:
    """`as_int` of each value; plain safe integers (most) pass straight through."""
    return [v if v.__class__ is int and -MAX_SAFE_INTEGER <= v <= MAX_SAFE_INTEGER
            else as_int(v) for v in values]


def _member_base(d: Any, tag: str) -> int:
    """The data size of a member of a packed row of type `tag`, less its encoded text."""
    if isinstance(d, _ColumnToolRow):
        chunk = member_chunk(tag, d.index, "", d.id, None if d.name is UNSET else d.name)
    else:
        chunk = member_chunk(tag, d.index, "")
    return len(dumps({"turn": d.turn, "step": d.step, "chunk": chunk})) - 2


class LineNumbers(ReadOnlySequence[int]):
    """The physical line (header = 1) of each event."""

    _what = "event"

    def __init__(self, first_seq: list[int]) -> None:
        self._first_seq = first_seq

    def __len__(self) -> int:
        return self._first_seq[-1]

    def _item(self, seq: int) -> int:
        return bisect_right(self._first_seq, seq) + 1


class PlanList(ReadOnlySequence[Plan]):
    """The plan each event committed, made on demand: a kind per event, and the replaces
    whole."""

    _what = "plan"

    def __init__(self, kinds: bytearray, replaces: dict[int, Plan]) -> None:
        self.kinds = kinds
        self.replaces = replaces

    def __len__(self) -> int:
        return len(self.kinds)

    def _item(self, seq: int) -> Plan:
        kind = self.kinds[seq]
        return self.replaces[seq] if kind == REPLACE else Plan(seq, kind)


# -- the reader ---------------------------------------------------------------------------


def _utf8_ok(data: bytes) -> bool:
    """Whether `data` is valid UTF-8, decoding only the stretches that are not ASCII
    (each widened to whole lines, so no character is cut)."""
    size = len(data)
    start = 0
    while start < size:
        if data[start : start + _UTF8_BLOCK].isascii():
            start += _UTF8_BLOCK
            continue
        end = start + _UTF8_BLOCK
        while end < size and not data[end : end + _UTF8_BLOCK].isascii():
            end += _UTF8_BLOCK
        lo = data.rfind(b"\n", 0, start) + 1
        hi = data.find(b"\n", end)
        try:
            data[lo : size if hi < 0 else hi].decode("utf-8")
        except UnicodeDecodeError:
            return False
        start = size if hi < 0 else hi
    return True


def _line_starts(data: bytes, first: int) -> list[int] | None:
    """The byte offset of every line from `first` on, and one past the last; None unless
    every line starts with "{" and ends with "}". Then each line break separates two
    JSON values (no value goes on past a "}" with a "{"), so `decode_lines`, which reads
    values separated by any whitespace, gives one per line exactly when it gives as many
    values as there are lines. (numpy finds the line breaks, a few MB at a time.)"""
    import numpy as np

    bytes_ = np.frombuffer(data, dtype=np.uint8)
    ends = [np.flatnonzero(bytes_[lo : lo + _SCAN_BYTES] == _NEWLINE) + lo
            for lo in range(first, len(data), _SCAN_BYTES)]
    breaks = np.concatenate([np.zeros(0, dtype=np.intp), *ends])
    if not ((bytes_[breaks[:-1] + 1] == _OPEN).all() and (bytes_[breaks - 1] == _CLOSE).all()
            and (len(breaks) == 0 or bytes_[first] == _OPEN)):
        return None
    return [first, *(breaks + 1).tolist()]


def _maybe_too_deep(data: bytes, start: int, end: int) -> bool:
    """Whether line `data[start:end]` may nest deeper than `_MAX_DEPTH`: brackets inside
    strings do not count (escaped backslashes and quotes are dropped first, so every
    quote left opens or closes a string)."""
    if data.count(b"[", start, end) + data.count(b"{", start, end) <= _MAX_DEPTH:
        return False
    line = data[start:end]
    if line.find(b'\\"') >= 0:
        line = line.replace(b"\\\\", b"").replace(b'\\"', b"")
    outside = b"".join(line.split(b'"')[::2]).translate(None, _NOT_BRACKETS)
    depth = deepest = 0
    for byte in outside:
        depth += 1 if byte in b"[{" else -1
        deepest = max(deepest, depth)
    return deepest > _MAX_DEPTH


def _stack_depth() -> int:
    """The number of Python frames below the caller's, the caller's included."""
    frame: FrameType | None = sys._getframe(1)
    depth = 0
    while frame is not None:
        depth += 1
        frame = frame.f_back
    return depth


_TOO_DEEP = b"[" * (_MAX_DEPTH + 1) + b"]" * (_MAX_DEPTH + 1)
_STRETCH_BYTES = 4 << 20
_SCAN_BYTES = 4 << 20  # the line breaks are looked for this many bytes at a time
_NEWLINE, _OPEN, _CLOSE = b"\n{}"


def _stretches(starts: list[int]) -> Iterator[tuple[int, int]]:
    """The lines in stretches of about `_STRETCH_BYTES` (at least one line each), as
    (first line, line after the last)."""
    first, last = 0, len(starts) - 1
    while first < last:
        end = max(bisect_right(starts, starts[first] + _STRETCH_BYTES, first, last),
                  first + 1)
        yield first, end
        first = end


def _decoded(data: bytes, starts: list[int]) -> Iterator[tuple[int, list[Any]]]:
    """The lines after the header decoded, a stretch of about `_STRETCH_BYTES` at a time
    (so only one stretch's records are alive at once): (index of its first line, records).
    No line nested deeper than `_MAX_DEPTH` decodes.

    On CPython 3.11 msgspec counts its nesting against the interpreter's recursion
    limit, so the limit is lowered to this frame's depth plus `_MAX_DEPTH` around each
    decode and a line nested deeper fails to decode. The decode holds the GIL, but the
    limit is process-wide: a thread that gets to run in the few bytecodes around it sees
    the lower limit too (which matters only to a thread some 300 frames deep). A probe
    at the same depth first checks that the interpreter counts that way (later versions
    count C recursion apart); if it does not, the lines with enough brackets to be that
    deep are looked at one by one.

    Raises:
        msgspec.DecodeError, RecursionError: a line the fast reader does not take.
    """
    view = memoryview(data)
    limit = sys.getrecursionlimit()
    bounded = False
    for first, end in _stretches(starts):
        sys.setrecursionlimit(_stack_depth() + _MAX_DEPTH)
        try:
            if first == 0:
                try:
                    msgspec.json.decode(_TOO_DEEP)
                except RecursionError:
                    bounded = True
            records = _DECODER.decode_lines(view[starts[first] : starts[end]])
        finally:
            sys.setrecursionlimit(limit)
        if len(records) != end - first or (not bounded and any(
                b - a > 2 * _MAX_DEPTH and _maybe_too_deep(data, a, b - 1)
                for a, b in pairwise(starts[first : end + 1]))):
            raise RecursionError("not one record per line, or a line nested too deep")
        yield first, records


Checked = tuple["LogEvents", "PlanList", FoldResult, list[Event]]


def fast_check(data: bytes, path: str, header_end: int,
               note: Callable[..., None]) -> Checked | None:
    """Check the event lines of a stored JSONL log (after the header line, which ends at
    byte `header_end`).

    Returns:
        (events, plans, fold, closers) when the log passes, else None: then the full
        pipeline must read it. `note` receives the same notes `check_log` would add.
    """
    with gc_paused():
        return _fast_check(data, path, header_end, note)


def _fast_check(data: bytes, path: str, header_end: int,
                note: Callable[..., None]) -> Checked | None:
    if not data.endswith(b"\n") or not _utf8_ok(data):
        return None
    starts = _line_starts(data, header_end)
    if starts is None or (len(data) - header_end > MAX_LINE_BYTES and max(
            map(operator.sub, starts[1:], starts)) > MAX_LINE_BYTES + 1):
        return None
    kept = _Records(starts, bytearray(), [0])
    log = LogEvents(data, path, kept)
    fold = _Fold(log)
    try:
        for first_line, records in _decoded(data, starts):
            codes = _envelopes(kept, records)
            if codes is None or not fold.take(records, codes, first_line):
                return None
            del records  # before the next stretch is decoded
    except (msgspec.DecodeError, RecursionError):  # ValidationError is a DecodeError
        return None
    kept.codes = bytes(kept.codes)
    closers = _closers(log, kept.codes, kept.first_seq, list(fold.nodes))
    if closers is None:
        return None
    note_open_turn(note, closers)
    return (log, PlanList(fold.kinds, fold.replaces),
            FoldResult(fold.nodes, fold.replacements), closers)


def _envelopes(kept: _Records, records: list[Any]) -> bytes | None:
    """Check the packed rows, the seqs and the legacy shapes of a stretch of records,
    and keep their type codes and first seqs. Returns the codes (None if a check fails).
    """
    codes = bytes(map(_CODE_OF, records))

    # Packed rows (SPEC 7.1), as `expand_row` checks them: members, gaps, safe times.
    is_row = codes.translate(_IS_ROW)
    rows = list(compress(records, is_row))
    members = [len(r.data.items) for r in rows]
    if rows and ([len(r.data.dt) for r in rows] != [m - 1 for m in members]
                 or max(map(_TIME_OF, rows)) + max(members) * _GAP_LIMIT > MAX_SAFE_INTEGER):
        return None

    # Seqs run on from 0 across lines and row members.
    per_line = [1] * len(records)
    for k, m in zip(compress(count(), is_row), members, strict=True):
        per_line[k] = m
    first_seq = list(accumulate(per_line, initial=kept.first_seq[-1]))
    if list(map(_SEQ_OF, records)) != first_seq[:-1]:
        return None

    # No legacy shape of SPEC 7.3 step 2, no retired request/header fallback.
    if not all(map(_current, compress(records, codes.translate(_IS_LEGACY)))):
        return None
    kept.codes += codes
    kept.first_seq += first_seq[1:]
    return codes


def _current(record: Any) -> bool:
    """No legacy turn/end reason of SPEC 7.3 step 2 (which `check_log` would upgrade) and
    no retired request/header fallback (which it refuses); a turn/start's legacy
    `trigger` cannot decode."""
    data = record.data
    if data is None or data.reason is UNSET:
        return True
    if record.code == _TURN_END:
        try:
            return upgrade_reason({}, data.reason)[1] is None
        except (AdmissionError, CorruptLogError):
            return False
    return bool(data.reason != "fallback")


def _tool_calls_match(surface: list[Any]) -> bool:
    """SPEC 5.1: a tool/result's block answers the call its source names."""
    return all(m.source.callId == m.content[0].toolCallId
               for m in (r.data.message for r in surface if r.code == _TOOL_RESULT))


class _Fold:
    """SPEC 4.1 for the surface events, stretch by stretch in log order: the surface, the
    plan kind of every event and the replaces. Appends (checked together) only extend
    the surface; each replace goes through the planner."""

    def __init__(self, log: LogEvents) -> None:
        self.log = log
        self.nodes: list[int] = []
        self.kinds = bytearray()
        self.replaces: dict[int, Plan] = {}
        self.replacements: list[Replacement] = []
        self.cited: int | None = -1  # the last seq cited so far, None once they fall

    def take(self, records: list[Any], codes: bytes, first_line: int) -> bool:
        """Fold the surface events among `records` (lines from `first_line` on)."""
        log = self.log
        self.kinds += bytes(len(log) - len(self.kinds))
        lines = list(compress(count(first_line), codes.translate(_IS_SURFACE)))
        surface = [records[k - first_line] for k in lines]
        if not _tool_calls_match(surface):
            return False
        is_replace = [r.surfaceOp.__class__ is _Replace for r in surface]
        appends = list(compress(surface, map(operator.not_, is_replace)))
        if not self._sources_ok(appends):
            return False
        for seq in map(_SEQ_OF, appends):
            self.kinds[seq] = APPEND
        seqs = list(map(_SEQ_OF, surface))
        nodes = self.nodes
        done = 0
        for i in compress(count(), is_replace):
            nodes.extend(seqs[done:i])
            done = i + 1
            plan = self._plan_replace(surface[i], lines[i], nodes)
            if plan is None:
                return False
            self.replacements.append(Replacement.of(plan))
            self.replaces[plan.seq] = plan
            self.kinds[plan.seq] = REPLACE
            nodes = apply_plan(nodes, plan)
        nodes.extend(seqs[done:])
        self.nodes = nodes
        return True

    def _sources_ok(self, appends: list[Any]) -> bool:
        """SPEC 4.1 step 5 for the appends that cite sources: distinct seqs, each before
        its event, and [] only from an assistant/message. While the cited seqs rise
        through the log (the usual case) all lists are checked at once, else one by one."""
        citing = [r for r in appends if r.sourceEventSeqs is not UNSET]
        lists = [r.sourceEventSeqs for r in citing]
        if not all(lists) and any(r.code != _ASSISTANT for r in citing
                                  if not r.sourceEventSeqs):
            return False
        if self.cited is not None:
            flat = list(chain([self.cited], chain.from_iterable(lists)))
            if all(map(operator.lt, flat, islice(flat, 1, None))):
                self.cited = flat[-1]  # each list rises, so its seqs are distinct
                return all(map(operator.lt, [cited[-1] for cited in lists if cited],
                               [r.seq for r in citing if r.sourceEventSeqs]))
            self.cited = None
        return all(len(set(cited)) == len(cited) and max(cited) < r.seq
                   for r, cited in zip(citing, lists, strict=True) if cited)

    def _plan_replace(self, r: Any, line: int, nodes: list[int]) -> Plan | None:
        candidate: Mapping[str, Any]
        if r.code == _TOOL_RESULT:
            candidate = self.log._parse(line)  # step 7 compares the data
        else:
            op = r.surfaceOp
            candidate = {"type": TYPE_NAMES[r.code], "seq": r.seq, "time": r.time,
                         "surfaceOp": {"op": "replace", "start": op.start, "end": op.end}}
            if r.sourceEventSeqs is not UNSET:
                candidate["sourceEventSeqs"] = r.sourceEventSeqs
        try:
            return plan_event(nodes, candidate, seq=r.seq, lookup=self.log.lookup, full=False)
        except AdmissionError:
            return None


def _closers(log: LogEvents, codes: bytes, first_seq: list[int], nodes: list[int]
             ) -> list[Event] | None:
    """What repair would append, checked as the seed check would (None if one fails)."""
    last = max(codes.rfind(bytes((_TURN_START,))), codes.rfind(bytes((_TURN_END,))))
    if last < 0 or codes[last] == _TURN_END:
        return []
    closers = interrupted_turn_closers(log[first_seq[last]:])
    for closer in closers:
        try:
            plan = plan_event(nodes, closer, seq=closer["seq"], lookup=log.lookup)
        except AdmissionError:
            return None
        nodes = apply_plan(nodes, plan)
    return closers
