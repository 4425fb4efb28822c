"""The column pass of the frames: one decode of each line's time and data (as its bytes),
a surface event's marker and sources, and a packed row's fields; nothing is checked
again (the fast reader checked it all)."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from itertools import accumulate, compress, repeat
from typing import Any

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType

from ..chunks import member_chunk
from ..events import ROW_TAGS, SURFACE_SET, Event
from ..gcpause import gc_paused
from ..jsonvalue import MAX_SAFE_INTEGER, as_int, dumps
from .lines import CODE, IS_ROW, IS_SURFACE, ROW, TYPE_NAMES, Plain, Records, stretches

__all__ = ["EventColumns", "columns_of", "event_columns"]

# The column pass (run for each frame): each line's time and data (as its bytes), a
# surface event's marker and sources, and a packed row's fields; nothing is checked again.


class _ColumnRow(Plain):
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
    return msgspec.defstruct(f"Column_{CODE[tag]}", fields, tag_field="type", tag=tag,
                             gc=False, namespace={"code": CODE[tag]})


_COLUMN_DECODER = msgspec.json.Decoder(reduce(operator.or_, map(
    _column_struct, [*TYPE_NAMES, *sorted(ROW_TAGS)])))
_EMPTY: dict[str, Any] = {}
_NOT = bytes((1, 0)) + bytes(254)  # turns a 0/1 mask over
_TIME_OF = operator.attrgetter("time")


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


def event_columns(data: bytes, r: Records, n: int,
                  on_surface: Callable[[Event], Any] | None = None,
                  lines: tuple[int, int] | None = None) -> EventColumns:
    """The envelope columns of the `n` events of a log's lines (`r`, in `data`), from one
    pass over the lines; with `on_surface`, also its answer for each surface event
    (given its type, seq, data, surfaceOp and sourceEventSeqs), by seq, in `.surface`.
    With `lines` (first line, line after the last), the columns of those lines' events
    alone (`n` is then their count; `.surface` keeps the log's seqs)."""
    import numpy as np

    start, stop = lines if lines is not None else (0, len(r.codes))
    lists = _ColumnLists([], [], [], [], [], [], [], [], {})
    view = memoryview(data)
    with gc_paused():
        for first, end in stretches(r.starts, start, stop):
            decoded = _COLUMN_DECODER.decode_lines(view[r.starts[first] : r.starts[end]])
            _collect(lists, decoded, r.codes[first:end], r.first_seq[first:end],
                     on_surface)
    line_seqs = np.array(r.first_seq[start : stop + 1], dtype=np.int64) - r.first_seq[start]
    is_row = np.frombuffer(r.codes[start:stop], dtype=np.uint8) == ROW
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


def _collect(lists: _ColumnLists, lines: list[Any], codes: bytes | bytearray,
             seqs: list[int], on_surface: Callable[[Event], Any] | None) -> None:
    """Add a stretch of column-pass records to `lists`. The event lines' data is parsed
    at once, as one array, and encoded again: when that gives back the very bytes of
    the file (the usual case) each line's data size is its length in the file, else
    each is encoded alone. A packed row's members are sized from their texts, the rest
    of their data being the same for the whole row."""
    is_row = codes.translate(IS_ROW)
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
        on = codes.translate(IS_SURFACE)
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


def columns_of(events: Sequence[Event],
               on_surface: Callable[[Event], Any] | None = None) -> EventColumns:
    """`event_columns` of events already parsed (a Session's, the full pipeline's): the
    same columns, so the frames have one way to build from them."""
    import numpy as np

    datas = [e.get("data") for e in events]
    objects = [d if isinstance(d, Mapping) else _EMPTY for d in datas]

    def nullable(values: list[int | None]) -> tuple[Any, Any]:
        array = np.array(values, dtype=object)
        missing = array == None  # noqa: E711  # elementwise: which values are missing
        array[missing] = 0
        return array.astype(np.int64), missing.astype(bool)

    turn, turn_missing = nullable(_ints(o.get("turn") for o in objects))
    step, step_missing = nullable(_ints(o.get("step") for o in objects))
    surface = {} if on_surface is None else {
        e["seq"]: on_surface(e) for e in events if e["type"] in SURFACE_SET}
    return EventColumns(np.array([e["time"] for e in events], dtype=np.int64), turn,
                        turn_missing, step, step_missing,
                        np.array([len(dumps(d)) for d in datas], dtype=np.int64), surface)
