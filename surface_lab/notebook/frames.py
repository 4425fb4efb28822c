"""DataFrames of a log, one function per grain, all with the same signature:
`<things>_df(source, *, strict=True, progress=True)` returns a frame, or
`(frame, problems)` with `strict=False`; `progress=False` hides the bar shown while a
large file loads. Columns and dtypes are those of `columns.SCHEMAS`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..events import SURFACE_TYPES, Event, mapping_at, message_of
from ..jsonvalue import as_int, dumps
from ..messages import estimate_tokens, message_text, project_message
from ..storage.base import Problem
from ..surface import REPLACE, apply_plan
from .columns import STATES, empty_frame, frame_from_columns
from .source import LogData, load_source

__all__ = [
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


def _int_field(data: Any, key: str) -> int | None:
    return as_int(data.get(key)) if isinstance(data, Mapping) else None


def _message_fields(event: Event) -> tuple[Any, Any, str | None, int | None, int | None]:
    """(role, message id, text, chars, tokens) of a surface event (Nones otherwise)."""
    if event["type"] not in SURFACE_TYPES:
        return None, None, None, None, None
    message = message_of(event)
    message = message if isinstance(message, Mapping) else {}
    text = message_text(event)
    return (message.get("role"), message.get("id"), text, len(text),
            estimate_tokens(event))


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
    sizes (see `schema_table()`)."""
    log = load_source(source, strict=strict, progress=progress)
    on_surface = set(log.fold.nodes)
    shadowed_by = log.shadowed_by
    cols: dict[str, list[Any]] = {k: [] for k in (
        "seq", "type", "time", "ts", "turn", "step", "line", "surface_op", "replace_start",
        "replace_end", "source_event_seqs", "on_surface", "shadowed_by", "role",
        "message_id", "text", "chars", "tokens", "data_bytes")}
    for event in log.events:
        seq, data = event["seq"], event.get("data")
        op = event.get("surfaceOp")
        role, mid, text, chars, tokens = _message_fields(event)
        sources = event.get("sourceEventSeqs")
        cols["seq"].append(seq)
        cols["type"].append(event["type"])
        cols["time"].append(event["time"])
        cols["ts"].append(event["time"])
        cols["turn"].append(_int_field(data, "turn"))
        cols["step"].append(_int_field(data, "step"))
        cols["line"].append(log.lines[seq] if seq < len(log.lines) else None)
        cols["surface_op"].append("append" if op == "append" else
                                  "replace" if isinstance(op, Mapping) else None)
        cols["replace_start"].append(op.get("start") if isinstance(op, Mapping) else None)
        cols["replace_end"].append(op.get("end") if isinstance(op, Mapping) else None)
        cols["source_event_seqs"].append(list(sources) if isinstance(sources, list) else None)
        cols["on_surface"].append(seq in on_surface)
        cols["shadowed_by"].append(shadowed_by.get(seq))
        cols["role"].append(role)
        cols["message_id"].append(mid if isinstance(mid, str) else None)
        cols["text"].append(text[:PREVIEW] if text is not None else None)
        cols["chars"].append(chars)
        cols["tokens"].append(tokens)
        cols["data_bytes"].append(len(dumps(data)))
    return _finish(frame_from_columns("events", cols), log, strict)


def surface_df(source: Any, at: int | None = None, *, strict: bool = True,
               progress: bool = True) -> Any:
    """The model-visible entries at the end of the log, or just after event `at`."""
    log = load_source(source, strict=strict, progress=progress)
    cols: dict[str, list[Any]] = {k: [] for k in (
        "position", "seq", "type", "role", "surface_op", "is_replacement", "message_id",
        "text", "chars", "tokens")}
    for position, seq in enumerate(nodes_at(log, at)):
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


def _recorded(events: Sequence[Event], seq: int, compaction_id: Any) -> list[Any] | None:
    """The shadowedSeqs a compaction trace recorded for the replace at `seq`, if any."""
    for event in reversed(events[:seq]):
        data = mapping_at(event, "data")
        if event["type"] == "compaction/summary" and data.get("compactionId") == compaction_id:
            return list(data.get("shadowedSeqs") or [])
        if event["type"] == "compaction/prune" and compaction_id is None:
            return list(data.get("shadowedSeqs") or [])
        if event["type"] in SURFACE_TYPES:
            return None
    return None


def replacements_df(source: Any, *, strict: bool = True, progress: bool = True) -> Any:
    """One row per replace: what it shadowed (seqs, types, sizes), what replaced it, its
    plugin and compaction id, and whether the recorded trace matches the fold."""
    log = load_source(source, strict=strict, progress=progress)
    events = log.events
    replaces = {p.seq for p in log.plans if p.kind == REPLACE}
    names = ("seq", "type", "kind", "start", "end", "shadowed_seqs", "shadowed_types",
             "n_shadowed", "chars_before", "tokens_before", "chars_after", "tokens_after",
             "plugin", "compaction_id", "shadows_replacement", "recorded_matches")
    cols: dict[str, list[Any]] = {k: [] for k in names}
    for plan in log.plans:
        if plan.kind != REPLACE:
            continue
        event = events[plan.seq]
        message = message_of(event) if isinstance(message_of(event), Mapping) else {}
        source_info = message.get("source", {}) if isinstance(message, Mapping) else {}
        plugin = source_info.get("plugin") if isinstance(source_info, Mapping) else None
        cid = source_info.get("compactionId") if isinstance(source_info, Mapping) else None
        kind = ("prune" if event["type"] == "tool/result" else
                "compaction" if plugin == "compact" or cid is not None else "replace")
        shadowed = list(plan.shadowed)
        recorded = _recorded(events, plan.seq, cid) if kind != "replace" else None
        cols["seq"].append(plan.seq)
        cols["type"].append(event["type"])
        cols["kind"].append(kind)
        cols["start"].append(shadowed[0])
        cols["end"].append(shadowed[-1])
        cols["shadowed_seqs"].append(shadowed)
        cols["shadowed_types"].append([events[s]["type"] for s in shadowed])
        cols["n_shadowed"].append(len(shadowed))
        cols["chars_before"].append(sum(len(message_text(events[s])) for s in shadowed))
        cols["tokens_before"].append(sum(estimate_tokens(events[s]) for s in shadowed))
        cols["chars_after"].append(len(message_text(event)))
        cols["tokens_after"].append(estimate_tokens(event))
        cols["plugin"].append(plugin if isinstance(plugin, str) else None)
        cols["compaction_id"].append(cid if isinstance(cid, str) else None)
        cols["shadows_replacement"].append(any(s in replaces for s in shadowed))
        cols["recorded_matches"].append(None if recorded is None else recorded == shadowed)
    return _finish(frame_from_columns("replacements", cols), log, strict)


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
    entries = np.array([p.seq for p in log.plans if p.kind != 0], dtype="int64")
    if not len(entries) or not log.events:
        return _finish(empty_frame("visibility"), log, strict)
    replaced_at = log.shadowed_by
    gone = np.array([replaced_at.get(int(s), np.iinfo("int64").max) for s in entries])
    is_replacement = np.array([p.kind == REPLACE for p in log.plans if p.kind != 0])
    chosen = np.arange(len(log.events), dtype="int64") if steps is None \
        else np.asarray(list(steps), dtype="int64")
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
