"""DataFrames of a log, one function per grain, all with the same signature:
`<things>_df(source, *, strict=True, progress=True)` returns a frame, or
`(frame, problems)` with `strict=False`; `progress=False` hides the bar shown while a
large file loads. Columns and dtypes are those of `columns.SCHEMAS`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from ..analysis.brackets import replacement_columns
from ..analysis.source import LogData, load_source
from ..events import SURFACE_TYPES, Event, mapping_at, message_of
from ..gcpause import gc_paused
from ..messages import estimate_tokens, message_text, project_message, text_tokens
from ..problems import Problem
from ..reading.columns import columns_of
from ..reading.lines import TYPE_NAMES
from ..reading.sequences import LogEvents
from ..surface import LOG_ONLY, REPLACE, apply_plan
from .columns import OPS, ROLES, STATES, empty_frame, frame_from_columns

__all__ = [
    "event_columns",
    "events_df",
    "messages_df",
    "nodes_at",
    "replacements_df",
    "surface_df",
    "visibility_df",
]

PREVIEW = 200


def _finish(frame: pd.DataFrame, log: LogData, strict: bool
            ) -> pd.DataFrame | tuple[pd.DataFrame, list[Problem]]:
    return frame if strict else (frame, log.problems)


def _message_fields(event: Event) -> tuple[Any, Any, str | None, int | None, int | None]:
    """(role, message id, text, chars, tokens) of a surface event (Nones otherwise)."""
    if event["type"] not in SURFACE_TYPES:
        return None, None, None, None, None
    message = message_of(event)
    message = message if isinstance(message, Mapping) else {}
    text = message_text(event)
    return message.get("role"), message.get("id"), text, len(text), text_tokens(text)


def is_tombstone(event: Event) -> bool:
    """An importer's stand-in node for a deleted run: on the surface, not a message."""
    source = mapping_at(message_of(event), "source")
    return source.get("provider") == "surface-lab-import" and source.get("model") == "tombstone"


def nodes_at(log: LogData, at: int | None) -> list[int]:
    """The surface just after event `at` (the end of the log when None)."""
    if at is None:
        return list(log.fold.nodes)
    if not -1 <= at < len(log.events):
        raise IndexError(f"at={at} is outside the log (seqs 0..{len(log.events) - 1})")
    nodes: list[int] = []
    for plan in log.plans[: at + 1]:
        nodes = apply_plan(nodes, plan)
    return nodes


def events_df(source: Any, *, strict: bool = True, progress: bool = True) -> Any:
    """One row per logical event: envelope, surface fields, visibility now, message and
    sizes (see `schema_table()`).

    Every event of the source is a row, so `len(frame) == len(events)` and `seq` equals
    the index. A Session resumed from a log (`read_log(path).session()`) ends with the
    `session/end-seed` marker it appends after the seed (SPEC 5; the first event a store
    writes on resume, timed now): one row more than the file, log-only, on no surface.
    Pass the log itself to match the file, or drop `type == "session/end-seed"`."""
    log = load_source(source, strict=strict, progress=progress)
    return _finish(frame_from_columns("events", _event_arrays(log)), log, strict)


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
    role, mid, text, chars, tokens = _message_fields(event)
    return _SurfaceFields(
        "append" if op == "append" else "replace" if isinstance(op, Mapping) else None,
        start, end, list(cited) if isinstance(cited, list) else None, role,
        mid if isinstance(mid, str) else None, text[:PREVIEW] if text is not None else None,
        chars, tokens)


def _event_arrays(log: LogData) -> dict[str, Any]:
    """The `events_df` columns, one way for every source: envelope columns in one pass
    (straight from the file's lines when the fast reader kept them packed), message
    fields from the surface events alone, visibility from the fold."""
    with gc_paused():  # the per-event fields are dropped before the collector is back
        return _arrays_of(log)


def _arrays_of(log: LogData) -> dict[str, Any]:
    events = log.events
    n = len(events)
    if isinstance(events, LogEvents):
        envelope = events.columns(on_surface=_surface_fields)
        types: Any = pd.Categorical.from_codes(
            np.frombuffer(events.type_codes, dtype="uint8").astype("int16"),
            dtype=pd.CategoricalDtype(list(TYPE_NAMES)))
        line = pd.arrays.IntegerArray(
            np.repeat(np.arange(2, len(events.first_seqs) + 1, dtype="int64"),
                      np.diff(np.array(events.first_seqs, dtype="int64"))),
            np.zeros(n, dtype=bool))
    else:
        envelope = columns_of(events, _surface_fields)
        types = [e["type"] for e in events]  # unknown types become categories too
        known = min(n, len(log.lines))
        lines = np.zeros(n, dtype="int64")
        lines[:known] = np.array(list(log.lines[:known]), dtype="int64")
        line = pd.arrays.IntegerArray(lines, np.arange(n) >= known)
    cols: dict[str, Any] = {
        "seq": np.arange(n, dtype="int64"),
        "type": types,
        "time": envelope.time,
        "ts": envelope.time,
        "turn": pd.arrays.IntegerArray(envelope.turn, envelope.turn_missing),
        "step": pd.arrays.IntegerArray(envelope.step, envelope.step_missing),
        "line": line,
    }
    at = np.fromiter(envelope.surface, dtype="int64", count=len(envelope.surface))
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
    on_surface[np.array(log.fold.nodes, dtype="int64")] = True
    shadowed_by = np.zeros(n, dtype="int64")
    shadowed = np.zeros(n, dtype=bool)
    for r in log.fold.replacements:
        shadowed_by[r.shadowed_seqs] = r.seq
        shadowed[r.shadowed_seqs] = True
    cols.update({
        "surface_op": pd.Categorical.from_codes(ops, dtype=pd.CategoricalDtype(OPS)),
        "replace_start": pd.arrays.IntegerArray(starts, ~has_range),
        "replace_end": pd.arrays.IntegerArray(ends, ~has_range),
        "source_event_seqs": sources,
        "on_surface": on_surface,
        "shadowed_by": pd.arrays.IntegerArray(shadowed_by, ~shadowed),
        "role": pd.Categorical.from_codes(roles, dtype=pd.CategoricalDtype(ROLES)),
        "message_id": mids,
        "text": texts,
        "chars": pd.arrays.IntegerArray(chars, ~is_message),
        "tokens": pd.arrays.IntegerArray(tokens, ~is_message),
        "data_bytes": envelope.data_bytes,
    })
    return cols


def _as_list(values: Any) -> list[Any]:
    """Python values with None for missing ones, as the list-built columns hold."""
    series = pd.Series(values).astype(object)
    return series.where(series.notna(), None).tolist()


def event_columns(log: LogData) -> dict[str, list[Any]]:
    """The columns of `events_df`, as lists (the corpus writes them with pyarrow)."""
    return {name: _as_list(values) for name, values in _event_arrays(log).items()}


def surface_df(source: Any, at: int | None = None, *, strict: bool = True,
               progress: bool = True) -> Any:
    """The model-visible entries at the end of the log, or just after event `at`
    (importers' tombstones, which are not messages, are left out)."""
    log = load_source(source, strict=strict, progress=progress)
    cols: dict[str, list[Any]] = {k: [] for k in (
        "position", "seq", "type", "role", "surface_op", "is_replacement", "message_id",
        "text", "chars", "tokens")}
    entries = [seq for seq in nodes_at(log, at) if not is_tombstone(log.events[seq])]
    for position, seq in enumerate(entries):
        event = log.events[seq]
        role, mid, text, chars, tokens = _message_fields(event)
        replacement = isinstance(event.get("surfaceOp"), Mapping)
        cols["position"].append(position)
        cols["seq"].append(seq)
        cols["type"].append(event["type"])
        cols["role"].append(role)
        cols["surface_op"].append("replace" if replacement else "append")
        cols["is_replacement"].append(replacement)
        cols["message_id"].append(mid)
        cols["text"].append((text or "")[:PREVIEW])
        cols["chars"].append(chars)
        cols["tokens"].append(tokens)
    return _finish(frame_from_columns("surface", cols), log, strict)


def replacements_df(source: Any, *, strict: bool = True, progress: bool = True) -> Any:
    """One row per replace: what it shadowed (seqs, types, sizes), what replaced it, its
    plugin and compaction id, what an importer re-appended (`restored_seqs`, not losses)
    and really removed (`removed_seqs`), and whether the recorded trace matches the fold.
    Only the replaces, the entries they hid and the compaction traces are read."""
    log = load_source(source, strict=strict, progress=progress)
    with gc_paused():  # the texts of what the replaces hid: many strings, no cycle
        columns = replacement_columns(log)
    return _finish(frame_from_columns("replacements", columns), log, strict)


def messages_df(source: Any, at: int | None = None, *, strict: bool = True,
                progress: bool = True) -> Any:
    """The messages the model sees at the end of the log, or just after event `at`."""
    log = load_source(source, strict=strict, progress=progress)
    cols: dict[str, list[Any]] = {k: [] for k in (
        "position", "seq", "role", "source_kind", "message_id", "block_types", "text",
        "chars", "tokens")}
    for seq in nodes_at(log, at):
        event = log.events[seq]
        message = project_message(event)
        if not isinstance(message, Mapping):
            continue
        text = message_text(event)
        source_info = message.get("source")
        content = message.get("content")
        content = content if isinstance(content, list) else []
        cols["position"].append(len(cols["seq"]))
        cols["seq"].append(seq)
        cols["role"].append(message.get("role"))
        cols["source_kind"].append(source_info.get("kind")
                                   if isinstance(source_info, Mapping) else None)
        cols["message_id"].append(message.get("id"))
        cols["block_types"].append([b.get("type") for b in content if isinstance(b, Mapping)])
        cols["text"].append(text)
        cols["chars"].append(len(text))
        cols["tokens"].append(estimate_tokens(event))
    return _finish(frame_from_columns("messages", cols), log, strict)


def visibility_df(source: Any, *, steps: Sequence[int] | None = None,
                  strict: bool = True, progress: bool = True) -> Any:
    """Long form `step, seq, state` for every entry that was ever on the surface, at every
    step (or the given steps); step k is just after event k."""
    log = load_source(source, strict=strict, progress=progress)
    entries = np.array([p.seq for p in log.plans if p.kind != LOG_ONLY], dtype="int64")
    if not len(entries) or not log.events:
        return _finish(empty_frame("visibility"), log, strict)
    replaced_at = log.shadowed_by
    gone = np.array([replaced_at.get(int(s), np.iinfo("int64").max) for s in entries])
    is_replacement = np.array([p.kind == REPLACE for p in log.plans if p.kind != LOG_ONLY])
    chosen = (np.arange(len(log.events), dtype="int64") if steps is None
        else np.asarray(list(steps), dtype="int64"))
    step_grid = np.repeat(chosen, len(entries))
    seq_grid = np.tile(entries, len(chosen))
    state = np.where(step_grid < seq_grid, 0,
                     np.where(step_grid >= np.tile(gone, len(chosen)), 3,
                              np.where(np.tile(is_replacement, len(chosen)), 2, 1)))
    frame = pd.DataFrame({
        "step": step_grid, "seq": seq_grid,
        "state": pd.Categorical.from_codes(state, dtype=pd.CategoricalDtype(STATES)),
    })
    return _finish(frame, log, strict)
