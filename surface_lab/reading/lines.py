"""What both passes over a log's lines share: the type code of each line (an index into
`TYPE_NAMES`, `ROW` for a packed row), translation masks over those codes, the records
kept of each line, and the stretches of lines decoded at a time."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

from msgspec import Struct

from ..events import KNOWN_TYPES, SURFACE_SET

__all__ = ["CODE", "IS_ROW", "IS_SURFACE", "ROW", "TYPE_NAMES", "Plain", "Records", "mask",
           "stretches"]

# Every type the fast reader takes, in the order of the frames' categories.
TYPE_NAMES: tuple[str, ...] = tuple(sorted(KNOWN_TYPES))
CODE = {name: code for code, name in enumerate(TYPE_NAMES)}
ROW = 255  # the code of a packed row's line
STRETCH_BYTES = 4 << 20


class Plain(Struct, gc=False):
    """The base of every record: never in a reference cycle, so the garbage collector
    need not track the few hundred thousand of them a log makes."""


def mask(codes: frozenset[int]) -> bytes:
    """A `bytes.translate` table: 1 for the codes given, 0 for every other."""
    return bytes(int(code in codes) for code in range(256))



IS_ROW = mask(frozenset({ROW}))
IS_SURFACE = mask(frozenset(CODE[name] for name in SURFACE_SET))


@dataclass(slots=True)
class Records:
    """What the reader keeps of each line: where it starts, its type code (ROW for a
    packed row) and its first seq."""

    starts: list[int]  # byte offset of each line, and one past the last
    codes: bytes | bytearray  # (a bytearray while the reader fills it in)
    first_seq: list[int]  # and the event count after the last line



def stretches(starts: list[int], first: int = 0,
              last: int | None = None) -> Iterator[tuple[int, int]]:
    """The lines (from `first` to before `last`, by default all) in stretches of about
    `STRETCH_BYTES` (at least one line each), as (first line, line after the last)."""
    last = len(starts) - 1 if last is None else last
    while first < last:
        end = max(bisect_right(starts, starts[first] + STRETCH_BYTES, first, last),
                  first + 1)
        yield first, end
        first = end
