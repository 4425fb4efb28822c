"""In-memory upgrades of older dsh log shapes (SPEC 7.3 step 2). Nothing is rewritten on
disk; each upgrade is counted so readers can report what they changed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from .errors import CorruptLogError
from .events import describe
from .jsonvalue import as_int

__all__ = ["UpgradeResult", "legacy_message_id", "upgrade_events", "upgrade_reason"]


@dataclass
class UpgradeResult:
    """Upgraded events (unchanged ones are the same objects) and a count per upgrade."""

    events: list[Mapping[str, Any]] = field(default_factory=list)
    applied: Counter[str] = field(default_factory=Counter)


def legacy_message_id(session_id: str, seq: int) -> str:
    """The id given to a pre-identity message."""
    return f"legacy-message:{session_id}:{seq}"


def _corrupt(event: Mapping[str, Any], message: str) -> NoReturn:
    kind = event.get("type")
    raise CorruptLogError(
        f"{describe(event)}: malformed legacy record: {message}",
        code="log-corrupt",
        seq=as_int(event.get("seq")),
        event_type=kind if isinstance(kind, str) else None,
    )


def upgrade_reason(event: Mapping[str, Any], reason: Any) -> tuple[Any, str | None]:
    """A `turn/end` reason in its current shape, and the name of the upgrade applied
    (None when it is current)."""
    if not isinstance(reason, Mapping):
        return reason, None
    kind = reason.get("kind")
    if kind == "aborted" and "reason" not in reason:
        return {**reason, "reason": {"kind": "legacy"}}, "turn/end aborted reason"
    if kind == "disposed":
        rest = {k: v for k, v in reason.items() if k != "kind"}
        return {"kind": "aborted", **rest, "reason": {"kind": "disposed"}}, "turn/end disposed"
    if kind == "error" and "error" not in reason:
        if "failure" in reason:
            return {"kind": "error", "error": reason["failure"]}, "turn/end error failure"
        if isinstance(reason.get("message"), str):
            code = reason.get("code")
            error = {"message": reason["message"], "code": code if code else "UNKNOWN"}
            return {"kind": "error", "error": error}, "turn/end error message"
        _corrupt(event, "an error reason needs error, failure or message")
    return reason, None


def _upgrade(
    event: Mapping[str, Any], seq: int, session_id: str, done: list[Mapping[str, Any]]
) -> tuple[Mapping[str, Any], str | None]:
    kind, data = event.get("type"), event.get("data")
    if not isinstance(data, Mapping):
        return event, None
    if kind == "turn/start" and "trigger" in data:
        return ({**event, "data": {k: v for k, v in data.items() if k != "trigger"}},
            "turn/start trigger")
    if kind == "turn/end" and "reason" in data:
        reason, name = upgrade_reason(event, data["reason"])
        return ({**event, "data": {**data, "reason": reason}}, name) if name else (event, None)
    if kind == "steering/message":
        if isinstance(data.get("message"), Mapping):
            return ({**event, "type": "user/message", "data": data["message"]},
                "steering/message")
        if "content" in data and "source" in data:
            message = {"id": legacy_message_id(session_id, seq), "role": "user",
                       "content": data["content"], "source": data["source"]}
            return {**event, "type": "user/message", "data": message}, "steering/message"
        _corrupt(event, "steering/message needs message, or content and source")
    if kind in ("user/message", "context/message"):
        if not ({"id", "role", "message"} & data.keys()) and "content" in data:
            return ({**event, "data": {**data, "role": "user",
                                       "id": legacy_message_id(session_id, seq)}},
                    "pre-identity message")
        return event, None
    if kind == "assistant/message" and "message" not in data and "content" in data:
        provenance = data.get("provenance")
        if not isinstance(provenance, Mapping):
            _corrupt(event, "a pre-identity assistant/message needs provenance")
        rest = {k: v for k, v in data.items() if k not in ("content", "provenance")}
        message = {"id": legacy_message_id(session_id, seq), "role": "assistant",
                   "content": data["content"], "source": {**provenance, "kind": "model"}}
        return {**event, "data": {**rest, "message": message}}, "pre-identity message"
    if kind == "tool/result" and "message" not in data and "callId" in data:
        call_id = data["callId"]
        block: dict[str, Any] = {"type": "tool-result", "toolCallId": call_id,
                                 "content": data.get("content")}
        if "isError" in data:
            block["isError"] = data["isError"]
        message_id = legacy_message_id(session_id, seq)
        op = event.get("surfaceOp")
        start = as_int(op.get("start")) if isinstance(op, Mapping) else None
        if start is not None and 0 <= start < len(done):
            # A rewrite keeps its original's id, so the content-only rule still holds.
            original = done[start].get("data")
            if isinstance(original, Mapping) and isinstance(original.get("message"), Mapping):
                message_id = original["message"].get("id", message_id)
        rest = {k: v for k, v in data.items() if k not in ("callId", "content", "isError")}
        message = {"id": message_id, "role": "user", "source": {"kind": "tool", "callId": call_id},
                   "content": [block]}
        return {**event, "data": {**rest, "message": message}}, "pre-identity message"
    return event, None


def upgrade_events(events: Sequence[Mapping[str, Any]], *, session_id: str) -> UpgradeResult:
    """Upgrade the legacy shapes of SPEC 7.3 step 2; events already current are returned
    unchanged (the same objects).

    Args:
        events: the log, in seq order from 0.
        session_id: the header's id, used in minted message ids.

    Raises:
        CorruptLogError: `log-corrupt` for a malformed old record.
    """
    result = UpgradeResult()
    for seq, event in enumerate(events):
        upgraded, name = _upgrade(event, seq, session_id, result.events)
        if name:
            result.applied[name] += 1
        result.events.append(upgraded)
    return result
