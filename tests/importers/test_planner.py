"""The splice planner: any target surface becomes valid events whose derived messages are
exactly the target, and the common shapes cost one replace and no copy."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from surface_lab import Session, fold_surface
from surface_lab.importers.common import Builder
from surface_lab.importers.planner import Keep, New, Replace, longest_increasing, plan
from surface_lab.messages import project_message


def _builder(kinds: list[str]) -> Builder:
    b = Builder("test", "mem")
    b.start({"version": 0, "id": "p", "createdAt": 0})
    for i, kind in enumerate(kinds):
        if kind == "user":
            b.user(f"u{i}", f"user {i}", {"line": i})
        elif kind == "context":
            b.context(f"c{i}", f"context {i}", "meta", {"line": i})
        else:
            call = f"call{i}"
            b.assistant(f"a{i}", [{"type": "text", "text": f"a {i}"},
                                  {"type": "tool-call", "id": call, "name": "t",
                                   "arguments": "{}"}],
                        provider="p", model="m", step_key=i, origin={"line": i})
            b.tool_result(f"t{i}", call, f"result {i}", False, {"line": i})
    return b


def _new(kind: str, i: int, b: Builder) -> New:
    if kind == "tool":
        return New("tool/result", b.tool_result_data(f"n{i}", f"x{i}", "new result", False))
    return New("user/message", {"id": f"n{i}", "role": "user", "source": {"kind": "user"},
                                "content": [{"type": "text", "text": f"new {i}"}]})


def _projection(b: Builder, target: list[Any]) -> list[Any]:
    out = []
    for item in target:
        event = b.event(item.seq) if isinstance(item, Keep) else {"type": item.type,
                                                                 "data": item.data}
        message = project_message(event)
        if message is not None:
            out.append(message)
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.booleans())
def test_any_target_derives_exactly(data: Any, tombstones: bool) -> None:
    kinds = data.draw(st.lists(st.sampled_from(["user", "context", "tool"]), max_size=8))
    b = _builder(kinds)
    b.tombstones = tombstones
    surface = b.surface()
    target: list[Any] = []
    for i in range(data.draw(st.integers(0, 8))):
        if surface and data.draw(st.booleans()):
            target.append(Keep(data.draw(st.sampled_from(surface))))
        else:
            target.append(_new(data.draw(st.sampled_from(["user", "tool"])), i, b))
    keeps = [t.seq for t in target if isinstance(t, Keep)]
    if len(keeps) != len(set(keeps)):
        return  # a target shows each kept event once
    b.compaction("cmp", target, summary=[], imported={})
    session = Session("check", seed=b.session.events)  # valid all the way
    assert [m for m in session.derive_messages()] == _projection(b, target)
    fold = fold_surface(b.session.events)
    assert fold.nodes == list(b.session.surface.nodes)
    [row] = b.compactions
    trace = next(e for e in b.session.events if e["type"] == "compaction/summary")
    assert trace["data"]["shadowedSeqs"] == row["shadowed_seqs"]
    assert set(trace["data"]["restoredSeqs"]) <= set(row["shadowed_seqs"])


def test_prefix_and_suffix_kept_is_one_replace_without_copies() -> None:
    b = _builder(["user", "tool", "user", "tool", "user"])
    o = b.surface()
    summary = _new("user", 0, b)
    for target in ([summary, *map(Keep, o[3:])], [*map(Keep, o[:2]), summary],
                   [*map(Keep, o[:2]), summary, *map(Keep, o[5:])]):
        ops = plan(o, target, b.copy)
        assert len(ops) == 1 and isinstance(ops[0], Replace)
        assert ops[0].item.copy_of is None


def test_an_insertion_at_the_head_widens_with_copies() -> None:
    b = _builder(["user", "tool"])
    o = b.surface()
    ops = plan(o, [_new("user", 0, b), *map(Keep, o)], b.copy)
    assert isinstance(ops[0], Replace) and (ops[0].start, ops[0].end) == (o[0], o[-1])
    assert [op.item.copy_of for op in ops[1:]] == o


def test_longest_increasing() -> None:
    assert longest_increasing([3, 1, 2, 5, 4]) in ([1, 2, 3], [1, 2, 4])
    assert longest_increasing([]) == []
