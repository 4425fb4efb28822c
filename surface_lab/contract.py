"""An optional checker of the agent-loop contract (SPEC 8) and of compaction traces
(SPEC 9). Its findings are warnings about how a log was written, never load rules."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .events import message_of
from .problems import Problem
from .surface import Replacement, fold_surface

__all__ = ["CLOSER_CODES", "Finding", "check_loop_contract", "unanswered_tool_call_problems",
           "unanswered_tool_calls"]

# The error codes of the synthetic results that close a call an interruption left open
# (repair.interrupted_turn_closers).
CLOSER_CODES = frozenset({"TOOL_NOT_STARTED", "TOOL_OUTCOME_UNKNOWN"})

@dataclass(frozen=True)
class Finding:
    seq: int
    rule: str
    message: str
    related: int | None = None
    """Another seq the finding is about (the call's assistant message for
    `unanswered-tool-call`)."""

    def __str__(self) -> str:
        return f"seq {self.seq}: {self.rule}: {self.message}"


def check_loop_contract(events: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """Check SPEC 8 and the compaction traces of SPEC 9 over a log.

    * an `assistant/message` cites exactly the run of chunks just before it: its own
      attempt's (`[]` for an empty stream), so never a chunk of a failed attempt, which
      always ends before some other event (`llm/retry`, a compaction, ...);
    * a `tool/result` appended for a call cites exactly `[seq of its tool/call]` (a repair
      closer for a call never started cites nothing), and calls are answered in the order
      the model issued them;
    * surface events are appended, except the replacements of SPEC 9;
    * each `compaction/summary` or `compaction/prune` records the entries its replacement
      really shadowed.
    """
    findings: list[Finding] = []
    attempt: list[int] = []  # the run of chunks just before the current event
    call_seq: dict[str, int] = {}
    expected_order: list[str] = []
    for event in events:
        seq, kind, data = event["seq"], event["type"], event.get("data")
        data = data if isinstance(data, Mapping) else {}
        if kind == "assistant/chunk":
            attempt.append(seq)
            continue
        if kind == "assistant/message":
            cited = event.get("sourceEventSeqs")
            if cited != attempt:
                findings.append(Finding(seq, "message-cites-its-attempt",
                                        f"cites {cited}, its attempt's chunks are {attempt}"))
            message = message_of(event) or {}
            expected_order = [b["id"] for b in message.get("content", [])
                              if isinstance(b, Mapping) and b.get("type") == "tool-call"]
        attempt = []
        if kind == "tool/call" and isinstance(data.get("callId"), str):
            call_seq[data["callId"]] = seq
        if kind == "tool/result" and event.get("surfaceOp") == "append":
            call_id = (message_of(event) or {}).get("source", {}).get("callId")
            sources = event.get("sourceEventSeqs")
            not_started = (data.get("error") or {}).get("code") == "TOOL_NOT_STARTED"
            if not_started and sources is not None:
                findings.append(Finding(seq, "closer-cites-nothing",
                                        f"a not-started closer cites {sources}"))
            elif not not_started and sources != [call_seq.get(call_id)]:
                findings.append(Finding(seq, "result-cites-its-call",
                                        f"cites {sources}, its tool/call is "
                                        f"{call_seq.get(call_id)}"))
            if expected_order and call_id != expected_order[0]:
                findings.append(Finding(seq, "results-in-model-order",
                                        f"answers {call_id!r} before {expected_order[0]!r}"))
            if call_id in expected_order:
                expected_order.remove(call_id)
        if kind in ("user/message", "context/message", "assistant/message"):
            op = event.get("surfaceOp")
            source = (message_of(event) or {}).get("source", {})
            if op != "append" and not (kind == "user/message"
                                       and source.get("plugin") == "compact"):
                findings.append(Finding(seq, "surface-append",
                                        f"{kind} uses surfaceOp {op!r}"))
    if any(e["type"] in ("compaction/summary", "compaction/prune") for e in events):
        findings += _check_compactions(events)
    return findings


def _check_compactions(events: Sequence[Mapping[str, Any]]) -> list[Finding]:
    fold = fold_surface(events)
    shadowed_by = {r.seq: r.shadowed_seqs for r in fold.replacements}
    findings = []
    for event in events:
        if event["type"] not in ("compaction/summary", "compaction/prune"):
            continue
        recorded = event["data"].get("shadowedSeqs")
        replacement = next(
            (e for e in events[event["seq"] + 1 :] if isinstance(e.get("surfaceOp"), Mapping)),
            None)
        if replacement is None or replacement["seq"] not in shadowed_by:
            findings.append(Finding(event["seq"], "compaction-replaced",
                                    "no replacement follows the recorded decision"))
        elif shadowed_by[replacement["seq"]] != recorded:
            findings.append(Finding(event["seq"], "compaction-replays",
                                    f"recorded shadowedSeqs {recorded} but the fold shadows "
                                    f"{shadowed_by[replacement['seq']]}"))
    return findings


def _call_ids(message: Mapping[str, Any]) -> list[str]:
    content = message.get("content")
    return ([str(b["id"]) for b in content if isinstance(b, Mapping)
             and b.get("type") == "tool-call" and isinstance(b.get("id"), str)]
            if isinstance(content, list) else [])


def _is_closer(event: Mapping[str, Any]) -> bool:
    data = event.get("data")
    error = data.get("error") if isinstance(data, Mapping) else None
    return isinstance(error, Mapping) and error.get("code") in CLOSER_CODES


def unanswered_tool_calls(events: Sequence[Mapping[str, Any]], *,
                          replacements: Sequence[Replacement] | None = None
                          ) -> list[Finding]:
    """Tool calls on the surface still without their result on the surface when the model
    is asked again: a history the provider refuses (the Anthropic API rejects a `tool_use`
    with no `tool_result` after it), so no model ever saw it.

    A request point is the first `assistant/message` of each step (each `(turn, step)`).
    A call is pending from its `assistant/message` until a `tool/result` for its id is on
    the surface; a replace that shadows the call drops it, one that shadows its result
    (other than a content-only rewrite of that result) makes it pending again. A call
    answered later by a synthetic interruption closer (`TOOL_NOT_STARTED`,
    `TOOL_OUTCOME_UNKNOWN`) is not reported. One finding per call, at the seq of the first
    request point that misses it.

    Args:
        events: the log's events in seq order.
        replacements: the fold's replacements when the caller has them (else folded here).
    """
    if replacements is None:
        replacements = fold_surface(events).replacements
    shadow = {r.seq: r.shadowed_seqs for r in replacements}
    live: dict[str, int] = {}  # call id -> seq of the assistant message on the surface
    calls_in: dict[int, list[str]] = {}
    answer_of: dict[int, str] = {}  # seq of a result on the surface -> its call id
    pending: dict[str, int] = {}  # call id -> seq of its assistant message
    found: dict[str, Finding] = {}
    last_step: Any = object()
    for event in events:
        seq, kind = event.get("seq"), event.get("type")
        if not isinstance(seq, int):
            continue
        for gone in shadow.get(seq, ()):
            for call in calls_in.pop(gone, []):
                live.pop(call, None)
                pending.pop(call, None)
            call_id = answer_of.pop(gone, None)
            if call_id is not None and call_id in live:
                pending[call_id] = live[call_id]
        data = event.get("data")
        data = data if isinstance(data, Mapping) else {}
        if kind == "assistant/message":
            step = (data.get("turn"), data.get("step"))
            if step != last_step or step == (None, None):
                for call_id, at in pending.items():
                    if call_id not in found:
                        found[call_id] = Finding(seq, "unanswered-tool-call", (
                            f"tool call {call_id!r} (assistant message at seq {at}) has no "
                            f"result on the surface when the model is asked again"), at)
            last_step = step
            calls = _call_ids(message_of(event) or {})
            calls_in[seq] = calls
            for call_id in calls:
                live[call_id] = seq
                pending[call_id] = seq
        elif kind == "tool/result" and event.get("surfaceOp") is not None:
            source = (message_of(event) or {}).get("source")
            call_id = source.get("callId") if isinstance(source, Mapping) else None
            if not isinstance(call_id, str):
                continue
            if _is_closer(event):
                found.pop(call_id, None)
            if call_id in live:
                pending.pop(call_id, None)
                answer_of[seq] = call_id
    return sorted(found.values(), key=lambda f: f.seq)


def unanswered_tool_call_problems(events: Sequence[Mapping[str, Any]], *, path: str,
                                  lines: Sequence[int] | None = None,
                                  replacements: Sequence[Replacement] | None = None
                                  ) -> list[Problem]:
    """`unanswered_tool_calls` as `validate` and `convert` report them: an `error` problem
    per call, located at the request point (file, line, seq)."""
    out = []
    for finding in unanswered_tool_calls(events, replacements=replacements):
        line = lines[finding.seq] if lines is not None and finding.seq < len(lines) else None
        out.append(Problem("error", finding.rule, finding.message, path, line, finding.seq,
                           "assistant/message"))
    return out
