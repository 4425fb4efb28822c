"""Behavioural evidence of loss: what an agent did after a compaction or prune that shows it
needed content the replace had hidden (re-reading a file, re-running a command, repeating
a call with the same arguments, asking the user again about something only the hidden
text said)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .events import Event, message_of
from .facts import DEFAULT_RULES, author_of, find_mentions
from .gcpause import gc_paused
from .messages import message_text
from .reading.sequences import LogEvents
from .surface import LOG_ONLY, Plan, PlanList, apply_plan, plan_event

__all__ = ["KINDS", "LostEvidence", "find_lost_evidence", "plan_log"]

KINDS = ("repeated-call", "same-target", "re-asked")
_PATH = next(k for k in DEFAULT_RULES.kinds if k.name == "path").regex
_STOP = re.compile(r"\?|[.!](?=\s|$)|\n")  # a sentence's end; a dot inside a name is none


@dataclass(frozen=True)
class LostEvidence:
    """One action that shows hidden content was needed.

    Attributes:
        seq: the assistant message that acted.
        kind: `repeated-call` (the same tool with the same arguments as a call whose
            result was hidden), `same-target` (the same tool on a file or command a hidden
            result was about) or `re-asked` (a question naming something a user or context
            message said that is hidden as a whole, even if a summary kept the name).
        replace_seq: the replace that hid the earlier content.
        hidden_seq: the hidden event (the earlier tool result or user message).
        turn: data.turn of the acting message, when recorded.
        tool: the tool called (None for a question).
        arguments: the call's arguments, or the question asked.
        detail: what matched: the arguments, the shared target, or the mention.
        events_after: events between the replace and the action.
    """

    seq: int
    kind: str
    replace_seq: int
    hidden_seq: int
    turn: int | None
    tool: str | None
    arguments: str | None
    detail: str
    events_after: int


@dataclass
class _Call:
    name: str
    key: str
    targets: frozenset[str]
    result: int | None = None


def plan_log(events: Sequence[Mapping[str, Any]]) -> list[Plan]:
    """The plan each event of a valid log commits (SPEC 4 checks only)."""
    nodes: list[int] = []
    plans: list[Plan] = []

    def lookup(seq: int) -> Mapping[str, Any] | None:
        return events[seq] if 0 <= seq < len(events) else None

    for seq, event in enumerate(events):
        plan = plan_event(nodes, event, seq=seq, lookup=lookup, full=False)
        plans.append(plan)
        nodes = apply_plan(nodes, plan)
    return plans


def _canonical(arguments: Any) -> str:
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(arguments)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _targets(arguments: Any) -> frozenset[str]:
    try:
        parsed = json.loads(arguments)
    except (TypeError, ValueError):
        parsed = arguments
    return frozenset(m.group(0) for s in _strings(parsed) for m in _PATH.finditer(s))


_MAPPINGS = (dict, Mapping)  # dict first: answers without the Mapping ABC's check


def _blocks(event: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    message = message_of(event)
    content = message.get("content") if isinstance(message, _MAPPINGS) else None
    return [b for b in content if isinstance(b, _MAPPINGS)] if isinstance(content, list) \
        else []


def find_lost_evidence(events: Sequence[Event], plans: Sequence[Plan] | None = None
                       ) -> list[LostEvidence]:
    """Every action after a replace that shows the agent needed what it hid, in log order.

    Content counts as hidden at an action when the event is off the surface because a
    replace removed it and the surface then does not show its text anywhere (a summary
    that quotes a short result, or an importer's re-appended copy, keeps it visible).
    Only the latest earlier call of the same kind is compared, so a call repeated while
    an identical call's result is still visible is not evidence.

    Args:
        events: a valid log (seqs from 0).
        plans: each event's plan, when already computed (as `LogData.plans`).
    """
    plans = PlanList.of(plans if plans is not None else plan_log(events)) \
        if not isinstance(plans, PlanList) else plans
    if not plans.replaces:
        return []  # nothing was ever hidden
    seqs = _surface_seqs(plans)
    # each surface event read once, of its message alone where the log is kept packed
    read = events.message_events(seqs) if isinstance(events, LogEvents) else map(
        events.__getitem__, seqs)
    walk = _Walk()
    replaces, texts, hidden_by = plans.replaces, walk.texts, walk.hidden_by
    nodes: list[int] = []
    with gc_paused():  # tens of thousands of short-lived acyclic events
        for seq, event in zip(seqs, read, strict=True):
            texts[seq] = message_text(event)
            kind, replace = event["type"], replaces.get(seq)
            for s in replace.shadowed if replace is not None else ():
                hidden_by.setdefault(s, seq)
            if kind == "assistant/message":
                blocks = _blocks(event)
                if hidden_by:
                    walk.check(event, blocks, seq, nodes)
                walk.record_calls(blocks)
            if replace is not None:
                nodes = apply_plan(nodes, replace)
            else:  # an append (log-only plans are not walked)
                nodes.append(seq)
            if kind == "tool/result":
                walk.record_result(event, seq)
            elif kind in ("user/message", "context/message") and author_of(event) in (
                    "user", "context"):
                walk.asked.append(seq)
    return walk.found


def _surface_seqs(plans: PlanList) -> list[int]:
    """The seqs whose plan is not log-only, in order (from the kinds, no plan made)."""
    import numpy as np  # only here: `import surface_lab` stays light

    seqs: list[int] = np.flatnonzero(np.frombuffer(plans.kinds, dtype=np.uint8)
                                     != LOG_ONLY).tolist()
    return seqs


class _Walk:
    """The state of one pass: calls seen, what each replace hid, each surface event's
    text, and what is worked out once per distinct argument string or question."""

    def __init__(self) -> None:
        self.shown: tuple[list[int], str] = ([], "")  # a surface and its joined texts
        self.hidden_by: dict[int, int] = {}
        self.calls: dict[str, _Call] = {}  # call id -> call
        self.latest: dict[str, _Call] = {}  # name + arguments -> the latest such call
        self.by_target: dict[tuple[str, str], _Call] = {}
        self.asked: list[int] = []  # user and context messages, in order
        self.texts: dict[int, str] = {}  # every surface event walked so far
        self.lowered: dict[int, str] = {}
        self.parsed: dict[str, tuple[str, frozenset[str]]] = {}  # arguments -> these
        self.mentions: dict[str, list[str]] = {}  # question -> its mentions
        self.found: list[LostEvidence] = []

    def arguments(self, arguments: Any) -> tuple[str, frozenset[str]]:
        """`_canonical` and `_targets` of a call's arguments (once per distinct string)."""
        if not isinstance(arguments, str):
            return _canonical(arguments), _targets(arguments)
        known = self.parsed.get(arguments)
        if known is None:
            known = self.parsed[arguments] = (_canonical(arguments), _targets(arguments))
        return known

    def visible(self, nodes: list[int]) -> str:
        """The surface's texts joined by newlines; a surface that only grew since the
        last one joins only the new texts."""
        before, joined = self.shown
        if before and len(nodes) > len(before) and nodes[: len(before)] == before:
            joined += "\n" + "\n".join(self.texts[n] for n in nodes[len(before):])
        elif nodes != before:
            joined = "\n".join(self.texts[n] for n in nodes)
        self.shown = (list(nodes), joined)
        return joined

    def record_calls(self, blocks: list[Mapping[str, Any]]) -> None:
        """Remember an assistant message's tool calls (by id, and as the latest call of
        their kind and of each target)."""
        for block in blocks:
            if block.get("type") != "tool-call":
                continue
            name, arguments = str(block.get("name")), block.get("arguments")
            canonical, targets = self.arguments(arguments)
            call = _Call(name, f"{name}\x00{canonical}", targets)
            self.calls[str(block.get("id"))] = call
            self.latest[call.key] = call
            for target in targets:
                self.by_target[(name, target)] = call

    def record_result(self, event: Mapping[str, Any], seq: int) -> None:
        """An appended tool result answers the call it names."""
        if event.get("surfaceOp") != "append":
            return
        message = message_of(event)
        source = message.get("source") if isinstance(message, _MAPPINGS) else None
        call_id = source.get("callId") if isinstance(source, _MAPPINGS) else None
        if call_id is None:  # some importers name the call only in the block
            call_id = next((b.get("toolCallId") for b in _blocks(event)), None)
        call = self.calls.get(str(call_id))
        if call is not None:
            call.result = seq

    def check(self, event: Mapping[str, Any], blocks: list[Mapping[str, Any]], seq: int,
              nodes: list[int]) -> None:
        on_surface: set[int] | None = None
        visible: str | None = None

        def hidden(s: int | None) -> bool:
            nonlocal on_surface, visible
            if s is None or s not in self.hidden_by:
                return False
            if on_surface is None:
                on_surface = set(nodes)
            if s in on_surface:
                return False
            text = self.texts[s].strip()
            if visible is None:
                visible = self.visible(nodes)
            return bool(text) and text not in visible

        data = event.get("data")
        turn = data.get("turn") if isinstance(data, _MAPPINGS) else None
        turn = turn if isinstance(turn, int) and not isinstance(turn, bool) else None

        def add(kind: str, s: int, tool: str | None, arguments: str | None,
                detail: str) -> None:
            self.found.append(LostEvidence(seq, kind, self.hidden_by[s], s, turn, tool,
                                           arguments, detail, seq - self.hidden_by[s]))

        for block in blocks:
            if block.get("type") == "tool-call":
                name, arguments = str(block.get("name")), block.get("arguments")
                canonical, targets = self.arguments(arguments)
                same = self.latest.get(f"{name}\x00{canonical}")
                if same is not None:
                    if same.result is not None and hidden(same.result):
                        add("repeated-call", same.result, name, str(arguments), canonical)
                    continue
                for target in sorted(targets):
                    other = self.by_target.get((name, target))
                    if other is not None and other.result is not None and hidden(
                            other.result):
                        add("same-target", other.result, name, str(arguments), target)
                        break
            elif block.get("type") == "text":
                for question in _questions(str(block.get("text", ""))):
                    hit = self.asked_before(question, hidden)
                    if hit is not None:
                        add("re-asked", hit[0], None, question, hit[1])

    def asked_before(self, question: str, hidden: Callable[[int], bool]
                     ) -> tuple[int, str] | None:
        """(the hidden user or context message, the mention) a question is about."""
        mentions = self.mentions.get(question)
        if mentions is None:
            mentions = self.mentions[question] = [
                m.text for m in find_mentions(question, author="assistant")
                if len(m.text) >= 4]
        if not mentions:
            return None
        lowered = [m.lower() for m in mentions]
        for s in reversed(self.asked):
            text = self.lowered.get(s)
            if text is None:
                text = self.lowered[s] = self.texts[s].lower()
            for mention, low in zip(mentions, lowered, strict=True):
                if low in text:
                    return (s, mention) if hidden(s) else None
        return None


def _questions(text: str) -> list[str]:
    """The sentences of `text` that end with a question mark (a dot inside a name, as in
    `app.py`, does not end a sentence)."""
    if "?" not in text:
        return []
    out, start = [], 0
    for stop in _STOP.finditer(text):
        if stop.group(0) == "?":
            question = text[start : stop.end()].strip()
            if len(question) > 1:
                out.append(question)
        start = stop.end()
    return out
