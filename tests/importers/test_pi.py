"""pi: a compaction with `retainedTail` (newer pi, `firstKeptEntryId` optional) gives the
context pi's builder gives: the summary, the retained messages, then what follows."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from surface_lab import SurfaceLabError
from surface_lab.contract import unanswered_tool_calls
from surface_lab.importers import import_pi

from .helpers import check_invariants, final_view, shadowed_ids, view_after

T = "2026-03-01T09:00:{:02d}Z"


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _msg(role: str, text: str, n: int, **extra: Any) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": text}],
            "timestamp": 1_772_355_600_000 + n, **extra}


def _entry(entry_id: str, parent: str | None, n: int, message: dict[str, Any]
           ) -> dict[str, Any]:
    return {"type": "message", "id": entry_id, "parentId": parent,
            "timestamp": T.format(n), "message": message}


def _call(n: int) -> dict[str, Any]:
    return {"role": "assistant", "provider": "anthropic", "model": "claude-x",
            "content": [{"type": "toolCall", "id": "c1", "name": "read",
                         "arguments": {"path": "a"}}], "stopReason": "toolUse",
            "timestamp": 1_772_355_600_000 + n}


def _result(n: int) -> dict[str, Any]:
    return {"role": "toolResult", "toolCallId": "c1", "toolName": "read",
            "content": [{"type": "text", "text": "contents of a"}], "isError": False,
            "timestamp": 1_772_355_600_000 + n}


def _session(tail: list[dict[str, Any]], *, first_kept: str | None = None
             ) -> list[dict[str, Any]]:
    compaction: dict[str, Any] = {"type": "compaction", "id": "k1", "parentId": "e6",
                                  "timestamp": T.format(7), "summary": "read a, then b",
                                  "tokensBefore": 5000, "retainedTail": tail}
    if first_kept is not None:
        compaction["firstKeptEntryId"] = first_kept
    return [
        {"type": "session", "version": 3, "id": "pi-rt", "timestamp": T.format(0),
         "cwd": "/w"},
        _entry("e1", None, 1, _msg("user", "read a", 1)),
        _entry("e2", "e1", 2, _call(2)),
        _entry("e3", "e2", 3, _result(3)),
        _entry("e4", "e3", 4, _msg("assistant", "a read", 4, provider="anthropic",
                                   model="claude-x", stopReason="stop")),
        _entry("e5", "e4", 5, _msg("user", "now b", 5)),
        _entry("e6", "e5", 6, _msg("assistant", "b read", 6, provider="anthropic",
                                   model="claude-x", stopReason="stop")),
        compaction,
        _entry("e8", "k1", 8, _msg("user", "and c?", 8)),
        _entry("e9", "e8", 9, _msg("assistant", "c too", 9, provider="anthropic",
                                   model="claude-x", stopReason="stop")),
    ]


class TestRetainedTail:
    def test_the_retained_messages_follow_the_summary(self, tmp_path: Path) -> None:
        records = _session([records_msg for records_msg in (
            _msg("user", "now b", 5),
            _msg("assistant", "b read", 6, provider="anthropic", model="claude-x",
                 stopReason="stop"))])
        result = import_pi(_write(tmp_path / "s.jsonl", records))
        check_invariants(result)
        assert result.problems == []
        assert view_after(result, "k1") == ["k1", "e5", "e6"]
        assert shadowed_ids(result, "k1") == ["e1", "e2", "e3", "e4"]
        assert final_view(result) == ["k1", "e5", "e6", "e8", "e9"]
        assert result.compactions[0]["imported_keptFrom"] == "retainedTail"
        assert result.compactions[0]["copies"] == 0

    def test_retained_tail_wins_over_first_kept_entry_id(self, tmp_path: Path) -> None:
        tail = [_msg("user", "now b", 5)]
        result = import_pi(_write(tmp_path / "s.jsonl", _session(tail, first_kept="e1")))
        assert view_after(result, "k1") == ["k1", "e5"]

    def test_a_retained_call_and_its_result_stay_a_pair(self, tmp_path: Path) -> None:
        tail = [_msg("user", "read a", 1), _call(2), _result(3)]
        result = import_pi(_write(tmp_path / "s.jsonl", _session(tail)))
        check_invariants(result)
        assert view_after(result, "k1") == ["k1", "e1", "e2", "e3"]
        assert unanswered_tool_calls(result.events) == []
        assert result.problems == []

    def test_a_retained_message_found_on_no_entry_becomes_a_new_event(
            self, tmp_path: Path) -> None:
        tail = [_msg("user", "a message pi rewrote", 99), _msg("user", "now b", 5)]
        result = import_pi(_write(tmp_path / "s.jsonl", _session(tail)))
        check_invariants(result)
        assert view_after(result, "k1") == ["k1", "k1:tail-0", "e5"]
        assert "retained-tail-new" in {n.code for n in result.notes}

    def test_an_empty_retained_tail_keeps_only_the_summary(self, tmp_path: Path) -> None:
        result = import_pi(_write(tmp_path / "s.jsonl", _session([])))
        assert view_after(result, "k1") == ["k1"]
        assert final_view(result) == ["k1", "e8", "e9"]


def test_a_tool_result_off_the_imported_branch_is_tool_result_lost(tmp_path: Path) -> None:
    records = _session([])[:3]  # header, the prompt, the call
    records += [_entry("e3", "e1", 3, _result(3)),  # hangs off the prompt, not the call
                _entry("e4", "e2", 4, _msg("user", "go on", 4)),
                _entry("e5", "e4", 5, _msg("assistant", "ok", 5, stopReason="stop"))]
    result = import_pi(_write(tmp_path / "s.jsonl", records))
    codes = [p.code for p in result.problems]
    assert "tool-result-lost" in codes and "unanswered-tool-call" in codes
    lost = next(p for p in result.problems if p.code == "tool-result-lost")
    assert lost.line == 4 and "record e3" in lost.message


ODD: list[Any] = [None, 5, "x", [], {}, [1, "a"], {"a": 1}, True, -1, 1e300]


def _mutate(value: Any, rng: random.Random, depth: int = 0) -> Any:
    if isinstance(value, dict) and value:
        key = rng.choice(list(value))
        return {**value, key: rng.choice(ODD) if rng.random() < 0.4 or depth > 4
                else _mutate(value[key], rng, depth + 1)}
    if isinstance(value, list) and value:
        copy = list(value)
        index = rng.randrange(len(copy))
        copy[index] = rng.choice(ODD) if rng.random() < 0.4 else _mutate(copy[index], rng,
                                                                          depth + 1)
        return copy
    return rng.choice(ODD)


@pytest.mark.parametrize("seed", range(3))
def test_odd_field_values_give_problems_never_a_foreign_exception(tmp_path: Path,
                                                                   seed: int) -> None:
    records = _session([_msg("user", "now b", 5), _call(2), _result(3)])
    rng = random.Random(seed)
    for _ in range(60):
        mutated = [records[0], *(_mutate(r, rng) if rng.random() < 0.3 else r
                                 for r in records[1:])]
        try:
            result = import_pi(_write(tmp_path / "s.jsonl", mutated))
        except SurfaceLabError:
            continue
        check_invariants(result)
