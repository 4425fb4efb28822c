"""The fast reader of a stored JSONL log: one typed msgspec pass over the lines, a few
MB at a time, the checks of the load pipeline written for the common case, and events
left packed in the file's bytes until someone asks for one.

`fast_check` accepts a log only when every line passes checks at least as strict as
the full pipeline's (`scan_bytes` + `check_log`); for anything else (a torn or crash
tail, the fixture form, legacy shapes, unknown types, a linear log, an integral float
where an integer belongs, any broken rule) it returns None and the caller runs that
pipeline, which finds and names the problem. So the two agree on every log the fast
reader takes; `tests/test_fast_read.py` compares them log by log.

What is checked here is what the full pipeline checks, from the same definitions. The
envelope, message shapes and packed rows are decoded into structs built from the rule
tables of `schema`, so a line that breaks one of their types does not decode; their
checks across fields run on a stretch of lines at once (`schema.message_checks`,
`schema.row_checks`). The planner's steps come from `surface`: seqs across lines and row
members through `first_misplaced`, the appends' sources through `check_sources_run`
(`SOURCE_RULES` over a stretch), `surfaceOp` decoded as "append" or `ReplaceOp`, and each
replace through `plan_event`. The legacy shapes (SPEC 7.3 step 2) are checked here. A
type narrower than its rule's is marked as a narrowing: it sends more logs to the full
pipeline, never fewer. Text the checks do not need (message content, tool output, chunk
text) is skipped by msgspec, which still checks its JSON syntax; UTF-8 is checked
separately, only where the bytes are not ASCII. msgspec skips numbers without
converting them, so the pass that finds the line breaks also finds where a number too
large for a double (`1e400`) may be, and those few lines are parsed as the full
pipeline parses them (`_numbers_fit`): a log holding one goes to that pipeline.
"""

from __future__ import annotations

import operator
import sys
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping
from functools import partial, reduce
from itertools import accumulate, compress, count, pairwise
from types import FrameType
from typing import Annotated, Any, Literal, TypeVar, get_args

import msgspec
import orjson
from msgspec import UNSET, Meta, Raw, Struct, UnsetType

from ..errors import AdmissionError, CorruptLogError
from ..events import ROW_TAGS, SURFACE_SET, Event
from ..gcpause import gc_paused
from ..jsonvalue import loads
from ..legacy import upgrade_reason
from ..repair import interrupted_turn_closers
from ..schema import (
    ENVELOPE_RULES,
    ROW_RULES,
    SAFE_INT,
    SEQ,
    Rows,
    Rule,
    message_checks,
    message_struct,
    row_checks,
    row_fields,
)
from ..surface import (
    APPEND,
    REPLACE,
    FoldResult,
    Plan,
    Replacement,
    ReplaceOp,
    apply_plan,
    check_sources_run,
    first_misplaced,
    plan_event,
)
from .codec import MAX_LINE_BYTES
from .lines import CODE as _CODE
from .lines import IS_ROW as _IS_ROW
from .lines import IS_SURFACE as _IS_SURFACE
from .lines import ROW as _ROW
from .lines import TYPE_NAMES, Plain, Records, mask, stretches
from .pipeline import note_open_turn
from .sequences import LogEvents, PlanList

__all__ = ["TYPE_NAMES", "LogEvents", "PlanList", "fast_check"]

_TURN_START, _TURN_END = _CODE["turn/start"], _CODE["turn/end"]
_TOOL_RESULT = _CODE["tool/result"]
# A line nested deeper than this goes to the full pipeline (whose `freeze` refuses past
# MAX_DEPTH 400); see `_decoded` for how it is found.
_MAX_DEPTH = 300
_T = TypeVar("_T")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_UTF8_BLOCK = 1 << 14


# -- the typed records --------------------------------------------------------------------
#
# The check pass decodes every line into one of these: the envelope, and of the data only
# what a rule reads, typed as `schema` types them (`ENVELOPE_RULES`, the message shapes,
# `row_fields`), so a line that breaks one of those rules fails the decode and the full
# pipeline names the problem. What is typed here besides is a legacy shape (SPEC 7.3) or a
# narrowing of the fast path, which sends more logs to the full pipeline, never fewer.

# Narrowing: the gaps of a packed row's member times, taken here only in [0, 2**31), so
# that one sum proves every member time of a stretch safe (`schema.Rows.gaps_within`).
# It stands in for dt's type only while that is `list[SAFE_INT]`, which it refines: a
# rule added on dt turns it off (`_narrowed`).
_GAP_LIMIT = 1 << 31
_GAP = Annotated[int, Meta(ge=0, lt=_GAP_LIMIT)]
_GAPS_NARROWED = (("dt", list[SAFE_INT], list[_GAP]),)
# No value is of this type: a field so typed must be absent.
_ABSENT = Annotated[int, Meta(ge=1, le=0)]


class _Object(Plain):
    """Any JSON object: its fields are skipped (their syntax still checked)."""


class _TurnStart(Plain):
    trigger: _ABSENT | UnsetType = UNSET  # a legacy field (SPEC 7.3 step 2)


class _TurnEnd(Plain):
    reason: Any = UNSET


class _RequestHeader(Plain):
    reason: Any = UNSET  # "fallback" is retired


_LEGACY_DATA: dict[str, Any] = {
    "turn/start": _TurnStart | None,
    "turn/end": _TurnEnd | None,
    "request/header": _RequestHeader | None,
}


def _data_struct(name: str) -> Any:
    """What the rules of type `name` read of its data: a surface type's message (SPEC
    5.1, from `schema.MESSAGE_RULES`), a legacy trigger's field, else nothing."""
    if name in ("user/message", "context/message"):
        return message_struct(name, Raw)
    if name in SURFACE_SET:
        return msgspec.defstruct(f"Data_{_CODE[name]}", [("message", message_struct(name, Raw))],
                                 bases=(Plain,))
    return _LEGACY_DATA.get(name, _Object | None)


def _event_struct(name: str) -> type[Struct]:
    """A line of type `name`: the envelope's fields typed by `schema.ENVELOPE_RULES`
    (`type` is the tag), its data by what the rules of that type read; the class
    attribute `code` is the type's index."""
    # Narrowing: seqs, times, sources and replace ends as ints only (no integral floats,
    # which the full pipeline converts); seq is checked by `first_misplaced`.
    required: list[tuple[str, Any] | tuple[str, Any, Any]] = [("seq", int)]
    optional: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for rule in ENVELOPE_RULES:
        if rule.field == "type":
            continue
        tp = _data_struct(name) if rule.field == "data" else rule.type(Raw)
        if rule.required:
            required.append((rule.field, tp))
        else:
            optional.append((rule.field, tp | UnsetType, UNSET))
    if name in SURFACE_SET:  # the surface fields of SPEC 4.1 steps 2, 3 and 5
        required.append(("surfaceOp", Literal["append"] | ReplaceOp))
        optional.insert(0, ("sourceEventSeqs", list[SEQ] | UnsetType, UNSET))
    return msgspec.defstruct(f"Event_{_CODE[name]}", required + optional, tag_field="type",
                             tag=name, forbid_unknown_fields=True, gc=False,
                             namespace={"code": _CODE[name]})


def _narrowed(tag: str) -> tuple[tuple[str, Any], ...]:
    """The narrowings of `_GAPS_NARROWED` that apply to a `tag` row: those whose field's
    last rule has the type they refine."""
    last = {r.field: r.type(Any) for r in ROW_RULES[tag] if isinstance(r, Rule)}
    return tuple((field, narrow) for field, wide, narrow in _GAPS_NARROWED
                 if last.get(field) == wide)


def _row_struct(tag: str) -> type[Struct]:
    """A packed row, as `schema.row_fields` has it (narrowed, see `_narrowed`); the
    class attribute `gaps_within` is `_GAP_LIMIT` when its gaps are narrowed."""
    narrowed = _narrowed(tag)
    return msgspec.defstruct(f"Row_{tag.replace('-', '_')}",
                             row_fields(tag, narrowed=narrowed),
                             tag_field="type", tag=tag, forbid_unknown_fields=True, gc=False,
                             namespace={"code": _ROW, "row_tag": tag,
                                        "gaps_within": _GAP_LIMIT if narrowed else None})


def decoder() -> msgspec.json.Decoder[Any]:
    """The decoder of the check pass, built from the rules as they are now."""
    return msgspec.json.Decoder(reduce(operator.or_, [
        *map(_event_struct, TYPE_NAMES), *map(_row_struct, sorted(ROW_TAGS))]))


_DECODER = decoder()


_LEGACY_CODES = frozenset(_CODE[name] for name in ("turn/end", "request/header"))


_IS_LEGACY = mask(_LEGACY_CODES)
_CODE_OF = operator.attrgetter("code")
_SEQ_OF = operator.attrgetter("seq")
_TIME_OF = operator.attrgetter("time")


# -- events kept packed in the file's bytes ----------------------------------------------


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


def _line_starts(data: bytes, first: int) -> tuple[list[int], list[int]] | None:
    """The byte offset of every line from `first` on and one past the last, and the
    offsets where a number too large for a double may start (see `_numbers_fit`); None
    unless every line starts with "{" and ends with "}". Then each line break separates
    two JSON values (no value goes on past a "}" with a "{"), so `decode_lines`, which
    reads values separated by any whitespace, gives one per line exactly when it gives
    as many values as there are lines. numpy looks for both in one pass, `_BLOCK` bytes
    at a time (they stay in the cache for all the comparisons)."""
    import numpy as np

    bytes_ = np.frombuffer(data, dtype=np.uint8)
    ends = []
    suspects: list[int] = []
    for lo in range(first, len(data), _BLOCK):
        x = bytes_[lo : lo + _BLOCK + 4]  # 4 more for a number's exponent
        is_break = x[: _BLOCK] == _NEWLINE
        # No stored record is shorter than the shortest envelope, so a block with more
        # line breaks than that allows (a newline bomb) goes to the full scan before any
        # of its breaks is listed: they take at most 1 byte in 40 of the log.
        if np.count_nonzero(is_break) > _BLOCK // (len(_SHORTEST) + 1) + 1:
            return None
        ends.append(np.flatnonzero(is_break) + lo)
        suspects += _big_number_suspects(np, data, x, lo)
    breaks = np.concatenate([np.zeros(0, dtype=np.intp), *ends])
    if not ((bytes_[breaks[:-1] + 1] == _OPEN).all() and (bytes_[breaks - 1] == _CLOSE).all()
            and (len(breaks) == 0 or bytes_[first] == _OPEN)):
        return None
    return [first, *(breaks + 1).tolist()], suspects


_BLOCK = 128 << 10  # bytes looked at a time by the scan (they stay in the cache)
_DIGIT_WORD = 0x0101010101010101  # eight digits in a row, as a word of digit flags
_SEVEN_WORDS = b"\x01" * 7


def _big_number_suspects(np: Any, data: bytes, x: Any, at: int) -> list[int]:
    """Where in block `x` (a uint8 array of `data` from offset `at`, with the 4 bytes
    after it) a number too large for a double may start. Such a number has an exponent
    of three digits or more, or a run of 210 digits (and an exponent of two at most):
    an "e" or "E" followed by three digits (a "+" between allowed), or 56 digits
    filling seven aligned words (a run of 210 digits has 105 in one block, so it fills
    some). Text such as "1e400" in a string is one too: `_numbers_fit` parses the line."""
    found: list[int] = []
    digit = (x - 0x30) < 10
    e = (x[:-4] | 0x20) == 0x65
    if data.find(b"+", at, at + len(x)) >= 0:  # found by memchr: most blocks have none
        e &= digit[1:-3] | (x[1:-3] == 0x2B)
    else:
        e &= digit[1:-3]
    e = np.flatnonzero(e)
    if len(e):
        exponent = e + 1 + (x[e + 1] == 0x2B)
        found += (e[digit[exponent] & digit[exponent + 1] & digit[exponent + 2]] + at).tolist()
    flags = (digit[: len(digit) // 8 * 8].view(np.uint64) == _DIGIT_WORD).tobytes()
    run = flags.find(_SEVEN_WORDS)
    while run >= 0:
        found.append(at + run * 8)
        run = flags.find(_SEVEN_WORDS, run + 7)
    return found


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


def _deeper(frames: int, call: Callable[[], _T]) -> _T:
    """`call()`, run `frames` Python frames deeper than the caller."""
    return call() if frames <= 0 else _deeper(frames - 1, call)


_TOO_DEEP = b"[" * (_MAX_DEPTH + 1) + b"]" * (_MAX_DEPTH + 1)
_SHORTEST = b'{"type":"a","seq":0,"time":0,"data":{}}'  # of the stored event lines
_NEWLINE, _OPEN, _CLOSE = b"\n{}"
# The deepest stack the bound below builds; past it lines are looked at one by one.
_MAX_HEADROOM = 20_000


def _decoded(data: bytes, starts: list[int]) -> Iterator[tuple[int, list[Any]]]:
    """The lines after the header decoded, a stretch of about `STRETCH_BYTES` at a time
    (so only one stretch's records are alive at once): (index of its first line, records).
    No line nested deeper than `_MAX_DEPTH` decodes.

    On CPython 3.11 msgspec counts its nesting against the interpreter's recursion
    limit, so each decode runs with the stack built up (by plain Python calls, which
    take no C stack on 3.11) to `_MAX_DEPTH` frames below the limit, and a line nested
    deeper fails to decode. Nothing process-wide changes: the limit is left as it is.
    A probe at the same depth first checks that the interpreter counts that way (later
    versions count C recursion apart); if it does not, or the limit is so high that the
    stack would be very deep, the lines with enough brackets to be that deep are looked
    at one by one.

    Raises:
        msgspec.DecodeError, RecursionError: a line the fast reader does not take.
    """
    view = memoryview(data)
    headroom = sys.getrecursionlimit() - _stack_depth() - _MAX_DEPTH
    bounded = False
    if 0 <= headroom <= _MAX_HEADROOM:
        try:
            _deeper(headroom, lambda: msgspec.json.decode(_TOO_DEEP))
        except RecursionError:
            bounded = True
    for first, end in stretches(starts):
        lines = view[starts[first] : starts[end]]
        records: list[Any] = (_deeper(headroom, partial(_DECODER.decode_lines, lines))
                              if bounded else _DECODER.decode_lines(lines))
        if len(records) != end - first or (not bounded and any(
                b - a > 2 * _MAX_DEPTH and _maybe_too_deep(data, a, b - 1)
                for a, b in pairwise(starts[first : end + 1]))):
            raise RecursionError("not one record per line, or a line nested too deep")
        yield first, records


def _numbers_fit(data: bytes, starts: list[int], suspects: list[int]) -> bool:
    """Whether every number in the lines fits a double, as the full pipeline's parser
    (orjson) requires; msgspec skips the numbers in text the checks do not read without
    converting them. Only the lines holding a suspect (`_big_number_suspects`) can hold
    one: they are parsed to find out."""
    for k in {bisect_right(starts, at) - 1 for at in suspects}:
        try:
            loads(view_of(data, starts, k))
        except orjson.JSONDecodeError:
            return False
    return True


def view_of(data: bytes, starts: list[int], line: int) -> memoryview:
    """Line `line` (counted from `starts`), without its line break."""
    return memoryview(data)[starts[line] : starts[line + 1] - 1]


Checked = tuple[LogEvents, PlanList, FoldResult, list[Event]]


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
    scanned = _line_starts(data, header_end)
    if scanned is None:
        return None
    starts, suspects = scanned
    if (len(data) - header_end > MAX_LINE_BYTES and max(
            map(operator.sub, starts[1:], starts)) > MAX_LINE_BYTES + 1) or not _numbers_fit(
            data, starts, suspects):
        return None
    kept = Records(starts, bytearray(), [0])
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


def _envelopes(kept: Records, records: list[Any]) -> bytes | None:
    """Check the packed rows, the seqs and the legacy shapes of a stretch of records,
    and keep their type codes and first seqs. Returns the codes (None if a check fails).
    """
    codes = bytes(map(_CODE_OF, records))

    # Packed rows (SPEC 7.1): what `schema.ROW_RULES` types the decode has checked; here
    # the checks across a row's fields, for all the rows at once.
    is_row = codes.translate(_IS_ROW)
    rows = list(compress(records, is_row))
    members = [r.data.members for r in rows]
    if rows and not _rows_ok(rows, members):
        return None

    # Seqs run on from 0 across lines and row members (SPEC 4.1 step 1).
    per_line = [1] * len(records)
    for k, m in zip(compress(count(), is_row), members, strict=True):
        per_line[k] = len(m)
    first_seq = list(accumulate(per_line, initial=kept.first_seq[-1]))
    if first_misplaced(list(map(_SEQ_OF, records)), first_seq[:-1], typed=True) is not None:
        return None

    # No legacy shape of SPEC 7.3 step 2, no retired request/header fallback.
    if not all(map(_current, compress(records, codes.translate(_IS_LEGACY)))):
        return None
    kept.codes += codes
    kept.first_seq += first_seq[1:]
    return codes


def _rows_ok(rows: list[Any], members: list[Any]) -> bool:
    """Whether `rows` (with their `members`) pass every check of `schema.ROW_RULES`
    across a row's fields, each run on the rows of the tags it is listed for."""
    checks = {tag: row_checks(tag) for tag in ROW_TAGS}
    narrowed = {cls.row_tag: cls.gaps_within for cls in get_args(_DECODER.type)
                if cls.code == _ROW}  # as the rows were decoded
    tags_of: dict[Any, set[str]] = {}  # the tags each check is listed for
    for tag, listed in checks.items():
        for check in listed:
            tags_of.setdefault(check, set()).add(tag)
    columns: dict[frozenset[str], Rows] = {}  # the rows of those tags, as columns
    for check, tags in tags_of.items():
        key = frozenset(tags)
        if key not in columns:
            chosen, their = rows, members
            if len(key) < len(checks):
                keep = [r.row_tag in key for r in rows]
                chosen, their = list(compress(rows, keep)), list(compress(members, keep))
            within = {narrowed[tag] for tag in key}
            columns[key] = Rows(list(map(_TIME_OF, chosen)), their,
                                [r.data.dt for r in chosen],
                                gaps_within=within.pop() if len(within) == 1 else None)
        if check.broken(columns[key]) is not None:
            return False
    return True


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


# The checks across a message's fields (`schema.message_checks`), by type code.
_CHECKS = {_CODE[kind]: message_checks(kind) for kind in sorted(SURFACE_SET)
           if message_checks(kind)}
_IN_DATA = frozenset(_CODE[kind] for kind in ("user/message", "context/message"))


def _checks_hold(surface: list[Any]) -> bool:
    """SPEC 5.1's rules across fields (a tool/result's block answers the call its source
    names) for the surface records of a stretch."""
    for code, checks in _CHECKS.items():
        messages = [r.data if code in _IN_DATA else r.data.message
                    for r in surface if r.code == code]
        if not all(check.holds(m) for check in checks for m in messages):
            return False
    return True


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
        if not _checks_hold(surface):
            return False
        is_replace = [r.surfaceOp.__class__ is ReplaceOp for r in surface]
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
        """SPEC 4.1 step 5 for the appends that cite sources (`check_sources_run`)."""
        citing = [r for r in appends if r.sourceEventSeqs is not UNSET]
        try:
            self.cited = check_sources_run(
                [TYPE_NAMES[r.code] for r in citing], list(map(_SEQ_OF, citing)),
                [r.sourceEventSeqs for r in citing], above=self.cited, typed=True)
        except AdmissionError:
            return False
        return True

    def _plan_replace(self, r: Any, line: int, nodes: list[int]) -> Plan | None:
        candidate: Mapping[str, Any]
        if r.code == _TOOL_RESULT:
            candidate = self.log.parse_record(line)  # step 7 compares the data
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
