"""Behavioural evidence of loss (surface_lab.evidence): repeated calls, the same target and
questions asked again after a replace hid what answered them; nothing while it is visible."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from surface_lab import Session, find_lost_evidence, read_log
from surface_lab.agent.compaction import write_compaction, write_tool_result_rewrite
from surface_lab.agent.samples import generate_large
from surface_lab.evidence import _Walk, plan_log
from surface_lab.importers import import_any
from surface_lab.messages import message_text
from surface_lab.surface import apply_plan

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_logs"
SHARED = Path(os.environ.get("SURFACE_LAB_SHARED", ROOT.parent / "shared"))


class _Fixed:
    provider, model = "test", "fixed"

    def __init__(self, text: str = "- earlier work") -> None:
        self.text = text

    def summarize(self, shadowed: Any) -> list[dict[str, Any]]:
        return [{"type": "text", "text": self.text}]


class _Chat:
    """A session written message by message, as a loop would."""

    def __init__(self) -> None:
        self.s = Session("e", clock=lambda: 0)
        self.calls = 0

    def user(self, text: str) -> int:
        n = self.s.seq
        self.s.append("user/message", {"id": f"u{n}", "role": "user",
                                        "source": {"kind": "user"},
                                        "content": [{"type": "text", "text": text}]},
                      surface_op="append")
        return n

    def say(self, text: str) -> int:
        return self._assistant([{"type": "text", "text": text}])

    def _assistant(self, content: list[dict[str, Any]]) -> int:
        n = self.s.seq
        self.s.append("assistant/message", {"turn": 1, "step": 1, "message": {
            "id": f"a{n}", "role": "assistant", "content": content,
            "source": {"kind": "model", "provider": "p", "model": "m"}}},
            surface_op="append", source_event_seqs=[])
        return n

    def call(self, name: str, arguments: dict[str, Any], result: str) -> tuple[int, int]:
        self.calls += 1
        cid = f"call_{self.calls}"
        asked = self._assistant([{"type": "tool-call", "id": cid, "name": name,
                                  "arguments": json.dumps(arguments)}])
        logged = self.s.append("tool/call", {"turn": 1, "step": 1, "callId": cid,
                                             "name": name, "arguments": json.dumps(arguments)})
        n = self.s.seq
        self.s.append("tool/result", {"turn": 1, "step": 1, "message": {
            "id": f"t{n}", "role": "user", "source": {"kind": "tool", "callId": cid},
            "content": [{"type": "tool-result", "toolCallId": cid,
                         "content": [{"type": "text", "text": result}]}]}},
            surface_op="append", source_event_seqs=[logged["seq"]])
        return asked, n

    def compact(self, first: int, last: int, summary: str = "- earlier work") -> int:
        nodes = list(self.s.surface.nodes)
        run = nodes[nodes.index(first) : nodes.index(last) + 1]
        write_compaction(self.s, run, _Fixed(summary), compaction_id=f"c{self.s.seq}",
                         turn=1, shadowed_tokens=10_000)
        return self.s.seq - 2  # the replacement, before compaction/end


class TestKinds:
    def test_a_call_repeated_after_its_result_was_compacted(self) -> None:
        chat = _Chat()
        first = chat.user("read the config")
        _, result = chat.call("read", {"path": "conf.toml"}, "port = 8080\nhost = db1")
        replace = chat.compact(first, result)
        again, _ = chat.call("read", {"path": "conf.toml"}, "port = 8080\nhost = db1")
        [found] = find_lost_evidence(list(chat.s.events))
        assert (found.seq, found.kind, found.replace_seq, found.hidden_seq, found.tool) == (
            again, "repeated-call", replace, result, "read")
        assert found.events_after == again - replace

    def test_the_same_file_read_another_way(self) -> None:
        chat = _Chat()
        first = chat.user("look at conf.toml")
        _, result = chat.call("read", {"path": "conf.toml"}, "port = 8080\nhost = db1")
        chat.compact(first, result)
        chat.call("read", {"path": "conf.toml", "offset": 2}, "host = db1")
        [found] = find_lost_evidence(list(chat.s.events))
        assert (found.kind, found.detail) == ("same-target", "conf.toml")

    def test_asking_the_user_again_about_what_only_they_said(self) -> None:
        chat = _Chat()
        said = chat.user("The settings live in deploy/prod.yaml, never edit staging.")
        reply = chat.say("Noted.")
        chat.compact(said, reply)
        asked = chat.say("Which file holds the settings? Is it deploy/prod.yaml?")
        [found] = find_lost_evidence(list(chat.s.events))
        assert (found.seq, found.kind, found.hidden_seq, found.detail) == (
            asked, "re-asked", said, "deploy/prod.yaml")

    def test_a_call_after_a_prune_counts_against_the_prune(self) -> None:
        chat = _Chat()
        chat.user("show the log")
        _, result = chat.call("read", {"path": "build.log"}, "x" * 500)
        write_tool_result_rewrite(chat.s, result, "x" * 20 + " [pruned]",
                                  shadowed_tokens=130)
        chat.call("read", {"path": "build.log"}, "x" * 500)
        [found] = find_lost_evidence(list(chat.s.events))
        assert (found.replace_seq, found.hidden_seq) == (result + 2, result)


class TestNotEvidence:
    def test_repeating_a_call_whose_result_is_still_visible(self) -> None:
        chat = _Chat()
        chat.user("read it twice")
        chat.call("read", {"path": "a.txt"}, "alpha")
        chat.call("read", {"path": "a.txt"}, "alpha")
        assert find_lost_evidence(list(chat.s.events)) == []

    def test_a_summary_that_quotes_the_result_keeps_it(self) -> None:
        chat = _Chat()
        first = chat.user("count the lines")
        _, result = chat.call("run", {"command": "wc -l a.txt"}, "1 a.txt")
        chat.compact(first, result, summary="- tool result: 1 a.txt")
        chat.call("run", {"command": "wc -l a.txt"}, "1 a.txt")
        assert find_lost_evidence(list(chat.s.events)) == []

    def test_a_question_about_something_still_on_the_surface(self) -> None:
        chat = _Chat()
        chat.user("The settings live in deploy/prod.yaml.")
        chat.say("Is it deploy/prod.yaml?")
        assert find_lost_evidence(list(chat.s.events)) == []


class TestLogs:
    def test_the_long_sample_re_reads_what_each_compaction_hid(self) -> None:
        found = find_lost_evidence(list(read_log(SAMPLES / "long-compaction.jsonl").events))
        assert Counter(f.replace_seq for f in found) == {250: 3, 377: 1, 506: 3, 632: 1,
                                                        702: 1, 736: 1}
        assert {(f.kind, f.tool) for f in found} == {("repeated-call", "read")}

    @pytest.mark.parametrize("path", sorted((SHARED / "real_logs").glob("*/*.json*")),
                             ids=lambda p: p.name[-60:])
    def test_every_row_points_at_content_hidden_when_the_agent_acted(self, path: Path
                                                                       ) -> None:
        events = list(import_any(path).events) if "other" in path.parts else list(
            read_log(path).events)
        found = find_lost_evidence(events)
        nodes: list[int] = []
        before: dict[int, set[int]] = {}
        for plan in plan_log(events):
            before[plan.seq] = set(nodes)
            nodes = apply_plan(nodes, plan)
        for row in found:
            assert row.replace_seq < row.seq and row.hidden_seq not in before[row.seq]


def _definition_visible(self: Any, nodes: list[int]) -> str:
    """The surface's texts joined anew at every check, from frozen events."""
    return "\n".join(message_text(self.events[n]) for n in nodes)


@pytest.mark.parametrize("name", ["long-compaction.jsonl", "pruned-tool-results.jsonl",
                                  "generated"])
def test_the_packed_incremental_walk_finds_what_the_definition_finds(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading a packed log's events unfrozen and joining only the texts a grown surface
    added find exactly the evidence of frozen events and a surface joined at each check."""
    path = SAMPLES / name if name != "generated" else \
        generate_large(tmp_path / "g.jsonl", 20000)[0]
    log = read_log(path)
    incremental, checks = _Walk.visible, []

    def checked(self: Any, nodes: list[int]) -> str:
        checks.append(incremental(self, nodes) == _definition_visible(self, nodes))
        return str(incremental(self, nodes))

    monkeypatch.setattr(_Walk, "visible", checked)
    fast = find_lost_evidence(log.events)
    assert all(checks) and (name != "generated" or len(checks) > 20)
    monkeypatch.setattr(_Walk, "visible", _definition_visible)
    slow = find_lost_evidence([log.events[s] for s in range(len(log.events))])
    assert fast == slow
    assert name != "generated" or len(fast) > 10
