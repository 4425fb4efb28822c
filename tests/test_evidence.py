"""Behavioural evidence of loss (surface_lab.analysis.evidence): repeated calls, the same target and
questions asked again after a replace hid what answered them; nothing while it is visible."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
import pytest
from builders import user, user_msg
from hypothesis import given, settings
from hypothesis import strategies as st
from shared_logs import SHARED

from surface_lab import Session, find_lost_evidence, read_log
from surface_lab.agent.samples import generate_large
from surface_lab.analysis.compaction import write_compaction, write_tool_result_rewrite
from surface_lab.analysis.evidence import (
    _LINE,
    _PATH,
    LostEvidence,
    _entry,
    _questions,
    _shown,
    _Walk,
    plan_log,
    read_entries,
)
from surface_lab.analysis.facts import author_of, find_mentions
from surface_lab.analysis.source import load_source
from surface_lab.events import freeze_event, mapping_at, message_of
from surface_lab.importers import import_any
from surface_lab.messages import Block, blocks_text, message_text
from surface_lab.reading.sequences import LogEvents
from surface_lab.surface import APPEND, LOG_ONLY, REPLACE, Plan, PlanList, apply_plan

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_logs"


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


# The definition, walked straightforwardly (a deliberate copy of the rules, so that the
# module's fast path is held to them): every event frozen and planned again, arguments
# parsed at every call, the surface's texts joined anew at every check, the mentions of
# every question found anew.


def _def_canonical(arguments: Any) -> str:
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(arguments)


def _def_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, Mapping) else value if isinstance(
        value, list) else []
    return [s for item in items for s in _def_strings(item)]


def _def_targets(arguments: Any) -> set[str]:
    try:
        parsed = json.loads(arguments)
    except (TypeError, ValueError):
        parsed = arguments
    return {m.group(0) for s in _def_strings(parsed) for m in _PATH.finditer(s)}


def _def_blocks(event: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    message = message_of(event)
    content = message.get("content") if isinstance(message, Mapping) else None
    return [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def _def_hidden(events: Sequence[Mapping[str, Any]], nodes: list[int],
                hidden_by: dict[int, int], visible: str, s: int | None) -> bool:
    text = message_text(events[s]).strip() if s is not None else ""
    return s is not None and s not in nodes and s in hidden_by and bool(text) and \
        text not in visible


def _definition(events: Sequence[Mapping[str, Any]]) -> list[LostEvidence]:
    calls: dict[str, dict[str, Any]] = {}
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    by_target: dict[tuple[str, str], dict[str, Any]] = {}
    hidden_by: dict[int, int] = {}
    asked: list[int] = []
    found: list[LostEvidence] = []
    nodes: list[int] = []
    for plan in plan_log(events):
        seq, event = plan.seq, events[plan.seq]
        if plan.kind == LOG_ONLY:
            continue
        for s in plan.shadowed:
            hidden_by.setdefault(s, seq)
        visible = "\n".join(message_text(events[n]) for n in nodes)
        hidden = partial(_def_hidden, events, nodes, hidden_by, visible)

        data = event.get("data")
        turn = data.get("turn") if isinstance(data, Mapping) else None
        turn = turn if isinstance(turn, int) and not isinstance(turn, bool) else None
        rows: list[tuple[str, int, str | None, str | None, str]] = []
        for block in _def_blocks(event) if event["type"] == "assistant/message" else []:
            name, arguments = str(block.get("name")), block.get("arguments")
            if block.get("type") == "tool-call":
                same = latest.get((name, _def_canonical(arguments)))
                if same is not None:
                    if hidden(same["result"]):
                        rows.append(("repeated-call", same["result"], name, str(arguments),
                                     _def_canonical(arguments)))
                    continue
                for target in sorted(_def_targets(arguments)):
                    other = by_target.get((name, target))
                    if other is not None and hidden(other["result"]):
                        rows.append(("same-target", other["result"], name, str(arguments),
                                     target))
                        break
            elif block.get("type") == "text":
                for question in _questions(str(block.get("text", ""))):
                    mentions = [m.text for m in find_mentions(question, author="assistant")
                                if len(m.text) >= 4]
                    for s in reversed(asked if mentions else []):
                        said = [m for m in mentions
                                if m.lower() in message_text(events[s]).lower()]
                        if said:
                            if hidden(s):
                                rows.append(("re-asked", s, None, question, said[0]))
                            break
        found += [LostEvidence(seq, kind, hidden_by[s], s, turn, tool, arguments, detail,
                               seq - hidden_by[s])
                  for kind, s, tool, arguments, detail in rows]
        nodes = apply_plan(nodes, plan)
        if event["type"] == "assistant/message":
            for block in _def_blocks(event):
                if block.get("type") == "tool-call":
                    name, arguments = str(block.get("name")), block.get("arguments")
                    call = {"result": None}
                    calls[str(block.get("id"))] = latest[
                        (name, _def_canonical(arguments))] = call
                    by_target.update(((name, t), call) for t in _def_targets(arguments))
        elif event["type"] == "tool/result" and event.get("surfaceOp") == "append":
            source = mapping_at(message_of(event), "source")
            call_id = source.get("callId")
            if call_id is None:
                call_id = next((b.get("toolCallId") for b in _def_blocks(event)), None)
            if str(call_id) in calls:
                calls[str(call_id)]["result"] = seq
        elif event["type"] in ("user/message", "context/message") and author_of(
                event) in ("user", "context"):
            asked.append(seq)
    return found


def _frozen(events: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [events[s] for s in range(len(events))]


def _generated(tmp_path: Path, n: int = 20000) -> Path:
    return generate_large(tmp_path / "g.jsonl", n)[0]


class TestSameAsTheDefinition:
    """The walk reads each surface event once (a packed log's of its message alone),
    parses each distinct argument string and question once and skips log-only events
    unplanned: it finds exactly the rows, in the order, of the definition."""

    @pytest.mark.parametrize("name", ["long-compaction.jsonl", "pruned-tool-results.jsonl",
                                      "chat.jsonl", "tools-parallel.jsonl", "generated"])
    def test_a_packed_log_read_by_the_fast_reader(self, name: str, tmp_path: Path) -> None:
        log = read_log(SAMPLES / name if name != "generated" else _generated(tmp_path))
        fast = find_lost_evidence(log.events, log.plans)
        assert fast == find_lost_evidence(log.events) == _definition(_frozen(log.events))
        source = load_source(log)
        some = source.entries[: len(source.entries) // 2]  # texts known of the first half
        assert find_lost_evidence(log.events, log.plans, texts=source.texts(some)) == fast
        assert find_lost_evidence(log.events, log.plans, texts=source.texts(some),
                                  sources=source.sources(some)) == fast
        assert name not in ("generated", "long-compaction.jsonl") or len(fast) > 5

    def test_the_surface_texts_kept_are_the_surface_at_every_check(
            self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """The texts kept, grown by appends and made anew by replaces, and their joined
        length, are those of the surface folded anew before each acting message."""
        log = read_log(_generated(tmp_path))
        events = _frozen(log.events)
        nodes: list[int] = []
        before: dict[int, list[int]] = {}
        for plan in plan_log(events):
            before[plan.seq] = list(nodes)
            nodes = apply_plan(nodes, plan)
        check, checks = _Walk.check, []

        def checked(self: _Walk, entry: Any, seq: int, shadowing: tuple[int, ...]) -> None:
            texts = [message_text(events[n]) for n in before[seq]]
            checks.append(self.shown == texts and self.length == len("\n".join(texts)))
            check(self, entry, seq, shadowing)

        monkeypatch.setattr(_Walk, "check", checked)
        assert find_lost_evidence(log.events, log.plans)
        assert len(checks) > 100 and all(checks)

    @given(st.text("ab\n", min_size=1, max_size=8).map(str.strip).filter(bool),
           st.lists(st.text("ab\n", max_size=8), max_size=6))
    @settings(max_examples=200, deadline=None)
    def test_a_text_is_shown_exactly_when_the_joined_parts_hold_it(
            self, text: str, parts: list[str]) -> None:
        assert _shown(text, parts) == (text in "\n".join(parts))

    @pytest.mark.parametrize("path", sorted((SHARED / "real_logs").glob("*/*.json*")),
                             ids=lambda p: p.name[-60:])
    def test_shared_real_logs_and_imported_ones(self, path: Path) -> None:
        if "other" in path.parts:
            events: Sequence[Mapping[str, Any]] = list(import_any(path).events)
            assert find_lost_evidence(events) == _definition(events)
        else:
            log = read_log(path)
            assert find_lost_evidence(log.events, log.plans) == _definition(
                _frozen(log.events))

    def test_texts_given_are_taken_as_the_events_texts(self) -> None:
        """A hidden result whose known text is empty hides nothing: the walk reads the
        texts it is given instead of decoding them again."""
        log = read_log(SAMPLES / "long-compaction.jsonl")
        found = find_lost_evidence(log.events, log.plans)
        known = load_source(log).texts(load_source(log).entries)
        emptied = {**known, found[0].hidden_seq: ""}
        fewer = [f for f in found if f.hidden_seq != found[0].hidden_seq]
        assert find_lost_evidence(log.events, log.plans, texts=emptied) == fewer
        assert find_lost_evidence(log.events, log.plans, texts=emptied, sources=load_source(
            log).sources(load_source(log).entries)) == fewer

    def test_a_log_without_replaces_has_no_evidence(self) -> None:
        chat = _Chat()
        chat.user("read it twice")
        chat.call("read", {"path": "a.txt"}, "alpha")
        chat.call("read", {"path": "a.txt"}, "alpha")
        assert find_lost_evidence(list(chat.s.events)) == [] == _definition(
            list(chat.s.events))

    def test_a_replace_that_hides_nothing(self) -> None:
        events = [freeze_event(e) for e in (
            user(0, text="read conf.toml"),
            {"seq": 1, "time": 0, "type": "user/message", "data": user_msg("s", "sum"),
             "surfaceOp": {"op": "replace", "start": 0, "end": 0}})]
        plans = [Plan(0, APPEND), Plan(1, REPLACE, 0, 0, ())]
        assert find_lost_evidence(events, plans) == []
        assert find_lost_evidence(events, PlanList.of(plans)) == []

    def test_prunes_questions_and_a_repeat_inside_one_message(self) -> None:
        """Two identical calls in one message are compared with what came before it,
        not with each other; a question is matched against every earlier user message,
        and its answer memoised per question is the same at every asking."""
        chat = _Chat()
        said = chat.user("The settings live in deploy/prod.yaml.")
        _, result = chat.call("read", {"path": "deploy/prod.yaml"}, "port: 1\nhost: a")
        write_tool_result_rewrite(chat.s, result, "[pruned]", shadowed_tokens=10)
        chat.compact(said, result + 2)
        for _ in range(2):
            chat.say("Is it deploy/prod.yaml? Where was deploy/prod.yaml?")
            chat._assistant([{"type": "tool-call", "id": f"x{chat.s.seq}", "name": "read",
                              "arguments": json.dumps({"path": "deploy/prod.yaml"})}] * 2)
        events = list(chat.s.events)
        found = find_lost_evidence(events)
        assert found == _definition(events)
        assert Counter(f.kind for f in found) == {"re-asked": 4, "repeated-call": 2}

    def test_arguments_that_are_not_a_string(self) -> None:
        chat = _Chat()
        first = chat.user("read it")
        call = [{"type": "tool-call", "id": "k1", "name": "read",
                 "arguments": {"path": "conf.toml"}}]
        chat._assistant(call)
        result = chat.s.seq
        chat.s.append("tool/result", {"turn": 1, "step": 1, "message": {
            "id": "tk", "role": "user", "source": {"kind": "tool", "callId": "k1"},
            "content": [{"type": "tool-result", "toolCallId": "k1",
                         "content": [{"type": "text", "text": "port = 1"}]}]}},
            surface_op="append")
        chat.compact(first, result)
        chat._assistant([dict(call[0], id="k2")])
        events = list(chat.s.events)
        [found] = find_lost_evidence(events)
        assert found == _definition(events)[0] and found.kind == "repeated-call"


class TestTypedReading:
    """A packed log's lines decoded typed (bare where the text is known, not at all where
    the source is known too) give each event the entry the event itself gives; lines
    the types do not take are read whole."""

    @pytest.mark.parametrize("name", ["long-compaction.jsonl", "tools-parallel.jsonl",
                                      "pruned-tool-results.jsonl", "generated", "dsh"])
    def test_every_event_reads_alike(self, name: str, tmp_path: Path) -> None:
        paths = sorted((SHARED / "real_logs" / "dsh").glob("*.jsonl")) if name == "dsh" \
            else [SAMPLES / name if name != "generated" else _generated(tmp_path, 3000)]
        for path in paths:
            log = read_log(path)
            seqs = list(range(len(log.events)))
            plans, events = PlanList.of(log.plans), _frozen(log.events)
            assert [plans.kinds[s] == APPEND for s in seqs] == [
                e.get("surfaceOp") == "append" for e in events]  # what `appended` means
            entries = [_entry(e, plans.kinds[s] == APPEND) for s, e in enumerate(events)]
            assert list(read_entries(log.events, plans, seqs, {}, {})) == entries
            known = load_source(log).texts(seqs)  # a tool result's or user's line bare
            assert list(read_entries(log.events, plans, seqs, known, {})) == entries
            sources = load_source(log).sources(seqs)  # such lines not read at all
            assert list(read_entries(log.events, plans, seqs, known, sources)) == entries
            kept = load_source(log)  # assistant lines kept from the texts' decode
            kept.keep_message_lines()
            kept.texts(seqs)
            lines = kept.cache["message_lines"]
            assert set(lines) == ({s for s in seqs if events[s]["type"] == "assistant/message"}
                                  if isinstance(log.events, LogEvents) else set())
            assert list(read_entries(log.events, plans, seqs, known, sources,
                                     lines=lines)) == entries
            assert lines == {}  # each taken once

    def test_a_line_the_types_refuse_is_read_whole(self, tmp_path: Path) -> None:
        """A user message carrying an extra `message` field that is not an object."""
        path = tmp_path / "odd.jsonl"
        lines = (SAMPLES / "chat.jsonl").read_text().splitlines()
        assert '"type":"user/message","seq":1,' in lines[2]
        lines[2] = lines[2].replace('"role":"user",', '"role":"user","message":"x",', 1)
        path.write_text("\n".join(lines) + "\n")
        log = read_log(path)
        with pytest.raises(msgspec.ValidationError):
            _LINE.decode(lines[2])
        [entry] = read_entries(log.events, PlanList.of(log.plans), [1], {}, {})
        assert entry == _entry(log.events[1], True) and entry.text == "What is a surface?"

    @pytest.mark.parametrize("content", [
        [{"type": "text", "text": "a"}, {"type": "reasoning", "text": "b"}],
        [{"type": "text"}, {"type": "text", "text": None}, {"type": "text", "text": 5}],
        [{"type": "tool-call", "id": "c", "arguments": {"k": [1]}}, {"type": "image"}],
        [{"type": "tool-result", "content": [{"type": "text", "text": "x"}, {
            "type": "tool-result", "content": [{"type": "text", "text": "y"}]}]}],
        [{"type": "tool-result", "content": None}, {"type": "tool-result"}, {}],
        [{"type": ["odd"], "text": "z"}, {"type": "text", "text": {"a": 1}}], [], None])
    def test_blocks_text_is_message_text(self, content: Any) -> None:
        event = {"type": "user/message", "data": {"content": content}}
        blocks = msgspec.json.decode(json.dumps(content), type=list[Block] | None)
        assert blocks_text(blocks) == message_text(event)
