"""Shapes seen in real session files (issue 17), each on a small synthetic file of the same
shape: nothing is lost silently, every record left out is counted with its reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from surface_lab import derive_messages, read_log
from surface_lab.cli import main
from surface_lab.importers import (
    detect_format,
    import_any,
    import_atif,
    import_claude_code,
    import_codex,
    import_openhands,
    import_pi,
)
from surface_lab.importers.common import ImportResult

from .helpers import OTHER, check_invariants, final_view, ids, shadowed_ids, view_after
from .test_openhands import build

T = "2026-02-01T10:00:{:02d}Z"


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def unaccounted_lines(result: ImportResult, path: Path) -> set[int]:
    """Lines of `path` that are neither imported (an origin), nor left out with a reason,
    nor a reported problem."""
    lines = {n for n, text in enumerate(path.read_text().splitlines(), 1) if text.strip()}
    name = str(path)
    used = {o["line"] for o in result.origins.values() if o.get("file") == name}
    used |= {o["usageLine"] for o in result.origins.values()  # usage carried over
             if o.get("file") == name and "usageLine" in o}
    used |= {r["line"] for r in result.omitted if r["file"] == name}
    used |= {p.line for p in result.problems}
    if result.format == "pi":
        used.add(1)  # the header
    if result.format == "codex":  # the first session_meta is the header
        used.add(next(n for n, text in enumerate(path.read_text().splitlines(), 1)
                      if '"session_meta"' in text))
    return lines - used


def _codes(findings: list[Any]) -> set[str]:
    return {f.code for f in findings}


# -- Claude Code ---------------------------------------------------------------------------


def _claude(uuid: str, parent: str | None, kind: str, second: int, **fields: Any
            ) -> dict[str, Any]:
    return {"uuid": uuid, "parentUuid": parent, "sessionId": "main-1", "type": kind,
            "timestamp": T.format(second), "cwd": "/repo", **fields}


def _use(uuid: str, parent: str, message_id: str, call: str, second: int) -> dict[str, Any]:
    return _claude(uuid, parent, "assistant", second, message={
        "id": message_id, "role": "assistant", "model": "claude-x",
        "content": [{"type": "tool_use", "id": call, "name": "Read", "input": {"f": call}}]})


def _result(uuid: str, parent: str, call: str, second: int) -> dict[str, Any]:
    return _claude(uuid, parent, "user", second, sourceToolAssistantUUID=parent, message={
        "role": "user", "content": [{"type": "tool_result", "tool_use_id": call,
                                     "content": f"text of {call}"}]})


def _prompt(uuid: str, parent: str | None, text: str, second: int) -> dict[str, Any]:
    return _claude(uuid, parent, "user", second, message={"role": "user", "content": text})


def _answer(uuid: str, parent: str, message_id: str, second: int, text: str = "done"
            ) -> dict[str, Any]:
    return _claude(uuid, parent, "assistant", second, message={
        "id": message_id, "role": "assistant", "model": "claude-x", "stop_reason": "end_turn",
        "content": [{"type": "text", "text": text}]})


def _parallel_chained() -> list[dict[str, Any]]:
    """Claude Code 2.1.x: three parallel tool_use blocks as records chained one after
    another, each result hanging off its own block; only the last result is on the chain."""
    return [
        _prompt("u1", None, "read the three files", 0),
        _use("a1", "u1", "msg-1", "t1", 1),
        _use("a2", "a1", "msg-1", "t2", 2),
        _use("a3", "a2", "msg-1", "t3", 3),
        _result("r1", "a1", "t1", 4),
        _result("r2", "a2", "t2", 5),
        _result("r3", "a3", "t3", 6),
        _answer("a4", "r3", "msg-2", 7),
    ]


class TestClaudeParallelToolCalls:
    def test_results_off_the_chain_are_imported_beside_their_response(self, tmp_path: Path
                                                                      ) -> None:
        result = import_claude_code(_write(tmp_path / "s.jsonl", _parallel_chained()))
        check_invariants(result)
        assert final_view(result) == ["u1", "a1", "a2", "a3", "r1", "r2", "r3", "a4"]
        assert "orphan-tool-result" not in _codes(result.problems)
        assert "parallel-tool-results" in _codes(result.notes)
        # one step: the three blocks and their results belong to one response
        steps = {(e["data"]["turn"], e["data"]["step"]) for e in result.events
                 if e["type"] in ("assistant/message", "tool/result")
                 and e["data"]["message"]["id"] != "a4"}
        assert steps == {(1, 1)}

    def test_parallel_results_are_not_leaf_candidates(self, tmp_path: Path) -> None:
        result = import_claude_code(_write(tmp_path / "s.jsonl", _parallel_chained()))
        assert [c["uuid"] for c in result.selection["leaves"]] == ["a4"]
        assert result.omitted == []

    def test_a_dead_end_record_under_the_path_makes_no_leaf(self, tmp_path: Path) -> None:
        records = [*_parallel_chained()[:-1],
                   _claude("hook", "r3", "system", 7, subtype="stop_hook_summary"),
                   _answer("a4", "r3", "msg-2", 8)]
        result = import_claude_code(_write(tmp_path / "s.jsonl", records))
        assert [c["uuid"] for c in result.selection["leaves"]] == ["a4"]
        assert {r["id"]: r["reason"] for r in result.omitted} == {"hook": "not-model-visible"}

    def test_sibling_blocks_under_one_parent_are_recovered_too(self, tmp_path: Path) -> None:
        records = [
            _prompt("u1", None, "two reads", 0),
            _use("a1", "u1", "msg-1", "t1", 1),
            _use("a2", "u1", "msg-1", "t2", 2),  # a sibling of a1, not its child
            _result("r1", "a1", "t1", 3),
            _result("r2", "a2", "t2", 4),
            _answer("a3", "r2", "msg-2", 5),
        ]
        result = import_claude_code(_write(tmp_path / "s.jsonl", records))
        check_invariants(result)
        assert final_view(result) == ["u1", "a1", "a2", "r1", "r2", "a3"]
        assert [c["uuid"] for c in result.selection["leaves"]] == ["a3"]

    def test_the_chain_may_go_on_from_any_result(self, tmp_path: Path) -> None:
        records = _parallel_chained()
        records[-1] = _answer("a4", "r1", "msg-2", 7)  # the first call finished last
        result = import_claude_code(_write(tmp_path / "s.jsonl", records))
        check_invariants(result)
        # the results follow their response in the order of its calls, as Claude Code
        # sends them (one user message with the three results)
        assert final_view(result) == ["u1", "a1", "a2", "a3", "r1", "r2", "r3", "a4"]
        assert [c["uuid"] for c in result.selection["leaves"]] == ["a4"]

    def test_a_session_that_ends_on_parallel_results_keeps_them_all(self, tmp_path: Path
                                                                     ) -> None:
        result = import_claude_code(_write(tmp_path / "s.jsonl", _parallel_chained()[:-1]))
        check_invariants(result)
        assert result.selection["leaf"] == "r3"
        assert final_view(result) == ["u1", "a1", "a2", "a3", "r1", "r2", "r3"]
        assert "final-turn-open" in _codes(result.notes)

    def test_a_rewound_branch_is_still_another_leaf(self, tmp_path: Path) -> None:
        records = [*_parallel_chained(), _prompt("u2", "u1", "no, do this instead", 8),
                   _answer("b1", "u2", "msg-3", 9)]
        result = import_claude_code(_write(tmp_path / "s.jsonl", records))
        assert final_view(result) == ["u1", "u2", "b1"]
        assert {c["uuid"] for c in result.selection["leaves"]} == {"a4", "b1"}
        left = {r["id"]: r["reason"] for r in result.omitted}
        assert left == {u: "off-branch" for u in ("a1", "a2", "a3", "r1", "r2", "r3", "a4")}


class TestClaudeSubagents:
    def _agent_file(self, tmp_path: Path) -> Path:
        def side(record: dict[str, Any]) -> dict[str, Any]:
            return {**record, "isSidechain": True, "agentId": "ab12"}

        return _write(tmp_path / "agent-ab12.jsonl", [
            side(_prompt("s1", "toolu-task-1", "search the repo for X", 0)),
            side(_use("s2", "s1", "msg-s1", "g1", 1)),
            side(_result("s3", "s2", "g1", 2)),
            side(_answer("s4", "s3", "msg-s2", 3, "X is in a.py")),
        ])

    def test_a_subagent_file_is_a_session_of_its_own(self, tmp_path: Path) -> None:
        result = import_claude_code(self._agent_file(tmp_path))
        check_invariants(result)
        assert dict(result.header) | {"createdAt": 0} == {
            "version": 0, "id": "agent-ab12", "createdAt": 0, "cwd": "/repo",
            "parentSession": "main-1", "origin": "subagent", "delegationDepth": 1}
        assert final_view(result) == ["s1", "s2", "s3", "s4"]
        assert result.problems == []  # its root hangs off the parent session: expected
        assert {"subagent-session", "subagent-root"} <= _codes(result.notes)

    def test_a_subagent_file_converts_and_validates(self, tmp_path: Path) -> None:
        out = tmp_path / "agent.jsonl"
        assert main(["convert", str(self._agent_file(tmp_path)), "-o", str(out)]) == 0
        assert main(["validate", str(out)]) == 0
        assert read_log(out).header["origin"] == "subagent"

    def test_sidechain_records_in_a_main_file_are_listed_and_importable(self, tmp_path: Path
                                                                         ) -> None:
        side = [{**r, "isSidechain": True, "agentId": "cd34"} for r in [
            _prompt("s1", "a1", "look up Y", 2), _answer("s2", "s1", "msg-s", 3, "Y")]]
        records = [_prompt("u1", None, "go", 0), _use("a1", "u1", "msg-1", "task-1", 1),
                   *side, _result("r1", "a1", "task-1", 4), _answer("a2", "r1", "msg-2", 5)]
        path = _write(tmp_path / "main.jsonl", records)
        main_result = import_claude_code(path)
        assert final_view(main_result) == ["u1", "a1", "r1", "a2"]
        assert [s["uuid"] for s in main_result.selection["subagents"]] == ["s2"]
        assert {r["id"]: r["reason"] for r in main_result.omitted} == {
            "s1": "sidechain", "s2": "sidechain"}
        sub = import_claude_code(path, leaf="s2")
        assert final_view(sub) == ["s1", "s2"]
        assert sub.header["id"] == "agent-cd34" and sub.header["parentSession"] == "main-1"
        assert "dangling-parent" not in _codes(sub.problems)


class TestClaudeBoundaries:
    def _continued(self, folder: Path) -> Path:
        folder.mkdir()
        _write(folder / "old.jsonl", [_prompt("u1", None, "start", 0),
                                      _answer("a1", "u1", "msg-1", 1, "started")])
        return _write(folder / "new.jsonl", [
            _claude("cb", None, "system", 2, subtype="compact_boundary",
                    logicalParentUuid="a1", compactMetadata={"trigger": "auto"}),
            _claude("cs", "cb", "user", 3, isCompactSummary=True, message={
                "role": "user", "content": "This session is being continued: started."}),
            _prompt("u2", "cs", "go on", 4),
            _answer("a2", "u2", "msg-2", 5, "went on"),
        ])

    def test_a_logical_parent_in_no_file_is_boundary_without_logical_parent(
            self, tmp_path: Path) -> None:
        result = import_claude_code(self._continued(tmp_path / "p"))
        codes = [p.code for p in result.problems]
        assert codes == ["boundary-without-logical-parent"]
        assert "project_dir=" in result.problems[0].message
        assert final_view(result) == ["cs", "u2", "a2"]

    def test_project_dir_follows_the_history_into_the_earlier_transcript(
            self, tmp_path: Path) -> None:
        path = self._continued(tmp_path / "p")
        result = import_claude_code(path, project_dir=path.parent)
        check_invariants(result)
        assert result.problems == []
        assert shadowed_ids(result, "cb") == ["u1", "a1"]
        assert final_view(result) == ["cs", "u2", "a2"]
        u1 = next(o for o in result.origins.values() if o["id"] == "u1")
        assert u1["file"] == str(path.parent / "old.jsonl")
        assert [Path(s["path"]).name for s in result.sources] == ["new.jsonl", "old.jsonl"]
        assert "cross-file-continuation" in _codes(result.notes)

    def test_project_dir_follows_a_chain_of_transcripts(self, tmp_path: Path) -> None:
        path = self._continued(tmp_path / "p")
        newest = _write(path.parent / "newest.jsonl", [
            _claude("cb2", None, "system", 6, subtype="compact_boundary",
                    logicalParentUuid="a2", compactMetadata={"trigger": "manual"}),
            _claude("cs2", "cb2", "user", 7, isCompactSummary=True, message={
                "role": "user", "content": "Continued again."}),
            _prompt("u3", "cs2", "last", 8),
        ])
        result = import_claude_code(newest, project_dir=path.parent)
        check_invariants(result)
        assert result.problems == []
        assert shadowed_ids(result, "cb") == ["u1", "a1"]
        assert shadowed_ids(result, "cb2") == ["cs", "u2", "a2"]
        assert final_view(result) == ["cs2", "u3"]

    def test_project_dir_never_follows_a_symlink_out_of_the_folder(self, tmp_path: Path
                                                                   ) -> None:
        path = self._continued(tmp_path / "p")
        outside = tmp_path / "outside.jsonl"
        (path.parent / "old.jsonl").rename(outside)
        (path.parent / "old.jsonl").symlink_to(outside)
        result = import_claude_code(path, project_dir=path.parent)
        assert [p.code for p in result.problems] == ["boundary-without-logical-parent"]
        assert len(result.sources) == 1


def test_every_line_of_a_branched_claude_file_is_imported_or_left_out_with_a_reason(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records: list[dict[str, Any]] = [
        {"type": "summary", "summary": "a title", "leafUuid": "a4"},
        *_parallel_chained(),
        _claude("sys1", "a4", "system", 8, subtype="turn_duration", durationMs=5),
        _prompt("u2", "u1", "rewound", 9),
        _answer("b1", "u2", "msg-9", 10),
        _claude("err", "b1", "assistant", 11, isApiErrorMessage=True, message={
            "id": "e", "role": "assistant", "model": "<synthetic>",
            "content": [{"type": "text", "text": "API Error"}]}),
        _answer("a4", "r3", "msg-2", 12, "done again"),  # a repeated uuid: last wins
    ]
    path = _write(tmp_path / "s.jsonl", records)
    result = import_claude_code(path)
    assert unaccounted_lines(result, path) == set()
    summary = result.omitted_summary()
    assert {k: v["count"] for k, v in summary.items()} == {
        "not-model-visible": 2, "duplicate": 1, "off-branch": 3}
    assert summary["off-branch"]["kinds"] == {"user": 1, "assistant": 2}
    assert {"not-model-visible", "duplicate", "off-branch"} <= _codes(result.notes)
    assert main(["convert", str(path), "-o", str(tmp_path / "out.jsonl")]) == 0
    printed = capsys.readouterr()
    assert (f"{path}: note: off-branch: 3 record(s) left out: not on the imported branch"
            in printed.err)  # notes go to stderr
    assert "6 source record(s) left out (see the notes)" in printed.err


@pytest.mark.parametrize("fragment", ["claude", "codex_small", "pi_small", "compact"])
def test_every_line_of_the_samples_is_accounted_for(fragment: str) -> None:
    for path in sorted(OTHER.glob(f"*{fragment}*.jsonl")):
        result = import_any(path)
        assert unaccounted_lines(result, path) == set(), path.name


# -- empty imports ---------------------------------------------------------------------------


def test_an_import_with_nothing_for_the_model_exits_1_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "rollout.jsonl", [
        {"timestamp": T.format(0), "type": "session_meta",
         "payload": {"id": "c1", "timestamp": T.format(0), "cwd": "/r"}},
        {"timestamp": T.format(1), "type": "turn_context", "payload": {"model": "gpt-x"}},
        {"timestamp": T.format(2), "type": "event_msg", "payload": {"type": "token_count"}},
    ])
    result = import_codex(path)
    assert result.is_empty
    assert [p.code for p in result.problems] == ["empty-import"]
    assert "1 not-model-visible, 1 usage-not-attached" in result.problems[0].message
    out = tmp_path / "out.jsonl"
    assert main(["convert", str(path), "-o", str(out)]) == 1
    printed = capsys.readouterr()
    assert "empty-import" in printed.err and "not converted" in printed.err
    assert not out.exists()


# -- pi ----------------------------------------------------------------------------------------


def _pi_v1(tmp_path: Path) -> Path:
    """A version 1 pi session: no version in the header, no entry ids, a compaction that
    keeps from an index into the file's entries (the header is index 0)."""
    def message(role: str, text: str, second: int, **extra: Any) -> dict[str, Any]:
        return {"type": "message", "timestamp": T.format(second),
                "message": {"role": role, "content": [{"type": "text", "text": text}],
                            **extra}}

    return _write(tmp_path / "v1.jsonl", [
        {"type": "session", "id": "pi-v1", "timestamp": T.format(0), "cwd": "/w"},
        {"type": "model_change", "timestamp": T.format(0), "provider": "anthropic",
         "modelId": "claude-x"},
        message("user", "one", 1),
        message("assistant", "reply one", 2, stopReason="stop"),
        message("user", "two", 3),
        message("assistant", "reply two", 4, stopReason="stop"),
        {"type": "message", "timestamp": T.format(5), "message": {
            "role": "bashExecution", "command": "ls", "output": "a", "exitCode": 0,
            "excludeFromContext": True}},
        {"type": "compaction", "timestamp": T.format(6), "summary": "did one",
         "firstKeptEntryIndex": 4, "tokensBefore": 100},
        message("user", "three", 7),
        message("assistant", "reply three", 8, stopReason="aborted"),
    ])


class TestPiV1:
    def test_a_version_1_file_is_detected_and_converted(self, tmp_path: Path) -> None:
        path = _pi_v1(tmp_path)
        assert detect_format(path) == "pi"
        out = tmp_path / "out.jsonl"
        assert main(["convert", "--from", "pi", str(path), "-o", str(out)]) == 0
        assert main(["validate", str(out)]) == 0

    def test_first_kept_entry_index_keeps_the_entries_from_that_index(self, tmp_path: Path
                                                                     ) -> None:
        path = _pi_v1(tmp_path)
        result = import_pi(path)
        check_invariants(result)
        assert view_after(result, "L8") == ["L8", "L5", "L6"]  # summary, "two", its reply
        assert final_view(result) == ["L8", "L5", "L6", "L9", "L10"]
        assert shadowed_ids(result, "L8") == ["L3", "L4"]
        assert unaccounted_lines(result, path) == set()
        assert {r["reason"] for r in result.omitted} == {"not-model-visible",
                                                         "excluded-from-context"}

    def test_an_aborted_response_ends_its_turn_with_a_cause(self, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
        result = import_pi(_pi_v1(tmp_path))
        assert result.events[-1]["data"]["reason"] == {"kind": "aborted",
                                                       "reason": {"kind": "user"}}


# -- Codex -------------------------------------------------------------------------------------


def test_codex_aborted_turns_keep_their_reason_and_validate_clean(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def line(second: int, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {"timestamp": T.format(second), "type": kind, "payload": payload}

    path = _write(tmp_path / "rollout.jsonl", [
        line(0, "session_meta", {"id": "c1", "timestamp": T.format(0), "cwd": "/r"}),
        line(1, "event_msg", {"type": "task_started"}),
        line(2, "response_item", {"type": "message", "role": "user",
                                  "content": [{"type": "input_text", "text": "hi"}]}),
        line(3, "event_msg", {"type": "turn_aborted", "reason": "replaced"}),
        line(4, "event_msg", {"type": "task_started"}),
        line(5, "response_item", {"type": "message", "role": "user",
                                  "content": [{"type": "input_text", "text": "again"}]}),
        line(6, "event_msg", {"type": "turn_aborted", "reason": "interrupted"}),
    ])
    result = import_codex(path)
    ends = [e["data"]["reason"] for e in result.events if e["type"] == "turn/end"]
    assert ends == [{"kind": "aborted", "reason": {"kind": "replaced"}},
                    {"kind": "interrupted"}]
    out = tmp_path / "out.jsonl"
    assert main(["convert", str(path), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["validate", str(out)]) == 0
    assert "legacy-upgraded" not in capsys.readouterr().out
    assert unaccounted_lines(result, path) == set()


# -- ATIF ----------------------------------------------------------------------------------------


def _atif_v15(folder: Path, *, with_questions: bool = True) -> Path:
    """terminus-2 without linear history: the summarization is a system step naming three
    subagent trajectories, then the answers arrive as the next user step."""
    folder.mkdir()
    refs = [{"session_id": f"s-summarization-1-{k}",
             "trajectory_path": f"trajectory.summarization-1-{k}.json"}
            for k in ("summary", "questions", "answers")]
    steps = [
        {"step_id": 1, "source": "user", "message": "Task: make hello.txt"},
        {"step_id": 2, "source": "agent", "model_name": "gpt-x", "message": "ls",
         "observation": {"results": [{"content": "empty dir"}]}},
        {"step_id": 3, "source": "system",
         "message": "Performed context summarization and handoff to continue task.",
         "observation": {"results": [{"subagent_trajectory_ref": refs}]}},
        {"step_id": 4, "source": "user", "message": "Here are the answers the other agent "
                                                   "provided.\n\nThe dir is empty."},
        {"step_id": 5, "source": "agent", "model_name": "gpt-x", "message": "touch it"},
    ]
    root = folder / "trajectory.json"
    root.write_text(json.dumps({"schema_version": "ATIF-v1.5", "session_id": "s",
                                "agent": {"name": "terminus-2", "model_name": "openai/gpt-x"},
                                "steps": steps}))
    if with_questions:
        (folder / "trajectory.summarization-1-questions.json").write_text(json.dumps({
            "schema_version": "ATIF-v1.5", "session_id": "s-summarization-1-questions",
            "agent": {"name": "terminus-2-summarization-questions", "model_name": "openai/gpt-x"},
            "steps": [
                {"step_id": 1, "source": "user", "message": "You are picking up work from a "
                 "previous AI agent on this task: ... Summary: listed the dir."},
                {"step_id": 2, "source": "agent", "message": "1. What is in the dir?"}]}))
    return root


class TestAtifSubagentSummarization:
    def test_the_handoff_becomes_the_context_after_the_step(self, tmp_path: Path) -> None:
        result = import_atif(_atif_v15(tmp_path / "run"))
        check_invariants(result)
        assert view_after(result, "f0:step-3") == [
            "f0:step-1", "f0:step-3:summary", "f0:step-3:questions"]
        assert final_view(result) == ["f0:step-1", "f0:step-3:summary",
                                      "f0:step-3:questions", "f0:step-4", "f0:step-5"]
        assert shadowed_ids(result, "f0:step-3") == ["f0:step-2", "f0:step-2:obs-0"]
        summary = derive_messages(result.events)[1]
        assert summary["content"][0]["text"].startswith("You are picking up work")
        assert "subagent-summarization" in _codes(result.notes)
        assert result.problems == []
        assert [r["reason"] for r in result.omitted].count("subagent-reference") == 3

    def test_without_the_subagent_file_the_reset_is_written_and_reported(
            self, tmp_path: Path) -> None:
        result = import_atif(_atif_v15(tmp_path / "run", with_questions=False))
        check_invariants(result)
        assert view_after(result, "f0:step-3") == ["f0:step-1"]
        assert {"continuation-missing", "compaction-without-summary"} <= _codes(
            result.problems)
        assert "subagent-summarization" in _codes(result.notes)

    def test_a_boundary_inside_a_file_applies_where_it_stands(self, tmp_path: Path) -> None:
        path = tmp_path / "trajectory.json"
        path.write_text(json.dumps({"schema_version": "ATIF-v1.7", "session_id": "s", "steps": [
            {"step_id": 1, "source": "user", "message": "task"},
            {"step_id": 2, "source": "agent", "message": "working"},
            {"step_id": 3, "source": "system", "message": "compacted",
             "extra": {"context_management": {"type": "compaction", "boundary": "replace"}},
             "observation": {"results": [{"content": "Summary: worked on the task"}]}},
            {"step_id": 4, "source": "agent", "message": "more work"}]}))
        result = import_atif(path)
        check_invariants(result)
        assert view_after(result, "f0:step-3") == ["f0:step-3:obs-0"]
        assert final_view(result) == ["f0:step-3:obs-0", "f0:step-4"]

    def test_a_lone_surrogate_is_a_located_package_error(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = tmp_path / "trajectory.json"
        path.write_text('{"schema_version": "ATIF-v1.5", "session_id": "s",\n'
                        '"steps": [{"step_id": 1, "source": "user", "message": "\\ud800"}]}')
        out = tmp_path / "out.jsonl"
        assert main(["convert", "--from", "atif", str(path), "-o", str(out)]) == 1
        printed = capsys.readouterr()
        assert printed.err.startswith(f"{path}:2: line-unparsable: ")  # errors: stderr
        assert "surrogate" in printed.err and "internal error" not in printed.err
        assert not out.exists()


# -- OpenHands -------------------------------------------------------------------------------


def test_openhands_assistant_messages_carry_the_model_base_state_names(tmp_path: Path
                                                                       ) -> None:
    folder = build(tmp_path / "conv")
    state = json.loads((folder / "base_state.json").read_text())
    state["agent"] = {"kind": "Agent", "llm": {"model": "anthropic/claude-sonnet-4-5"}}
    (folder / "base_state.json").write_text(json.dumps(state))
    result = import_openhands(folder)
    sources = {json.dumps(e["data"]["message"]["source"], sort_keys=True)
               for e in result.events if e["type"] == "assistant/message"
               and e["data"]["message"]["source"]["model"] != "tombstone"}
    assert sources == {json.dumps({"kind": "model", "provider": "anthropic",
                                   "model": "claude-sonnet-4-5"}, sort_keys=True)}
    assert ids(derive_messages(result.events))[-1] == "m4"
    left = result.omitted_summary()
    assert left["system-prompt"]["count"] == 1
    assert left["not-model-visible"]["kinds"] == {"ConversationStateUpdateEvent": 1}


def test_an_openhands_event_with_a_lone_surrogate_is_a_problem_not_a_crash(
        tmp_path: Path) -> None:
    folder = build(tmp_path / "conv")
    (folder / "events" / "event-00099-bad.json").write_text(
        '{"kind": "MessageEvent", "id": "bad", "source": "user", "llm_message": '
        '{"role": "user", "content": [{"type": "text", "text": "\\udc00"}]}}')
    result = import_openhands(folder)
    bad = [p for p in result.problems if p.code == "line-unparsable"]
    assert len(bad) == 1 and "event-00099-bad.json" in bad[0].message
    assert {"reason": "unparsable", "kind": "event-file"}.items() <= next(
        r for r in result.omitted if r["id"] == "event-00099-bad.json").items()
    check_invariants(result)
