"""The ten real dsh logs of ../shared/real_logs/dsh: every reader gives the expected surface
listed in their SOURCES.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from shared_logs import SHARED, needs_shared, require_shared

from surface_lab import Session, fold_surface, read_log
from surface_lab.cli import main

ROOT = Path(__file__).resolve().parents[1]
DSH = SHARED / "real_logs" / "dsh"
PREFIX = "deepseek-ai__deepseek-harness__"

EXPECTED: dict[str, list[int]] = {
    "examples_headless-agent_tests_snapshots_compaction-recovery_session.jsonl":
        [21, 13, 15, 28],
    "examples_acp-agent_tests_snapshots_agent-instructions_session.jsonl":
        [4, 17, 6, 15, 18, 23, 29, 31, 36, 42],
    "examples_headless-agent_tests_semantic-checkpoint-snapshots_tool-outcome-unknown_"
    "session.expected.jsonl": [1, 3, 5, 13, 21],
    "examples_acp-agent_tests_snapshots_cancel_session.jsonl": [4, 5, 11],
    "examples_acp-agent_tests_snapshots_cancel-tool-calls_session.jsonl": [4, 5, 17, 19, 21],
    "examples_acp-agent_tests_snapshots_parallel-tool-calls_session.jsonl":
        [4, 5, 17, 20, 21, 29],
    "examples_acp-agent_tests_snapshots_max-tokens-continue_session.jsonl": [4, 5, 16, 23, 29],
    "examples_acp-agent_tests_snapshots_empty-response-retry_session.jsonl": [4, 5, 18],
    "examples_jsonrpc-agent_tests_snapshots_text-turn_session.jsonl": [4, 37],
    "apps_web_tests_snapshots_seeded-history_seed.jsonl": [1, 64, 67, 68, 108],
}
REPLACEMENTS = {
    "examples_headless-agent_tests_snapshots_compaction-recovery_session.jsonl": [(21, [4])],
    "examples_acp-agent_tests_snapshots_agent-instructions_session.jsonl": [(17, [5])],
}
NAMES = sorted(EXPECTED)


def _path(name: str) -> Path:
    path = DSH / (PREFIX + name)
    require_shared(str(path.relative_to(SHARED)))
    return path


def _numbered(path: Path) -> list[dict[str, Any]]:
    """The SOURCES.md numbering, done by hand: a packed row of N members takes N seqs."""
    events: list[dict[str, Any]] = []
    for line in path.read_text().splitlines()[1:]:
        record = json.loads(line)
        data = record.get("data") or {}
        members = len(data.get("texts", data.get("args", []))) if record["type"].endswith(
            "-chunks") else 0
        for _ in range(members):
            events.append({"type": "assistant/chunk", "seq": len(events), "time": 0, "data": {}})
        if not members:
            events.append({**record, "seq": len(events), "time": 0})
    return events


@needs_shared("real_logs/dsh")
def test_all_ten_are_listed() -> None:
    assert len(NAMES) == 10
    assert sorted(p.name.removeprefix(PREFIX) for p in DSH.glob("*.jsonl")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_fold_surface_of_the_numbered_events(name: str) -> None:
    result = fold_surface(_numbered(_path(name)))
    assert result.nodes == EXPECTED[name]
    assert [(r.seq, r.shadowed_seqs) for r in result.replacements] == REPLACEMENTS.get(name, [])


@pytest.mark.parametrize("name", NAMES)
def test_read_log_gives_the_expected_surface(name: str) -> None:
    log = read_log(_path(name))
    assert log.form == "fixture"
    assert log.fold.nodes == EXPECTED[name]
    assert log.valid
    assert log.closers == []
    assert list(log.session().surface.nodes) == EXPECTED[name]


def test_the_legacy_log_is_upgraded_and_noted() -> None:
    log = read_log(_path("apps_web_tests_snapshots_seeded-history_seed.jsonl"))
    codes = {p.code for p in log.problems}
    assert {"fixture-form", "header-legacy", "legacy-upgraded"} <= codes
    assert log.events[1]["data"]["id"] == "legacy-message:{{sessionId}}:1"
    assert Session("x", seed=log.events).surface.nodes == EXPECTED[
        "apps_web_tests_snapshots_seeded-history_seed.jsonl"]


@pytest.mark.parametrize("name", NAMES)
def test_the_command_prints_the_expected_nodes(name: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["surface", "--json", str(_path(name))]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["nodes"] == EXPECTED[name]
    assert out["form"] == "fixture"
    assert out["replace_generation"] == len(REPLACEMENTS.get(name, []))


@pytest.mark.parametrize("name", NAMES)
def test_validate_accepts_each(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(_path(name))]) == 0
    assert all(": note: " in line for line in capsys.readouterr().out.splitlines())


def test_fixtures_convert_to_stored_logs(tmp_path: Path) -> None:
    for name in NAMES:
        out = tmp_path / f"{name}.jsonl"
        assert main(["convert", str(_path(name)), str(out)]) == 0
        converted = read_log(out)
        assert converted.form == "stored" and converted.problems == []
        assert converted.fold.nodes == EXPECTED[name]
