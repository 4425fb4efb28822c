"""SPEC 4: the admission rules (one test per code), their order, fold_surface and windows."""

from __future__ import annotations

from typing import Any

import pytest
from builders import assistant_data, ev, replace, tool_data, user, user_msg

from surface_lab import AdmissionError, Session, SurfaceLabError, fold_surface
from surface_lab.jsonvalue import json_equal

# A base log: user 0, assistant 1 (one call), tool/call 2, tool/result 3.
BASE: list[dict[str, Any]] = [
    user(0),
    ev(1, "assistant/message", assistant_data(calls=("c1",)), op="append"),
    ev(2, "tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "read", "arguments": "{}"}),
    ev(3, "tool/result", tool_data("c1"), op="append", sources=[2]),
]


def _tool_rewrite(**changes: Any) -> dict[str, Any]:
    data = tool_data("c1", "pruned")
    data["message"].update(changes.pop("message", {}))
    data.update(changes)
    return ev(4, "tool/result", data, op=(3, 3), sources=[3])


# code -> a candidate for seq 4 on top of BASE
CASES: dict[str, dict[str, Any]] = {
    "seq-not-contiguous": user(5),
    "surface-op-forbidden": ev(4, "step/start", op="append"),
    "sources-forbidden": ev(4, "step/start", sources=[1]),
    "surface-op-missing": user(4, op=None),
    "surface-op-invalid": user(4, op="prepend"),
    "replace-op-invalid": ev(4, "user/message", user_msg(), op={"op": "replace", "start": 0}),
    "replace-start-missing": replace(4, 2, 3, [2, 3]),
    "replace-end-missing": replace(4, 0, 9, [0]),
    "replace-range-reversed": replace(4, 3, 0, [0, 1, 3]),
    "sources-not-array": user(4, sources={"0": 1}),
    "sources-empty": user(4, sources=[]),
    "sources-invalid-seq": user(4, sources=[0, -1]),
    "sources-duplicate": user(4, sources=[0, 0]),
    "sources-not-earlier": user(4, sources=[0, 4]),
    "replace-sources-incomplete": replace(4, 0, 1, [0]),
    "tool-result-rewrite-count": ev(4, "tool/result", tool_data("c1"), op=(1, 3),
                                    sources=[1, 3]),
    "tool-result-rewrite-target": ev(4, "tool/result", tool_data("c1"), op=(0, 0), sources=[0]),
    "tool-result-rewrite-fields": _tool_rewrite(step=2),
    "envelope-invalid": {**user(4), "extra": 1},
    "data-not-json": ev(4, "note/x", {"v": float("nan")}),
    "message-unidentified": ev(4, "user/message", {**user_msg(), "id": ""}, op="append"),
    "message-role": ev(4, "user/message", {**user_msg(), "role": "assistant"}, op="append"),
    "message-source": ev(4, "user/message", {**user_msg(), "source": {}}, op="append"),
    "message-content": ev(4, "user/message", {**user_msg(), "content": "text"}, op="append"),
    "tool-result-shape": ev(4, "tool/result", {**tool_data("c1"), "message": {
        **tool_data("c1")["message"], "content": []}}, op="append"),
    "tool-call-id-mismatch": ev(4, "tool/result", {**tool_data("c1"), "message": {
        **tool_data("c1")["message"], "source": {"kind": "tool", "callId": "c2"}}},
        op="append"),
    "legacy-unsupported": ev(4, "mode/set", {}),
}


class TestEveryCode:
    @pytest.mark.parametrize("code", sorted(CASES))
    def test_seed_refuses_with_the_code(self, code: str) -> None:
        with pytest.raises(AdmissionError) as info:
            Session("s", seed=[*BASE, CASES[code]])
        assert info.value.code == code
        assert str(info.value).startswith("invalid seed event at index 4: ")

    @pytest.mark.parametrize("code", sorted(CASES))
    def test_check_refuses_with_the_code_and_changes_nothing(self, code: str) -> None:
        session = Session("s", seed=BASE)
        before = (list(session.surface.nodes), session.surface.replace_generation)
        candidate = {**CASES[code], "seq": session.seq}
        if code == "seq-not-contiguous":
            candidate["seq"] = session.seq + 1
        if code == "sources-not-earlier":
            candidate["sourceEventSeqs"] = [0, session.seq]
        with pytest.raises(AdmissionError) as info:
            session.surface.check(candidate)
        assert info.value.code == code
        assert (list(session.surface.nodes), session.surface.replace_generation) == before
        assert len(session.events) == 5

    def test_the_error_names_seq_type_and_values(self) -> None:
        with pytest.raises(AdmissionError, match=r"seq 4 user/message: replace end 9 is not "
                           r"on the surface \(3 entries\)") as info:
            Session("s", seed=[*BASE, CASES["replace-end-missing"]])
        assert (info.value.seq, info.value.event_type) == (4, "user/message")

    def test_admission_error_is_a_value_error_and_a_package_error(self) -> None:
        assert issubclass(AdmissionError, ValueError)
        assert issubclass(AdmissionError, SurfaceLabError)

    def test_every_spec_code_of_the_admission_path_is_covered(self) -> None:
        spec_codes = {
            "seq-not-contiguous", "surface-op-forbidden", "sources-forbidden",
            "surface-op-missing", "surface-op-invalid", "replace-op-invalid",
            "replace-start-missing", "replace-end-missing", "replace-range-reversed",
            "sources-not-array", "sources-empty", "sources-invalid-seq", "sources-duplicate",
            "sources-not-earlier", "replace-sources-incomplete", "tool-result-rewrite-count",
            "tool-result-rewrite-target", "tool-result-rewrite-fields", "envelope-invalid",
            "data-not-json", "message-unidentified", "message-role", "message-source",
            "message-content", "tool-result-shape", "tool-call-id-mismatch",
        }
        assert spec_codes <= set(CASES)


class TestOrder:
    """SPEC 4.1: the first failing check wins."""

    def _code(self, candidate: dict[str, Any]) -> str | None:
        try:
            fold_surface([*BASE, candidate])
        except AdmissionError as err:
            return err.code
        return None

    def test_seq_before_everything(self) -> None:
        assert self._code({**CASES["replace-range-reversed"], "seq": 7}) == "seq-not-contiguous"

    def test_forbidden_op_before_forbidden_sources(self) -> None:
        assert self._code(ev(4, "step/end", op="append", sources=[0])) == "surface-op-forbidden"

    def test_endpoints_before_provenance(self) -> None:
        assert self._code(replace(4, 9, 0, [0, 0])) == "replace-start-missing"

    def test_invalid_seq_walk_before_duplicates_and_later_seqs(self) -> None:
        assert self._code(user(4, sources=[0, 0, 9, "x"])) == "sources-invalid-seq"
        assert self._code(user(4, sources=[9, 0, 0])) == "sources-duplicate"

    def test_provenance_before_completeness(self) -> None:
        assert self._code(replace(4, 0, 1, [0, 7])) == "sources-not-earlier"

    def test_null_markers_are_present(self) -> None:
        assert self._code({**user(4), "surfaceOp": None}) == "surface-op-invalid"
        assert self._code({**ev(4, "step/end"), "surfaceOp": None}) == "surface-op-forbidden"
        assert self._code({**ev(4, "step/end"), "sourceEventSeqs": None}) == "sources-forbidden"

    @pytest.mark.parametrize("bad", [None, True, "1", 1.5, -1])
    def test_what_is_not_a_seq(self, bad: Any) -> None:
        assert self._code(user(4, sources=[bad])) == "sources-invalid-seq"

    @pytest.mark.parametrize("op", [
        {"op": "replace", "start": 0, "end": 0, "x": 1},
        {"op": "splice", "start": 0, "end": 0},
        {"op": "replace", "start": True, "end": 0},
        {"op": "replace", "start": -1, "end": 0},
        {"op": "replace", "start": 0.5, "end": 0},
    ])
    def test_malformed_replace_objects(self, op: dict[str, Any]) -> None:
        assert self._code(ev(4, "user/message", user_msg(), op=op, sources=[0])) \
            == "replace-op-invalid"


class TestFold:
    def test_append_and_replace(self) -> None:
        result = fold_surface([*BASE, replace(4, 0, 1, [0, 1])])
        assert result.nodes == [4, 3]
        [r] = result.replacements
        assert (r.seq, r.start, r.end, r.shadowed_seqs) == (4, 0, 1, [0, 1])
        assert result.replace_generation == 1

    def test_single_entry_replace(self) -> None:
        assert fold_surface([*BASE, replace(4, 1, 1, [1])]).nodes == [0, 4, 3]

    def test_a_replacement_can_itself_be_shadowed(self) -> None:
        log = [*BASE, replace(4, 0, 1, [0, 1]), replace(5, 4, 3, [4, 3])]
        result = fold_surface(log)
        assert result.nodes == [5]
        assert [r.shadowed_seqs for r in result.replacements] == [[0, 1], [4, 3]]

    def test_start_may_be_numerically_greater_than_end(self) -> None:
        log = [user(0), user(1), replace(2, 1, 1, [1]), replace(3, 0, 0, [0])]
        assert fold_surface(log).nodes == [3, 2]
        assert fold_surface([*log, replace(4, 3, 2, [2, 3])]).nodes == [4]

    def test_integral_floats_are_integers(self) -> None:
        log = [user(0), {**replace(1, 0, 0, [0.0]), "seq": 1.0,
                          "surfaceOp": {"op": "replace", "start": 0.0, "end": -0.0}}]
        assert fold_surface(log).nodes == [1]

    def test_extra_sources_are_fine(self) -> None:
        assert fold_surface([*BASE, replace(4, 3, 3, [0, 1, 2, 3])]).nodes == [0, 1, 4]

    def test_empty_sources_on_an_assistant_message_mean_an_empty_stream(self) -> None:
        log = [ev(0, "assistant/message", assistant_data(), op="append", sources=[])]
        assert fold_surface(log).nodes == [0]

    def test_content_only_tool_result_rewrite(self) -> None:
        log = [*BASE, _tool_rewrite()]
        assert fold_surface(log).nodes == [0, 1, 4]

    @pytest.mark.parametrize("change", [
        {"message": {"id": "other"}}, {"error": {"name": "E", "code": "X"}},
        {"meta": {}}, {"turn": True},
    ])
    def test_a_rewrite_may_change_only_content(self, change: dict[str, Any]) -> None:
        with pytest.raises(AdmissionError) as info:
            fold_surface([*BASE, _tool_rewrite(**change)])
        assert info.value.code == "tool-result-rewrite-fields"

    def test_rewrite_equality_is_json_equality(self) -> None:
        original = ev(3, "tool/result", {**tool_data("c1"), "meta": {"n": 1, "k": [1, 2]}},
                      op="append")
        rewrite = ev(4, "tool/result", {**tool_data("c1", "x"), "meta": {"k": [1.0, 2], "n": 1.0}},
                     op=(3, 3), sources=[3])
        assert fold_surface([*BASE[:3], original, rewrite]).nodes == [0, 1, 4]

    @pytest.mark.parametrize("a,b,equal", [
        ({"k": [1, 2], "n": 1}, {"n": 1, "k": [1, 2]}, True),  # key order
        ({"n": 1}, {"n": 1.0}, True),
        ({"n": True}, {"n": 1}, False),
        ({"n": None}, {}, False),
        ({"n": None}, {"n": None}, True),
        ([float("nan")], [None], False),  # not JSON, though both encode as null
        ([float("nan")], [float("nan")], False),
        ({"t": "null"}, {"t": "null"}, True),
    ])
    def test_json_equality(self, a: Any, b: Any, equal: bool) -> None:
        assert json_equal(a, b) is equal and json_equal(b, a) is equal

    def test_the_fold_checks_only_the_surface(self) -> None:
        odd = {"type": "user/message", "seq": 0, "data": None, "surfaceOp": "append"}
        assert fold_surface([odd]).nodes == [0]


class TestWindow:
    def test_a_window_folds_from_base(self) -> None:
        window = [user(10), user(11, sources=[3]), replace(12, 10, 11, [10, 11])]
        result = fold_surface(window, base=10)
        assert result.nodes == [12]
        assert result.replacements[0].shadowed_seqs == [10, 11]

    def test_a_window_cannot_replace_what_lies_before_it(self) -> None:
        with pytest.raises(AdmissionError) as info:
            fold_surface([user(10), replace(11, 2, 10, [2, 10])], base=10)
        assert info.value.code == "replace-start-missing"

    def test_seqs_must_follow_base(self) -> None:
        with pytest.raises(AdmissionError) as info:
            fold_surface([user(0)], base=10)
        assert info.value.code == "seq-not-contiguous"
