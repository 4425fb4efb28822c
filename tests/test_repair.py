"""SPEC 6: interrupted_turn_closers is pure and closes exactly what a crash left open."""

from __future__ import annotations

from typing import Any

from builders import assistant_data, ev, tool_data, user

from surface_lab import Session, interrupted_turn_closers


def _call(seq: int, call_id: str, step: int = 1) -> dict[str, Any]:
    return ev(seq, "tool/call", {"turn": 1, "step": step, "callId": call_id, "name": "read",
                                 "arguments": "{}"}, time=seq)


def _turn(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    log = [ev(0, "turn/start", {"turn": 1}), user(1), ev(2, "step/start", {"turn": 1, "step": 1})]
    return log + [dict(e, seq=3 + i) for i, e in enumerate(extra)]


def _asks(*calls: str, step: int = 1) -> dict[str, Any]:
    return ev(0, "assistant/message", assistant_data(calls=calls, step=step), op="append",
              time=77)


def _types(closers: list[Any]) -> list[str]:
    return [c["type"] for c in closers]


def test_a_balanced_log_needs_nothing() -> None:
    log = _turn(ev(0, "step/end", {"turn": 1, "step": 1}), ev(0, "turn/end", {"turn": 1}))
    assert interrupted_turn_closers(log) == []


def test_an_empty_log_needs_nothing() -> None:
    assert interrupted_turn_closers([]) == []


def test_an_open_turn_is_closed_as_interrupted() -> None:
    log = [ev(0, "turn/start", {"turn": 4}, time=5), user(1)]
    [closer] = interrupted_turn_closers(log)
    assert dict(closer) == {"type": "turn/end", "seq": 2, "time": 0,
                            "data": {"turn": 4, "reason": {"kind": "interrupted"}}}


def test_an_open_step_is_closed_before_the_turn() -> None:
    closers = interrupted_turn_closers(_turn())
    assert _types(closers) == ["step/end", "turn/end"]
    assert closers[0]["data"] == {"turn": 1, "step": 1}
    assert [c["seq"] for c in closers] == [3, 4]


def test_a_call_never_logged_is_not_started() -> None:
    closers = interrupted_turn_closers(_turn(_asks("c1")))
    assert _types(closers) == ["tool/result", "step/end", "turn/end"]
    result = closers[0]
    assert "sourceEventSeqs" not in result
    assert result["surfaceOp"] == "append"
    assert result["time"] == 77  # the last real event's time
    data = result["data"]
    assert data["error"] == {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}
    assert data["message"]["id"] == "interrupted-tool-result-c1-4"
    block = data["message"]["content"][0]
    assert (block["toolCallId"], block["isError"]) == ("c1", True)


def test_a_logged_call_has_an_unknown_outcome_and_cites_its_call() -> None:
    closers = interrupted_turn_closers(_turn(_asks("c1"), _call(0, "c1")))
    result = closers[0]
    assert result["sourceEventSeqs"] == [4]
    assert result["data"]["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    assert "Do not retry blindly" in result["data"]["message"]["content"][0]["content"][0]["text"]


def test_a_closed_step_clears_pending_calls() -> None:
    log = _turn(_asks("c1"), ev(0, "step/end", {"turn": 1, "step": 1}))
    assert _types(interrupted_turn_closers(log)) == ["turn/end"]


def test_two_pending_calls_in_model_order() -> None:
    closers = interrupted_turn_closers(_turn(_asks("b", "a"), _call(0, "a")))
    assert [c["data"]["message"]["source"]["callId"] for c in closers[:2]] == ["b", "a"]
    assert [c["data"]["error"]["code"] for c in closers[:2]] == [
        "TOOL_NOT_STARTED", "TOOL_OUTCOME_UNKNOWN"]
    assert closers[1]["data"]["message"]["id"] == "interrupted-tool-result-a-6"


def test_answered_calls_are_not_pending() -> None:
    answer = ev(0, "tool/result", tool_data("c1"), op="append", sources=[4])
    closers = interrupted_turn_closers(_turn(_asks("c1"), _call(0, "c1"), answer))
    assert _types(closers) == ["step/end", "turn/end"]


def test_a_later_tool_call_overwrites_the_started_seq() -> None:
    closers = interrupted_turn_closers(_turn(_asks("c1"), _call(0, "c1"), _call(0, "c1")))
    assert closers[0]["sourceEventSeqs"] == [5]


def test_closers_are_valid_events_and_the_function_is_pure() -> None:
    log = _turn(_asks("c1", "c2"), _call(0, "c1"))
    snapshot = [dict(e) for e in log]
    closers = interrupted_turn_closers(log)
    assert log == snapshot
    session = Session("s", seed=[*log, *closers])
    assert session.events[-2]["type"] == "turn/end"
    assert interrupted_turn_closers(list(session.events)) == []
