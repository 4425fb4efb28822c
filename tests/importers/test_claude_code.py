"""Claude Code: nothing the model saw is lost (issue 23, points 1 and 2). Each shape on a
small hand-built file, and the no-loss rule on every shared Claude Code file, with "the
results that exist in the source" computed straight from the JSONL."""

from __future__ import annotations

import json
import random
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from surface_lab import SurfaceLabError
from surface_lab.contract import unanswered_tool_calls
from surface_lab.importers import import_claude_code
from surface_lab.importers.common import Builder, ImportFailure

from .helpers import (
    OTHER,
    SHARED,
    break_builder,
    check_invariants,
    final_view,
    shadowed_ids,
    view_after,
)

AGENT_LOGS = SHARED / "agent_logs" / "claude_code"
T = "2026-02-01T10:{:02d}:{:02d}Z"


def _shared_claude_files() -> list[Path]:
    files = [*OTHER.glob("*claude*.jsonl"), *AGENT_LOGS.glob("*.jsonl")] \
        if SHARED.is_dir() else []
    return sorted(f for f in files if "codex" not in f.name and "_pi_" not in f.name)


needs_shared = pytest.mark.skipif(not AGENT_LOGS.is_dir(),
                                  reason=f"the shared Claude Code sessions ({AGENT_LOGS}) "
                                         f"are not here")


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _rec(uuid: str, parent: str | None, kind: str, n: int, **fields: Any) -> dict[str, Any]:
    return {"uuid": uuid, "parentUuid": parent, "sessionId": "main-1", "type": kind,
            "timestamp": T.format(n // 60, n % 60), "cwd": "/repo", **fields}


def _block(uuid: str, parent: str, message_id: str, n: int, block: dict[str, Any],
           **fields: Any) -> dict[str, Any]:
    return _rec(uuid, parent, "assistant", n, requestId=f"req-{message_id}", message={
        "id": message_id, "role": "assistant", "model": "claude-x", "content": [block],
        "usage": {"input_tokens": 10, "output_tokens": 2}}, **fields)


def _use(uuid: str, parent: str, message_id: str, call: str, n: int) -> dict[str, Any]:
    return _block(uuid, parent, message_id, n, {"type": "tool_use", "id": call,
                                                "name": "Read", "input": {"f": call}})


def _result(uuid: str, parent: str, call: str, n: int) -> dict[str, Any]:
    return _rec(uuid, parent, "user", n, sourceToolAssistantUUID=parent, message={
        "role": "user", "content": [{"type": "tool_result", "tool_use_id": call,
                                     "content": f"text of {call}"}]})


def _hook(uuid: str, parent: str, call: str, n: int) -> dict[str, Any]:
    return _rec(uuid, parent, "progress", n, parentToolUseID=call, toolUseID=call,
                data={"type": "hook_progress", "hookEvent": "PostToolUse"})


def _prompt(uuid: str, parent: str | None, text: str, n: int) -> dict[str, Any]:
    return _rec(uuid, parent, "user", n, message={"role": "user", "content": text})


def _answer(uuid: str, parent: str, message_id: str, n: int, text: str = "done"
            ) -> dict[str, Any]:
    record = _block(uuid, parent, message_id, n, {"type": "text", "text": text})
    record["message"]["stop_reason"] = "end_turn"
    return record


def _codes(findings: list[Any]) -> list[str]:
    return [f.code for f in findings]


# -- no silent loss ------------------------------------------------------------------------


def _hooked_response() -> list[dict[str, Any]]:
    """The shape of the real 2.1.39 sessions: one response (msg-1) written as four block
    records; PreToolUse hook progress records between its blocks and under the results;
    each result hangs off its own block, so the chain reaches only the last one."""
    return [
        _prompt("u1", None, "read three files", 0),
        _block("a1", "u1", "msg-1", 1, {"type": "text", "text": "reading"}),
        _use("a2", "a1", "msg-1", "t1", 2),
        _hook("h1", "a2", "t1", 3), _hook("h2", "h1", "t1", 4),
        _use("a3", "h2", "msg-1", "t2", 5),
        _use("a4", "a3", "msg-1", "t3", 6),
        _hook("h3", "a4", "t1", 7),
        _result("r1", "a2", "t1", 8),
        _hook("h4", "r1", "t2", 9), _hook("h5", "h4", "t2", 10),
        _result("r2", "a3", "t2", 11),
        _hook("h6", "r2", "t3", 12),
        _result("r3", "a4", "t3", 13),
        _answer("a5", "r3", "msg-2", 14),
    ]


def _interleaved() -> list[dict[str, Any]]:
    """One response whose blocks and results alternate in the chain (Claude Code runs a
    tool while the response still streams): every record has the same message id."""
    return [
        _prompt("u1", None, "go", 0),
        _use("a1", "u1", "msg-1", "t1", 1),
        _hook("h1", "a1", "t1", 2),
        _result("r1", "a1", "t1", 3),
        _use("a2", "r1", "msg-1", "t2", 4),
        _hook("h2", "a2", "t2", 5),
        _result("r2", "a2", "t2", 6),
        _answer("a3", "r2", "msg-2", 7),
    ]


class TestResponsesAndResults:
    def test_progress_between_blocks_and_hooks_under_results_lose_nothing(
            self, tmp_path: Path) -> None:
        result = import_claude_code(_write(tmp_path / "s.jsonl", _hooked_response()))
        check_invariants(result)
        assert final_view(result) == ["u1", "a1", "a2", "a3", "a4", "r1", "r2", "r3", "a5"]
        assert result.problems == []
        assert unanswered_tool_calls(result.events) == []
        assert "parallel-tool-results" in _codes(result.notes)
        assert {r["id"] for r in result.omitted} == {f"h{k}" for k in range(1, 7)}
        # the hook-ended branches are not offered as other leaves
        assert [c["uuid"] for c in result.selection["leaves"]] == ["a5"]

    def test_an_attachment_under_a_result_off_the_chain_comes_back_with_it(
            self, tmp_path: Path) -> None:
        records = _hooked_response()
        hook_context = _rec("x1", "h5", "attachment", 10, attachment={
            "type": "hook_additional_context", "content": ["lint: 2 warnings"]})
        records.insert(11, hook_context)  # under r1's hook progress, a dead end
        result = import_claude_code(_write(tmp_path / "s.jsonl", records))
        check_invariants(result)
        # after all the results of the response: the API wants the results first
        assert final_view(result) == ["u1", "a1", "a2", "a3", "a4", "r1", "r2", "r3", "x1",
                                      "a5"]
        assert result.problems == []

    def test_a_leaf_picked_inside_a_response_brings_back_nothing_written_after_it(
            self, tmp_path: Path) -> None:
        path = _write(tmp_path / "s.jsonl", _hooked_response())
        assert final_view(import_claude_code(path, leaf="a3")) == ["u1", "a1", "a2", "a3"]

    def test_a_response_interleaved_with_its_results_is_one_step_then_its_results(
            self, tmp_path: Path) -> None:
        result = import_claude_code(_write(tmp_path / "s.jsonl", _interleaved()))
        check_invariants(result)
        assert final_view(result) == ["u1", "a1", "a2", "r1", "r2", "a3"]
        steps = {(e["data"]["turn"], e["data"]["step"]) for e in result.events
                 if e["type"] == "assistant/message" and e["data"]["message"]["id"] != "a3"}
        assert steps == {(1, 1)}
        assert result.problems == []

    def test_each_assistant_message_keeps_message_id_request_id_and_model(
            self, tmp_path: Path) -> None:
        result = import_claude_code(_write(tmp_path / "s.jsonl", _interleaved()))
        sources = [e["data"]["message"]["source"] for e in result.events
                   if e["type"] == "assistant/message"]
        assert [(s["responseId"], s["requestId"], s["model"]) for s in sources] == [
            ("msg-1", "req-msg-1", "claude-x"), ("msg-1", "req-msg-1", "claude-x"),
            ("msg-2", "req-msg-2", "claude-x")]
        assert [result.origins[e["seq"]]["id"] for e in result.events
                if e["type"] == "assistant/message"] == ["a1", "a2", "a3"]

    def test_a_call_with_no_result_anywhere_is_an_unanswered_tool_call(
            self, tmp_path: Path) -> None:
        records = [r for r in _hooked_response() if r["uuid"] != "r2"]
        records[-2]["parentUuid"] = "r1"  # r3 hangs where r2 was
        path = _write(tmp_path / "s.jsonl", records)
        result = import_claude_code(path)
        [problem] = result.problems
        assert problem.code == "unanswered-tool-call"
        assert "'t2'" in problem.message and "record a3" in problem.message
        assert (problem.path, problem.line) == (str(path), 6)

    def test_a_result_in_the_source_that_no_tool_result_answers_is_tool_result_lost(
            self) -> None:
        b = Builder("claude-code", "s.jsonl")
        b.start({"version": 0, "id": "s", "createdAt": 0})
        b.assistant("a1", [{"type": "tool-call", "id": "t1", "name": "Read",
                            "arguments": "{}"}], provider="anthropic", model="m",
                    step_key="m1", origin={"file": "s.jsonl", "line": 2, "id": "a1"})
        b.lost_results({"t1": {"file": "s.jsonl", "line": 3, "id": "r1"}})
        [problem] = b.problems
        assert (problem.code, problem.path, problem.line) == ("tool-result-lost", "s.jsonl", 3)
        assert "record r1" in problem.message and "'t1'" in problem.message


def _calls_with_results_in_source(path: Path) -> list[str]:
    """Straight from the JSONL, without the importer: the tool_use ids on the main chain
    (parentUuid walked back from the last main-chain user or assistant record, through any
    record, across a boundary by its logicalParentUuid), kept when a tool_result block for
    the id is anywhere in the file."""
    records = []
    for line in path.read_text().splitlines():
        if line.strip():
            value = json.loads(line)
            if isinstance(value, dict):
                records.append(value)
    by_uuid = {r["uuid"]: r for r in records if isinstance(r.get("uuid"), str)}

    def blocks(record: dict[str, Any]) -> list[dict[str, Any]]:
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        return [b for b in content if isinstance(b, dict)] if isinstance(content, list) \
            else []

    answered = {b.get("tool_use_id") for r in records if r.get("type") == "user"
                for b in blocks(r) if b.get("type") == "tool_result"}
    talk = [r for r in by_uuid.values() if r.get("type") in ("user", "assistant")]
    main = [r for r in talk if not r.get("isSidechain")] or talk
    calls: list[str] = []
    at, seen = (main[-1]["uuid"] if main else None), set()
    while at in by_uuid and at not in seen:
        seen.add(at)
        record = by_uuid[at]
        if record.get("type") == "assistant":
            calls += [b["id"] for b in blocks(record) if b.get("type") == "tool_use"]
        at = record.get("parentUuid") or record.get("logicalParentUuid")
    return [c for c in calls if c in answered]


@needs_shared
@pytest.mark.parametrize("path", _shared_claude_files(), ids=lambda p: p.name[-60:])
def test_every_result_in_the_source_is_on_the_surface_at_the_next_request(path: Path
                                                                          ) -> None:
    expected = _calls_with_results_in_source(path)
    result = import_claude_code(path)
    check_invariants(result)
    answered = {e["data"]["message"]["source"]["callId"] for e in result.events
                if e["type"] == "tool/result"}
    assert [c for c in expected if c not in answered] == []
    assert unanswered_tool_calls(result.events) == []
    codes = _codes(result.problems)
    assert "tool-result-lost" not in codes and "unanswered-tool-call" not in codes


@needs_shared
@pytest.mark.parametrize("path", _shared_claude_files(), ids=lambda p: p.name[-60:])
def test_every_line_of_a_shared_session_is_imported_or_left_out_with_a_reason(
        path: Path, tmp_path: Path) -> None:
    from surface_lab.cli import main

    from .test_real_shapes import unaccounted_lines

    assert unaccounted_lines(import_claude_code(path), path) == set()
    out = tmp_path / "out.jsonl"
    assert main(["convert", str(path), "-o", str(out)]) == 0
    assert main(["validate", str(out)]) == 0


@needs_shared
def test_the_real_sessions_hold_many_results_off_the_chain() -> None:
    """The test above is not vacuous: the real sessions have results the parentUuid chain
    from the leaf does not reach (they hang under hook progress records)."""
    for name in ("258c7280", "8463c716"):
        [path] = [p for p in AGENT_LOGS.glob(f"*{name}*.jsonl") if "subagents" not in p.name]
        expected = _calls_with_results_in_source(path)
        assert len(expected) > 150
        result = import_claude_code(path)
        assert "parallel-tool-results" in _codes(result.notes)


# -- compactions ---------------------------------------------------------------------------


class TestCompactions:
    def _missing_parent(self) -> list[dict[str, Any]]:
        return [
            _prompt("u1", None, "start", 0),
            _answer("a1", "u1", "msg-1", 1, "started"),
            _prompt("u2", "a1", "more", 2),
            _answer("a2", "u2", "msg-2", 3, "more done"),
            _rec("cb", None, "system", 4, subtype="compact_boundary",
                 logicalParentUuid="gone-1", compactMetadata={"trigger": "auto"}),
            _rec("cs", "cb", "user", 5, isCompactSummary=True, message={
                "role": "user", "content": "This session is being continued: started."}),
            _prompt("u3", "cs", "go on", 6),
            _answer("a3", "u3", "msg-3", 7, "went on"),
        ]

    def test_a_missing_logical_parent_continues_the_last_main_record_before_it(
            self, tmp_path: Path) -> None:
        result = import_claude_code(_write(tmp_path / "s.jsonl", self._missing_parent()))
        check_invariants(result)
        assert result.problems == []
        assert "logical-parent-inferred" in _codes(result.notes)
        assert shadowed_ids(result, "cb") == ["u1", "a1", "u2", "a2"]
        assert final_view(result) == ["cs", "u3", "a3"]

    def test_a_boundary_with_nothing_before_it_still_says_the_history_is_elsewhere(
            self, tmp_path: Path) -> None:
        result = import_claude_code(_write(tmp_path / "s.jsonl",
                                           self._missing_parent()[4:]))
        assert _codes(result.problems) == ["boundary-without-logical-parent"]

    def _segment(self, *, all_uuids: bool) -> list[dict[str, Any]]:
        """A suffix-keeping compaction (2.1.15x+): the preserved segment is u1..a3, with
        the parallel result r1 off the chain; `preservedMessages.uuids` leaves r1 out."""
        preserved: dict[str, Any] = {"anchorUuid": "cs",
                                     "uuids": ["u1", "a1", "a2", "r2", "a3"]}
        if all_uuids:
            preserved["allUuids"] = ["u1", "a1", "a2", "r1", "r2", "a3"]
        return [
            _prompt("u0", None, "hello", 0),
            _answer("a0", "u0", "msg-0", 1, "hi"),
            _prompt("u1", "a0", "read both", 2),
            _use("a1", "u1", "msg-1", "t1", 3),
            _use("a2", "a1", "msg-1", "t2", 4),
            _result("r1", "a1", "t1", 5),
            _result("r2", "a2", "t2", 6),
            _answer("a3", "r2", "msg-2", 7, "both read"),
            _rec("cb", None, "system", 8, subtype="compact_boundary",
                 logicalParentUuid="a3", compactMetadata={
                     "trigger": "auto", "preservedMessages": preserved,
                     "preservedSegment": {"headUuid": "u1", "anchorUuid": "cs",
                                          "tailUuid": "a3"}}),
            _rec("cs", "cb", "user", 9, isCompactSummary=True, message={
                "role": "user", "content": "Summary: said hello."}),
            _prompt("u2", "a3", "now what", 10),
            _answer("a4", "u2", "msg-3", 11, "this"),
        ]

    @pytest.mark.parametrize("all_uuids", [True, False], ids=["allUuids", "segment-only"])
    def test_the_preserved_segment_keeps_a_result_its_uuids_leave_out(
            self, tmp_path: Path, all_uuids: bool) -> None:
        result = import_claude_code(_write(tmp_path / "s.jsonl",
                                           self._segment(all_uuids=all_uuids)))
        check_invariants(result)
        assert result.problems == []
        assert view_after(result, "cb") == ["cs", "u1", "a1", "a2", "r1", "r2", "a3"]
        assert shadowed_ids(result, "cb") == ["u0", "a0"]
        assert final_view(result) == ["cs", "u1", "a1", "a2", "r1", "r2", "a3", "u2", "a4"]
        row = result.compactions[0]
        assert row["copies"] == 0
        assert row["imported_preservedFrom"] == "preservedSegment"


# -- subagents -----------------------------------------------------------------------------


def _lay_out(tmp_path: Path, stem: str) -> Path:
    """The shared copies of one real session and its subagents, laid out as Claude Code
    keeps them: `<session>.jsonl` and `<session>/subagents/agent-*.jsonl`."""
    [main] = [p for p in AGENT_LOGS.glob(f"*{stem}*.jsonl") if "_subagents_" not in p.name]
    session = tmp_path / "project" / f"{stem}.jsonl"
    (session.parent / stem / "subagents").mkdir(parents=True)
    shutil.copy(main, session)
    for sub in AGENT_LOGS.glob(f"*{stem}_subagents_agent-*.jsonl"):
        name = sub.name.split("_subagents_", 1)[1]
        shutil.copy(sub, session.parent / stem / "subagents" / name)
    return session


class TestSubagents:
    @needs_shared
    def test_a_real_session_links_its_task_subagent_and_its_compaction_summarizer(
            self, tmp_path: Path) -> None:
        session = _lay_out(tmp_path, "8463c716-a2ea-4c14-9efa-87158ebd9f20")
        result = import_claude_code(session)
        links = {link.agent_id: link for link in result.subagents}
        assert set(links) == {"a7be2f0", "acompact-f46190"}
        task = links["a7be2f0"]
        assert (task.role, task.call_id, task.matched_by) == (
            "task", "toolu_017SvvKc8KLbhGMG3tXkf21Z", "agentId")
        call = result.events[task.call_seq]
        assert call["type"] == "tool/call" and call["data"]["name"] in ("Task", "Agent")
        summarizer = links["acompact-f46190"]
        assert summarizer.role == "compaction"
        assert summarizer.compaction_id == result.compactions[0]["compaction_id"]
        assert all(link.result is None for link in result.subagents)
        assert "subagents" in _codes(result.notes)

    @needs_shared
    def test_subagents_true_imports_each_as_a_session_of_its_own(self, tmp_path: Path
                                                                 ) -> None:
        session = _lay_out(tmp_path, "258c7280-ae70-4798-800f-63464d01a85d")
        result = import_claude_code(session, subagents=True)
        assert len(result.subagents) == 2
        for link in result.subagents:
            assert link.result is not None
            check_invariants(link.result)
            assert link.result.header["parentSession"] == result.header["id"]
            assert link.result.header["delegationDepth"] == 1
            assert not {"tool-result-lost", "unanswered-tool-call"} & set(
                _codes(link.result.problems))

    @needs_shared
    def test_import_any_passes_subagents_through(self, tmp_path: Path) -> None:
        from surface_lab.importers import import_any

        session = _lay_out(tmp_path, "258c7280-ae70-4798-800f-63464d01a85d")
        assert all(link.result is None for link in import_any(session).subagents)
        result = import_any(session, subagents=True)
        direct = import_claude_code(session, subagents=True)
        assert len(result.subagents) == 2
        for link, same in zip(result.subagents, direct.subagents, strict=True):
            assert link.result is not None and same.result is not None
            assert link.result.events == same.result.events
            assert link.result.header["parentSession"] == result.header["id"]

    @needs_shared
    def test_import_any_ignores_subagents_for_a_format_without_them(self) -> None:
        from surface_lab.importers import import_any

        rollout = OTHER / ("jazzyalex__agent-sessions__Resources_Fixtures_stage0_agents_"
                           "codex_small.jsonl")
        plain = import_any(rollout)
        assert import_any(rollout, subagents=True).events == plain.events

    def test_a_subagent_is_linked_by_its_first_prompt_without_an_agent_id_result(
            self, tmp_path: Path) -> None:
        task = {"type": "tool_use", "id": "task-1", "name": "Task",
                "input": {"description": "look", "prompt": "find X"}}
        session = _write(tmp_path / "s1.jsonl", [
            _prompt("u1", None, "go", 0), _block("a1", "u1", "msg-1", 1, task),
            _result("r1", "a1", "task-1", 5), _answer("a2", "r1", "msg-2", 6)])
        (tmp_path / "s1" / "subagents").mkdir(parents=True)
        _write(tmp_path / "s1" / "subagents" / "agent-ab12.jsonl", [
            {**_prompt("s1", None, "find X", 2), "isSidechain": True, "agentId": "ab12"},
            {**_answer("s2", "s1", "msg-s", 3, "X is here"), "isSidechain": True,
             "agentId": "ab12"}])
        [link] = import_claude_code(session).subagents
        assert (link.agent_id, link.call_id, link.matched_by) == ("ab12", "task-1", "prompt")

    def test_a_symlinked_subagents_folder_is_not_followed(self, tmp_path: Path) -> None:
        (tmp_path / "p").mkdir()
        session = _write(tmp_path / "p" / "s1.jsonl", [_prompt("u1", None, "go", 0),
                                                        _answer("a1", "u1", "msg-1", 1)])
        outside = tmp_path / "outside"
        outside.mkdir()
        _write(outside / "agent-x.jsonl", [_prompt("s1", None, "secret", 0)])
        (session.parent / "s1").mkdir()
        (session.parent / "s1" / "subagents").symlink_to(outside)
        assert import_claude_code(session).subagents == []


# -- odd input -----------------------------------------------------------------------------

ODD: list[Any] = [None, 5, "x", [], {}, [1, "a"], {"a": 1}, True, -1, 1e300,
                  "2026-13-45T99:00:00Z"]


def _mutate(value: Any, rng: random.Random, depth: int = 0) -> Any:
    if isinstance(value, dict) and value:
        key = rng.choice(list(value))
        return {**value, key: rng.choice(ODD) if rng.random() < 0.4 or depth > 4
                else _mutate(value[key], rng, depth + 1)}
    if isinstance(value, list) and value:
        index = rng.randrange(len(value))
        copy = list(value)
        copy[index] = rng.choice(ODD) if rng.random() < 0.4 else _mutate(copy[index], rng,
                                                                          depth + 1)
        return copy
    return rng.choice(ODD)


@pytest.mark.parametrize("shape", ["hooked", "segment", "missing-parent"])
def test_odd_field_values_give_problems_never_a_foreign_exception(
        tmp_path: Path, shape: str) -> None:
    records = {"hooked": _hooked_response(),
               "segment": TestCompactions()._segment(all_uuids=True),
               "missing-parent": TestCompactions()._missing_parent()}[shape]
    rng = random.Random(shape)
    for _ in range(60):
        mutated = [_mutate(r, rng) if rng.random() < 0.3 else r for r in records]
        path = _write(tmp_path / "s.jsonl", mutated)
        try:
            result = import_claude_code(path, subagents=True)
        except SurfaceLabError:
            continue
        check_invariants(result)


def test_a_foreign_exception_inside_the_importer_becomes_a_located_import_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from surface_lab.importers import claude_code
    from surface_lab.importers.common import ImportFailure

    def broken(*args: Any) -> Any:
        raise KeyError("uuid")

    monkeypatch.setattr(claude_code, "_responses", broken)
    path = _write(tmp_path / "s.jsonl", _interleaved())
    with pytest.raises(ImportFailure, match=r"s\.jsonl: cannot import: KeyError") as caught:
        import_claude_code(path)
    assert caught.value.code == "importer-error" and caught.value.path == str(path)
    assert "before any record was imported" in caught.value.message


def test_a_foreign_exception_names_the_last_record_imported_before_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard says how far the import got: the line of the last record written."""
    break_builder(monkeypatch, "tool_result", TypeError("unhashable type: 'list'"))
    path = _write(tmp_path / "s.jsonl", _interleaved())
    with pytest.raises(ImportFailure) as caught:
        import_claude_code(path)
    err = caught.value
    assert err.code == "importer-error" and err.path == str(path)
    assert re.search(r"s\.jsonl: cannot import: TypeError \(unhashable type: 'list'\) .* "
                     r"after line \d+, the last record imported; nothing imported",
                     err.message), err.message
    assert isinstance(err.__cause__, TypeError)


class TestDates:
    def test_events_carry_the_records_times_and_the_header_the_first(self, tmp_path: Path
                                                                      ) -> None:
        result = import_claude_code(_write(tmp_path / "s.jsonl", _interleaved()))
        first = int(datetime(2026, 2, 1, 10, 0, tzinfo=UTC).timestamp() * 1000)
        assert result.header["createdAt"] == first
        times = {result.origins[e["seq"]]["id"]: e["time"] for e in result.events
                 if e["seq"] in result.origins}
        assert times["a3"] == first + 7000

    def test_the_corpus_dates_a_session_by_its_first_dated_record(self, tmp_path: Path
                                                                  ) -> None:
        from surface_lab.corpus import plan_tasks

        undated = {"type": "file-history-snapshot", "messageId": "m",
                   "snapshot": {"timestamp": "2020-01-01T00:00:00Z"}}
        path = _write(tmp_path / "s.jsonl", [undated, *_interleaved()])
        [task] = plan_tasks([path])
        assert task.date == "2026-02-01"


def test_convert_then_validate_a_hooked_session_reports_no_problem(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from surface_lab.cli import main

    path = _write(tmp_path / "s.jsonl", _hooked_response())
    out = tmp_path / "out.jsonl"
    assert main(["convert", str(path), "-o", str(out)]) == 0
    assert "0 problem(s)" in capsys.readouterr().err
    assert main(["validate", str(out)]) == 0
    assert "unanswered-tool-call" not in capsys.readouterr().out
