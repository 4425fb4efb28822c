"""DataFrames of a log, one function per grain, all with the same signature:
`<things>_df(source, *, strict=True, progress=True)` returns a frame, or
`(frame, problems)` with `strict=False`; `progress=False` hides the bar shown while a
large file loads. Columns and dtypes are those of `columns.SCHEMAS`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..analysis.brackets import replacement_columns
from ..analysis.events import PREVIEW, Coded, Masked, event_arrays, message_fields
from ..analysis.source import LogData, load_source
from ..events import Event, mapping_at, message_of
from ..gcpause import gc_paused
from ..messages import estimate_tokens, message_text, project_message
from ..problems import Problem
from ..surface import LOG_ONLY, REPLACE, apply_plan
from .columns import STATES, empty_frame, frame_from_columns

__all__ = [
    "events_df",
    "messages_df",
    "nodes_at",
    "replacements_df",
    "surface_df",
    "visibility_df",
]



def _finish(frame: pd.DataFrame, log: LogData, strict: bool
            ) -> pd.DataFrame | tuple[pd.DataFrame, list[Problem]]:
    return frame if strict else (frame, log.problems)


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


def _typed(values: Any) -> Any:
    """A column of `event_arrays` as the frame holds it (nullable integers, categories)."""
    if isinstance(values, Masked):
        return pd.arrays.IntegerArray(values.values, values.missing)
    if isinstance(values, Coded):
        return pd.Categorical.from_codes(values.codes,
                                         dtype=pd.CategoricalDtype(list(values.categories)))
    return values


def _event_arrays(log: LogData) -> dict[str, Any]:
    return {name: _typed(values) for name, values in event_arrays(log).items()}


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
        role, mid, text, chars, tokens = message_fields(event)
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
