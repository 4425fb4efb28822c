"""The per-event columns of a log, without pandas: what `notebook.events_df` shows and
the corpus's `events` table holds, computed once here (numpy arrays, built lazily)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ..events import SURFACE_TYPES, Event, message_of
from ..gcpause import gc_paused
from ..messages import message_text, text_tokens
from ..reading.columns import columns_of
from ..reading.lines import TYPE_NAMES
from ..reading.sequences import LogEvents
from .source import LogData

__all__ = ["OPS", "PREVIEW", "ROLES", "Coded", "Masked", "event_arrays", "event_columns",
           "event_slices", "message_fields"]

PREVIEW = 200  # characters of a message's text a row shows
ROLES = ("system", "user", "assistant")
OPS = ("append", "replace")


class Masked(NamedTuple):
    """An integer column with missing values: `values` (int64) where `missing` is False."""

    values: Any
    missing: Any


class Coded(NamedTuple):
    """A category column: `codes` index `categories`, -1 for a missing value."""

    codes: Any
    categories: Sequence[str]


def message_fields(event: Event) -> tuple[Any, Any, str | None, int | None, int | None]:
    """(role, message id, text, chars, tokens) of a surface event (Nones otherwise)."""
    if event["type"] not in SURFACE_TYPES:
        return None, None, None, None, None
    message = message_of(event)
    message = message if isinstance(message, Mapping) else {}
    text = message_text(event)
    return message.get("role"), message.get("id"), text, len(text), text_tokens(text)


class _SurfaceFields(NamedTuple):
    op: str | None
    start: Any
    end: Any
    sources: list[Any] | None
    role: Any
    message_id: str | None
    text: str | None
    chars: int | None
    tokens: int | None


def _surface_fields(event: Event) -> _SurfaceFields:
    """The `events_df` fields of an event that only surface events fill."""
    op, cited = event.get("surfaceOp"), event.get("sourceEventSeqs")
    start, end = (op.get("start"), op.get("end")) if isinstance(op, Mapping) else (None, None)
    role, mid, text, chars, tokens = message_fields(event)
    return _SurfaceFields(
        "append" if op == "append" else "replace" if isinstance(op, Mapping) else None,
        start, end, list(cited) if isinstance(cited, list) else None, role,
        mid if isinstance(mid, str) else None, text[:PREVIEW] if text is not None else None,
        chars, tokens)


def event_arrays(log: LogData, seqs: range | None = None) -> dict[str, Any]:
    """The `events_df` columns, one way for every source: envelope columns in one pass
    (straight from the file's lines when the fast reader kept them packed), message
    fields from the surface events alone, visibility from the fold. Arrays, `Masked`
    integers and `Coded` categories: the frame and the corpus type them their way.
    With `seqs` (one of `event_slices`), the rows of those events only: the corpus
    builds a large session's columns a slice at a time, never all at once."""
    with gc_paused():  # the per-event fields are dropped before the collector is back
        return _arrays_of(log, seqs)


def event_slices(log: LogData, size: int) -> list[range]:
    """The log's seqs in consecutive ranges of about `size` events (at least one line
    each: a packed row's members are never split), for `event_arrays(log, seqs)`."""
    events = log.events
    if not isinstance(events, LogEvents):
        return [range(a, min(a + size, len(events))) for a in range(0, len(events), size)]
    import bisect

    first_seqs = events.first_seqs
    cuts, line, last = [0], 0, len(first_seqs) - 1
    while line < last:
        line = max(bisect.bisect_right(first_seqs, first_seqs[line] + size, line,
                                       last + 1) - 1, line + 1)
        cuts.append(line)
    return [range(first_seqs[a], first_seqs[b]) for a, b in itertools.pairwise(cuts)]


def _line_of(first_seqs: list[int], seq: int) -> int:
    import bisect

    line = bisect.bisect_left(first_seqs, seq)
    if line == len(first_seqs) or first_seqs[line] != seq:
        raise ValueError(f"seq {seq} does not start a line (use event_slices' ranges)")
    return line


def _arrays_of(log: LogData, seqs: range | None) -> dict[str, Any]:
    import numpy as np

    events = log.events
    a, b = (0, len(events)) if seqs is None else (seqs.start, seqs.stop)
    n = b - a
    if isinstance(events, LogEvents):
        first_seqs = events.first_seqs
        k0, k1 = 0, len(first_seqs) - 1
        if seqs is not None:  # whole lines (`event_slices`)
            k0, k1 = _line_of(first_seqs, a), _line_of(first_seqs, b)
        envelope = events.columns(on_surface=_surface_fields,
                                  lines=(k0, k1) if seqs is not None else None)
        types: Any = Coded(np.frombuffer(events.type_codes, dtype="uint8",
                                         count=n, offset=a).astype("int16"), TYPE_NAMES)
        line = Masked(
            np.repeat(np.arange(k0 + 2, k1 + 2, dtype="int64"),
                      np.diff(np.array(first_seqs[k0 : k1 + 1], dtype="int64"))),
            np.zeros(n, dtype=bool))
    else:
        part = events if seqs is None else events[a:b]
        envelope = columns_of(part, _surface_fields)
        types = [e["type"] for e in part]  # unknown types become categories too
        known = max(0, min(b, len(log.lines)) - a)
        lines = np.zeros(n, dtype="int64")
        lines[:known] = np.array(list(log.lines[a : a + known]), dtype="int64")
        line = Masked(lines, np.arange(n) >= known)
    cols: dict[str, Any] = {
        "seq": np.arange(a, b, dtype="int64"),
        "type": types,
        "time": envelope.time,
        "ts": envelope.time,
        "turn": Masked(envelope.turn, envelope.turn_missing),
        "step": Masked(envelope.step, envelope.step_missing),
        "line": line,
    }
    at = np.fromiter(envelope.surface, dtype="int64", count=len(envelope.surface)) - a
    fields = list(envelope.surface.values())
    ops = np.full(n, -1, dtype="int8")
    ops[at] = [-1 if f.op is None else OPS.index(f.op) for f in fields]
    ranged = [(seq, f.start, f.end) for seq, f in zip(at.tolist(), fields, strict=True)
              if f.start is not None and f.end is not None]
    starts, ends = np.zeros(n, dtype="int64"), np.zeros(n, dtype="int64")
    has_range = np.zeros(n, dtype=bool)
    if ranged:
        where, starts_at, ends_at = zip(*ranged, strict=True)
        starts[list(where)], ends[list(where)] = starts_at, ends_at
        has_range[list(where)] = True
    sources = np.full(n, None, dtype=object)
    for seq, f in zip(at.tolist(), fields, strict=True):  # lists: one by one, not spread
        sources[seq] = f.sources
    role_codes = {role: k for k, role in enumerate(ROLES)}
    roles = np.full(n, -1, dtype="int8")
    roles[at] = [role_codes.get(f.role, -1) for f in fields]
    mids, texts = np.full(n, None, dtype=object), np.full(n, None, dtype=object)
    mids[at], texts[at] = [f.message_id for f in fields], [f.text for f in fields]
    chars, tokens = np.zeros(n, dtype="int64"), np.zeros(n, dtype="int64")
    chars[at], tokens[at] = [f.chars for f in fields], [f.tokens for f in fields]
    is_message = np.zeros(n, dtype=bool)
    is_message[at] = True
    on_surface = np.zeros(n, dtype=bool)
    nodes = np.array(log.fold.nodes, dtype="int64")
    on_surface[nodes[(nodes >= a) & (nodes < b)] - a] = True
    shadowed_by = np.zeros(n, dtype="int64")
    shadowed = np.zeros(n, dtype=bool)
    for r in log.fold.replacements:
        hidden = np.asarray(r.shadowed_seqs, dtype="int64")
        if seqs is not None:
            hidden = hidden[(hidden >= a) & (hidden < b)] - a
        shadowed_by[hidden] = r.seq
        shadowed[hidden] = True
    cols.update({
        "surface_op": Coded(ops, OPS),
        "replace_start": Masked(starts, ~has_range),
        "replace_end": Masked(ends, ~has_range),
        "source_event_seqs": sources,
        "on_surface": on_surface,
        "shadowed_by": Masked(shadowed_by, ~shadowed),
        "role": Coded(roles, ROLES),
        "message_id": mids,
        "text": texts,
        "chars": Masked(chars, ~is_message),
        "tokens": Masked(tokens, ~is_message),
        "data_bytes": envelope.data_bytes,
    })
    return cols


def _as_list(values: Any) -> list[Any]:
    """Python values with None for missing ones, as the list-built columns hold."""
    if isinstance(values, Masked):
        return [None if gone else v for v, gone in zip(values.values.tolist(),
                                                       values.missing.tolist(), strict=True)]
    if isinstance(values, Coded):
        names = list(values.categories)
        return [names[c] if c >= 0 else None for c in values.codes.tolist()]
    return values.tolist() if hasattr(values, "tolist") else list(values)


def event_columns(log: LogData) -> dict[str, list[Any]]:
    """The columns of `events_df`, as lists (the corpus writes them with pyarrow)."""
    return {name: _as_list(values) for name, values in event_arrays(log).items()}
