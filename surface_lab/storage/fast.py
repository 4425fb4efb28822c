"""The fast reader of a stored JSONL log: one typed msgspec pass over the lines, the
checks of the load pipeline written for the common case, and events left packed in the
file's bytes until someone asks for one.

`fast_check` accepts a log only when every line passes checks at least as strict as
the full pipeline's (`scan_bytes` + `check_log`); for anything else (a torn or crash
tail, the fixture form, legacy shapes, unknown types, a linear log, an integral float
where an integer belongs, any broken rule) it returns None and the caller runs that
pipeline, which finds and names the problem. So the two agree on every log the fast
reader takes; `tests/test_fast_read.py` compares them log by log.

What is checked here, field by field, is what the full pipeline checks: the envelope,
the packed rows, the message shapes (SPEC 5.1), the legacy triggers and, through
`plan_event`, every surface rule. Text the checks do not need (message content, tool
output, chunk text) is skipped by msgspec, which still checks its JSON syntax; UTF-8 is
checked separately, only where the bytes are not ASCII. One difference is left: msgspec
skips numbers without converting them, so a number too large for a double (`1e400`)
inside skipped text is reported, as `line-unparsable` with its file, line and seq, when
that event is first read rather than by `read_log` itself. `read_log(path, check="full")`
and `surface-lab validate` run the full pipeline and report it up front.
"""

from __future__ import annotations

import gc
import operator
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import reduce
from itertools import accumulate, chain, compress, count, pairwise, repeat
from typing import Any, cast

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType

from ..chunks import expand_row
from ..errors import AdmissionError, CorruptLogError
from ..events import KNOWN_TYPES, ROW_TAGS, SURFACE_SET, Event, freeze_event
from ..jsonvalue import MAX_SAFE_INTEGER, as_int, dumps
from ..legacy import upgrade_reason
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
# Deeper than this goes to the full pipeline (whose `freeze` refuses past MAX_DEPTH 400);
# only a line with this many brackets can be, and only those are parsed to see.
_MAX_DEPTH = 300
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_UTF8_BLOCK = 1 << 16
_ROW = 255  # the code of a packed row's line


# -- the typed records --------------------------------------------------------------------


class _Probe(Struct):
    """The data fields the frames read; the rest is skipped."""

    turn: Any = UNSET
    step: Any = UNSET


class _TurnStart(_Probe):
    trigger: Any = UNSET  # a legacy field (SPEC 7.3 step 2)


class _TurnEnd(_Probe):
    reason: Any = UNSET


class _RequestHeader(_Probe):
    reason: Any = UNSET  # "fallback" is retired


class _Message(_Probe, kw_only=True):
    id: Any = UNSET
    role: Any = UNSET
    source: Any = UNSET
    content: list[Raw]


class _ToolBlock(Struct):
    type: Any = UNSET
    content: Raw = Raw()
    toolCallId: Any = UNSET


class _ToolMessage(_Message, kw_only=True):
    content: list[_ToolBlock]  # type: ignore[assignment]  # narrower than a message's


class _AssistantData(_Probe, kw_only=True):
    message: _Message


class _ToolResultData(_Probe, kw_only=True):
    message: _ToolMessage


class _TextRow(Struct, forbid_unknown_fields=True):
    turn: int
    step: int
    index: int
    dt: list[int]
    items: list[str] = msgspec.field(name="texts")


class _ToolRow(_TextRow, forbid_unknown_fields=True, kw_only=True):
    id: str
    items: list[str] = msgspec.field(name="args")
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
    # Only integers in sourceEventSeqs (an integral float goes to the full pipeline).
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = [
        ("seq", int), ("time", int), ("data", _DATA_OF_TYPE.get(name, _Probe | None)),
        ("surfaceOp", Any, UNSET), ("sourceEventSeqs", list[int] | UnsetType, UNSET),
        ("ignorable", Any, UNSET)]
    return msgspec.defstruct(f"Event_{_CODE[name]}", fields, tag_field="type", tag=name,
                             forbid_unknown_fields=True)


def _row_struct(tag: str) -> type[Struct]:
    data = _ToolRow if tag == "tool-call-chunks" else _TextRow
    return msgspec.defstruct(f"Row_{tag.replace('-', '_')}", [
        ("seq0", int), ("time0", int), ("data", data)], tag_field="type", tag=tag,
        forbid_unknown_fields=True)


_EVENT_CLASSES: dict[type[Struct], int] = {_event_struct(name): _CODE[name]
                                            for name in TYPE_NAMES}
_ROW_DELTA = {_row_struct(tag): tag.replace("-chunks", "-delta") for tag in sorted(ROW_TAGS)}
_ROW_CLASSES = frozenset(_ROW_DELTA)
_SURFACE_CODES = frozenset(_CODE[name] for name in SURFACE_SET)
_LEGACY_CODES = frozenset(_CODE[name] for name in ("turn/start", "turn/end", "request/header"))


def _mask(codes: frozenset[int]) -> bytes:
    """A `bytes.translate` table: 1 for the codes given, 0 for every other."""
    return bytes(int(code in codes) for code in range(256))


_IS_ROW = _mask(frozenset({_ROW}))
_IS_EVENT = _mask(frozenset(range(len(TYPE_NAMES))))
_IS_SURFACE = _mask(_SURFACE_CODES)
_IS_LOG_ONLY = _mask(frozenset(range(len(TYPE_NAMES))) - _SURFACE_CODES)
_IS_LEGACY = _mask(_LEGACY_CODES)
_ENVELOPE = operator.attrgetter("seq", "time", "ignorable", "surfaceOp", "sourceEventSeqs",
                                "data")
_DATA_IS_MESSAGE = frozenset({"user/message", "context/message"})
_DECODER = msgspec.json.Decoder(reduce(operator.or_, [*_EVENT_CLASSES, *_ROW_CLASSES]))


# -- events kept packed in the file's bytes ----------------------------------------------


@dataclass(slots=True)
class _Records:
    """What the reader keeps of each line: its type code (ROW for a packed row), its first
    seq, its time (the member times of a row) and the raw turn and step."""

    starts: list[int]  # byte offset of each line, and one past the last
    codes: bytes
    first_seq: list[int]  # and the event count after the last line
    event_times: Sequence[int]  # of the event lines, in order
    member_times: list[list[int]]  # of the rows' members, row by row
    datas: Sequence[Any]  # the probed data of the event lines (None for null)
    row_datas: list[Any]
    row_deltas: list[str]  # the chunk type of each row's members

    def per_line(self, events: Iterator[Any], rows: Iterator[Any]) -> list[Any]:
        """One value per line, from the event lines' and the rows' values."""
        return [next(rows) if code == _ROW else next(events) for code in self.codes]


class LogEvents(ReadOnlySequence[Event]):
    """The logical events of a log read by the fast reader: a read-only sequence whose
    events are parsed from the file's bytes when asked for (a packed row is expanded
    whole and the last few kept). Envelope columns need no parsing: `type_codes` (into
    `TYPE_NAMES`), `types`, `times`, `turns`, `steps` and `lines`, made on first use."""

    _what = "event"

    def __init__(self, data: bytes, path: str, records: _Records) -> None:
        self._data = data
        self._path = path
        self._records = records
        self._row_cache: dict[int, list[Event]] = {}
        self._columns: dict[str, Any] = {}

    def __len__(self) -> int:
        return self._records.first_seq[-1]

    def _record(self, seq: int) -> int:
        return bisect_right(self._records.first_seq, seq) - 1

    def _parse(self, record: int) -> Any:
        starts = self._records.starts
        try:
            return _parse(self._data[starts[record] : starts[record + 1] - 1])
        except _BadLine as bad:  # only a number too large for a double gets here
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

    def _spread(self, name: str, per_record: Callable[[], list[Any]]) -> list[Any]:
        """A column with one value per event, from one per line: a row's value is
        repeated for its members, except its member times, which are listed."""
        if name not in self._columns:
            r = self._records
            listed = name == "times"
            self._columns[name] = list(chain.from_iterable(
                (value,) if code != _ROW else value if listed
                else repeat(value, r.first_seq[k + 1] - r.first_seq[k])
                for k, (code, value) in enumerate(zip(r.codes, per_record(), strict=True))))
        return cast(list[Any], self._columns[name])

    @property
    def type_codes(self) -> bytes:
        """Each event's type as an index into `TYPE_NAMES`."""
        if "codes" not in self._columns:
            r = self._records
            chunk = bytes((_CHUNK,))
            self._columns["codes"] = b"".join(
                chunk * (r.first_seq[k + 1] - r.first_seq[k]) if code == _ROW
                else bytes((code,)) for k, code in enumerate(r.codes))
        return cast(bytes, self._columns["codes"])

    @property
    def types(self) -> list[str]:
        return [TYPE_NAMES[c] for c in self.type_codes]

    @property
    def times(self) -> list[int]:
        r = self._records
        return self._spread("times", lambda: r.per_line(iter(r.event_times),
                                                        iter(r.member_times)))

    @property
    def turns(self) -> list[int | None]:
        """`data.turn` of each event as an integer, None when absent or not one."""
        return self._spread("turns", lambda: self._probed("turn"))

    @property
    def steps(self) -> list[int | None]:
        return self._spread("steps", lambda: self._probed("step"))

    def _probed(self, key: str) -> list[int | None]:
        r = self._records
        return r.per_line((None if d is None else _as_int(getattr(d, key)) for d in r.datas),
                          (getattr(d, key) for d in r.row_datas))

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

    def lookup(self, seq: int) -> Mapping[str, Any] | None:
        """`raw(seq)`, or None outside the log: the planner's lookup, which reads data."""
        return self.raw(seq) if 0 <= seq < len(self) else None

    def surface_seqs(self) -> list[int]:
        """The seqs of the surface-type events, in order."""
        first = self._records.first_seq
        return [first[k] for k in compress(count(), self._records.codes.translate(_IS_SURFACE))]

    def data_sizes(self) -> list[int]:
        """`len(dumps(event["data"]))` of every event: each line's data is parsed and
        encoded again (exact whatever the file's spacing); a row's members are sized
        from their texts, the rest of their data being the same for the whole row."""
        r = self._records
        rows, deltas = iter(r.row_datas), iter(r.row_deltas)
        sizes: list[int] = []
        for k, code in enumerate(r.codes):
            if code != _ROW:
                sizes.append(len(dumps(self._parse(k).get("data"))))
                continue
            d, delta = next(rows), next(deltas)
            if isinstance(d, _ToolRow):
                chunk: dict[str, Any] = {"type": "tool-call-delta", "index": d.index,
                                         "id": d.id}
                if d.name is not UNSET:
                    chunk["name"] = d.name
                chunk["argumentsDelta"] = ""
            else:
                chunk = {"type": delta, "index": d.index, "text": ""}
            base = len(dumps({"turn": d.turn, "step": d.step, "chunk": chunk})) - 2
            sizes.extend(base + len(dumps(item)) for item in d.items)
        return sizes


def _as_int(value: Any) -> int | None:
    return None if value is UNSET else as_int(value)


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


def _sources_ok(kind: str, sources: list[int], seq: int) -> bool:
    """SPEC 4.1 step 5 for integers: distinct seqs from 0 to before this event."""
    if not sources:
        return kind == "assistant/message"
    return min(sources) >= 0 and max(sources) < seq and len(set(sources)) == len(sources)


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


def _line_starts(data: bytes, first: int) -> list[int]:
    starts = [first]
    find = data.find
    pos = first
    while (end := find(b"\n", pos)) >= 0:
        pos = end + 1
        starts.append(pos)
    return starts


def _message_ok(kind: str, msg: Any) -> bool:
    """SPEC 5.1, at least as strict as `check_message_shape`."""
    mid, source = msg.id, msg.source
    if not (type(mid) is str and mid and type(source) is dict):
        return False
    source_kind = source.get("kind")
    if not (type(source_kind) is str and source_kind):
        return False
    if kind == "assistant/message":
        provider, model = source.get("provider"), source.get("model")
        return (msg.role == "assistant" and source_kind == "model"
                and type(provider) is str and bool(provider)
                and type(model) is str and bool(model))
    if msg.role != "user":
        return False
    if kind != "tool/result":
        return True
    call_id = source.get("callId")
    if source_kind != "tool" or type(call_id) is not str or len(msg.content) != 1:
        return False
    block = msg.content[0]
    raw = memoryview(block.content)
    return (block.type == "tool-result" and len(raw) > 0 and raw[0] == 0x5B  # "["
            and block.toolCallId == call_id)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No garbage collection while a few hundred thousand acyclic objects are built:
    the collector would otherwise walk them again and again (half the decode time)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


Checked = tuple["LogEvents", "PlanList", FoldResult, list[Event]]


def fast_check(data: bytes, path: str, header_end: int,
               note: Callable[..., None]) -> Checked | None:
    """Check the event lines of a stored JSONL log (after the header line, which ends at
    byte `header_end`).

    Returns:
        (events, plans, fold, closers) when the log passes, else None: then the full
        pipeline must read it. `note` receives the same notes `check_log` would add.
    """
    with _gc_paused():
        return _fast_check(data, path, header_end, note)


def _fast_check(data: bytes, path: str, header_end: int,
                note: Callable[..., None]) -> Checked | None:
    if not data.endswith(b"\n") or not _utf8_ok(data):
        return None
    starts = _line_starts(data, header_end)
    view = memoryview(data)
    decode = _DECODER.decode
    try:
        records: list[Any] = [decode(view[a : b - 1]) for a, b in pairwise(starts)]
    except (msgspec.DecodeError, RecursionError):  # ValidationError is a DecodeError
        return None
    if any(b - a > 2 * _MAX_DEPTH and (b - a > MAX_LINE_BYTES + 1
                                       or _maybe_too_deep(data, a, b - 1))
           for a, b in pairwise(starts)):
        return None
    classes = _EVENT_CLASSES
    codes = bytes(map(classes.get, map(type, records), repeat(_ROW)))
    is_row = codes.translate(_IS_ROW)
    is_event = codes.translate(_IS_EVENT)
    rows = list(compress(records, is_row))
    events = list(compress(records, is_event))
    lo, hi = -MAX_SAFE_INTEGER, MAX_SAFE_INTEGER

    # Packed rows (SPEC 7.1): members, gaps and safe integers, as `expand_row` checks.
    row_data = [r.data for r in rows]
    counts = [len(d.items) for d in row_data]
    if 0 in counts or any(len(d.dt) != m - 1 for d, m in zip(row_data, counts, strict=True)):
        return None
    member_times = [list(accumulate(d.dt, initial=r.time0)) for r, d in zip(rows, row_data,
                                                                           strict=True)]
    fields = [[d.turn for d in row_data], [d.step for d in row_data],
              [d.index for d in row_data],
              [x for t in member_times for x in (min(t), max(t))],
              [x for d in row_data if d.dt for x in (min(d.dt), max(d.dt))]]
    if any(values and (min(values) < lo or max(values) > hi) for values in fields):
        return None

    # Seqs run on from 0 across lines and row members.
    per_line = [1] * len(records)
    for k, m in zip(compress(count(), is_row), counts, strict=False):
        per_line[k] = m
    first_seq = list(accumulate(per_line, initial=0))
    seqs, times, ignorables, ops, sources, datas = (
        zip(*map(_ENVELOPE, events), strict=True) if events else ((),) * 6)
    if (list(seqs) != list(compress(first_seq, is_event))
            or [r.seq0 for r in rows] != list(compress(first_seq, is_row))):
        return None

    # The envelope (SPEC 1): safe times, ignorable only true, retired shapes refused.
    if times and (min(times) < lo or max(times) > hi):
        return None
    event_codes = bytes(compress(codes, is_event))
    try:
        # Log-only types carry neither marker (a list or an object is unhashable).
        log_only = event_codes.translate(_IS_LOG_ONLY)
        if (set(ignorables) - {UNSET, True} or set(compress(ops, log_only)) - {UNSET}
                or set(compress(sources, log_only)) - {UNSET}):
            return None
    except TypeError:
        return None
    legacy = event_codes.translate(_IS_LEGACY)
    if not all(_current(TYPE_NAMES[code], data) for code, data in zip(
            compress(event_codes, legacy), compress(datas, legacy), strict=True)
            if data is not None):
        return None
    surface = list(compress(count(), codes.translate(_IS_SURFACE)))
    if surface and all(records[k].surfaceOp is UNSET for k in surface):
        return None  # a linear (unmarked) log: the legacy reading applies
    kept = _Records(starts, codes, first_seq, times, member_times, datas, row_data,
                    [_ROW_DELTA[r.__class__] for r in rows])
    log = LogEvents(data, path, kept)
    folded = _fold(log, [(k, records[k]) for k in surface], first_seq)
    if folded is None:
        return None
    kinds, replaces, nodes, replacements = folded
    closers = _closers(log, codes, first_seq, list(nodes))
    if closers is None:
        return None
    note_open_turn(note, closers)
    return log, PlanList(kinds, replaces), FoldResult(nodes, replacements), closers


def _current(kind: str, data: Any) -> bool:
    """No legacy shape of SPEC 7.3 step 2 (which `check_log` would upgrade) and no
    retired request/header fallback (which it refuses)."""
    if kind == "turn/start":
        return data.trigger is UNSET
    if kind == "turn/end":
        if data.reason is UNSET:
            return True
        try:
            return upgrade_reason({}, data.reason)[1] is None
        except (AdmissionError, CorruptLogError):
            return False
    return bool(data.reason != "fallback")


def _fold(log: LogEvents, surface: list[tuple[int, Any]], first_seq: list[int]
          ) -> tuple[bytearray, dict[int, Plan], list[int], list[Replacement]] | None:
    """SPEC 5.1 and 4.1 for the surface events, in log order: kinds, replaces, nodes."""
    kinds = bytearray(first_seq[-1])
    replaces: dict[int, Plan] = {}
    replacements: list[Replacement] = []
    nodes: list[int] = []

    for k, r in surface:
        seq = first_seq[k]
        kind = TYPE_NAMES[_EVENT_CLASSES[r.__class__]]
        data = r.data
        if not _message_ok(kind, data if kind in _DATA_IS_MESSAGE else data.message):
            return None
        op, sources = r.surfaceOp, r.sourceEventSeqs
        if op == "append" and (sources is UNSET or _sources_ok(kind, sources, seq)):
            nodes.append(seq)
            kinds[seq] = APPEND
            continue
        if kind == "tool/result" and isinstance(op, dict):
            candidate: Mapping[str, Any] = log._parse(k)  # step 7 compares the data
        else:
            candidate = {"type": kind, "seq": seq, "time": r.time}
            if op is not UNSET:
                candidate["surfaceOp"] = op
            if sources is not UNSET:
                candidate["sourceEventSeqs"] = sources
        try:
            plan = plan_event(nodes, candidate, seq=seq, lookup=log.lookup, full=False)
        except AdmissionError:
            return None
        if plan.kind == REPLACE:
            replacements.append(Replacement.of(plan))
            replaces[seq] = plan
        kinds[seq] = plan.kind
        nodes = apply_plan(nodes, plan)
    return kinds, replaces, nodes, replacements


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
