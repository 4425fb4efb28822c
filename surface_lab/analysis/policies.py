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
    write_compaction,
    write_tool_result_rewrite,
)
from .tokens import Tokenizer, count_tokens

__all__ = [
    "Compact",
    "MaskObservations",
    "Policy",
    "PolicyView",
    "Prune",
    "Recording",
    "Rewrite",
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
                 tokenizer: Tokenizer | None) -> None:
        self.session = session
        self.policies = policies
        self.summarizer = summarizer
        self.tokenizer = tokenizer
        self.tokens: dict[int, int] = {}
        self.compactions = 0

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

    def _write(self, rewrite: Rewrite, turn: int | None, policy: Policy) -> None:
        s = self.session
        nodes = list(s.surface.nodes)
        name = getattr(policy, "__name__", type(policy).__name__)
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
            if len(run) != 1 or s.events[run[0]]["type"] != "tool/result":
                raise AdmissionError(
                    f"policy {name} gave text for seqs {rewrite.start}..{rewrite.end}; text "
                    f"rewrites one tool result only", code="tool-result-rewrite-target",
                    seq=s.seq)
            write_tool_result_rewrite(s, run[0], rewrite.text,
                                      shadowed_tokens=self._tokens(run[0]))
            return
        self.compactions += 1
        write_compaction(s, run, self.summarizer, compaction_id=f"whatif-{self.compactions}",
                         turn=turn, shadowed_tokens=sum(self._tokens(n) for n in run))


def replay_policy(source: Any, policy: Policy | Sequence[Policy] | None, *,
                  summarizer: Any = None, tokenizer: Tokenizer | None = None,
                  session_id: str | None = None,
                  out: str | os.PathLike[str] | None = None) -> Session:
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
    replayer = _Replayer(session, policies, _summarizer(summarizer), tokenizer)
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
