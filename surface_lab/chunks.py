"""The packed chunk-row codec of the JSONL format (SPEC 7.1): runs of streamed
`assistant/chunk` events stored as one record, and back."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import accumulate, pairwise
from typing import Any

import msgspec
from msgspec import UNSET

from .events import ROW_TAGS, Event
from .jsonvalue import FrozenDict, as_int
from .schema import (
    MAX_ROW_MEMBERS,
    ROW_ENVELOPE_RULES,
    ROW_MEMBERS,
    ROW_POSITION,
    ROW_RULES,
    RowCheck,
    Rows,
    Rule,
    convert,
    row_struct,
)

__all__ = ["MAX_ROW_MEMBERS", "MIN_PACKED_RUN", "RowError", "expand_row", "member_chunk",
           "pack_records"]

MIN_PACKED_RUN = 3

_DELTA_OF_TAG = {
    "text-chunks": "text-delta",
    "reasoning-chunks": "reasoning-delta",
    "tool-call-chunks": "tool-call-delta",
}
_TAG_OF_DELTA = {v: k for k, v in _DELTA_OF_TAG.items()}


class RowError(ValueError):
    """A packed row that fails validation (`row-malformed`)."""


def _is_int(value: Any) -> bool:
    return as_int(value) is not None


def _packable(event: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """The run key of a chunk event that may be packed, or None."""
    if event.keys() != {"type", "seq", "time", "data"} or event["type"] != "assistant/chunk":
        return None
    data = event["data"]
    if not isinstance(data, Mapping) or data.keys() != {"turn", "step", "chunk"}:
        return None
    chunk = data["chunk"]
    if not isinstance(chunk, Mapping) or not (_is_int(data["turn"]) and _is_int(data["step"])):
        return None
    kind = chunk.get("type")
    if kind in ("text-delta", "reasoning-delta"):
        if chunk.keys() != {"type", "index", "text"} or not isinstance(chunk["text"], str):
            return None
        name: tuple[Any, ...] = ()
    elif kind == "tool-call-delta":
        if not (chunk.keys() - {"name"} == {"type", "index", "id", "argumentsDelta"}
                and isinstance(chunk["id"], str) and isinstance(chunk["argumentsDelta"], str)):
            return None
        if "name" in chunk and not isinstance(chunk["name"], str):
            return None
        name = (chunk["id"], "name" in chunk, chunk.get("name"))
    else:
        return None
    if not _is_int(chunk["index"]):
        return None
    return (data["turn"], data["step"], kind, chunk["index"], *name)


def _row(run: Sequence[Event]) -> dict[str, Any]:
    first = run[0]
    data, chunk = first["data"], first["data"]["chunk"]
    kind = chunk["type"]
    times = [e["time"] for e in run]
    row_data: dict[str, Any] = {
        "turn": data["turn"],
        "step": data["step"],
        "index": chunk["index"],
        "dt": [b - a for a, b in pairwise(times)],
    }
    if kind == "tool-call-delta":
        row_data["id"] = chunk["id"]
        if "name" in chunk:
            row_data["name"] = chunk["name"]
        row_data["args"] = [e["data"]["chunk"]["argumentsDelta"] for e in run]
    else:
        row_data["texts"] = [e["data"]["chunk"]["text"] for e in run]
    return {"type": _TAG_OF_DELTA[kind], "seq0": first["seq"], "time0": first["time"],
            "data": row_data}


def pack_records(events: Sequence[Event]) -> Iterator[Mapping[str, Any]]:
    """The records to write for `events`: each run of >= 3 consecutive packable chunks
    becomes one packed row (a longer run than `MAX_ROW_MEMBERS`, several); every other
    event is written as it is."""
    i, n = 0, len(events)
    while i < n:
        key = _packable(events[i])
        j = i + 1
        if key is not None:
            while (j < n and j - i < MAX_ROW_MEMBERS
                   and events[j]["seq"] == events[j - 1]["seq"] + 1
                   and _packable(events[j]) == key):
                j += 1
        if key is not None and j - i >= MIN_PACKED_RUN:
            yield _row(events[i:j])
        else:
            yield from events[i:j]
        i = j


def expand_row(record: Mapping[str, Any], *, fixture: bool = False,
               seq0: int = 0, time0: int = 0) -> list[FrozenDict]:
    """The logical `assistant/chunk` events of one packed row, checked by the row rules
    of `schema` (integral floats count as integers, as everywhere in SPEC 1).

    Args:
        record: the row, with `seq0` and `time0` (or without both, in fixture form).
        fixture: the row is in snapshot-fixture form; `seq0`/`time0` give its position.

    Raises:
        RowError: when the row fails validation, with the message of the first rule broken.
    """
    tag = record.get("type")
    if not isinstance(tag, str) or tag not in ROW_TAGS:
        raise RowError(f"{tag!r} is not a packed row type")
    struct: Any = row_struct(tag, fixture=fixture)
    try:  # the usual case: a row every rule's type takes
        row: Any = msgspec.convert(record, struct)
    except msgspec.ValidationError:
        record = _integral(record)
        try:
            row = msgspec.convert(record, struct)
        except msgspec.ValidationError as err:
            raise RowError(_row_problem(tag, record, fixture, time0) or str(err)) from None
    if not fixture:
        seq0, time0 = row.seq, row.time
    data = row.data
    columns = Rows([time0], [data.members], [data.dt], typed=True)
    for check in struct.checks:  # every rule holds: the first check broken wins
        if check.broken(columns) is not None:
            raise RowError(_message(check.expected, data.members))
    name = getattr(data, "name", None)
    call_id, name = getattr(data, "id", None), None if name is UNSET else name
    times = accumulate(data.dt, initial=time0)
    return [FrozenDict({
        "type": "assistant/chunk", "seq": seq0 + k, "time": time,
        "data": FrozenDict({"turn": data.turn, "step": data.step, "chunk": FrozenDict(
            member_chunk(tag, data.index, item, call_id, name))}),
    }) for k, (item, time) in enumerate(zip(data.members, times, strict=True))]


def _integral(record: Mapping[str, Any]) -> dict[str, Any]:
    """`record` with each integral float (in it, its data and its dt) as an int."""
    out = {k: _as_int_or_same(v) for k, v in record.items()}
    data = out.get("data")
    if isinstance(data, Mapping):
        out["data"] = data = {k: _as_int_or_same(v) for k, v in data.items()}
        if isinstance(data.get("dt"), list):
            data["dt"] = [_as_int_or_same(v) for v in data["dt"]]
    return out


def _as_int_or_same(value: Any) -> Any:
    n = as_int(value) if type(value) is float else None
    return value if n is None else n


def _row_problem(tag: str, record: Mapping[str, Any], fixture: bool, time0: int) -> str | None:
    """The message of the first row rule `record` breaks, walking them in their order
    (`time0` is the row's in the fixture form)."""
    envelope = [r for r in ROW_ENVELOPE_RULES if not (fixture and r.field in ROW_POSITION)]
    problem = (_keys_problem("a packed row", record, {"type", *(r.field for r in envelope)})
               or _rule_problem(envelope, record, None))
    if problem:
        return problem
    data = record["data"]
    rules = ROW_RULES[tag]
    fields = [r for r in rules if isinstance(r, Rule)]
    problem = _keys_problem(f"{tag} data", data, {r.field for r in fields if r.required},
                            {r.field for r in fields if not r.required})
    if problem:
        return problem
    time0, members = record.get("time0", time0), data[ROW_MEMBERS[tag]]
    for rule in rules:
        if isinstance(rule, RowCheck):
            if rule.broken(Rows([time0], [members], [data["dt"]])) is not None:
                return _message(rule.expected, members)
        elif (problem := _rule_problem([rule], data, members)):
            return problem
    return None


def _keys_problem(what: str, record: Mapping[str, Any], required: set[str],
                  optional: set[str] | frozenset[str] = frozenset()) -> str | None:
    keys = record.keys()
    if required <= keys <= required | optional:
        return None
    also = f" (and {', '.join(sorted(optional))})" if optional else ""
    return f"{what} has exactly the keys {sorted(required)}{also}, got {sorted(keys)}"


def _rule_problem(rules: list[Rule], record: Mapping[str, Any], members: Any) -> str | None:
    """The message of the first of `rules` a present field of `record` breaks."""
    for rule in rules:
        if rule.field in record and not convert(record[rule.field], rule.type(Any)):
            bad = None
            if "{bad" in rule.expected:  # the first item of the list the type refuses
                bad = next(x for x in record[rule.field] if not convert([x], rule.type(Any)))
            return _message(rule.expected, members, bad=bad)
    return None


def _message(expected: str, members: Any, bad: Any = None) -> str:
    """A row rule's message (see `schema`), for a row whose members are `members`."""
    count = len(members) if isinstance(members, list) else 0
    return expected.format(members=count, gaps=count - 1, bad=bad)


def member_chunk(tag: str, index: int, item: str, call_id: str | None = None,
                 name: str | None = None) -> dict[str, Any]:
    """The `chunk` of one member of a packed row of type `tag`: the row's delta type and
    index and the member's text; a tool-call row's members also carry its call id and
    (when the row has one) name, and their text is the arguments delta."""
    delta = _DELTA_OF_TAG[tag]
    if tag != "tool-call-chunks":
        return {"type": delta, "index": index, "text": item}
    chunk: dict[str, Any] = {"type": delta, "index": index, "id": call_id}
    if name is not None:
        chunk["name"] = name
    chunk["argumentsDelta"] = item
    return chunk

