"""Compaction brackets and what each replace did, without pandas: the traces a
`compaction/start` .. `compaction/end` pair records, and the columns of
`replacements_df` as lists (the frames and the corpus both build on them)."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import msgspec

from ..events import Event, mapping_at
from ..messages import text_tokens
from ..reading.sequences import LogEvents, decode_line
from ..surface import REPLACE
from .source import LogData

__all__ = [
    "Bracket",
    "bracket_appends",
    "bracket_of",
    "brackets",
    "prune_record",
    "replacement_columns",
    "settle_points",
]


@dataclass(frozen=True)
class Bracket:
    """A compaction trace: `compaction/start` .. `compaction/end` and what it recorded."""

    compaction_id: Any
    start: int
    end: int
    recorded: list[Any] | None
    restored: frozenset[int]
    kind: str


_TRACE_TYPES = ("compaction/start", "compaction/summary", "compaction/end")


def brackets(source: LogData | Sequence[Event]) -> list[Bracket]:
    """Every compaction bracket of a log (an unclosed one runs to the end). Only the trace
    events are read, found by their type."""
    log = source if isinstance(source, LogData) else LogData("events", source)
    known: list[Bracket] | None = log.cache.get("brackets")
    if known is not None:  # (found once per log: the audit's steps each ask)
        return list(known)
    out: list[Bracket] = []
    open_at: dict[Any, int] = {}
    summaries: dict[Any, Mapping[str, Any]] = {}
    for seq in log.seqs_of_type(*_TRACE_TYPES):
        kind, data = _trace(log, seq)
        cid = data.get("compactionId")
        if not isinstance(cid, (str, int)):
            continue
        if kind == "compaction/start":
            open_at[cid] = seq
        elif kind == "compaction/summary":
            summaries[cid] = data
        elif kind == "compaction/end" and cid in open_at:
            out.append(_bracket(cid, open_at.pop(cid), seq, summaries.get(cid)))
    out += [_bracket(cid, at, len(log.events), summaries.get(cid))
            for cid, at in open_at.items()]
    found = log.cache["brackets"] = sorted(out, key=lambda b: b.start)
    return list(found)


class _TraceData(msgspec.Struct, gc=False):
    compactionId: Any = None
    shadowedSeqs: Any = None
    restoredSeqs: Any = None
    imported: Any = None


class _TraceLine(msgspec.Struct, gc=False):
    """What `brackets` reads of a trace event's line (not a summary's text)."""

    type: str
    data: _TraceData | None = None


_TRACE = msgspec.json.Decoder(_TraceLine)


def _trace(log: LogData, seq: int) -> tuple[str, Mapping[str, Any]]:
    """(type, data) of the trace event `seq`, its data only as far as `brackets` reads
    it: decoded from its line alone where the reader kept the log packed, else (or if
    the types do not take the line) read whole."""
    view = log.events.line_view(seq) if isinstance(log.events, LogEvents) else None
    line = decode_line(_TRACE, view)
    if line is not None:
        data = line.data
        return line.type, {} if data is None else {
            "compactionId": data.compactionId, "shadowedSeqs": data.shadowedSeqs,
            "restoredSeqs": data.restoredSeqs, "imported": data.imported}
    event = log.read(seq)
    return event["type"], mapping_at(event, "data")


def _bracket(cid: Any, start: int, end: int, summary: Mapping[str, Any] | None) -> Bracket:
    recorded = list(summary.get("shadowedSeqs") or []) if summary is not None else None
    restored = summary.get("restoredSeqs") if summary is not None else None
    imported = mapping_at(summary, "imported") if summary is not None else {}
    kind = "rollback" if imported.get("kind") == "rollback" else "compaction"
    return Bracket(cid, start, end, recorded, frozenset(
        s for s in restored or [] if isinstance(s, int)), kind)


_START = attrgetter("start")


def bracket_of(traces: Sequence[Bracket], seq: int) -> Bracket | None:
    """The bracket that holds event `seq`, if any (brackets do not nest)."""
    at = bisect_right(traces, seq, key=_START) - 1
    return traces[at] if at >= 0 and seq < traces[at].end else None


def prune_record(log: LogData, seq: int) -> list[Any] | None:
    """The shadowedSeqs a `compaction/prune` just before a tool-result rewrite recorded."""
    if seq > 0 and log.type_of(seq - 1) == "compaction/prune":
        return list(mapping_at(log.read(seq - 1), "data").get("shadowedSeqs") or [])
    return None


def bracket_appends(log: LogData, traces: Sequence[Bracket]) -> dict[int, list[int]]:
    """For each replace inside a bracket, the entries the bracket appended after it (up to
    its next replace): the copies and new items a widened import put in the place of the
    run it replaced, beside the replacement itself."""
    entries = log.entries
    out: dict[int, list[int]] = {}
    for bracket in traces:
        lo = bisect_right(entries, bracket.start)
        hi = bisect_left(entries, bracket.end)
        current: int | None = None
        for seq in entries[lo:hi]:
            if log.plans[seq].kind == REPLACE:
                current = seq
                out[seq] = []
            elif current is not None:
                out[current].append(seq)
    return out


def replacement_columns(log: LogData) -> dict[str, list[Any]]:
    """The columns of `replacements_df`, as lists."""
    replaces = log.replaces
    replaced = {p.seq for p in replaces}
    traces = brackets(log)
    owner = {p.seq: bracket_of(traces, p.seq) for p in replaces}
    union: dict[int, list[int]] = {}
    for plan in replaces:
        bracket = owner[plan.seq]
        if bracket is not None:
            union.setdefault(bracket.start, []).extend(plan.shadowed)
    appended = bracket_appends(log, [b for b in traces if b.restored])
    texts = log.texts([*replaced, *(s for p in replaces for s in p.shadowed),
                       *(s for seqs in appended.values() for s in seqs)])
    names = ("seq", "type", "kind", "start", "end", "shadowed_seqs", "shadowed_types",
             "n_shadowed", "restored_seqs", "removed_seqs", "chars_before", "tokens_before",
             "chars_after", "tokens_after", "plugin", "compaction_id", "shadows_replacement",
             "recorded_matches")
    cols: dict[str, list[Any]] = {k: [] for k in names}
    for plan in replaces:
        kind_of_event = log.type_of(plan.seq)
        source_info = log.source_of(plan.seq)
        plugin = source_info.get("plugin")
        bracket = owner[plan.seq]
        cid = source_info.get("compactionId") or (bracket.compaction_id if bracket else None)
        shadowed = list(plan.shadowed)
        if kind_of_event == "tool/result" and bracket is None:
            kind, recorded = "prune", prune_record(log, plan.seq)
            matches = None if recorded is None else recorded == shadowed
        elif bracket is not None:
            kind = bracket.kind
            recorded = bracket.recorded
            matches = None if recorded is None else recorded == union[bracket.start]
        else:
            kind = "compaction" if plugin == "compact" else "replace"
            matches = None
        restored = [s for s in shadowed if bracket is not None and s in bracket.restored]
        # What took the run's place: the replacement, and in a widened import the copies
        # and new items appended after it.
        after = [plan.seq, *appended.get(plan.seq, [])]
        cols["seq"].append(plan.seq)
        cols["type"].append(kind_of_event)
        cols["kind"].append(kind)
        op = {} if shadowed else mapping_at(log.read(plan.seq), "surfaceOp")
        cols["start"].append(shadowed[0] if shadowed else op.get("start"))
        cols["end"].append(shadowed[-1] if shadowed else op.get("end"))
        cols["shadowed_seqs"].append(shadowed)
        cols["shadowed_types"].append(log.types_of(shadowed))
        cols["n_shadowed"].append(len(shadowed))
        cols["restored_seqs"].append(restored)
        kept = set(restored)
        cols["removed_seqs"].append([s for s in shadowed if s not in kept])
        cols["chars_before"].append(sum(len(texts[s]) for s in shadowed))
        cols["tokens_before"].append(sum(text_tokens(texts[s]) for s in shadowed))
        cols["chars_after"].append(sum(len(texts[s]) for s in after))
        cols["tokens_after"].append(sum(text_tokens(texts[s]) for s in after))
        cols["plugin"].append(plugin if isinstance(plugin, str) else None)
        cols["compaction_id"].append(str(cid) if isinstance(cid, (str, int)) else None)
        cols["shadows_replacement"].append(any(s in replaced for s in shadowed))
        cols["recorded_matches"].append(matches)
    return cols


def settle_points(log: LogData, traces: Sequence[Bracket]) -> dict[int, list[int]]:
    """For each event after which the audit looks at the surface, the replaces it
    settles: what the model still sees once the whole manipulation is done is the surface
    just after the replace, or after its bracket's end when an importer re-appended kept
    items."""
    wanted: dict[int, list[int]] = {}
    last = len(log.events) - 1
    for plan in log.replaces:
        bracket = bracket_of(traces, plan.seq)
        at = bracket.end if bracket is not None and bracket.start < plan.seq else plan.seq
        wanted.setdefault(min(at, last), []).append(plan.seq)
    return wanted
