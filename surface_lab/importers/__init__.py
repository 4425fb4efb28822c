"""Importers: other agents' session logs as valid surface logs (IMPORTERS.md).

`detect_format(path)` names the format of a file or folder (None for a surface log or
anything unknown); `import_<format>(source, ...)` returns an `ImportResult` whose events
seed a `Session`; `import_any` dispatches on the detected or given format.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from .atif import import_atif, looks_like_atif
from .claude_code import import_claude_code, looks_like_claude_code
from .codex import import_codex, looks_like_codex
from .common import ImportFailure, ImportResult
from .openhands import import_openhands, looks_like_openhands
from .pi import import_pi, is_pi_header

__all__ = [
    "FORMATS",
    "ImportFailure",
    "ImportResult",
    "detect_format",
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
            value = orjson.loads(line)
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
            if looks_like_atif(orjson.loads(path.read_bytes())):
                return "atif"
        except (ValueError, UnicodeDecodeError):
            return None
    return None


def import_any(source: str | Path, *, fmt: str | None = None, leaf: str | None = None,
               tombstones: bool = False, strict: bool = False) -> ImportResult:
    """Import with the given or detected format."""
    fmt = fmt or detect_format(source)
    if fmt is None:
        raise ImportFailure(f"{source}: not a format surface-lab can import (Claude Code, "
                            f"Codex, pi, ATIF or OpenHands)", code="format-unsupported",
                            path=str(source))
    if fmt not in FORMATS:
        raise ImportFailure(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}",
                            code="format-unsupported", path=str(source))
    options: dict[str, Any] = {"tombstones": tombstones, "strict": strict}
    if leaf is not None:
        if fmt not in ("claude-code", "pi", "openhands"):
            raise ImportFailure(f"--leaf does not apply to {fmt}", code="format-unsupported",
                                path=str(source))
        options["leaf"] = leaf
    importer: Any = FORMATS[fmt]
    result: ImportResult = importer(source, **options)
    return result
