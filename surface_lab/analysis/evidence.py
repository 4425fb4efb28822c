"""Behavioural evidence of loss: what an agent did after a compaction or prune that shows it
needed content the replace had hidden (re-reading a file, re-running a command, repeating
a call with the same arguments, asking the user again about something only the hidden
text said)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, count, islice, repeat
from operator import contains
from typing import Any, NamedTuple, cast

import msgspec
from msgspec import UNSET

from ..events import Event, message_of
from ..gcpause import gc_paused
from ..messages import Block, blocks_text, message_text
from ..reading.lines import TYPE_NAMES
from ..reading.sequences import LogEvents, MessageLine
from ..surface import APPEND, LOG_ONLY, Plan, PlanList, apply_plan, plan_event
from .facts import DEFAULT_RULES, author_from, author_of, find_mentions

__all__ = ["KINDS", "LostEvidence", "find_lost_evidence", "plan_log", "surface_entries"]

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


@dataclass(slots=True)
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


_Parsed = tuple[str, str, frozenset[str]]  # a call's key, canonical arguments, targets


def _parse(name: str, arguments: Any) -> _Parsed:
    canonical = _canonical(arguments)
    return f"{name}\x00{canonical}", canonical, _targets(arguments)


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
_NESTED = ("assistant/message", "tool/result")  # their message is `data.message`

# An act of an assistant message, in block order: ("tool-call", name, arguments, call
# id) or ("text", text, None, None).
_Act = tuple[str, str, Any, str | None]


class _Entry(NamedTuple):
    """What the walk reads of one surface event."""

    kind: str
    text: str  # message_text
    turn: int | None
    acts: tuple[_Act, ...]  # an assistant message's tool calls and text blocks
    answers: str | None  # the call id an appended tool result answers (as str)
    asks: bool  # a user or context message written by the user or the context


def _act(kind: Any, name: Any, arguments: Any, call_id: Any, text: Any) -> _Act:
    if kind == "tool-call":
        return ("tool-call", str(name), arguments, str(call_id))
    return ("text", str(text), None, None)


def _turn(turn: Any) -> int | None:
    return turn if isinstance(turn, int) and not isinstance(turn, bool) else None


def _blocks(event: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    message = message_of(event)
    content = message.get("content") if isinstance(message, _MAPPINGS) else None
    return ([b for b in content if isinstance(b, _MAPPINGS)] if isinstance(content, list)
        else [])


def _entry(event: Mapping[str, Any], appended: bool) -> _Entry:
    """What the walk reads of a surface event, read from the event itself (`appended`:
    its plan is an append, as its surfaceOp says)."""
    kind, data = event["type"], event.get("data")
    acts: tuple[_Act, ...] = ()
    answers, turn = None, None
    if kind == "assistant/message":
        acts = tuple(_act(b.get("type"), b.get("name"), b.get("arguments"), b.get("id"),
                          b.get("text", "")) for b in _blocks(event)
                     if b.get("type") in ("tool-call", "text"))
        turn = _turn(data.get("turn")) if isinstance(data, _MAPPINGS) else None
    elif kind == "tool/result" and appended:
        message = message_of(event)
        source = message.get("source") if isinstance(message, _MAPPINGS) else None
        call_id = source.get("callId") if isinstance(source, _MAPPINGS) else None
        if call_id is None:  # some importers name the call only in the block
            call_id = next((b.get("toolCallId") for b in _blocks(event)), None)
        answers = str(call_id)
    asks = kind in ("user/message", "context/message") and author_of(event) in (
        "user", "context")
    return _Entry(kind, message_text(event), turn, acts, answers, asks)


def _known_entry(kind: str, text: str, appended: bool, source: Any) -> _Entry | None:
    """The entry of a tool result or a user or context message from its text and its
    message's source alone (None for a tool result that names its call only in a
    block: its line is read)."""
    answers = None
    if kind == "tool/result" and appended:
        call_id = source.get("callId") if isinstance(source, _MAPPINGS) else None
        if call_id is None:
            return None
        answers = str(call_id)
    asks = kind in ("user/message", "context/message") and author_from(kind, source) in (
        "user", "context")
    return _Entry(kind, text, None, (), answers, asks)


# A packed log's surface line decoded of what `_entry` reads alone (`MessageLine`), the
# blocks typed; where the text is known already, a tool result's or user message's line
# without its text.


class _BareBlock(msgspec.Struct, gc=False):
    """A `Block` without its text or content (a tool result's own blocks skipped)."""

    type: Any = None
    name: Any = None
    arguments: Any = None
    id: Any = None
    toolCallId: Any = None
    text: Any = UNSET  # (a user's text blocks: the walk reads it of assistant messages)


_LINE = msgspec.json.Decoder(MessageLine[Block])
_BARE = msgspec.json.Decoder(MessageLine[_BareBlock])
_UNKNOWN = object()  # a source not given


def _typed_entry(line: MessageLine[Block] | MessageLine[_BareBlock], text: str | None,
                 appended: bool) -> _Entry:
    """`_entry` of the event a typed line holds (the same reading, over typed fields);
    `text` when known (a bare line is decoded only then)."""
    kind, data = line.type, line.data
    message = (data.message if data is not None else None) if kind in _NESTED else data
    blocks = message.content if message is not None else None
    acts: tuple[_Act, ...] = ()
    answers, turn = None, None
    if kind == "assistant/message":
        acts = tuple(_act(b.type, b.name, b.arguments, b.id, "" if b.text is UNSET
                          else b.text) for b in blocks or () if b.type in ("tool-call",
                                                                         "text"))
        turn = _turn(data.turn) if data is not None else None
    elif kind == "tool/result" and appended:
        source = message.source if message is not None else None
        call_id = source.get("callId") if isinstance(source, _MAPPINGS) else None
        if call_id is None:
            call_id = blocks[0].toolCallId if blocks else None
        answers = str(call_id)
    asks = kind in ("user/message", "context/message") and author_from(
        kind, message.source if message is not None else None) in ("user", "context")
    if text is None:  # then the line is a full one
        text = blocks_text(cast(list[Block] | None, blocks))
    return _Entry(kind, text, turn, acts, answers, asks)


def read_entries(events: Sequence[Event], plans: PlanList, seqs: list[int],
             texts: Mapping[int, str], sources: Mapping[int, Any], *,
             lines: dict[int, MessageLine[Block]] | None = None) -> Iterator[_Entry]:
    """The entry of each of these events. A packed log's tool result or user or context
    message whose text and source are both known is not read; one whose text alone is
    known is decoded without it; an assistant message whose typed line is in `lines`
    (`LogData.keep_message_lines`) is taken from there (and dropped from it); any other
    line is decoded typed (parsed whole where it does not fit the types). Other logs'
    events are read as they are."""
    kinds = plans.kinds
    if not isinstance(events, LogEvents):
        for seq in seqs:
            yield _entry(events[seq], kinds[seq] == APPEND)
        return
    codes = events.type_codes
    for seq in seqs:
        kind, appended, text = TYPE_NAMES[codes[seq]], kinds[seq] == APPEND, texts.get(seq)
        bare = text is not None and kind != "assistant/message"
        if bare:
            source = sources.get(seq, _UNKNOWN)
            entry = None if source is _UNKNOWN else _known_entry(kind, cast(str, text),
                                                                  appended, source)
            if entry is not None:
                yield entry
                continue
        typed_line = lines.pop(seq, None) if lines else None
        if typed_line is not None:  # decoded with its text already
            yield _typed_entry(typed_line, text, appended)
            continue
        line = events.line_view(seq)
        if line is None:  # a packed row's member
            yield _entry(events[seq], appended)
            continue
        try:
            typed = _BARE.decode(line) if bare else _LINE.decode(line)
        except msgspec.DecodeError:  # a shape the types do not take: read it whole
            yield _entry(events.raw(seq), appended)
            continue
        yield _typed_entry(typed, text, appended)


def surface_entries(events: Sequence[Event], plans: PlanList, *,
                    texts: Mapping[int, str] | None = None,
                    sources: Mapping[int, Any] | None = None,
                    lines: dict[int, MessageLine[Block]] | None = None
                    ) -> dict[int, _Entry]:
    """What the walk reads of each surface event (`read_entries` of every seq whose plan
    is not log-only), by seq: read once, it serves the walk and the facts ledger, which
    reads the assistant messages' acts of it."""
    seqs = _surface_seqs(plans)
    return dict(zip(seqs, read_entries(events, plans, seqs, texts or {}, sources or {},
                                       lines=lines), strict=True))


def find_lost_evidence(events: Sequence[Event], plans: Sequence[Plan] | None = None, *,
                       texts: Mapping[int, str] | None = None,
                       sources: Mapping[int, Any] | None = None,
                       entries: Mapping[int, _Entry] | None = None) -> list[LostEvidence]:
    """Every action after a replace that shows the agent needed what it hid, in log order.

    Content counts as hidden at an action when the event is off the surface because a
    replace removed it and the surface then does not show its text anywhere (a summary
    that quotes a short result, or an importer's re-appended copy, keeps it visible).
    Only the latest earlier call of the same kind is compared, so a call repeated while
    an identical call's result is still visible is not evidence.

    Args:
        events: a valid log (seqs from 0).
        plans: each event's plan, when already computed (as `LogData.plans`).
        texts, sources: `message_text` of events and their message's `source`, by seq,
            where already decoded (as `LogData.texts` and `LogData.sources` give them):
            a packed log's tool results and user messages whose text and source are
            known are not read again, and those whose text alone is known are read
            without it.
        entries: `surface_entries` of this log with these texts and sources, when
            already read (then neither the events nor the texts are read).
    """
    plans = (PlanList.of(plans if plans is not None else plan_log(events))
        if not isinstance(plans, PlanList) else plans)
    if not plans.replaces:
        return []  # nothing was ever hidden
    seqs = _surface_seqs(plans) if entries is None else list(entries)
    walk = _Walk()
    replaces, known, hidden_by = plans.replaces, walk.texts, walk.hidden_by
    nodes: list[int] = []
    with gc_paused():  # tens of thousands of short-lived acyclic objects
        # each surface event read once (of a packed log's line, only what the walk reads)
        read = (read_entries(events, plans, seqs, texts or {}, sources or {})
                if entries is None else entries.values())
        for seq, entry in zip(seqs, read, strict=True):
            known[seq] = entry.text
            replace = replaces.get(seq)
            for s in replace.shadowed if replace is not None else ():
                hidden_by.setdefault(s, seq)
            if entry.acts:
                if hidden_by:
                    walk.check(entry, seq, replace.shadowed if replace else ())
                walk.record_calls(entry.acts)
            if replace is not None:
                nodes = apply_plan(nodes, replace)
                walk.replaced(nodes)
            else:  # an append (log-only plans are not walked)
                nodes.append(seq)
                walk.length += len(entry.text) + bool(walk.shown)
                walk.shown.append(entry.text)
            if entry.answers is not None:
                call = walk.calls.get(entry.answers)
                if call is not None:
                    call.result = seq
            elif entry.asks:
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
        self.shown: list[str] = []  # the texts of the surface, in order
        self.length = 0  # of those texts joined by newlines
        self.hidden_by: dict[int, int] = {}
        self.calls: dict[str, _Call] = {}  # call id -> call
        self.latest: dict[str, _Call] = {}  # name + arguments -> the latest such call
        self.by_target: dict[tuple[str, str], _Call] = {}
        self.asked: list[int] = []  # user and context messages, in order
        self.texts: dict[int, str] = {}  # every surface event walked so far
        self.lowered: dict[int, str] = {}
        self.parsed: dict[tuple[str, str], _Parsed] = {}  # (name, arguments) -> these
        self.mentions: dict[str, list[str]] = {}  # question -> its mentions
        self.found: list[LostEvidence] = []

    def parse(self, name: str, arguments: Any) -> _Parsed:
        """A call's key (name and canonical arguments), canonical arguments and targets,
        worked out once per distinct name and argument string."""
        if not isinstance(arguments, str):
            return _parse(name, arguments)
        known = self.parsed.get((name, arguments))
        if known is None:
            known = self.parsed[(name, arguments)] = _parse(name, arguments)
        return known

    def replaced(self, nodes: list[int]) -> None:
        """A replace made this surface."""
        self.shown = [self.texts[n] for n in nodes]
        self.length = sum(map(len, self.shown)) + max(len(nodes) - 1, 0)

    def record_calls(self, acts: tuple[_Act, ...]) -> None:
        """Remember an assistant message's tool calls (by id, and as the latest call of
        their kind and of each target)."""
        for kind, name, arguments, call_id in acts:
            if kind != "tool-call":
                continue
            key, _, targets = self.parse(name, arguments)
            call = _Call(name, key, targets)
            self.calls[str(call_id)] = call
            self.latest[call.key] = call
            for target in targets:
                self.by_target[(name, target)] = call

    def hidden(self, s: int | None, shadowing: tuple[int, ...]) -> bool:
        """Whether event `s` is hidden from the surface: a replace removed it and the
        surface shows its text nowhere. (A seq an earlier replace shadowed never comes
        back to the surface; the acting event's own replace, hiding `shadowing`, is not
        applied yet, so those are still on it: answered without a search.)"""
        if s is None or s not in self.hidden_by or s in shadowing:
            return False
        text = self.texts[s].strip()
        if not text or len(text) > self.length:  # longer than all the surface shows
            return bool(text)
        return not _shown(text, self.shown)

    def check(self, entry: _Entry, seq: int, shadowing: tuple[int, ...]) -> None:
        """What an assistant message's acts show was needed (before its own calls are
        remembered and its own replace, hiding `shadowing`, is applied)."""

        def hidden(s: int | None) -> bool:
            return self.hidden(s, shadowing)

        def add(kind: str, s: int, tool: str | None, arguments: str | None,
                detail: str) -> None:
            self.found.append(LostEvidence(seq, kind, self.hidden_by[s], s, entry.turn,
                                           tool, arguments, detail, seq - self.hidden_by[s]))

        for kind, name, arguments, _ in entry.acts:
            if kind == "tool-call":
                key, canonical, targets = self.parse(name, arguments)
                same = self.latest.get(key)
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
            else:  # a text block: its questions (`name` holds the text)
                for question in _questions(name):
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


def _shown(text: str, parts: list[str]) -> bool:
    """Whether `text` (stripped, not empty) occurs in the parts joined by newlines, found
    without joining them. An occurrence begins inside a part (the text does not begin
    with a newline) and its first line, which holds no newline, lies in that part; one
    that runs on past the part begins in its last `len(text) - 1` characters. So only a
    part holding the first line is tried: the text inside it, then each place in that
    tail where the first line begins."""
    first, newline, _ = text.partition("\n")
    for i in compress(count(), map(contains, parts, repeat(first))):  # one pass in C
        part = parts[i]
        if not newline or text in part:
            return True
        at = part.find(first, max(0, len(part) - len(text) + 1))
        while at >= 0:
            if _runs_on(text, parts, i, at):
                return True
            at = part.find(first, at + 1)
    return False


def _runs_on(text: str, parts: list[str], i: int, at: int) -> bool:
    """Whether `text` occurs in the parts joined by newlines from offset `at` of part `i`
    on, where it is longer than the rest of that part."""
    k = len(parts[i]) - at  # the text's characters this part holds (fewer than all)
    if text[k] != "\n" or not parts[i].startswith(text[:k], at):
        return False
    k += 1  # past the newline joining the next part (the text does not end with one)
    for part in islice(parts, i + 1, None):
        if len(part) >= len(text) - k:
            return part.startswith(text[k:])
        if not text.startswith(part, k) or text[k + len(part)] != "\n":
            return False
        k += len(part) + 1
    return False


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
