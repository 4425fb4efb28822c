"""SPEC 5: Session seed, append, atomicity, read-only views, subscribers, messages."""

from __future__ import annotations

import copy
import logging
import pickle
from typing import Any

import pytest
from builders import assistant_data, ev, replace, tool_data, user, user_msg

from surface_lab import AdmissionError, Session, SurfaceLabError, UnsupportedFormatError


def _clock() -> Any:
    ticks = iter(range(1000, 10**6))
    return lambda: next(ticks)


def _chat() -> Session:
    s = Session("s", clock=_clock())
    s.append("turn/start", {"turn": 1})
    s.append("user/message", user_msg("u1"), surface_op="append")
    s.append("assistant/message", assistant_data("a1", calls=("c1",)), surface_op="append")
    s.append("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "read",
                           "arguments": "{}"})
    s.append("tool/result", tool_data("c1"), surface_op="append", source_event_seqs=[3])
    return s


class TestAppend:
    def test_append_stamps_seq_and_time_and_returns_the_event(self) -> None:
        s = Session("s", clock=_clock())
        e = s.append("user/message", user_msg(), surface_op="append")
        assert dict(e) == {"type": "user/message", "seq": 0, "time": 1001,
                           "data": user_msg(), "surfaceOp": "append"}
        assert list(s.surface.nodes) == [0]
        assert s.seq == 1

    def test_on_disk_key_order(self) -> None:
        s = _chat()
        assert list(s.events[4]) == ["type", "seq", "time", "data", "sourceEventSeqs",
                                     "surfaceOp"]

    def test_data_is_copied(self) -> None:
        s = Session("s")
        data = user_msg()
        s.append("user/message", data, surface_op="append")
        data["content"][0]["text"] = "changed"
        assert s.events[0]["data"]["content"][0]["text"] == "hi"

    def test_events_are_read_only_all_the_way_down(self) -> None:
        s = _chat()
        event = s.events[1]
        with pytest.raises(TypeError):
            event["type"] = "x"  # type: ignore[index]
        with pytest.raises(TypeError):
            event["data"]["content"].append({})
        with pytest.raises(TypeError):
            event["data"]["content"][0]["text"] = "x"
        with pytest.raises(TypeError):
            s.events[1]["data"].update({})
        with pytest.raises(AttributeError):
            s.events.append(event)  # type: ignore[attr-defined]
        assert s.events[1]["data"] == user_msg("u1")

    def test_events_copy_and_pickle_cleanly(self) -> None:
        event = _chat().events[2]
        assert copy.deepcopy(event) == event
        assert pickle.loads(pickle.dumps(event)) == event
        plain = event.copy()
        plain["type"] = "x"
        assert event["type"] == "assistant/message"
        from surface_lab.jsonvalue import FrozenDict, FrozenList, thaw

        deep = thaw(event)
        deep["data"]["message"]["content"].append({"type": "text", "text": "mine"})
        assert type(deep["data"]) is dict and type(deep["data"]["message"]["content"]) is list
        assert not isinstance(deep["data"], FrozenDict | FrozenList)
        assert len(event["data"]["message"]["content"]) == 2

    def test_surface_types_need_a_surface_op_at_runtime(self) -> None:
        kind: str = "tool/result"
        with pytest.raises(AdmissionError) as info:
            Session("s").append(kind, tool_data())
        assert info.value.code == "surface-op-missing"

    def test_log_only_types_refuse_surface_fields(self) -> None:
        s = Session("s")
        with pytest.raises(AdmissionError, match="surfaceOp is only allowed") as forbidden:
            s.append("step/start", {}, surface_op="append")
        assert forbidden.value.code == "surface-op-forbidden"
        with pytest.raises(AdmissionError) as info:
            s.append("step/start", {}, source_event_seqs=[0])
        assert info.value.code == "sources-forbidden"

    def test_row_tags_are_reserved(self) -> None:
        with pytest.raises(AdmissionError, match="reserved for packed chunk rows"):
            Session("s").append("text-chunks", {})

    def test_non_json_data_is_refused_with_the_type_named(self) -> None:
        s = Session("s")
        for bad in ({"a": (1, 2)}, {"a": {1, 2}}, {"a": b"x"}, {1: "x"}, float("inf")):
            with pytest.raises(AdmissionError, match="seq 0 note/x") as info:
                s.append("note/x", bad)
            assert info.value.code == "data-not-json"
        assert len(s.events) == 0

    def test_deep_nesting_is_refused_cleanly(self) -> None:
        deep: Any = []
        for _ in range(5000):
            deep = [deep]
        with pytest.raises(AdmissionError, match="nested deeper") as info:
            Session("s").append("note/x", deep)
        assert info.value.code == "data-not-json"

    def test_tuple_source_lists_are_accepted(self) -> None:
        s = _chat()
        e = s.append("user/message", user_msg("r"), surface_op={"op": "replace", "start": 1,
                     "end": 2}, source_event_seqs=(1, 2))
        assert e["sourceEventSeqs"] == [1, 2]
        assert list(s.surface.nodes) == [5, 4]

    def test_message_shapes_are_checked_live(self) -> None:
        with pytest.raises(AdmissionError) as info:
            Session("s").append("assistant/message", {"turn": 1, "step": 1, "message": {
                "id": "a", "role": "assistant", "content": [], "source": {"kind": "model"}}},
                surface_op="append")
        assert info.value.code == "message-source"


class TestAtomicity:
    def test_a_rejected_replace_changes_nothing_and_a_valid_append_follows(self) -> None:
        s = _chat()
        before = (len(s.events), list(s.surface.nodes), s.surface.replace_generation)
        with pytest.raises(AdmissionError) as info:
            s.append("user/message", user_msg("r"),
                     surface_op={"op": "replace", "start": 1, "end": 2}, source_event_seqs=[1])
        assert info.value.code == "replace-sources-incomplete"
        assert (len(s.events), list(s.surface.nodes), s.surface.replace_generation) == before
        e = s.append("user/message", user_msg("u2"), surface_op="append")
        assert e["seq"] == 5
        assert list(s.surface.nodes) == [1, 2, 4, 5]

    def test_a_rejected_tool_rewrite_changes_nothing(self) -> None:
        s = _chat()
        with pytest.raises(AdmissionError):
            s.append("tool/result", {**tool_data("c1"), "step": 9},
                     surface_op={"op": "replace", "start": 4, "end": 4}, source_event_seqs=[4])
        assert s.surface.replace_generation == 0
        assert len(s.events) == 5

    def test_a_rejected_seed_builds_nothing(self) -> None:
        with pytest.raises(AdmissionError) as info:
            Session("s", seed=[user(0), user(1, sources=[1])])
        assert info.value.code == "sources-not-earlier"
        assert "invalid seed event at index 1: seq 1 user/message" in str(info.value)

    def test_a_failed_candidate_check_leaves_the_view_unchanged(self) -> None:
        s = _chat()
        nodes = s.surface.nodes
        with pytest.raises(AdmissionError):
            s.surface.check(replace(5, 9, 9, [9]))
        assert s.surface.nodes is nodes


class TestSeed:
    def test_an_end_seed_marker_is_appended(self) -> None:
        s = Session("s", seed=[user(0)])
        assert [e["type"] for e in s.events] == ["user/message", "session/end-seed"]
        assert s.first_live_seq == 1

    def test_no_marker_when_the_seed_ends_with_one(self) -> None:
        s = Session("s", seed=[user(0), ev(1, "session/end-seed")])
        assert len(s.events) == 2
        assert s.first_live_seq == 2

    def test_empty_and_absent_seeds(self) -> None:
        assert [e["type"] for e in Session("s", seed=[]).events] == ["session/end-seed"]
        assert Session("s", seed=[]).first_live_seq == 0
        assert len(Session("s").events) == 0

    def test_a_seed_may_be_another_sessions_events(self) -> None:
        first = _chat()
        second = Session("s2", seed=first.events)
        assert list(second.surface.nodes) == list(first.surface.nodes)
        assert second.events[1] is first.events[1]

    def test_unmarked_surface_events_are_refused_not_upgraded(self) -> None:
        with pytest.raises(AdmissionError) as info:
            Session("s", seed=[user(0, op=None)])
        assert info.value.code == "surface-op-missing"

    def test_seed_refuses_a_wrong_seq(self) -> None:
        with pytest.raises(AdmissionError) as info:
            Session("s", seed=[user(1)])
        assert info.value.code == "seq-not-contiguous"


class TestHeader:
    def test_default_header(self) -> None:
        s = Session("s", clock=lambda: 42)
        assert dict(s.header) == {"version": 0, "id": "s", "createdAt": 42}

    def test_header_id_must_match(self) -> None:
        with pytest.raises(AdmissionError, match="expected the session id") as info:
            Session("s", header={"version": 0, "id": "t", "createdAt": 0})
        assert info.value.code == "header-invalid"

    @pytest.mark.parametrize(("field", "value"), [
        ("createdAt", -1), ("cwd", "relative/path"), ("origin", "parent"),
        ("delegationDepth", -1), ("seedLength", True), ("sandboxMode", "x"),
        ("version", "0"),
    ])
    def test_header_rules(self, field: str, value: Any) -> None:
        header = {"version": 0, "id": "s", "createdAt": 0, field: value}
        with pytest.raises(AdmissionError, match=f"header field {field}") as info:
            Session("s", header=header)
        assert info.value.code == "header-invalid"

    @pytest.mark.parametrize(("version", "words"), [(1, "newer"), (-1, "no upgrade path")])
    def test_other_versions_are_unsupported(self, version: int, words: str) -> None:
        with pytest.raises(UnsupportedFormatError, match=words) as info:
            Session("s", header={"version": version, "id": "s", "createdAt": 0})
        assert info.value.code == "format-unsupported"


class TestSubscribers:
    def test_subscribers_see_each_committed_event(self) -> None:
        s = Session("s")
        seen: list[int] = []
        unsubscribe = s.subscribe(lambda e: seen.append(e["seq"]))
        s.append("turn/start", {"turn": 1})
        with pytest.raises(AdmissionError):
            s.append("turn/end", {}, surface_op="append")
        unsubscribe()
        s.append("turn/end", {"turn": 1})
        assert seen == [0]

    def test_a_failing_subscriber_never_uncommits(self, caplog: pytest.LogCaptureFixture) -> None:
        s = Session("s")

        def boom(event: Any) -> None:
            raise RuntimeError("observer broke")

        s.subscribe(boom)
        with caplog.at_level(logging.ERROR, logger="surface_lab"):
            s.append("turn/start", {"turn": 1})
        assert len(s.events) == 1
        assert "subscriber" in caplog.text

    def test_a_subscriber_may_not_append(self) -> None:
        s = Session("s")
        errors: list[Exception] = []

        def reentrant(event: Any) -> None:
            try:
                s.append("turn/end", {})
            except SurfaceLabError as err:
                errors.append(err)

        s.subscribe(reentrant)
        s.append("turn/start", {"turn": 1})
        assert len(errors) == 1
        assert len(s.events) == 1


class TestSurfaceView:
    def test_the_surface_is_one_object_for_life(self) -> None:
        s = Session("s")
        surface = s.surface
        s.append("user/message", user_msg(), surface_op="append")
        assert s.surface is surface

    def test_nodes_are_read_only_snapshots(self) -> None:
        s = _chat()
        nodes = s.surface.nodes
        assert nodes == [1, 2, 4]
        assert s.surface.nodes is nodes  # nothing new: the same snapshot
        with pytest.raises(TypeError):
            nodes[0] = 9  # type: ignore[index]
        s.append("user/message", user_msg("u2"), surface_op="append")
        s.append("user/message", user_msg("r"), surface_op={"op": "replace", "start": 1,
                 "end": 5}, source_event_seqs=[1, 2, 4, 5])
        assert nodes == [1, 2, 4]
        assert list(s.surface.nodes) == [6]
        assert nodes[-1] == 4 and nodes[1:] == [2, 4]


class TestDeriveMessages:
    def test_projection(self) -> None:
        s = _chat()
        s.append("assistant/message", assistant_data("empty", text=""), surface_op="append")
        messages = s.derive_messages()
        assert [m["id"] for m in messages] == ["u1", "a1", "t1"]
        assert messages.mode == "surface"
        assert messages[0] is s.events[1]["data"]

    def test_cache_extends_on_append_and_rebuilds_on_replace(self) -> None:
        s = _chat()
        first = s.derive_messages()
        assert s.derive_messages() is first
        s.append("context/message", user_msg("ctx"), surface_op="append")
        assert [m["id"] for m in s.derive_messages()] == ["u1", "a1", "t1", "ctx"]
        s.append("user/message", user_msg("sum"), surface_op={"op": "replace", "start": 1,
                 "end": 4}, source_event_seqs=[1, 2, 4])
        assert [m["id"] for m in s.derive_messages()] == ["sum", "ctx"]

    def test_messages_are_read_only(self) -> None:
        with pytest.raises(TypeError):
            _chat().derive_messages()[0]["id"] = "x"
