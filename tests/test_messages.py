"""SPEC 10: the free derive_messages, with its legacy linear fallback, and legacy upgrades."""

from __future__ import annotations

import pytest
from builders import assistant_data, ev, replace, tool_data, user, user_msg

from surface_lab import AdmissionError, CorruptLogError, derive_messages
from surface_lab.legacy import upgrade_events


def test_marked_logs_use_the_surface() -> None:
    log = [user(0), user(1), replace(2, 0, 1, [0, 1])]
    messages = derive_messages(log)
    assert messages.mode == "surface"
    assert [m["id"] for m in messages] == ["r2"]


def test_unmarked_logs_fall_back_to_the_linear_scan() -> None:
    log = [user(0, op=None), ev(1, "assistant/message", assistant_data(text="")),
           ev(2, "assistant/message", assistant_data("a2")), ev(3, "tool/result", tool_data()),
           ev(4, "context/message", user_msg("ctx"))]
    messages = derive_messages(log)
    assert messages.mode == "linear"
    assert [m["id"] for m in messages] == ["u0", "a2", "t1", "ctx"]


def test_a_log_without_surface_events_is_a_surface_log() -> None:
    assert derive_messages([ev(0, "turn/start", {"turn": 1})]).mode == "surface"


def test_surface_violations_raise() -> None:
    with pytest.raises(AdmissionError):
        derive_messages([user(0), replace(1, 5, 5, [5])])


def test_legacy_shapes_are_upgraded_first() -> None:
    log = [
        ev(0, "turn/start", {"turn": 1, "trigger": {"kind": "message"}}),
        ev(1, "user/message", {"content": [{"type": "text", "text": "hi"}],
                               "source": {"kind": "user"}}, op="append"),
        ev(2, "assistant/message", {"turn": 1, "step": 1, "content": [{"type": "text",
           "text": "yo"}], "provenance": {"provider": "p", "model": "m"}}, op="append"),
        ev(3, "tool/result", {"turn": 1, "step": 1, "callId": "c", "content": [],
                              "isError": False}, op="append"),
    ]
    messages = derive_messages(log, session_id="S")
    assert [m["id"] for m in messages] == ["legacy-message:S:1", "legacy-message:S:2",
                                           "legacy-message:S:3"]
    assert messages[1]["source"] == {"provider": "p", "model": "m", "kind": "model"}
    assert messages[2]["content"][0]["toolCallId"] == "c"


class TestLegacyUpgrades:
    def test_turn_end_reasons(self) -> None:
        reasons = [{"kind": "aborted"}, {"kind": "disposed"},
                   {"kind": "error", "step": 1, "message": "boom"},
                   {"kind": "error", "step": 1, "message": "boom", "code": "E1"},
                   {"kind": "error", "step": 1, "failure": {"name": "X"}},
                   {"kind": "aborted", "reason": {"kind": "user"}}]
        result = upgrade_events([ev(i, "turn/end", {"turn": 1, "reason": r})
                                 for i, r in enumerate(reasons)], session_id="s")
        assert [e["data"]["reason"] for e in result.events] == [
            {"kind": "aborted", "reason": {"kind": "legacy"}},
            {"kind": "aborted", "reason": {"kind": "disposed"}},
            {"kind": "error", "error": {"message": "boom", "code": "UNKNOWN"}},
            {"kind": "error", "error": {"message": "boom", "code": "E1"}},
            {"kind": "error", "error": {"name": "X"}},
            {"kind": "aborted", "reason": {"kind": "user"}},
        ]
        assert sum(result.applied.values()) == 5

    def test_a_malformed_old_record_is_corruption(self) -> None:
        with pytest.raises(CorruptLogError, match="seq 0 turn/end: malformed legacy") as info:
            upgrade_events([ev(0, "turn/end", {"turn": 1, "reason": {"kind": "error"}})],
                           session_id="s")
        assert info.value.code == "log-corrupt"

    def test_steering_messages_become_user_messages(self) -> None:
        result = upgrade_events([
            ev(0, "steering/message", {"turn": 1, "message": user_msg("x")}, op="append"),
            ev(1, "steering/message", {"turn": 1, "content": [], "source": {"kind": "user"}},
               op="append"),
        ], session_id="s")
        assert [e["type"] for e in result.events] == ["user/message", "user/message"]
        assert result.events[0]["data"] == user_msg("x")
        assert result.events[1]["data"]["id"] == "legacy-message:s:1"

    def test_a_legacy_tool_result_rewrite_keeps_its_originals_id(self) -> None:
        result = upgrade_events([
            ev(0, "tool/result", {"turn": 1, "step": 1, "callId": "c", "content": [
                {"type": "text", "text": "long"}], "isError": False}, op="append"),
            ev(1, "tool/result", {"turn": 1, "step": 1, "callId": "c", "content": [
                {"type": "text", "text": "short"}], "isError": False}, op=(0, 0), sources=[0]),
        ], session_id="s")
        ids = [e["data"]["message"]["id"] for e in result.events]
        assert ids == ["legacy-message:s:0", "legacy-message:s:0"]

    def test_current_events_are_returned_unchanged(self) -> None:
        log = [user(0)]
        result = upgrade_events(log, session_id="s")
        assert result.events[0] is log[0]
        assert not result.applied
