"""JSON values (SPEC 1): checking, integer normalisation, read-only views and JSON equality."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, NoReturn

__all__ = [
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "FrozenDict",
    "FrozenList",
    "NotJsonError",
    "as_int",
    "dumps",
    "freeze",
    "json_equal",
    "loads",
    "thaw",
]

MAX_SAFE_INTEGER = 2**53 - 1
# Deeper values are refused with a clean error rather than a RecursionError (SPEC 1).
MAX_DEPTH = 400
_WHERE_MAX = 120  # characters of a value's path kept in a NotJsonError


def _read_only(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(f"{type(self).__name__} is read-only: events in a log never change")


class FrozenDict(dict[str, Any]):
    """A read-only JSON object. A `dict` subclass, so JSON encoders and `==` work as usual;
    `.copy()` gives a plain, mutable dict."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"


class FrozenList(list[Any]):
    """A read-only JSON array. A `list` subclass for the same reasons as `FrozenDict`."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only
    append = extend = insert = pop = remove = clear = sort = reverse = _read_only

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenList:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))

    def __repr__(self) -> str:
        return f"FrozenList({list.__repr__(self)})"


class NotJsonError(ValueError):
    """A value is not JSON; `where` is a path such as `data.content[0].text`."""

    def __init__(self, where: str, reason: str) -> None:
        if len(where) > _WHERE_MAX:  # a path 400 levels deep would make a kilobyte message
            where = f"{where[:_WHERE_MAX // 2]}...{where[-_WHERE_MAX // 2:]}"
        super().__init__(f"{where}: {reason}")
        self.where = where
        self.reason = reason


def as_int(value: Any) -> int | None:
    """The value as a safe integer (integral floats converted), or None if it is not one.

    A bool is never an integer here.
    """
    if type(value) is int:
        return value if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER else None
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if value.is_integer() and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return int(value)
        return None
    if isinstance(value, int):  # int subclasses such as IntEnum
        return as_int(int(value))
    return None


def freeze(value: Any, where: str = "data") -> Any:
    """Check that `value` is JSON and return a read-only deep copy of it.

    Raises:
        NotJsonError: for tuples, sets, bytes, non-str keys, NaN, ±Infinity, other objects,
            or nesting deeper than MAX_DEPTH.
    """
    return _freeze(value, where, 0)


def _freeze(value: Any, where: str, depth: int) -> Any:
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is int:
        return value
    if kind is float:
        if not math.isfinite(value):
            raise NotJsonError(where, f"{value!r} is not a JSON number")
        return value
    if kind is FrozenDict or kind is FrozenList:
        return value  # already checked when it was frozen
    if depth >= MAX_DEPTH:
        raise NotJsonError(where, f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise NotJsonError(where, f"object key {key!r} is not a string")
            out[key] = _freeze(item, f"{where}.{key}", depth + 1)
        return FrozenDict(out)
    if isinstance(value, list):
        return FrozenList(
            [_freeze(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value)]
        )
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _freeze(float(value), where, depth)
    if isinstance(value, Mapping):
        return _freeze(dict(value), where, depth)
    raise NotJsonError(where, f"a {type(value).__name__} is not a JSON value")


def dumps(value: Any) -> bytes:
    """Compact JSON as UTF-8 (no `\\u` escapes for non-ASCII, keys in insertion order)."""
    import orjson

    try:
        return orjson.dumps(value)
    except TypeError:  # integers beyond 64 bits: the standard library writes them exactly
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return text.encode()


# orjson (yyjson) reserves up to 12 bytes per input byte before it builds a value, and
# under an address-space limit it can die of SIGSEGV when that reservation succeeds but a
# Python object it then makes does not (orjson 3.11-3.13: a failed string allocation is
# not checked). N bytes decode to at most N bytes of string if ASCII, else 4N; that much
# more than 12N (and 1 MiB), checked before the parse, leaves room for both.
_ORJSON_BYTES_PER_BYTE = 12
_ORJSON_SLACK = 1 << 20
_SIZE_CHECKED_FROM = 1 << 16  # smaller inputs: the check would cost more than it saves


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON with orjson, where exhausted memory is always a `MemoryError`.

    orjson reports a buffer it could not allocate as a `JSONDecodeError` ("Not enough
    memory"), which a reader would take for a bad line; here it is a `MemoryError`. An
    input of 64 KiB or more is parsed only when the address space its parse may need is
    free: 13 times its size if ASCII, else 16 times (an anonymous mapping of that size
    is made and dropped at once, touching no page), so a memory limit ends in a
    `MemoryError`, never in a crash of the parser.

    Raises:
        orjson.JSONDecodeError: not JSON (as `orjson.loads` raises it).
        MemoryError: not enough memory to parse `data`.
    """
    import orjson

    size = len(data)
    if size >= _SIZE_CHECKED_FROM:
        ascii_only = data.isascii() if not isinstance(data, memoryview) else False
        strings = size if ascii_only else 4 * size
        check_room(size * _ORJSON_BYTES_PER_BYTE + strings + _ORJSON_SLACK)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as err:
        if str(err).startswith("Not enough memory"):
            raise MemoryError(f"parsing {size} bytes of JSON: {err}") from None
        raise


def check_room(nbytes: int) -> None:
    """Raise `MemoryError` unless `nbytes` of address space can be mapped now."""
    import mmap

    try:
        mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE).close()
    except (OSError, ValueError, OverflowError) as err:  # ENOMEM under RLIMIT_AS
        raise MemoryError(f"{nbytes} bytes of memory are not available: {err}") from None


def thaw(value: Any) -> Any:
    """A plain, mutable deep copy of a JSON value (frozen views become dicts and lists)."""
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [thaw(v) for v in value]
    return value


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality (SPEC 4.1 step 7): unordered object keys, ordered arrays, numbers by
    value, and a boolean never equal to a number. The same compact text is the same
    value, so equal encodings answer at once; others are compared member by member (keys
    in another order, 1 and 1.0), and so is any text with a null in it (NaN and the
    infinities, which are not JSON, encode as null too)."""
    try:
        text = dumps(a)
        if b"null" not in text and text == dumps(b):
            return True
    except (TypeError, ValueError):  # not JSON: the walk below says how it differs
        pass
    return _json_equal(a, b)


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    return a is None and b is None
