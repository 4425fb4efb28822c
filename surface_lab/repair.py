"""Crash repair (SPEC 6): the events that close a turn a crash left open. Pure: it returns
events and never writes; a store decides to commit them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .events import Event, freeze_event, message_of
from .jsonvalue import as_int

__all__ = ["interrupted_turn_closers"]

OUTCOME_UNKNOWN_TEXT = (
    "The tool call was interrupted after it was recorded, but no result was durably "
    "recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: "
    "retry only if the operation is read-only or idempotent; if it may have side effects, "
    "first verify external state or ask the user. Do not retry blindly."
)
NOT_STARTED_TEXT = (
    "The tool call was interrupted before it started: it did not run and no result was "
    "recorded. Call it again if it is still needed."
)


def _tool_call_ids(event: Mapping[str, Any]) -> list[str]:
    message = message_of(event)
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, list):
        return []
    return [
        block["id"]
        for block in content
        if isinstance(block, Mapping) and block.get("type") == "tool-call"
        and isinstance(block.get("id"), str)
    ]


def interrupted_turn_closers(events: Sequence[Mapping[str, Any]]) -> list[Event]:
    """The events to append after a crash left a turn open; `[]` when no turn is open.

    For each pending tool call, in the order the model issued it, a synthetic error
    `tool/result` (citing its `tool/call` when one was logged); then `step/end` if a step
    is open; then `turn/end {reason: {kind: "interrupted"}}`. The closers take the seqs
    after the last event and reuse its time.
    """
    in_turn = False
    turn: Any = None
    step: Any = None
    pending: dict[str, dict[str, Any]] = {}  # call id -> {"step", "started"}
    for event in events:
        kind, data = event.get("type"), event.get("data")
        data = data if isinstance(data, Mapping) else {}
        if kind == "turn/start":
            in_turn, turn, step, pending = True, data.get("turn"), None, {}
        elif kind == "turn/end":
            in_turn, turn, step, pending = False, None, None, {}
        elif kind == "step/start":
            step = data.get("step")
        elif kind == "step/end":
            step, pending = None, {}
        elif kind == "assistant/message":
            for call_id in _tool_call_ids(event):
                pending[call_id] = {"step": data.get("step"), "started": None}
        elif kind == "tool/call":
            called = data.get("callId")
            if isinstance(called, str) and called in pending:
                pending[called]["started"] = as_int(event.get("seq"))
        elif kind == "tool/result":
            source = (message_of(event) or {}).get("source")
            answered = source.get("callId") if isinstance(source, Mapping) else None
            if isinstance(answered, str):
                pending.pop(answered, None)
    if not in_turn:
        return []
    last = events[-1]
    last_seq = as_int(last.get("seq"))
    seq = len(events) - 1 if last_seq is None else last_seq
    time = as_int(last.get("time")) or 0
    closers: list[dict[str, Any]] = []

    def add(kind: str, data: Any, **extra: Any) -> None:
        closers.append({"type": kind, "seq": seq + 1 + len(closers), "time": time,
                        "data": data, **extra})

    for call_id, call in pending.items():
        started = call["started"]
        closer_seq = seq + 1 + len(closers)
        text = OUTCOME_UNKNOWN_TEXT if started is not None else NOT_STARTED_TEXT
        block = {
            "type": "tool-result",
            "toolCallId": call_id,
            "isError": True,
            "content": [{"type": "text", "text": text}],
        }
        message = {"id": f"interrupted-tool-result-{call_id}-{closer_seq}", "role": "user",
                   "source": {"kind": "tool", "callId": call_id}, "content": [block]}
        error = (
            {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
            if started is not None
            else {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}
        )
        data = {"turn": turn, "step": call["step"], "message": message, "error": error}
        if started is not None:
            add("tool/result", data, sourceEventSeqs=[started], surfaceOp="append")
        else:
            add("tool/result", data, surfaceOp="append")
    if step is not None:
        add("step/end", {"turn": turn, "step": step})
    add("turn/end", {"turn": turn, "reason": {"kind": "interrupted"}})
    return [freeze_event(c) for c in closers]
