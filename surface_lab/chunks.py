"""The packed chunk-row codec of the JSONL format (SPEC 7.1): runs of streamed
`assistant/chunk` events stored as one record, and back."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import pairwise
from typing import Any

from .events import ROW_TAGS, Event
from .jsonvalue import MAX_SAFE_INTEGER, FrozenDict, as_int

__all__ = ["MAX_ROW_MEMBERS", "MIN_PACKED_RUN", "RowError", "expand_row", "member_chunk",
           "pack_records"]

MIN_PACKED_RUN = 3
# Readers refuse a packed row of more members, before expanding it: a member costs ~5 bytes
# on disk and ~600 in memory, so this bounds what one line can expand to. Writers split
# longer runs. (The longest row in the real dsh logs has 29 members.)
MAX_ROW_MEMBERS = 100_000

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
    """The logical `assistant/chunk` events of one packed row.

    Args:
        record: the row, with `seq0` and `time0` (or without both, in fixture form).
        fixture: the row is in snapshot-fixture form; `seq0`/`time0` give its position.

    Raises:
        RowError: when the row fails validation.
    """
    tag = record.get("type")
    if not isinstance(tag, str) or tag not in ROW_TAGS:
        raise RowError(f"{tag!r} is not a packed row type")
    expected = {"type", "data"} if fixture else {"type", "seq0", "time0", "data"}
    if record.keys() != expected:
        raise RowError(f"a packed row has exactly the keys {sorted(expected)}, "
                       f"got {sorted(record.keys())}")
    if not fixture:
        s0, t0 = as_int(record["seq0"]), as_int(record["time0"])
        if s0 is None or s0 < 0 or t0 is None:
            raise RowError("seq0 and time0 must be safe integers")
        seq0, time0 = s0, t0
    data = record["data"]
    if not isinstance(data, Mapping):
        raise RowError("row data must be an object")
    is_tool = tag == "tool-call-chunks"
    items_key = "args" if is_tool else "texts"
    want = {"turn", "step", "index", "dt", items_key} | ({"id"} if is_tool else set())
    if not (data.keys() == want or (is_tool and data.keys() == want | {"name"})):
        raise RowError(f"{tag} data has exactly the keys {sorted(want)}"
                       f"{' (and name)' if is_tool else ''}, got {sorted(data.keys())}")
    turn, step, index = (as_int(data[k]) for k in ("turn", "step", "index"))
    if turn is None or step is None or index is None:
        raise RowError("turn, step and index must be integers")
    items, dt = data[items_key], data["dt"]
    if isinstance(items, list) and len(items) > MAX_ROW_MEMBERS:  # before any expansion
        raise RowError(f"a packed row has {len(items)} members, more than the limit of "
                       f"{MAX_ROW_MEMBERS}")
    if not isinstance(items, list) or not items or not all(isinstance(x, str) for x in items):
        raise RowError(f"{items_key} must be a non-empty list of strings")
    if not isinstance(dt, list) or len(dt) != len(items) - 1:
        raise RowError(f"dt must list the {len(items) - 1} gaps between {len(items)} members")
    if is_tool and not (isinstance(data["id"], str)
                        and ("name" not in data or isinstance(data["name"], str))):
        raise RowError("id and name must be strings")
    times = [time0]
    for gap in dt:
        g = as_int(gap)
        if g is None:
            raise RowError(f"dt holds {gap!r}, not an integer")
        times.append(times[-1] + g)
        if abs(times[-1]) > MAX_SAFE_INTEGER:
            raise RowError("a member time is not a safe integer")
    events = []
    for k, item in enumerate(items):
        chunk = member_chunk(tag, index, item, data.get("id"), data.get("name"))
        events.append(FrozenDict({
            "type": "assistant/chunk", "seq": seq0 + k, "time": times[k],
            "data": FrozenDict({"turn": turn, "step": step, "chunk": FrozenDict(chunk)}),
        }))
    return events


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

