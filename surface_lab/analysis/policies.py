"""What-if history policies: replay a recorded session with its own compactions and prunes
taken out and another policy applied before every model request, writing a valid surface
log. The agent's actions stay the recorded ones: what changes is what the model would
have been sent."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import AdmissionError
from ..events import SURFACE_TYPES, Event, mapping_at
from ..messages import message_text
from ..session import Session
from ..storage.jsonl import JsonlStore
from ..storage.read import LogReading, read_log
from .compaction import (
    CompactionPolicy,
    ExtractiveSummarizer,
    ToolResultPruner,
    _tool_delta,
    balanced_cuts,
    write_compaction,
    write_tool_result_rewrite,
)
from .tokens import Tokenizer, count_tokens

__all__ = [
    "BudgetMiss",
    "ClaudeCodeAutoCompact",
    "ClearToolUses",
    "CodexAutoCompact",
    "Compact",
    "LastNObservations",
    "MaskObservations",
    "OpenHandsSummarizing",
    "PiCompaction",
    "Policy",
    "PolicyView",
    "Prune",
    "Recording",
    "Rewrite",
    "SummarizeEvery",
    "WindowCompact",
    "budget_miss",
    "history_removed",
    "recording_of",
    "replay_policy",
]


@dataclass(frozen=True)
class Rewrite:
    """One replace a policy asks for: the surface run `start` .. `end` (seqs, inclusive).
    With `text`, the run must be one tool result whose content becomes `text` (a prune
    or a mask); without, the run is replaced by a summary (a compaction)."""

    start: int
    end: int
    text: str | None = None


@dataclass(frozen=True)
class PolicyView:
    """What a policy sees before a request: the log so far, the surface, each entry's
    tokens (the tokenizer's when one was given, else the estimate), turn and step."""

    events: Sequence[Event]
    nodes: tuple[int, ...]
    tokens: tuple[int, ...]
    turn: int | None
    step: int | None


Policy = Callable[[PolicyView], Sequence[Rewrite]]


@dataclass(frozen=True)
class Compact:
    """The built-in compactor's rule (`CompactionPolicy`): over `budget_tokens`, replace
    the oldest balanced run before a tail of `keep_tail_tokens` with a summary."""

    budget_tokens: int = 6000
    keep_tail_tokens: int = 2000
    min_run: int = 2

    def __call__(self, view: PolicyView) -> list[Rewrite]:
        rule = CompactionPolicy(self.budget_tokens, self.keep_tail_tokens, self.min_run)
        run = rule.choose(view.events, view.nodes, view.tokens)
        return [] if run is None else [Rewrite(view.nodes[run[0]], view.nodes[run[1]])]


@dataclass(frozen=True)
class Prune:
    """The built-in pruner's rule (`ToolResultPruner`): every tool result longer than
    `threshold` code points keeps its `head` and `tail` around a marker."""

    threshold: int = 8192
    head: int = 4096
    tail: int = 1024

    def __call__(self, view: PolicyView) -> list[Rewrite]:
        pruner = ToolResultPruner(self.threshold, self.head, self.tail)
        out = []
        for seq in view.nodes:
            event = view.events[seq]
            if event["type"] == "tool/result" and event.get("surfaceOp") == "append":
                text = message_text(event)
                if len(text) > self.threshold:
                    out.append(Rewrite(seq, seq, pruner.rewrite(text)))
        return out


@dataclass(frozen=True)
class MaskObservations:
    """Observation masking: every tool result but the latest `keep_last` becomes a
    one-line placeholder (`{chars}` is the hidden length); the calls stay visible."""

    keep_last: int = 3
    placeholder: str = ("[tool result of {chars} characters hidden; call the tool again "
                       "if you need it]")

    def __call__(self, view: PolicyView) -> list[Rewrite]:
        results = [s for s in view.nodes if view.events[s]["type"] == "tool/result"]
        old = results[: max(len(results) - self.keep_last, 0)]
        out = []
        for seq in old:
            event = view.events[seq]
            if event.get("surfaceOp") != "append":  # already rewritten (masked or pruned)
                continue
            text = self.placeholder.format(chars=len(message_text(event)))
            out.append(Rewrite(seq, seq, text))
        return out


# --- Presets: the policies as the agents define them --------------------------------------

_OBSERVATION_TYPES = ("tool/result", "context/message")


def _is_observation(event: Event) -> bool:
    """An environment output: a tool result, or a harness message that an importer marked
    as an observation (SWE-agent without function calling)."""
    if event["type"] == "tool/result":
        return True
    if event["type"] != "context/message":
        return False
    source = mapping_at(event, "data").get("source")
    return isinstance(source, Mapping) and source.get("origin") == "observation"


def _tags(event: Event) -> set[str]:
    data = mapping_at(event, "data")
    tags = data.get("tags")
    if tags is None:
        tags = mapping_at(data, "message").get("tags")
    if not isinstance(tags, Sequence) or isinstance(tags, str):
        return set()
    return {t for t in tags if isinstance(t, str)}


def _line_stats(event: Event) -> tuple[int, int]:
    """SWE-agent's `_get_content_stats`: text lines (`str.splitlines`) and images."""
    data = mapping_at(event, "data")
    content: Any = data.get("content")
    if event["type"] == "tool/result":
        blocks = mapping_at(data, "message").get("content")
        first = blocks[0] if isinstance(blocks, Sequence) and blocks else {}
        content = first.get("content") if isinstance(first, Mapping) else None
    if isinstance(content, str):
        return len(content.splitlines()), 0
    if not isinstance(content, Sequence):
        return len(message_text(event).splitlines()), 0
    lines = sum(len(str(b.get("text", "")).splitlines()) for b in content
                if isinstance(b, Mapping) and b.get("type") == "text")
    images = sum(1 for b in content if isinstance(b, Mapping)
                 and b.get("type") in ("image", "image_url"))
    return lines, images


@dataclass(frozen=True)
class LastNObservations:
    """SWE-agent's `LastNObservations` history processor (SWE-agent
    `sweagent/agent/history_processors.py`; the masking of The Complexity Trap,
    Lindenbauer et al. 2025, with `n=10`).

    Of the non-demonstration observations `obs` (the task first, then every environment
    output), `obs[1:K]` is elided with `K = max(0, (len(obs) // polling) * polling - n)`:
    each becomes `Old environment output: (L lines omitted)` (L its text's line count, plus
    ` (I images omitted)` with images). The first observation (the task) is never elided;
    an observation tagged with one of `keep_tags` is kept, one tagged with `remove_tags` is
    always elided. The calls stay visible."""

    n: int = 10
    polling: int = 1
    remove_tags: frozenset[str] = frozenset({"remove_output"})
    keep_tags: frozenset[str] = frozenset({"keep_output"})

    def __post_init__(self) -> None:
        if self.n <= 0 or self.polling <= 0:
            raise ValueError("LastNObservations needs n and polling of at least 1")

    def __call__(self, view: PolicyView) -> list[Rewrite]:
        events = view.events
        task = next((s for s in view.nodes if events[s]["type"] == "user/message"), None)
        obs = ([task] if task is not None else []) + [
            s for s in view.nodes if _is_observation(events[s])]
        last = max(0, (len(obs) // self.polling) * self.polling - self.n)
        elide = set(obs[1:last])
        out = []
        for seq in obs[1:]:
            event = events[seq]
            tags = _tags(event)
            if not ((seq in elide and not tags & self.keep_tags) or tags & self.remove_tags):
                continue
            if event.get("surfaceOp") != "append":  # already elided
                continue
            lines, images = _line_stats(event)
            text = f"Old environment output: ({lines} lines omitted)"
            if images:
                text += f" ({images} images omitted)"
            out.append(Rewrite(seq, seq, text))
        return out


def _rounds(view: PolicyView) -> list[list[int]]:
    """The surface after the task as rounds: each model response (its assistant messages,
    one step) with what follows it up to the next one (its observations). A summary user
    message starts no round."""
    rounds: list[list[int]] = []
    key: Any = None
    for position, seq in enumerate(view.nodes):
        event = view.events[seq]
        if event["type"] == "assistant/message":
            data = mapping_at(event, "data")
            step = (data.get("turn"), data.get("step"))
            # the messages of one response (Claude Code writes one per block) are one round
            if step[1] is None or step != key or not rounds:
                rounds.append([position])
            else:
                rounds[-1].append(position)
            key = step
        elif rounds:
            rounds[-1].append(position)
    return rounds


def _is_summary(event: Event) -> bool:
    source = mapping_at(event, "data").get("source")
    return isinstance(source, Mapping) and source.get("plugin") == "compact"


@dataclass(frozen=True)
class SummarizeEvery:
    """The Complexity Trap's LLM-summary policy (Lindenbauer et al. 2025, after OpenHands'
    condenser): once `every` rounds (a model response and its observations) have piled up
    since the task or the last summary, all but the latest `keep_last` are replaced by one
    summary (the previous summary folded in). The paper's setting: `every=21`,
    `keep_last=10`. The summarizer is `replay_policy`'s; its calls are costed as requests."""

    every: int = 21
    keep_last: int = 10

    def __call__(self, view: PolicyView) -> list[Rewrite]:
        rounds = _rounds(view)
        events, nodes = view.events, view.nodes
        summaries = [i for i, s in enumerate(nodes) if _is_summary(events[s])]
        since = [r for r in rounds if not summaries or r[0] > summaries[-1]]
        if len(since) < self.every or len(since) <= self.keep_last:
            return []
        first = summaries[-1] if summaries else since[0][0]
        last = since[len(since) - self.keep_last - 1][-1]
        return [Rewrite(nodes[first], nodes[last])]


@dataclass(frozen=True)
class ClearToolUses:
    """Anthropic's context editing, `clear_tool_uses_20250919` (Anthropic docs, "Context
    editing"): when the request's input passes `trigger` tokens (100,000 by default),
    the oldest tool results are cleared, the latest `keep` tool uses (3) kept; a clearing
    that would free fewer than `clear_at_least` tokens is not done; results of
    `exclude_tools` are never cleared. A cleared result reads `placeholder`.

    `clear_tool_inputs` (clearing the calls' parameters too) rewrites assistant messages,
    which a replay of the recorded actions keeps: it is refused rather than ignored."""

    trigger: int = 100_000
    keep: int = 3
    clear_at_least: int = 0
    exclude_tools: frozenset[str] = frozenset()
    clear_tool_inputs: bool = False
    placeholder: str = "[tool result cleared]"
    overhead_tokens: int = 0

    def __post_init__(self) -> None:
        if self.clear_tool_inputs:
            raise ValueError("clear_tool_inputs rewrites the recorded tool calls; a replay "
                             "keeps the recorded actions, so it is not supported")

    @property
    def budget_tokens(self) -> int:
        return self.trigger

    def __call__(self, view: PolicyView) -> list[Rewrite]:
        if sum(view.tokens) + self.overhead_tokens <= self.trigger:
            return []
        names = _call_names(view)
        results = [(i, s) for i, s in enumerate(view.nodes)
                   if view.events[s]["type"] == "tool/result"]
        old = results[: max(len(results) - self.keep, 0)]
        chosen = [(i, s) for i, s in old if view.events[s].get("surfaceOp") == "append"
                  and names.get(_call_id(view.events[s])) not in self.exclude_tools]
        if sum(view.tokens[i] for i, _ in chosen) < self.clear_at_least:
            return []
        return [Rewrite(s, s, self.placeholder) for _, s in chosen]


def _call_id(event: Event) -> Any:
    message = mapping_at(mapping_at(event, "data"), "message")
    content = message.get("content")
    if isinstance(content, Sequence) and content and isinstance(content[0], Mapping):
        return content[0].get("toolCallId") or content[0].get("id")
    return None


def _call_names(view: PolicyView) -> dict[Any, str]:
    names: dict[Any, str] = {}
    for seq in view.nodes:
        event = view.events[seq]
        if event["type"] != "assistant/message":
            continue
        content = mapping_at(mapping_at(event, "data"), "message").get("content")
        for block in content if isinstance(content, Sequence) else ():
            if isinstance(block, Mapping) and block.get("type") == "tool-call":
                names[block.get("id")] = str(block.get("name"))
    return names


@dataclass(frozen=True)
class PiCompaction:
    """pi's auto-compaction (pi-mono `coding-agent` compaction settings): when the context
    passes `context_window - reserve_tokens` (reserve 16,384), everything but the most
    recent `keep_recent_tokens` (20,000) becomes a summary, cut where no tool call is
    separated from its result."""

    context_window: int = 200_000
    reserve_tokens: int = 16_384
    keep_recent_tokens: int = 20_000

    @property
    def budget_tokens(self) -> int:
        return self.context_window - self.reserve_tokens

    def __call__(self, view: PolicyView) -> list[Rewrite]:
        return Compact(self.budget_tokens, self.keep_recent_tokens)(view)


@dataclass(frozen=True)
class WindowCompact:
    """Compact once the surface passes `threshold` of a model's `context_window`: the
    history becomes one summary and the latest `keep_recent_tokens` stay (the presets
    below are this rule with an agent's own figures)."""

    context_window: int
    threshold: float
    keep_recent_tokens: int

    @property
    def budget_tokens(self) -> int:
        return int(self.context_window * self.threshold)

    def __call__(self, view: PolicyView) -> list[Rewrite]:
        return Compact(self.budget_tokens, self.keep_recent_tokens)(view)


@dataclass(frozen=True)
class CodexAutoCompact(WindowCompact):
    """Codex's auto-compaction (codex-rs: `model_auto_compact_token_limit`, near 0.95 of
    the model's window; 272,000 for the GPT-5 family): past the limit the history is
    replaced by a summary and the recent user messages (kept here as the latest
    `keep_recent_tokens`)."""

    context_window: int = 272_000
    threshold: float = 0.95
    keep_recent_tokens: int = 20_000


@dataclass(frozen=True)
class ClaudeCodeAutoCompact(WindowCompact):
    """Claude Code's auto-compact: as the context nears the window (200,000 tokens;
    Claude Code compacts with a buffer left for the summary, `threshold` 0.92 of the
    window by default here, an observed figure, not a documented one) the conversation
    becomes one summary; the latest `keep_recent_tokens` stay."""

    context_window: int = 200_000
    threshold: float = 0.92
    keep_recent_tokens: int = 2_000


@dataclass(frozen=True)
class OpenHandsSummarizing:
    """OpenHands' `LLMSummarizingCondenser` (the OpenHands SDK's
    `openhands.sdk.context.condenser`): when the history passes `max_size` entries (120),
    the first `keep_first` (4) stay, and the entries between them and the newest
    `max_size // 2 - keep_first - 1` become one summary (cut where no tool call is
    separated from its result)."""

    max_size: int = 120
    keep_first: int = 4

    def __call__(self, view: PolicyView) -> list[Rewrite]:
        nodes = view.nodes
        if len(nodes) <= self.max_size:
            return []
        tail = max(self.max_size // 2 - self.keep_first - 1, 0)
        first, end = self.keep_first, len(nodes) - tail
        cuts = [c for c in balanced_cuts(view.events, nodes) if first < c <= end]
        if not cuts or first >= len(nodes):
            return []
        return [Rewrite(nodes[first], nodes[max(cuts) - 1])]


@dataclass(frozen=True)
class BudgetMiss:
    """A request a policy sent over its own budget, and why."""

    policy: str
    seq: int
    turn: int | None
    step: int | None
    tokens: int
    budget: int
    why: str


def budget_miss(view: PolicyView, budget: int, overhead: int = 0) -> str | None:
    """Why the surface in `view` stays over `budget` (None when it does not): one entry
    larger than the budget, an unanswered tool call that leaves no balanced run before the
    kept tail, or no older history left to replace."""
    total = sum(view.tokens) + overhead
    if total <= budget:
        return None
    big = max(range(len(view.tokens)), key=view.tokens.__getitem__, default=None)
    if big is not None and view.tokens[big] + overhead > budget:
        return (f"one entry (seq {view.nodes[big]}, {view.tokens[big]} tokens) is larger "
                f"than the budget by itself")
    cuts = balanced_cuts(view.events, view.nodes)
    open_at = None
    count = 0
    for seq in view.nodes:
        before = count
        count += _delta(view.events[seq])
        if before == 0 and count > 0:
            open_at = seq
    if count > 0 and open_at is not None:
        return (f"an unanswered tool call (seq {open_at}) leaves no balanced run after it "
                f"to replace")
    if max(cuts) < len(view.nodes) // 2:
        return "the history holds no balanced run old enough to replace"
    return "the kept tail and what the policy may not replace exceed the budget"


def _delta(event: Event) -> int:
    return _tool_delta(event)


class _CallableSummarizer:
    """A summarizer from a plain callable: events -> text or blocks."""

    provider = "user"

    def __init__(self, func: Callable[[Sequence[Event]], Any]) -> None:
        self.func = func
        self.model = getattr(func, "__name__", "summarizer")

    def summarize(self, shadowed: Sequence[Event]) -> list[dict[str, Any]]:
        out = self.func(shadowed)
        return [{"type": "text", "text": out}] if isinstance(out, str) else list(out)


def _summarizer(value: Any) -> Any:
    if value is None:
        return ExtractiveSummarizer()
    if hasattr(value, "summarize"):
        return value
    if callable(value):
        return _CallableSummarizer(value)
    raise TypeError(f"a summarizer is an object with summarize(events) or a callable, "
                    f"got {type(value).__name__}")


@dataclass(frozen=True)
class Recording:
    """A recorded session ready to replay: its events (seqs from 0) and its header."""

    events: Sequence[Event]
    header: Mapping[str, Any]


def recording_of(source: Any) -> Recording:
    """The events and header of a path (read once, another agent's log imported), a
    `read_log` result, a `Session`, an `ImportResult`, a `LogData`, a `Recording` or a
    list of events.

    Raises:
        SurfaceLabError: for a path that cannot be read.
        TypeError: for anything else.
    """
    if isinstance(source, Recording):
        return source
    if isinstance(source, (str, os.PathLike)):
        source = read_log(Path(source))
    if isinstance(source, (LogReading, Session)) or (
            hasattr(source, "events") and hasattr(source, "header")):
        return Recording(list(source.events), dict(source.header))
    if hasattr(source, "events") and hasattr(source, "session_id"):  # a LogData
        events = list(source.events)
        return Recording(events, _header(str(source.session_id), events))
    if isinstance(source, Sequence) and not isinstance(source, (str, bytes)):
        events = list(source)
        return Recording(events, _header("events", events))
    raise TypeError(f"cannot replay {type(source).__name__}; give a path, a read_log "
                    f"result, a Session, an ImportResult or a list of events")


def _header(session_id: str, events: Sequence[Event]) -> dict[str, Any]:
    return {"version": 0, "id": session_id, "createdAt": events[0]["time"] if events else 0}


def history_removed(events: Sequence[Event]) -> list[Event]:
    """The log without its history manipulation: every compaction bracket (its trace,
    replaces and re-appended copies), every `compaction/prune`, and every other replace.
    The events kept are returned unchanged (their seqs still the old ones)."""
    inside: set[int] = set()
    open_at: dict[Any, int] = {}
    for event in events:
        if not event["type"].startswith("compaction/"):
            continue
        cid = mapping_at(event, "data").get("compactionId")
        if event["type"] == "compaction/start" and isinstance(cid, (str, int)):
            open_at[cid] = event["seq"]
        elif event["type"] == "compaction/end" and cid in open_at:
            inside.update(range(open_at.pop(cid), event["seq"] + 1))
    return [e for e in events
            if not e["type"].startswith("compaction/")
            and not isinstance(e.get("surfaceOp"), Mapping)
            and not (e["seq"] in inside and e["type"] in SURFACE_TYPES)]


class _Replayer:
    def __init__(self, session: Session, policies: Sequence[Policy], summarizer: Any,
                 tokenizer: Tokenizer | None, overhead: int = 0) -> None:
        self.session = session
        self.policies = policies
        self.summarizer = summarizer
        self.tokenizer = tokenizer
        self.overhead = overhead
        self.tokens: dict[int, int] = {}
        self.compactions = 0
        self.misses: list[BudgetMiss] = []

    def _tokens(self, seq: int) -> int:
        if seq not in self.tokens:
            self.tokens[seq] = count_tokens(self.session.events[seq], self.tokenizer)[0]
        return self.tokens[seq]

    def apply(self, turn: int | None, step: int | None) -> None:
        for policy in self.policies:
            nodes = tuple(self.session.surface.nodes)
            view = PolicyView(self.session.events, nodes,
                              tuple(self._tokens(s) for s in nodes), turn, step)
            for rewrite in policy(view):
                self._write(rewrite, turn, policy)
        for policy in self.policies:
            budget = getattr(policy, "budget_tokens", None)
            if not isinstance(budget, int):
                continue
            nodes = tuple(self.session.surface.nodes)
            view = PolicyView(self.session.events, nodes,
                              tuple(self._tokens(s) for s in nodes), turn, step)
            why = budget_miss(view, budget, self.overhead)
            if why is not None:
                self.misses.append(BudgetMiss(
                    _name(policy), self.session.seq, turn, step,
                    sum(view.tokens) + self.overhead, budget, why))

    def _write(self, rewrite: Rewrite, turn: int | None, policy: Policy) -> None:
        s = self.session
        nodes = list(s.surface.nodes)
        name = _name(policy)
        for end, code in ((rewrite.start, "replace-start-missing"),
                          (rewrite.end, "replace-end-missing")):
            if end not in nodes:
                raise AdmissionError(f"policy {name} asked to replace from seq "
                                     f"{rewrite.start} to {rewrite.end}, but seq {end} is "
                                     f"not on the surface at seq {s.seq}", code=code,
                                     seq=s.seq)
        if nodes.index(rewrite.start) > nodes.index(rewrite.end):
            raise AdmissionError(f"policy {name} asked to replace from seq {rewrite.start} "
                                 f"to {rewrite.end}, which come in the other order on the "
                                 f"surface at seq {s.seq}", code="replace-range-reversed",
                                 seq=s.seq)
        run = nodes[nodes.index(rewrite.start) : nodes.index(rewrite.end) + 1]
        if rewrite.text is not None:
            if len(run) != 1 or s.events[run[0]]["type"] not in _OBSERVATION_TYPES:
                raise AdmissionError(
                    f"policy {name} gave text for seqs {rewrite.start}..{rewrite.end}; text "
                    f"rewrites one tool result or observation only",
                    code="tool-result-rewrite-target", seq=s.seq)
            if s.events[run[0]]["type"] == "tool/result":
                write_tool_result_rewrite(s, run[0], rewrite.text,
                                          shadowed_tokens=self._tokens(run[0]))
            else:
                _rewrite_observation(s, run[0], rewrite.text, self._tokens(run[0]))
            return
        self.compactions += 1
        write_compaction(s, run, self.summarizer, compaction_id=f"whatif-{self.compactions}",
                         turn=turn, shadowed_tokens=sum(self._tokens(n) for n in run))


def _name(policy: Any) -> str:
    return str(getattr(policy, "__name__", type(policy).__name__))


def _rewrite_observation(session: Session, seq: int, text: str, tokens: int) -> None:
    """The content-only rewrite of a harness observation (a `context/message`), as the
    SWE-agent importer writes SWE-agent's elisions: a prune trace, then the replace."""
    event = session.events[seq]
    data = dict(mapping_at(event, "data"))
    data["content"] = [{"type": "text", "text": text}]
    session.append("compaction/prune", {
        "shadowedRange": {"start": seq, "end": seq}, "shadowedSeqs": [seq],
        "shadowedTokenCount": tokens})
    session.append("context/message", data,
                   surface_op={"op": "replace", "start": seq, "end": seq},
                   source_event_seqs=[seq])


def replay_policy(source: Any, policy: Policy | Sequence[Policy] | None, *,
                  summarizer: Any = None, tokenizer: Tokenizer | None = None,
                  session_id: str | None = None,
                  out: str | os.PathLike[str] | None = None,
                  misses: list[BudgetMiss] | None = None,
                  overhead_tokens: int = 0) -> Session:
    """Replay a recorded session without its own history manipulation, applying `policy`
    before every model request (at each `step/start`, or before each assistant message
    when the log has no steps).

    Args:
        source: a path (another agent's log is imported), a `read_log` result, a
            `Session`, an `ImportResult`, a `LogData`, a `Recording` or events.
        policy: a callable `PolicyView -> [Rewrite]` (`Compact`, `Prune`,
            `MaskObservations` or your own), several applied in order, or None for none.
        summarizer: what writes compaction summaries: an object with
            `summarize(events) -> blocks` (and `provider`, `model`) or a callable
            `events -> text`; the offline `ExtractiveSummarizer` by default.
        tokenizer: counts the tokens the policy sees (the estimate by default).
        session_id: the new session's id (default: the recorded id + `~whatif`).
        out: also write the log there as JSONL (written whole, then renamed into place).
        misses: a list that receives a `BudgetMiss` for every request a policy with a
            `budget_tokens` sent over that budget, with why (never a silent stall).
        overhead_tokens: tokens every request carries beyond the surface (the system
            prompt and tools), counted in the budget checks.

    Returns:
        The new `Session`; every event passed the session's admission checks.

    Raises:
        AdmissionError: when a policy asks for a replace the surface rules refuse.
    """
    recording = recording_of(source)
    events, header = recording.events, recording.header
    policies: Sequence[Policy] = () if policy is None else (
        [policy] if callable(policy) else list(policy))
    new_id = session_id or f"{header.get('id', 'session')}~whatif"
    now = [int(header.get("createdAt") or (events[0]["time"] if events else 0))]
    session = Session(new_id, header={**header, "id": new_id}, clock=lambda: now[0])
    replayer = _Replayer(session, policies, _summarizer(summarizer), tokenizer,
                         overhead_tokens)
    kept = history_removed(events)
    stepped = any(e["type"] == "step/start" for e in kept)
    new_seq: dict[int, int] = {}
    for event in kept:
        now[0] = max(now[0], int(event.get("time") or 0))
        data = mapping_at(event, "data")
        if not stepped and event["type"] == "assistant/message":
            replayer.apply(_int(data.get("turn")), _int(data.get("step")))
        cited = event.get("sourceEventSeqs")
        sources = None if not isinstance(cited, list) else [
            new_seq[s] for s in cited if s in new_seq]
        if sources == [] and event["type"] != "assistant/message":
            sources = None
        if event["type"] in SURFACE_TYPES:
            copied = session.append(event["type"], event.get("data"), surface_op="append",
                                    source_event_seqs=sources)
        else:
            kind: str = str(event["type"])  # a log-only type: no surface_op
            copied = session.append(kind, event.get("data"), source_event_seqs=sources)
        new_seq[event["seq"]] = copied["seq"]
        if stepped and event["type"] == "step/start":
            replayer.apply(_int(data.get("turn")), _int(data.get("step")))
    if misses is not None:
        misses.extend(replayer.misses)
    if out is not None:
        _write(session, Path(out))
    return session


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _write(session: Session, path: Path) -> None:
    temporary = path.with_name(f".{path.name}.partial")
    temporary.unlink(missing_ok=True)
    try:
        store = JsonlStore.for_file(temporary)
        store.create(session.header)
        store.append(session.id, list(session.events))
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
