"""The envelope (SPEC 1), the message shapes (SPEC 5.1) and the packed chunk rows
(SPEC 7.1), each rule written once.

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

Packed rows have their own table (`ROW_RULES`, see its section): `chunks.expand_row`
converts a row through the struct built from it and walks it for the message of the
first rule broken; the fast reader decodes rows into the same struct (`row_fields`) and
runs the row checks on a stretch of rows.

`Opaque` stands for values no rule looks into (message content): msgspec skips them
(`Raw`) when decoding a line and takes them as they are (`Any`) when converting.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import accumulate, takewhile
from typing import Annotated, Any, Literal, NamedTuple

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from .jsonvalue import MAX_SAFE_INTEGER, as_int

__all__ = [
    "ENVELOPE_RULES",
    "MAX_ROW_MEMBERS",
    "MESSAGE_RULES",
    "NAME",
    "ROW_ENVELOPE_RULES",
    "ROW_MEMBERS",
    "ROW_POSITION",
    "ROW_RULES",
    "SAFE_INT",
    "SEQ",
    "Check",
    "RowCheck",
    "Rows",
    "Rule",
    "event_fields",
    "list_of",
    "message_checks",
    "message_struct",
    "row_checks",
    "row_data_struct",
    "row_fields",
    "row_struct",
]

SAFE_INT = Annotated[int, Meta(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)]
SEQ = Annotated[int, Meta(ge=0, le=MAX_SAFE_INTEGER)]
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



# -- packed chunk rows (SPEC 7.1) ----------------------------------------------------------
#
# A row is checked as its record's keys (exactly `type` and the fields of
# ROW_ENVELOPE_RULES; the fixture form has no `seq0`/`time0`), then those rules, then its
# data's keys (the fields of `ROW_RULES[tag]`, the optional ones may be absent), then the
# entries of `ROW_RULES[tag]` in order: a `Rule` types a field, a `RowCheck` relates
# fields the rules before it have passed. Every row message is its `expected` formatted
# with `members` (how many the row has) and `gaps` (members - 1) and, for a rule over a
# list, `bad` (its first item the rule's type refuses). `chunks.expand_row` walks them;
# the fast reader decodes rows into `row_fields` and runs the checks on a stretch of rows
# at once.

# Readers refuse a packed row of more members, before expanding it: a member costs ~5 bytes
# on disk and ~600 in memory, so this bounds what one line can expand to. Writers split
# longer runs. (The longest row in the real dsh logs has 29 members.)
MAX_ROW_MEMBERS = 100_000

# The data field that holds a row's members (its texts or argument deltas), by row tag.
ROW_MEMBERS: dict[str, str] = {
    "text-chunks": "texts", "reasoning-chunks": "texts", "tool-call-chunks": "args"}
# The envelope fields a row in the snapshot-fixture form (SPEC 7.1.1) leaves out.
ROW_POSITION = ("seq0", "time0")


class Rows(NamedTuple):
    """Packed rows as columns, for the checks across a row's fields (`RowCheck`)."""

    time0: Sequence[int]
    members: Sequence[Sequence[str]]
    dt: Sequence[Sequence[Any]]
    # What is known of every gap: it is a safe integer (`typed`: a decoder or conversion
    # typed them so), or an integer in [0, gaps_within), which lets a check prove a
    # whole stretch of rows at once.
    typed: bool = False
    gaps_within: int | None = None


@dataclass(frozen=True)
class RowCheck:
    """`broken(rows)` is the index of the first of `rows` that breaks the rule (None if
    none does); then `code`, with `expected` formatted as every row message is."""

    code: str
    broken: Callable[[Rows], int | None]
    expected: str


def _gap_count_wrong(rows: Rows) -> int | None:
    """The first row whose dt does not list a gap between each two members."""
    want = [len(m) - 1 for m in rows.members]
    if list(map(len, rows.dt)) == want:
        return None
    return next(i for i, (dt, n) in enumerate(zip(rows.dt, want, strict=True)) if len(dt) != n)


def _is_safe_int(value: Any) -> bool:
    return as_int(value) is not None


def _time_unsafe(rows: Rows) -> int | None:
    """The first row with a member time (time0 + the gaps so far) that is not a safe
    integer, looking only at the gaps before the first that is not an integer (the rule
    after this check names that one)."""
    within = rows.gaps_within
    if within is not None and rows.time0 and (
            max(rows.time0) + max(map(len, rows.members)) * within <= MAX_SAFE_INTEGER):
        return None  # each time is in [time0, time0 + members * within): all are safe
    for i, (time0, dt) in enumerate(zip(rows.time0, rows.dt, strict=True)):
        gaps = dt if rows.typed or within is not None else takewhile(_is_safe_int, dt)
        times = list(accumulate(gaps, initial=time0))
        if min(times) < -MAX_SAFE_INTEGER or max(times) > MAX_SAFE_INTEGER:
            return i
    return None


_POSITION_SAFE = "seq0 and time0 must be safe integers"
ROW_ENVELOPE_RULES: tuple[Rule, ...] = (
    Rule("row-malformed", "seq0", lambda o: SEQ, _POSITION_SAFE),
    Rule("row-malformed", "time0", lambda o: SAFE_INT, _POSITION_SAFE),
    Rule("row-malformed", "data", lambda o: dict[str, Any], "row data must be an object"),
)

# Any JSON value but a list of more than MAX_ROW_MEMBERS: the limit comes before what the
# members are, so an over-long row is refused before anything looks into it.
_WITHIN_LIMIT = (Annotated[list[Any], Meta(max_length=MAX_ROW_MEMBERS)]
                 | dict[str, Any] | str | int | float | bool | None)
_MEMBERS = Annotated[list[str], Meta(min_length=1, max_length=MAX_ROW_MEMBERS)]
_INTEGERS = "turn, step and index must be integers"
_GAPS = "dt must list the {gaps} gaps between {members} members"
_STRINGS = "id and name must be strings"


def _row_rules(tag: str) -> tuple[Rule | RowCheck, ...]:
    members = ROW_MEMBERS[tag]
    tool: tuple[Rule, ...] = (
        Rule("row-malformed", "id", lambda o: str, _STRINGS),
        Rule("row-malformed", "name", lambda o: str, _STRINGS, required=False),
    ) if tag == "tool-call-chunks" else ()
    return (
        *(Rule("row-malformed", name, lambda o: SAFE_INT, _INTEGERS)
          for name in ("turn", "step", "index")),
        Rule("row-malformed", members, lambda o: _WITHIN_LIMIT,
             f"a packed row has {{members}} members, more than the limit of {MAX_ROW_MEMBERS}"),
        Rule("row-malformed", members, lambda o: _MEMBERS,
             f"{members} must be a non-empty list of strings"),
        Rule("row-malformed", "dt", lambda o: list[Any], _GAPS),
        RowCheck("row-malformed", _gap_count_wrong, _GAPS),
        *tool,
        RowCheck("row-malformed", _time_unsafe, "a member time is not a safe integer"),
        Rule("row-malformed", "dt", lambda o: list[SAFE_INT], "dt holds {bad!r}, not an integer"),
    )


ROW_RULES: dict[str, tuple[Rule | RowCheck, ...]] = {tag: _row_rules(tag) for tag in ROW_MEMBERS}


def row_checks(tag: str) -> tuple[RowCheck, ...]:
    """The checks across the fields of a `tag` row, in order."""
    return tuple(r for r in ROW_RULES[tag] if isinstance(r, RowCheck))


def _last_rules(rules: Iterable[Rule | RowCheck]) -> dict[str, Rule]:
    """Each field's last rule, in the order the fields first appear."""
    fields: dict[str, Rule] = {}
    for rule in rules:
        if isinstance(rule, Rule):
            fields[rule.field] = rule
    return fields


@cache
def row_data_struct(tag: str, narrowed: tuple[tuple[str, Any], ...] = ()) -> type[Struct]:
    """The data of a `tag` row as a struct: each field typed by its last rule (or as
    `narrowed` says, for a decoder that takes less), the members under the name
    `members`, the optional fields UNSET when absent, no other field."""
    narrow = dict(narrowed)
    fields: list[tuple[str, Any, Any]] = []
    for name, rule in _last_rules(ROW_RULES[tag]).items():
        tp = narrow.get(name, rule.type(Any))
        attr = "members" if name == ROW_MEMBERS[tag] else name
        fields.append((attr, tp, msgspec.field(name=name)) if rule.required else
                      (attr, tp | UnsetType, msgspec.field(name=name, default=UNSET)))
    return msgspec.defstruct(f"RowData_{tag.replace('-', '_')}", fields, bases=(Plain,),
                             forbid_unknown_fields=True, kw_only=True)


def row_fields(tag: str, *, fixture: bool = False, narrowed: tuple[tuple[str, Any], ...] = ()
               ) -> list[tuple[str, Any, Any]]:
    """The fields of a `tag` row record as a struct (the tag aside): `seq0` and `time0`
    under the names of an event's `seq` and `time` (none in the fixture form), then
    `data` (`row_data_struct`)."""
    fields: list[tuple[str, Any, Any]] = []
    for rule in ROW_ENVELOPE_RULES:
        if rule.field == "data":
            fields.append(("data", row_data_struct(tag, narrowed), msgspec.field(name="data")))
        elif not fixture:
            fields.append((rule.field.removesuffix("0"), rule.type(Any),
                           msgspec.field(name=rule.field)))
    return fields


@cache
def row_struct(tag: str, *, fixture: bool = False) -> type[Struct]:
    """A `tag` row record, tagged by its `type` (see `row_fields`); the class attribute
    `checks` is `row_checks(tag)`."""
    return msgspec.defstruct(f"Row_{tag.replace('-', '_')}", row_fields(tag, fixture=fixture),
                             bases=(Plain,), tag_field="type", tag=tag,
                             forbid_unknown_fields=True, namespace={"checks": row_checks(tag)})
