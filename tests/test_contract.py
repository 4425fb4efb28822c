"""`contract.unanswered_tool_calls`: a tool call still without its result when the model is
asked again is a history no provider accepts; `validate` and `convert` report it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builders import assistant_data, ev, tool_data, user_msg

from surface_lab.cli import main
from surface_lab.contract import unanswered_tool_calls


def _log(*, answered: bool, closer: bool = False) -> list[dict[str, Any]]:
    events = [
        ev(0, "turn/start", {"turn": 1}),
        ev(1, "user/message", user_msg(), op="append"),
        ev(2, "step/start", {"turn": 1, "step": 1}),
        ev(3, "assistant/message", assistant_data("a1", calls=("c1", "c2")), op="append",
           sources=[]),
        ev(4, "tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "read",
                            "arguments": "{}"}),
        ev(5, "tool/call", {"turn": 1, "step": 1, "callId": "c2", "name": "read",
                            "arguments": "{}"}),
        ev(6, "tool/result", tool_data("c1", mid="t1"), op="append", sources=[4]),
    ]
    if answered:
        events.append(ev(7, "tool/result", tool_data("c2", mid="t2"), op="append",
                         sources=[5]))
    events += [ev(len(events), "step/end", {"turn": 1, "step": 1}),
               ev(len(events) + 1, "step/start", {"turn": 1, "step": 2}),
               ev(len(events) + 2, "assistant/message",
                  assistant_data("a2", text="done", step=2), op="append", sources=[])]
    if closer:
        data = tool_data("c2", "interrupted", mid="closer")
        data["error"] = {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}
        events.append(ev(len(events), "tool/result", data, op="append"))
    return events


class TestUnansweredToolCalls:
    def test_a_call_answered_before_the_next_request_is_fine(self) -> None:
        assert unanswered_tool_calls(_log(answered=True)) == []

    def test_a_call_without_its_result_at_the_next_request_is_found_there(self) -> None:
        [finding] = unanswered_tool_calls(_log(answered=False))
        assert (finding.seq, finding.rule, finding.related) == (9, "unanswered-tool-call", 3)
        assert "'c2'" in finding.message

    def test_a_call_a_synthetic_closer_answers_later_is_fine(self) -> None:
        assert unanswered_tool_calls(_log(answered=False, closer=True)) == []

    def test_the_blocks_of_one_step_are_one_request(self) -> None:
        events = _log(answered=True)
        # a second assistant message of step 1 before the results: not a new request
        events.insert(4, ev(4, "assistant/message", assistant_data("a1b", text="and"),
                            op="append", sources=[]))
        for seq, event in enumerate(events):
            event["seq"] = seq
        assert unanswered_tool_calls(events) == []

    def test_a_call_whose_message_a_compaction_shadowed_is_no_longer_pending(self) -> None:
        events = _log(answered=False)[:8]  # through step/end of step 1
        summary = {"id": "s", "role": "user", "content": [{"type": "text", "text": "sum"}],
                   "source": {"kind": "plugin", "plugin": "compact", "compactionId": "k"}}
        events += [ev(8, "user/message", summary, op=(1, 6), sources=[1, 3, 6]),
                   ev(9, "step/start", {"turn": 1, "step": 2}),
                   ev(10, "assistant/message", assistant_data("a2", text="ok", step=2),
                      op="append", sources=[])]
        assert unanswered_tool_calls(events) == []


def _write(path: Path, events: list[dict[str, Any]]) -> Path:
    header = {"type": "session", "version": 0, "id": "s1", "createdAt": 0,
              "delegationDepth": 0}
    path.write_text("".join(json.dumps(r) + "\n" for r in [header, *events]))
    return path


class TestValidateAndConvert:
    def test_validate_reports_the_call_with_file_line_and_seq(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = _write(tmp_path / "s.jsonl", _log(answered=False))
        assert main(["validate", str(path)]) == 1
        out, err = capsys.readouterr()
        assert f"{path}:11: seq 9 assistant/message: unanswered-tool-call: tool call 'c2'" \
            in out
        assert "INVALID" in err

    def test_validate_passes_a_log_whose_calls_are_answered(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = _write(tmp_path / "s.jsonl", _log(answered=True))
        assert main(["validate", str(path)]) == 0
        assert "unanswered" not in capsys.readouterr().out

    def test_convert_copies_the_log_and_says_the_problem(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = _write(tmp_path / "s.jsonl", _log(answered=False))
        assert main(["convert", str(path), "-o", str(tmp_path / "out.db")]) == 0
        out, err = capsys.readouterr()
        assert "unanswered-tool-call" in err and out == ""  # a problem: on stderr
        assert "1 problem(s)" in err
