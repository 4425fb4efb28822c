"""The envelope (SPEC 1) and the message shapes (SPEC 5.1), each rule written once.

A rule names the error code, the field it reads and the msgspec type the field's value
must have. `events.check_envelope` and `events.check_message_shape` walk the rules in
order and convert each value to its type (the first that does not convert wins); the
fast reader decodes every line into structs built from the same rules (`event_fields`,
`message_struct`), so a line that breaks one does not decode and goes to the full
pipeline, which names it. A rule that relates fields (`Check`) is a predicate over such
a struct, which the full check builds by converting the message and the fast reader
gets from its decode.

To add a rule, add it to the table here; both readers then enforce it
(`tests/test_rules.py` shows each code enforced by both on the same input). A later
rule on a field must refine the earlier ones (accept only values they accept), since
the fast reader's struct types the field with the last.

`Opaque` stands for values no rule looks into (message content): msgspec skips them
(`Raw`) when decoding a line and takes them as they are (`Any`) when converting.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, Struct

from .jsonvalue import MAX_SAFE_INTEGER

__all__ = [
    "ENVELOPE_RULES",
    "MESSAGE_RULES",
    "NAME",
    "SAFE_INT",
    "Check",
    "Rule",
    "event_fields",
    "list_of",
    "message_checks",
    "message_struct",
]

SAFE_INT = Annotated[int, Meta(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)]
NAME = Annotated[str, Meta(min_length=1)]


class Plain(Struct, gc=False):
    """The base of every rule struct: never in a reference cycle, so the garbage
    collector need not track the few hundred thousand of them a log makes."""


@dataclass(frozen=True)
class Rule:
    """`field` must convert to `type(opaque)`; else `code`, with `expected` (formatted
    with `where`, the message's place) and the value got."""

    code: str
    field: str
    type: Callable[[Any], Any]  # the type, given what opaque values are
    expected: str
    required: bool = True


@dataclass(frozen=True)
class Check:
    """`holds(message struct)` must be true; else `code` with `describe(struct)`."""

    code: str
    holds: Callable[[Any], bool]
    describe: Callable[[Any], str]


# -- the envelope (SPEC 1) ----------------------------------------------------------------
# (The keys allowed are `events.EVENT_KEYS`; seq and the surface fields are the planner's.)

ENVELOPE_RULES: tuple[Rule, ...] = (
    Rule("envelope-invalid", "type", lambda o: NAME, "type must be a non-empty string"),
    Rule("envelope-invalid", "time", lambda o: SAFE_INT, "time must be an integer (epoch ms)"),
    Rule("envelope-invalid", "data", lambda o: o, "the data key is required (null for no data)"),
    Rule("envelope-invalid", "ignorable", lambda o: Literal[True],
         "ignorable may only be the literal true", required=False),
)


def event_fields(opaque: Any) -> dict[str, Any]:
    """The envelope fields the rules type (besides `type`, the decode's tag), by name."""
    return {r.field: r.type(opaque) for r in ENVELOPE_RULES if r.field != "type"}


# -- message shapes (SPEC 5.1) ------------------------------------------------------------


class SourceKind(Plain):
    kind: NAME


class ModelSource(Plain):
    kind: Literal["model"]
    provider: NAME
    model: NAME


class ToolSource(Plain):
    kind: Literal["tool"]
    callId: str  # the on-disk key


@cache
def _tool_block(opaque: Any) -> type[Struct]:
    return msgspec.defstruct("ToolBlock", [("type", Literal["tool-result"]),
                                           ("content", list_of(opaque)),
                                           ("toolCallId", Any, UNSET)],
                             bases=(Plain,))


def list_of(item: Any) -> Any:
    """`list[item]` for a type made at run time."""
    return list[item]


def _one_tool_block(opaque: Any) -> Any:
    return Annotated[list_of(_tool_block(opaque)), Meta(min_length=1, max_length=1)]


def _common(role: str) -> tuple[Rule, ...]:
    return (
        Rule("message-unidentified", "id", lambda o: NAME,
             "{where}.id must be a non-empty string"),
        Rule("message-role", "role", lambda o: Literal[role], f"{{where}}.role must be {role!r}"),
        Rule("message-source", "source", lambda o: SourceKind,
             "{where}.source.kind must be a non-empty string"),
        Rule("message-content", "content", list_of, "{where}.content must be a list"),
    )


MESSAGE_RULES: dict[str, tuple[Rule, ...]] = {
    "user/message": _common("user"),
    "context/message": _common("user"),
    "assistant/message": (*_common("assistant"), Rule(
        "message-source", "source", lambda o: ModelSource,
        "{where}.source must be {{kind: 'model', provider, model}} with non-empty strings")),
    "tool/result": (*_common("user"), Rule(
        "tool-result-shape", "source", lambda o: ToolSource,
        "{where}.source must be {{kind: 'tool', callId}}"), Rule(
        "tool-result-shape", "content", _one_tool_block,
        "{where}.content must be exactly one tool-result block whose content is a list")),
}

_CHECKS: dict[str, tuple[Check, ...]] = {
    "tool/result": (Check(
        "tool-call-id-mismatch",
        lambda m: m.content[0].toolCallId == m.source.callId,
        lambda m: f"tool-result toolCallId {_unset(m.content[0].toolCallId)!r} != "
                  f"source.callId {m.source.callId!r}"),),
}


def _unset(value: Any) -> Any:
    return None if value is UNSET else value


def message_checks(kind: str) -> tuple[Check, ...]:
    return _CHECKS.get(kind, ())


@cache
def message_struct(kind: str, opaque: Any) -> type[Struct]:
    """The message of a `kind` event as a struct: each field typed by its last rule."""
    fields: dict[str, Any] = {}
    for rule in MESSAGE_RULES[kind]:
        fields[rule.field] = rule.type(opaque)
    return msgspec.defstruct(f"Message_{kind.replace('/', '_')}", list(fields.items()),
                             bases=(Plain,))


def convert(value: Any, tp: Any) -> bool:
    """Whether `value` (a Python JSON value) converts to `tp`."""
    try:
        msgspec.convert(value, tp)
    except msgspec.ValidationError:
        return False
    return True


def first_broken(rules: tuple[Rule, ...], record: Mapping[str, Any]) -> tuple[Rule, Any] | None:
    """The first rule `record` breaks, with the value it got (`<missing>` when absent)."""
    for rule in rules:
        if rule.field not in record:
            if rule.required:
                return rule, "<missing>"
            continue
        if not convert(record[rule.field], rule.type(Any)):
            return rule, record[rule.field]
    return None

