"""Importers: other agents' session logs as valid surface logs (IMPORTERS.md).

`detect_format(path)` names the format of a file or folder (None for a surface log or
anything unknown); `import_<format>(source, ...)` returns an `ImportResult` whose events
seed a `Session`; `import_any` dispatches on the detected or given format.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import SurfaceLabError
from ..jsonvalue import loads
from .atif import import_atif, looks_like_atif
from .claude_code import import_claude_code, looks_like_claude_code
from .codex import import_codex, looks_like_codex
from .common import ImportError_, ImportResult, printable
from .openhands import import_openhands, looks_like_openhands
from .pi import import_pi, is_pi_header

__all__ = [
    "FORMATS",
    "ImportResult",
    "detect_format",
    "foreign_format_hint",
    "import_any",
    "import_atif",
    "import_claude_code",
    "import_codex",
    "import_openhands",
    "import_pi",
]

FORMATS = {
    "claude-code": import_claude_code,
    "codex": import_codex,
    "pi": import_pi,
    "atif": import_atif,
    "openhands": import_openhands,
}
PEEK_BYTES = 256 * 1024


def _first_records(path: Path) -> list[dict[str, Any]]:
    with open(path, "rb") as f:
        head = f.read(PEEK_BYTES)
    records = []
    for line in head.splitlines()[:50]:
        try:  # orjson refuses nesting past 1024 levels with a ValueError, never recursing
            value = loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            records.append(value)
    return records


def detect_format(path: str | Path) -> str | None:
    """The importer format of a file or folder, or None (a surface log, or unknown)."""
    path = Path(path)
    if path.is_dir():
        return "openhands" if looks_like_openhands(path) else None
    if not path.is_file():
        return None
    records = _first_records(path)
    if records:
        first = records[0]
        if is_pi_header(first):
            return "pi"
        if first.get("type") == "session" and "createdAt" in first:
            return None
        if looks_like_codex(records):
            return "codex"
        if looks_like_claude_code(records):
            return "claude-code"
        if looks_like_atif(first):
            return "atif"
    if path.suffix == ".json" and path.stat().st_size < 64 * 1024 * 1024:
        try:
            if looks_like_atif(loads(path.read_bytes())):
                return "atif"
        except ValueError as err:  # UnicodeDecodeError is one
            if "surrogate" not in str(err):
                return None
            # orjson refuses a lone surrogate escape; the importer names its line
            try:
                document = json.loads(path.read_bytes().decode("utf-8"))
            except (ValueError, RecursionError):
                return None
            return "atif" if looks_like_atif(document) else None
    return None


def foreign_format_hint(path: str | Path) -> str | None:
    """`"... use surface-lab convert --from X ..."` when `path` is another tool's log;
    None when it is not one, or looking cannot tell (a line nested too deep to parse,
    bytes that are not text, a file that cannot be read): this only adds a hint."""
    try:
        fmt = detect_format(path)
    except (RecursionError, ValueError, OSError):  # UnicodeDecodeError is a ValueError
        return None
    if fmt is None:
        return None
    names = {"claude-code": "a Claude Code transcript", "codex": "a Codex rollout",
             "pi": "a pi session log", "atif": "an ATIF trajectory",
             "openhands": "an OpenHands conversation folder"}
    return (f"this is {names[fmt]}, not a surface log; import it with: surface-lab convert "
            f"--from {fmt} {path} -o OUT.jsonl")


def import_any(source: str | Path, *, fmt: str | None = None, leaf: str | None = None,
               tombstones: bool = False, strict: bool = False) -> ImportResult:
    """Import with the given or detected format."""
    fmt = fmt or detect_format(source)
    if fmt is None:
        raise ImportError_(f"{source}: not a format surface-lab can import (Claude Code, "
                           f"Codex, pi, ATIF or OpenHands)", code="format-unsupported",
                           path=str(source))
    if fmt not in FORMATS:
        raise ImportError_(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}",
                           code="format-unsupported", path=str(source))
    options: dict[str, Any] = {"tombstones": tombstones, "strict": strict}
    if leaf is not None:
        if fmt not in ("claude-code", "pi", "openhands"):
            raise ImportError_(f"--leaf does not apply to {fmt}", code="format-unsupported",
                               path=str(source))
        options["leaf"] = leaf
    importer: Any = FORMATS[fmt]
    try:
        result: ImportResult = importer(source, **options)
    except SurfaceLabError as err:  # the package's own (an AdmissionError is a ValueError too)
        if err.path is not None:
            raise
        # the builder's refusal of an event it was given: the source file is the place
        raise ImportError_(f"{source}: {err.message}", code=err.code, path=str(source)) \
            from err
    except _SHAPE_ERRORS as err:
        # A record of a shape no check of the importer foresaw (a list where an id
        # goes, an object for a type): the file's problem, never an internal error.
        # MemoryError is not one: it says nothing about the file.
        what = "nested too deep" if isinstance(err, RecursionError) else \
            f"{type(err).__name__}: {err}"
        raise ImportError_(printable(f"{source}: a record of an unexpected shape stopped the "
                                     f"{fmt} import ({what}); nothing imported"),
                           code="record-malformed", path=str(source)) from err
    return result


# What Python raises on a value of the wrong type or shape deep in an importer.
_SHAPE_ERRORS = (TypeError, KeyError, AttributeError, IndexError, ValueError, OverflowError,
                 RecursionError)
