"""Every sample of ../shared/real_logs/other converts, validates, and shows the model
view its tool describes after each compaction."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from surface_lab import derive_messages, read_log
from surface_lab.cli import main
from surface_lab.importers import (
    detect_format,
    import_any,
    import_atif,
    import_claude_code,
    import_codex,
    import_pi,
)
from surface_lab.importers.codex import classify
from surface_lab.notebook import compaction_audit, replacements_df

from .helpers import OTHER, check_invariants, final_view, sample, shadowed_ids, view_after

SAMPLES = sorted(p for p in OTHER.glob("*") if p.suffix in (".jsonl", ".json"))


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name[-45:])
def test_every_sample_converts_and_validates(path: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    out = tmp_path / "out.jsonl"
    assert main(["convert", str(path), "-o", str(out)]) == 0
    assert main(["validate", str(out)]) == 0
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before  # never writes the source
    check_invariants(import_any(path))
    log = read_log(out)
    assert log.valid
    assert replacements_df(log)["recorded_matches"].fillna(True).all()


def test_the_format_is_detected_and_readers_import_it(capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    expected = {"claude-code-log": "claude-code", "claude_small": "claude-code",
                "codex_small": "codex", "pi_small": "pi", "trajectory": "atif",
                "compaction_session": "claude-code"}
    for path in SAMPLES:
        fmt = next(v for k, v in expected.items() if k in path.name)
        assert detect_format(path) == fmt
    pi = sample("pi_small")
    assert main(["validate", str(pi)]) == 0
    captured = capsys.readouterr()
    assert "newer version" not in captured.out
    assert f"{pi}: valid: 22 events" in captured.err and "imported from pi" in captured.err


class TestClaudeCode:
    def test_full_compaction_after_a_rewind(self) -> None:
        result = import_claude_code(sample("dag_compact_after_rewind.jsonl"))
        assert view_after(result, "cb") == ["cs"]
        assert shadowed_ids(result, "cb") == ["u1", "a1", "b2u", "b2a", "b2u2", "b2a2"]
        assert final_view(result) == ["cs", "p1u", "p1a"]
        assert result.selection["leaf"] == "p1a"
        assert {c["uuid"] for c in result.selection["leaves"]} == {"b1a", "b2a2", "p1a"}

    def test_preserved_messages_are_kept(self) -> None:
        result = import_claude_code(sample("rewind_preserved"))
        assert view_after(result, "cb") == ["cs", "b2a", "b2u2", "b2a2"]
        assert shadowed_ids(result, "cb") == ["u1", "a1", "b2u"]
        assert final_view(result) == ["cs", "b2a", "b2u2", "b2a2", "p1u", "p1a"]
        assert result.problems == []

    def test_the_other_branch_can_be_chosen(self) -> None:
        result = import_claude_code(sample("dag_compact_after_rewind.jsonl"), leaf="b1a")
        assert final_view(result) == ["u1", "a1", "b1u", "b1a"]
        assert result.compactions == []

    def test_scouts_fixture(self) -> None:
        result = import_claude_code(sample("compaction_session"))
        assert view_after(result, "compact-003") == ["compact-004"]
        assert shadowed_ids(result, "compact-003") == ["compact-001", "compact-002"]
        assert final_view(result) == ["compact-004", "compact-005", "compact-006"]
        summary = result.events[next(e["seq"] for e in result.events
                                     if e.get("surfaceOp") not in (None, "append"))]
        assert summary["data"]["source"]["plugin"] == "compact"
        assert summary["data"]["content"][0]["text"].startswith("Summary of previous")

    def test_the_schema_sampler_keeps_its_invariants(self) -> None:
        result = import_claude_code(sample("claude_small"))
        check_invariants(result)
        codes = {p.code for p in result.problems}
        assert "duplicate-id" in codes
        assert all(o["file"].endswith("claude_small.jsonl") for o in result.origins.values())


class TestPi:
    def test_only_the_last_compaction_shapes_the_context(self) -> None:
        result = import_pi(sample("pi_small"))
        assert view_after(result, "c139a627") == ["c139a627", "30c6a75f", "22a2720e"]
        assert view_after(result, "2c19d326") == [
            "2c19d326", "30c6a75f", "22a2720e", "ddd2179a", "4a666296"]
        first = next(c for c in result.compactions if c["compaction_id"] == "c139a627")
        assert first["copies"] == 2 and first["restored_seqs"] == first["shadowed_seqs"]
        assert shadowed_ids(result, "2c19d326") == ["c139a627"]
        text = derive_messages(result.events)[0]["content"][0]["text"]
        assert text.startswith("The conversation history before this point was compacted")

    def test_nothing_was_really_removed(self) -> None:
        result = import_pi(sample("pi_small"))
        audit = compaction_audit(result.session())
        first = audit[audit["compaction_id"] == "c139a627"].iloc[0]
        assert first["removed_seqs"] == [] and len(first["restored_seqs"]) == 2


class TestAtif:
    def test_the_handoff_becomes_the_new_context(self) -> None:
        result = import_atif(sample("trajectory.json"))
        assert view_after(result, "f0:step-5") == [
            "f0:step-1", "f1:step-2", "f1:step-3", "f1:step-4"]
        assert shadowed_ids(result, "f0:step-5") == [
            "f0:step-2", "f0:step-2:obs-0", "f0:step-3", "f0:step-3:obs-0", "f0:step-4",
            "f0:step-4:obs-0"]
        assert [s["path"].endswith(n) for s, n in zip(
            result.sources, ["trajectory.json", "trajectory.cont-1.json"], strict=True)]
        assert {n.code for n in result.notes} >= {"continuation-resolved-by-prefix"}
        summary = result.events[next(e["seq"] for e in result.events
                                     if isinstance(e.get("surfaceOp"), dict))]
        assert "picking up work from a previous AI agent" in summary["data"]["content"][0][
            "text"]


class TestCodex:
    def test_each_replacement_history_is_the_model_view(self) -> None:
        path = sample("codex_small")
        result = import_codex(path)
        check_invariants(result)
        lines = {n: json.loads(line) for n, line in enumerate(path.read_text().splitlines(), 1)}
        assert len(result.compactions) == 6
        for row in result.compactions:
            history = lines[row["imported_line"]]["payload"]["replacement_history"]
            visible = [item for item in history if classify(item) is not None]
            view = derive_messages(result.events[: _end(result, row["compaction_id"]) + 1])
            assert len(view) == len(visible)
            for item, message in zip(visible, view, strict=True):
                texts = [p.get("text") for p in item.get("content") or [] if "text" in p]
                if texts and item.get("type") == "message":
                    assert [b.get("text") for b in message["content"] if "text" in b] == texts

    def test_until_imports_a_prefix(self) -> None:
        result = import_codex(sample("codex_small"), until=30)
        assert len(result.compactions) == 1


def _end(result: object, compaction_id: str) -> int:
    return next(e["seq"] for e in result.events  # type: ignore[attr-defined]
                if e["type"] == "compaction/end" and e["data"]["compactionId"] == compaction_id)


def test_claude_microcompact_clears_are_content_only_rewrites(tmp_path: Path) -> None:
    def rec(uuid: str, parent: str | None, kind: str, **fields: object) -> str:
        return json.dumps({"uuid": uuid, "parentUuid": parent, "sessionId": "mc",
                           "type": kind, "timestamp": "2026-01-01T00:00:00Z", **fields})

    lines = [
        rec("u1", None, "user", message={"role": "user", "content": "read it"}),
        rec("a1", "u1", "assistant", message={"id": "m1", "role": "assistant", "model": "c",
            "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"p": 1}}]}),
        rec("r1", "a1", "user", message={"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "long file text"}]}),
        rec("mc", "r1", "system", subtype="microcompact_boundary",
            microcompactMetadata={"trigger": "auto", "compactedToolIds": ["t1"]}),
        rec("a2", "mc", "assistant", message={"id": "m2", "role": "assistant", "model": "c",
            "stop_reason": "end_turn", "content": [{"type": "text", "text": "done"}]}),
    ]
    path = tmp_path / "mc.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = import_claude_code(path)
    check_invariants(result)
    view = derive_messages(result.events)
    cleared = next(m for m in view if m["role"] == "user" and m["id"] == "r1")
    assert cleared["content"][0]["content"] == [
        {"type": "text", "text": "[Old tool result content cleared]"}]
    assert any(e["type"] == "compaction/prune" for e in result.events)
    assert result.events[-1]["data"]["reason"] == {"kind": "completed"}
