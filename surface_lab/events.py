"""Event vocabulary (SPEC 3), the envelope (SPEC 1) and message shapes (SPEC 5.1)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

import msgspec

from .errors import AdmissionError
from .jsonvalue import FrozenDict, NotJsonError, as_int, freeze
from .schema import ENVELOPE_RULES, MESSAGE_RULES, first_broken, message_checks, message_struct

__all__ = [
    "CORE_TYPES",
    "EVENT_KEYS",
    "KNOWN_TYPES",
    "RETIRED_TYPES",
    "ROW_TAGS",
    "SESSION_FORMAT_VERSION",
    "SURFACE_TYPES",
    "Event",
    "TypeNames",
    "check_envelope",
    "check_message_shape",
    "describe",
    "fail",
    "freeze_event",
    "mapping_at",
    "message_of",
    "normalise_op",
]

SESSION_FORMAT_VERSION = 0

# A committed event: a read-only mapping with the on-disk (camelCase) keys.
Event = Mapping[str, Any]

class TypeNames(frozenset[str]):
    """A set of event type names whose `in` is safe on untrusted values: anything that is
    not a string (a list, a dict, None) is simply not a member."""

    def __contains__(self, value: object) -> bool:
        return isinstance(value, str) and frozenset.__contains__(self, value)


SURFACE_TYPES = TypeNames(
    {"user/message", "context/message", "assistant/message", "tool/result"}
)
CORE_TYPES = TypeNames(SURFACE_TYPES | {
    "turn/start",
    "turn/end",
    "step/start",
    "step/end",
    "assistant/chunk",
    "tool/call",
    "todo/write",
    "request/header",
    "request/context",
    "session/end-seed",
    "compaction/start",
    "compaction/summary",
    "compaction/end",
    "compaction/prune",
})
_PLUGIN_TYPES = (
    "agent-preset/selected", "agent/inbox/spliced", "approval/asked", "approval/decided",
    "approval/policy", "command/run", "command/done", "feedback/record", "goal/change",
    "hook/invoked", "hook/result", "llm/retry", "llm/retry-started", "permission/preset",
    "plan/mode", "sandbox/mode", "schedule/change", "session/title", "session/title-llm-request",
    "subagent/descriptor", "team/member", "team/task", "team/message/queued",
    "team/message/delivered", "tool/code-dispatch", "tool/code-dispatch-start",
    "tool-workflow/agent-start", "tool-workflow/agent-end", "tool-workflow/run-start",
    "tool-workflow/run-end", "web/deepseek-search-llm-request",
)
KNOWN_TYPES = TypeNames(CORE_TYPES | frozenset(_PLUGIN_TYPES))
RETIRED_TYPES = TypeNames({"request/header-delta", "mode/set"})
ROW_TAGS = TypeNames({"text-chunks", "reasoning-chunks", "tool-call-chunks"})
# Plain sets for hot paths that have already checked the value is a string.
SURFACE_SET: frozenset[str] = frozenset(SURFACE_TYPES)
ROW_SET: frozenset[str] = frozenset(ROW_TAGS)
RETIRED_SET: frozenset[str] = frozenset(RETIRED_TYPES)

# On-disk key order of an event (SPEC 7.1); no other top-level key is allowed.
EVENT_KEYS: tuple[str, ...] = (
    "type",
    "seq",
    "time",
    "data",
    "sourceEventSeqs",
    "surfaceOp",
    "ignorable",
)
_EVENT_KEY_SET = frozenset(EVENT_KEYS)
_INT_KEYS = ("seq", "time")


def describe(event: Any) -> str:
    """`seq N TYPE` for error messages, with whatever of the two is known."""
    if not isinstance(event, Mapping):
        return "event"
    seq, kind = as_int(event.get("seq")), event.get("type")
    parts = [f"seq {seq}" if seq is not None else "", kind if isinstance(kind, str) else ""]
    return " ".join(p for p in parts if p) or "event"


def fail(code: str, event: Any, message: str) -> NoReturn:
    """Raise the AdmissionError of a broken rule, naming the event's seq and type."""
    seq = as_int(event.get("seq")) if isinstance(event, Mapping) else None
    kind = event.get("type") if isinstance(event, Mapping) else None
    raise AdmissionError(
        f"{describe(event)}: {message}",
        code=code,
        seq=seq,
        event_type=kind if isinstance(kind, str) else None,
        detail=message,
    )


def normalise_op(op: Any) -> Any:
    """A replace op with integral-float ends as ints (anything else as it is)."""
    if isinstance(op, Mapping) and "start" in op and "end" in op:
        start, end = as_int(op["start"]), as_int(op["end"])
        if start is not None and end is not None:
            return {**op, "start": start, "end": end}
    return op


def freeze_event(raw: Any) -> FrozenDict:
    """Check that every value of `raw` is JSON and return a read-only copy in on-disk key
    order, with integral floats in `seq`, `time`, `sourceEventSeqs` and replace endpoints
    converted to int. Unknown keys are kept so that the envelope check can name them.

    Raises:
        AdmissionError: `envelope-invalid` if `raw` is not a mapping, `data-not-json` for
            a value that is not JSON.
    """
    if type(raw) is FrozenDict:
        return raw
    if not isinstance(raw, Mapping):
        fail("envelope-invalid", raw, f"an event must be a JSON object, not {type(raw).__name__}")
    ordered: dict[str, Any] = {}
    for key in EVENT_KEYS:
        if key in raw:
            ordered[key] = raw[key]
    for key in raw:
        if key not in _EVENT_KEY_SET:
            ordered[key] = raw[key]
    for key in _INT_KEYS:
        if key in ordered and (value := as_int(ordered[key])) is not None:
            ordered[key] = value
    sources = ordered.get("sourceEventSeqs")
    if isinstance(sources, list):
        ordered["sourceEventSeqs"] = [n if (n := as_int(v)) is not None else v for v in sources]
    if "surfaceOp" in ordered:
        ordered["surfaceOp"] = normalise_op(ordered["surfaceOp"])
    try:
        frozen: FrozenDict = freeze(ordered, "event")
    except NotJsonError as err:
        fail("data-not-json", raw, f"{err.where.removeprefix('event.')}: {err.reason}")
    return frozen


def check_envelope(event: Mapping[str, Any]) -> None:
    """SPEC 1 (the keys of `EVENT_KEYS`, then `schema.ENVELOPE_RULES` in order) and the
    retired types of SPEC 3. `seq`, `surfaceOp` and `sourceEventSeqs` values are the
    surface planner's business (SPEC 4.1).

    Raises:
        AdmissionError: `envelope-invalid` or `legacy-unsupported`.
    """
    extra = [k for k in event if k not in _EVENT_KEY_SET]
    if extra:
        fail("envelope-invalid", event, f"unexpected top-level key {extra[0]!r}; "
              f"expected only {', '.join(EVENT_KEYS)}")
    broken = first_broken(ENVELOPE_RULES, event)
    if broken is not None:
        rule, got = broken
        fail(rule.code, event, f"{rule.expected}, got {got!r}")
    kind = event["type"]
    if kind in ROW_SET:  # a string by now
        fail("envelope-invalid", event,
              f"type {kind!r} is reserved for packed chunk rows of the JSONL format")
    data = event["data"]
    if kind in RETIRED_SET or (
        kind == "request/header" and isinstance(data, Mapping) and data.get("reason") == "fallback"
    ):
        what = f"{kind} with reason 'fallback'" if kind == "request/header" else kind
        fail("legacy-unsupported", event, f"{what} is retired and can no longer be read")


def mapping_at(value: Any, key: str) -> Mapping[str, Any]:
    """`value[key]` when `value` is a mapping holding a mapping there, else `{}`: for
    reading optional nested fields of untrusted data."""
    if isinstance(value, Mapping):
        found = value.get(key)
        if isinstance(found, Mapping):
            return found
    return {}


def message_of(event: Mapping[str, Any]) -> Any:
    """The Message a surface event carries: `data` for user and context messages,
    `data.message` for assistant messages and tool results (None if absent)."""
    data = event.get("data")
    if event.get("type") in ("assistant/message", "tool/result"):
        return data.get("message") if isinstance(data, Mapping) else None
    return data


def check_message_shape(event: Mapping[str, Any]) -> None:
    """SPEC 5.1, for the four surface types (other types pass): the rules of
    `schema.MESSAGE_RULES` in order, then its checks across fields.

    Raises:
        AdmissionError: `message-unidentified`, `message-role`, `message-source`,
            `message-content`, `tool-result-shape` or `tool-call-id-mismatch`.
    """
    kind = event.get("type")
    if not isinstance(kind, str) or kind not in SURFACE_SET:
        return
    where = "data" if kind in ("user/message", "context/message") else "data.message"
    msg = message_of(event)
    if not isinstance(msg, Mapping):
        fail("message-unidentified", event, f"{where} must be a message object, got {msg!r}")
    broken = first_broken(MESSAGE_RULES[kind], msg)
    if broken is not None:
        rule, got = broken
        fail(rule.code, event, f"{rule.expected.format(where=where)}, got {got!r}")
    checks = message_checks(kind)
    if checks:
        struct = msgspec.convert(msg, message_struct(kind, Any))
        for check in checks:
            if not check.holds(struct):
                fail(check.code, event, check.describe(struct))
