"""The facts ledger and the re-dos as frames (`surface_lab.analysis.ledger`)."""

from __future__ import annotations

from typing import Any

from ..analysis.brackets import replacement_columns
from ..analysis.ledger import fact_ledger, facts_rows
from ..analysis.source import load_source
from .columns import frame_from_columns

__all__ = ["facts_df", "redos_df"]


def _kinds(log: Any) -> dict[int, str]:
    rep = replacement_columns(log)
    return dict(zip(rep["seq"], rep["kind"], strict=True))


def facts_df(source: Any, *, strict: bool = True, progress: bool = True) -> Any:
    """One row per (replace, hidden item) that carries a fact at risk, or whose content is
    unmeasurable (redacted, encrypted): its kind, text, whether the surface after the
    replace keeps it, whether a later action needed it, and its rank. Built from the
    log's structure (user messages, tool calls' arguments, results' status), never from
    patterns over free text; see `docs/facts.md`."""
    log = load_source(source, strict=strict, progress=progress)
    rows = facts_rows(fact_ledger(log))
    kinds = _kinds(log) if rows else {}
    names = ("replace_seq", "seq", "kind", "text", "kept", "needed", "redo_seqs", "rank")
    cols: dict[str, list[Any]] = {n: [r[n] for r in rows] for n in names}
    cols["replace_kind"] = [kinds.get(r["replace_seq"]) for r in rows]
    frame = frame_from_columns("facts", cols)
    return frame if strict else (frame, log.problems)


def redos_df(source: Any, *, strict: bool = True, progress: bool = True) -> Any:
    """One row per action after a replace that gets back one of its hidden items (a re-do):
    re-read, re-run, repeat-call, re-ask, re-instruct; see `docs/facts.md`."""
    log = load_source(source, strict=strict, progress=progress)
    found = fact_ledger(log).redos
    kinds = _kinds(log) if found else {}
    cols: dict[str, list[Any]] = {
        "seq": [r.seq for r in found], "kind": [r.kind for r in found],
        "replace_seq": [r.replace_seq for r in found],
        "replace_kind": [kinds.get(r.replace_seq) for r in found],
        "hidden_seq": [r.hidden_seq for r in found], "tool": [r.tool for r in found],
        "arguments": [r.arguments for r in found], "detail": [r.detail for r in found],
        "call_id": [r.call_id for r in found]}
    frame = frame_from_columns("redos", cols)
    return frame if strict else (frame, log.problems)
