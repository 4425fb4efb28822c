"""History manipulation on the surface (SPEC 9): compaction of the oldest balanced run and
the tool-result pruner. Every decision is an appended event, so replay reproduces it."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..events import Event, message_of
from ..messages import estimate_tokens, message_text
from ..session import Session

__all__ = [
    "SUMMARY_PREAMBLE",
    "CompactionPolicy",
    "Compactor",
    "ExtractiveSummarizer",
    "SummaryError",
    "ToolResultPruner",
    "balanced_cuts",
    "estimate_tokens",
    "message_text",
    "write_compaction",
    "write_tool_result_rewrite",
]

SUMMARY_PREAMBLE = (
    "This is an automatically generated checkpoint of earlier history: the conversation "
    "above it was compacted to save context. Treat it as a faithful summary of what happened."
)
_SENTENCE = re.compile(r"(.+?[.!?])(\s|$)", re.S)


def _tool_delta(event: Mapping[str, Any]) -> int:
    if event["type"] == "assistant/message":
        message = message_of(event)
        content = message.get("content", []) if isinstance(message, Mapping) else []
        return sum(1 for b in content if isinstance(b, Mapping) and b.get("type") == "tool-call")
    return -1 if event["type"] == "tool/result" else 0


def balanced_cuts(events: Sequence[Event], nodes: Sequence[int]) -> list[int]:
    """Positions `c` (0..len(nodes)) where cutting the surface before `nodes[c]` separates
    no tool call from its result: the running count of tool-call blocks minus tool
    results is 0 there (SPEC 9)."""
    cuts, count = [0], 0
    for position, seq in enumerate(nodes, 1):
        count += _tool_delta(events[seq])
        if count == 0:
            cuts.append(position)
    return cuts


@dataclass(frozen=True)
class CompactionPolicy:
    """Compact when the surface's estimated tokens exceed `budget_tokens`: keep a recent
    tail of at least `keep_tail_tokens` and replace the oldest balanced run before it
    (at least `min_run` entries)."""

    budget_tokens: int = 6000
    keep_tail_tokens: int = 2000
    min_run: int = 2

    def choose(self, events: Sequence[Event], nodes: Sequence[int],
               tokens: Sequence[int]) -> tuple[int, int] | None:
        """Positions `(first, last)` of the run to compact, or None."""
        if sum(tokens) <= self.budget_tokens:
            return None
        tail_start, kept = len(nodes), 0
        while tail_start > 0 and kept < self.keep_tail_tokens:
            tail_start -= 1
            kept += tokens[tail_start]
        cut = max(c for c in balanced_cuts(events, nodes) if c <= tail_start)
        return (0, cut - 1) if cut >= self.min_run else None


class SummaryError(Exception):
    """The summarizer could not produce a usable summary."""


@dataclass
class ExtractiveSummarizer:
    """A deterministic offline summarizer: the first sentence of each message, the tool
    calls made, the first line of each tool result, and earlier summaries kept whole.

    Args:
        max_line: characters kept of each extracted line.
        max_lines: lines kept in all; the oldest go first, so summaries of summaries stay
            bounded however long the session runs.
        fail_calls: 1-based numbers of the calls that fail (to show the error path).
    """

    max_line: int = 160
    max_lines: int = 40
    fail_calls: frozenset[int] = frozenset()
    provider: str = "offline"
    model: str = "extractive-1"
    calls: int = field(default=0, init=False)

    def summarize(self, shadowed: Sequence[Event]) -> list[dict[str, Any]]:
        self.calls += 1
        if self.calls in self.fail_calls:
            raise SummaryError(f"summarizer call {self.calls} failed (scripted)")
        lines = []
        for event in shadowed:
            lines.extend(self._lines(event))
        if len(lines) > self.max_lines:
            dropped = len(lines) - self.max_lines + 1
            lines = [f"- ({dropped} earlier lines omitted)", *lines[dropped:]]
        return [{"type": "text", "text": "\n".join(lines)}]

    def _cut(self, text: str) -> str:
        text = " ".join(text.split())
        return text if len(text) <= self.max_line else text[: self.max_line - 1] + "…"

    def _lines(self, event: Event) -> list[str]:
        message = message_of(event)
        source = message.get("source", {}) if isinstance(message, Mapping) else {}
        text = message_text(event)
        if source.get("plugin") == "compact":  # an earlier summary: keep what it says
            inner = text.split("<compacted-summary>", 1)[-1].split("</compacted-summary>")[0]
            return [line for line in inner.strip().splitlines() if line]
        if event["type"] == "tool/result":
            first = next((line for line in text.splitlines() if line.strip()), "")
            return [f"- tool result ({source.get('callId')}): {self._cut(first)}"]
        if event["type"] == "assistant/message":
            content = message.get("content", [])
            calls = [b for b in content if b.get("type") == "tool-call"]
            said = " ".join(b.get("text", "") for b in content if b.get("type") == "text")
            out = [f"- assistant: {self._cut(_first_sentence(said))}"] if said.strip() else []
            return out + [f"- assistant called {b.get('name')}({self._cut(b.get('arguments', ''))})"
                          for b in calls]
        role = "context" if event["type"] == "context/message" else "user"
        return [f"- {role}: {self._cut(_first_sentence(text))}"]


def _first_sentence(text: str) -> str:
    match = _SENTENCE.match(text.strip())
    return match.group(1) if match else text.strip()


class Compactor:
    """Runs the policy and, when it picks a run, appends the compaction of SPEC 9:
    `compaction/start`, `compaction/summary`, the replacement `user/message`,
    `compaction/end` (or start then end with an error)."""

    def __init__(self, policy: CompactionPolicy | None = None,
                 summarizer: ExtractiveSummarizer | None = None) -> None:
        self.policy = policy or CompactionPolicy()
        self.summarizer = summarizer or ExtractiveSummarizer()
        self.count = 0
        self._tokens: dict[int, int] = {}

    def _estimate(self, session: Session, seq: int) -> int:
        if seq not in self._tokens:
            self._tokens[seq] = estimate_tokens(session.events[seq])
        return self._tokens[seq]

    def maybe_compact(self, session: Session, turn: int | None) -> bool:
        """Compact if the policy asks to; True when a replacement was committed."""
        events = session.events
        nodes = list(session.surface.nodes)
        tokens = [self._estimate(session, seq) for seq in nodes]
        run = self.policy.choose(events, nodes, tokens)
        if run is None:
            return False
        first, last = run
        self.count += 1
        return write_compaction(session, nodes[first : last + 1], self.summarizer,
                                compaction_id=f"cmp-{self.count}", turn=turn,
                                shadowed_tokens=sum(tokens[first : last + 1]))


def write_compaction(session: Session, shadowed: Sequence[int], summarizer: Any, *,
                     compaction_id: str, turn: int | None, shadowed_tokens: int) -> bool:
    """Append the compaction of SPEC 9 that replaces the surface run `shadowed` (seqs, in
    surface order) with a framed summary from `summarizer` (an object with
    `summarize(events) -> blocks`, `provider` and `model`); a `SummaryError`, or a
    summary not smaller than the run, ends the bracket with an error instead. True when
    the replacement was committed."""
    shadowed = list(shadowed)
    events = session.events
    start = session.append("compaction/start", {"compactionId": compaction_id, "turn": turn})
    try:
        summary = summarizer.summarize([events[s] for s in shadowed])
        summary_tokens = 4 + math.ceil(sum(len(b["text"]) for b in summary) / 4)
        if summary_tokens >= shadowed_tokens:
            raise SummaryError(f"the summary ({summary_tokens} tokens) is not smaller "
                               f"than the history it replaces ({shadowed_tokens} tokens)")
    except SummaryError as err:
        session.append("compaction/end", {"compactionId": compaction_id, "turn": turn,
                                          "error": str(err)})
        return False
    recorded = session.append("compaction/summary", {
        "compactionId": compaction_id, "summary": summary,
        "shadowedRange": {"start": shadowed[0], "end": shadowed[-1]},
        "shadowedSeqs": shadowed, "shadowedTokenCount": shadowed_tokens,
        "provider": summarizer.provider, "model": summarizer.model,
        "usage": {"inputTokens": shadowed_tokens, "outputTokens": summary_tokens}})
    framed = [{"type": "text", "text": f"{SUMMARY_PREAMBLE}\n\n<compacted-summary>"},
              *summary, {"type": "text", "text": "</compacted-summary>"}]
    session.append(
        "user/message",
        {"id": f"{compaction_id}-summary", "role": "user", "content": framed,
         "source": {"kind": "plugin", "plugin": "compact", "compactionId": compaction_id}},
        surface_op={"op": "replace", "start": shadowed[0], "end": shadowed[-1]},
        source_event_seqs=[start["seq"], recorded["seq"], *shadowed])
    session.append("compaction/end", {"compactionId": compaction_id, "turn": turn})
    return True


def write_tool_result_rewrite(session: Session, seq: int, text: str, *,
                              shadowed_tokens: int) -> Event:
    """Append `compaction/prune` and the content-only rewrite of the surface tool result
    `seq` to `text` (SPEC 9); returns the new tool/result."""
    event = session.events[seq]
    data = dict(event["data"])
    message = dict(data["message"])
    block = {**message["content"][0], "content": [{"type": "text", "text": text}]}
    message["content"] = [block]
    data["message"] = message
    session.append("compaction/prune", {
        "shadowedRange": {"start": seq, "end": seq}, "shadowedSeqs": [seq],
        "shadowedTokenCount": shadowed_tokens})
    return session.append("tool/result", data, surface_op={"op": "replace", "start": seq,
                                                           "end": seq},
                          source_event_seqs=[seq])


@dataclass
class ToolResultPruner:
    """Rewrites each surface tool result longer than `threshold` code points to its first
    `head` and last `tail` code points around a one-line marker (SPEC 9)."""

    threshold: int = 8192
    head: int = 4096
    tail: int = 1024
    _checked: int = field(default=-1, init=False)

    def rewrite(self, text: str) -> str:
        """`text` cut to its head and tail around the one-line marker."""
        cut = len(text) - self.head - self.tail
        marker = f"\n[... {cut} characters pruned from the middle of this tool result ...]\n"
        return text[: self.head] + marker + text[-self.tail :]

    def prune(self, session: Session) -> int:
        """Prune what is new on the surface since the last call; returns how many."""
        pruned = 0
        for seq in list(session.surface.nodes):
            if seq <= self._checked:
                continue
            event = session.events[seq]
            if event["type"] != "tool/result" or event.get("surfaceOp") != "append":
                continue
            text = message_text(event)
            if len(text) <= self.threshold:
                continue
            write_tool_result_rewrite(session, seq, self.rewrite(text),
                                      shadowed_tokens=estimate_tokens(event))
            pruned += 1
        self._checked = session.seq - 1
        return pruned
