"""Helpers for importer tests: the model view at points of an imported log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shared_logs import SHARED

from surface_lab import Session, derive_messages, fold_surface
from surface_lab.importers import ImportResult

ROOT = Path(__file__).resolve().parents[2]
OTHER = SHARED / "real_logs" / "other"


def sample(fragment: str) -> Path:
    [path] = [p for p in OTHER.iterdir() if fragment in p.name]
    return path


def ids(messages: Any) -> list[str]:
    return [m["id"] for m in messages]


def view_after(result: ImportResult, compaction_id: str) -> list[str]:
    """The ids the model sees right after a compaction bracket ends."""
    end = next(e["seq"] for e in result.events if e["type"] == "compaction/end"
               and e["data"]["compactionId"] == compaction_id)
    return ids(derive_messages(result.events[: end + 1]))


def final_view(result: ImportResult) -> list[str]:
    return ids(Session("v", seed=result.events).derive_messages())


def shadowed_ids(result: ImportResult, compaction_id: str) -> list[str]:
    row = next(c for c in result.compactions if c["compaction_id"] == compaction_id)
    return [result.origins[s]["id"] for s in row["shadowed_seqs"]]


def check_invariants(result: ImportResult) -> None:
    """IMPORTERS.md 2.9: folds and seeds; traces equal the replaces; restored within."""
    fold = fold_surface(result.events)
    Session("inv", seed=result.events)
    by_bracket: dict[Any, list[int]] = {}
    open_id = None
    for event in result.events:
        if event["type"] == "compaction/start":
            open_id = event["data"]["compactionId"]
            by_bracket[open_id] = []
        elif event["type"] == "compaction/end":
            open_id = None
        elif open_id is not None and isinstance(event.get("surfaceOp"), dict):
            rep = next(r for r in fold.replacements if r.seq == event["seq"])
            by_bracket[open_id] += rep.shadowed_seqs
    for event in result.events:
        if event["type"] == "compaction/summary":
            data = event["data"]
            assert data["shadowedSeqs"] == by_bracket[data["compactionId"]]
            assert set(data["restoredSeqs"]) <= set(data["shadowedSeqs"])
    assert len(result.compactions) == len(by_bracket)


def break_builder(monkeypatch: Any, method: str, error: BaseException, *,
                  on_call: int = 2) -> None:
    """Make `Builder.<method>` raise `error` on its `on_call`-th call (an importer bug
    that odd input reaches midway through an import)."""
    from surface_lab.importers.common import Builder

    original = getattr(Builder, method)
    calls = [0]

    def broken(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == on_call:
            raise error
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Builder, method, broken)
