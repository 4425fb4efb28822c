"""Property tests: on random valid and invalid logs, the incremental surface always equals
fold_surface, and a log gives one surface whether appended, seeded or folded."""

from __future__ import annotations

from typing import Any

from builders import assistant_data, tool_data, user_msg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from surface_lab import AdmissionError, Session, fold_surface

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _candidate(draw: Any, events: list[dict[str, Any]], nodes: list[int]) -> dict[str, Any]:
    """A random next event for a log whose surface is `nodes`; often valid, sometimes not."""
    seq = len(events)
    earlier = st.integers(0, max(seq - 1, 0))
    action = draw(st.sampled_from(
        ["user", "context", "assistant", "tool", "log", "replace", "replace", "rewrite", "bad"]))
    event: dict[str, Any] = {"seq": seq, "time": draw(st.integers(-5, 5))}
    if action in ("user", "context"):
        event.update(type=f"{action}/message", data=user_msg(f"m{seq}"), surfaceOp="append")
    elif action == "assistant":
        event.update(type="assistant/message", data=assistant_data(f"a{seq}", calls=("c",)),
                     surfaceOp="append", sourceEventSeqs=[])
    elif action == "tool":
        event.update(type="tool/result", data=tool_data("c", mid=f"t{seq}"), surfaceOp="append")
        if seq:
            event["sourceEventSeqs"] = [draw(earlier)]
    elif action == "log" or not nodes:
        event.update(type=draw(st.sampled_from(["step/start", "assistant/chunk", "x/y"])),
                     data={"n": seq})
    elif action == "replace":
        i = draw(st.integers(0, len(nodes) - 1))
        j = draw(st.integers(i, len(nodes) - 1))
        shadowed = nodes[i : j + 1]
        extra = draw(st.lists(earlier, max_size=2))
        sources = list(dict.fromkeys([*shadowed, *extra]))
        event.update(type=draw(st.sampled_from(["user/message", "context/message"])),
                     data=user_msg(f"s{seq}"), sourceEventSeqs=sources,
                     surfaceOp={"op": "replace", "start": nodes[i], "end": nodes[j]})
    elif action == "rewrite":
        target = draw(st.sampled_from(nodes))
        original = events[target]
        data = original["data"]
        if original["type"] == "tool/result":
            message = dict(data["message"])
            message["content"] = [{**message["content"][0],
                                   "content": [{"type": "text", "text": f"pruned {seq}"}]}]
            data = {**data, "message": message}
        event.update(type="tool/result", data=data, sourceEventSeqs=[target],
                     surfaceOp={"op": "replace", "start": target, "end": target})
    else:  # a deliberately doubtful event
        start, end = draw(earlier), draw(earlier)
        event.update(type="user/message", data=user_msg(f"b{seq}"),
                     surfaceOp=draw(st.sampled_from(
                         ["append", {"op": "replace", "start": start, "end": end}, "bad"])),
                     sourceEventSeqs=draw(st.lists(st.integers(-1, seq + 1), max_size=3)))
        if draw(st.booleans()):
            event["seq"] = draw(st.integers(0, seq + 1))
    return event


@st.composite
def logs(draw: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(valid log, candidates tried including rejected ones)."""
    events: list[dict[str, Any]] = []
    tried: list[dict[str, Any]] = []
    nodes: list[int] = []
    for _ in range(draw(st.integers(0, 40))):
        candidate = _candidate(draw, events, nodes)
        tried.append(candidate)
        try:
            nodes = fold_surface([*events, candidate]).nodes
        except AdmissionError:
            continue
        events.append(candidate)
    return events, tried


def _append(session: Session, event: dict[str, Any]) -> None:
    session._clock = lambda: event["time"]
    session.append(event["type"], event["data"], surface_op=event.get("surfaceOp"),
                   source_event_seqs=event.get("sourceEventSeqs"))


@SETTINGS
@given(logs())
def test_incremental_view_always_equals_the_fold(case: Any) -> None:
    _, tried = case
    session = Session("p")
    for candidate in tried:
        before = (len(session.events), list(session.surface.nodes),
                  session.surface.replace_generation)
        try:  # the oracle: a full replay (seeding checks every rule, like append)
            Session("oracle", seed=[*session.events, candidate])
            expected: Any = fold_surface([*session.events, candidate])
        except AdmissionError as err:
            expected = err.code
        try:
            if candidate["seq"] != len(session.events):
                raise AdmissionError("seq", code="seq-not-contiguous")
            _append(session, candidate)
        except AdmissionError as err:
            assert expected == err.code
            after = (len(session.events), list(session.surface.nodes),
                     session.surface.replace_generation)
            assert after == before
            continue
        assert list(session.surface.nodes) == expected.nodes
        assert session.surface.replace_generation == expected.replace_generation


@SETTINGS
@given(logs())
def test_appended_seeded_and_folded_agree(case: Any) -> None:
    events, _ = case
    folded = fold_surface(events)
    appended = Session("p")
    for event in events:
        _append(appended, event)
    seeded = Session("p", seed=events)
    assert [dict(e) for e in appended.events] == [
        {k: e[k] for k in ("type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp")
         if k in e} for e in events]
    assert list(appended.surface.nodes) == folded.nodes
    assert list(seeded.surface.nodes) == folded.nodes
    assert seeded.surface.replace_generation == len(folded.replacements)
    assert list(seeded.surface.replacements) == folded.replacements
    assert fold_surface(list(seeded.events)).nodes == folded.nodes
    shadowed = [s for r in folded.replacements for s in r.shadowed_seqs]
    assert len(shadowed) == len(set(shadowed))  # an entry is shadowed at most once


@SETTINGS
@given(logs(), st.integers(0, 40))
def test_a_window_folds_like_the_tail_of_the_log(case: Any, cut: int) -> None:
    events, _ = case
    cut = min(cut, len(events))
    window = events[cut:]
    try:
        result = fold_surface(window, base=cut)
    except AdmissionError as err:
        assert err.code in {"replace-start-missing", "replace-end-missing",
                            "replace-range-reversed", "replace-sources-incomplete"}
        return
    whole = fold_surface(events)
    # entries the window appended and nobody before it shadowed agree with the whole fold
    assert [n for n in whole.nodes if n >= cut] == [n for n in result.nodes]
