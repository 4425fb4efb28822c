"""`ReadOnlySequence`: the base of the sequences that stand for a list without being one
(the surface's node snapshot, the fast reader's events, lines and plans)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar, overload

__all__ = ["ReadOnlySequence"]

T = TypeVar("T")


class ReadOnlySequence(Sequence[T]):
    """A read-only sequence whose items come from `_item(index)` (0 <= index < len);
    indexing, slicing (to a list) and iteration follow from it. Equal to a list or
    tuple with the same items, like the list it stands for, and so unhashable."""

    __slots__ = ()
    _what = "item"  # for the IndexError message

    def __len__(self) -> int:
        raise NotImplementedError

    def _item(self, index: int) -> T:
        raise NotImplementedError

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return [self._item(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"{self._what} index out of range")
        return self._item(index)

    def __iter__(self) -> Iterator[T]:
        return map(self._item, range(len(self)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, ReadOnlySequence)):
            return len(self) == len(other) and all(
                a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to lists, so unhashable like them
