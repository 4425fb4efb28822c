"""The splice planner of IMPORTERS.md 2.7: turn a target surface T, stated by another tool
after one of its history manipulations, into admission-valid replaces and appends on the
current surface O."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TOMBSTONE", "Append", "Keep", "New", "Replace", "longest_increasing", "plan"]


@dataclass(frozen=True)
class Keep:
    """An event already in the log that the target keeps."""

    seq: int


@dataclass(frozen=True)
class New:
    """An event to create: `type` and `data`, with an optional original it copies and the
    source record it comes from."""

    type: str
    data: Any
    copy_of: int | None = None
    origin: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def is_tool_result(self) -> bool:
        return self.type == "tool/result"


TOMBSTONE = New("tombstone", None)


@dataclass(frozen=True)
class Replace:
    start: int
    end: int
    item: New


@dataclass(frozen=True)
class Append:
    item: New


Op = Replace | Append


def longest_increasing(values: Sequence[int]) -> list[int]:
    """Indices of one longest strictly increasing subsequence of `values` (O(n log n))."""
    tails: list[int] = []  # index into values of the smallest tail of each length
    parent = [-1] * len(values)
    import bisect

    tail_values: list[int] = []
    for i, value in enumerate(values):
        k = bisect.bisect_left(tail_values, value)
        if k == len(tails):
            tails.append(i)
            tail_values.append(value)
        else:
            tails[k] = i
            tail_values[k] = value
        parent[i] = tails[k - 1] if k else -1
    out: list[int] = []
    i = tails[-1] if tails else -1
    while i != -1:
        out.append(i)
        i = parent[i]
    return out[::-1]


def plan(current: Sequence[int], target: Sequence[Keep | New],
         copy: Any, *, tombstones: bool = False) -> list[Op]:
    """The operations that turn the surface `current` into `target`.

    Args:
        current: O, the surface seqs now.
        target: T, what the model sees right after the manipulation.
        copy: `copy(seq) -> New`, a copy of the event at `seq`.
        tombstones: stand a tombstone in for a deleted run in the middle instead of
            widening.
    """
    position = {seq: i for i, seq in enumerate(current)}
    candidates = [(ti, position[item.seq]) for ti, item in enumerate(target)
                  if isinstance(item, Keep) and item.seq in position]
    chosen = {candidates[k][0] for k in longest_increasing([p for _, p in candidates])}
    items: list[Keep | New] = [
        item if not isinstance(item, Keep) or ti in chosen else copy(item.seq)
        for ti, item in enumerate(target)]
    kept = [(ti, position[item.seq]) for ti, item in enumerate(items) if isinstance(item, Keep)]
    # Gaps between kept items: (disappearing O run, appearing T items, T index of the gap).
    gaps: list[tuple[list[int], list[New], int]] = []
    previous_t, previous_o = -1, -1
    for ti, oi in [*kept, (len(items), len(current))]:
        news = [x for x in items[previous_t + 1 : ti] if isinstance(x, New)]
        gaps.append((list(current[previous_o + 1 : oi]), news, previous_t + 1))
        previous_t, previous_o = ti, oi
    ops: list[Op] = []
    for gap, (gone, news, t_start) in enumerate(gaps):
        if not gone and not news:
            continue
        if gone and len(news) == 1 and not news[0].is_tool_result:
            ops.append(Replace(gone[0], gone[-1], news[0]))
            continue
        if gone and not news and tombstones:
            ops.append(Replace(gone[0], gone[-1], TOMBSTONE))
            continue
        # Widen: everything from here to the end of O goes; everything from here in T comes.
        if gone:
            start = position[gone[0]]
        elif gap < len(kept):
            start = kept[gap][1]  # the next kept item
        else:
            start = len(current)
        widened = list(current[start:])
        rest = [x if isinstance(x, New) else copy(x.seq) for x in items[t_start:]]
        if not widened:
            ops += [Append(x) for x in rest]
        elif rest and not rest[0].is_tool_result:
            ops.append(Replace(widened[0], widened[-1], rest[0]))
            ops += [Append(x) for x in rest[1:]]
        else:
            ops.append(Replace(widened[0], widened[-1], TOMBSTONE))
            ops += [Append(x) for x in rest]
        break
    return ops
