"""Importers: other agents' session logs as valid surface logs (IMPORTERS.md).

`detect_format(path)` names the format of a file or folder (None for a surface log or
anything unknown); `import_<format>(source, ...)` returns an `ImportResult` whose events
seed a `Session`; `import_any` dispatches on the detected or given format.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..jsonvalue import loads
from .atif import import_atif, looks_like_atif
from .claude_code import import_claude_code, looks_like_claude_code
from .codex import import_codex, looks_like_codex
from .common import ImportFailure, ImportResult
from .mini_swe_agent import import_mini_swe_agent, looks_like_mini_swe_agent
from .openhands import (
    import_openhands,
    import_openhands_v0,
    is_v0_event,
    looks_like_openhands,
    looks_like_openhands_v0,
    looks_like_openhands_v0_folder,
)
from .pi import import_pi, is_pi_header
from .swe_agent import import_swe_agent, looks_like_swe_agent
from .unsupported import unsupported_agent

__all__ = [
    "FORMATS",
    "ImportFailure",
    "ImportResult",
    "detect_format",
    "import_any",
    "import_atif",
    "import_claude_code",
    "import_codex",
    "import_mini_swe_agent",
    "import_openhands",
    "import_openhands_v0",
    "import_pi",
    "import_swe_agent",
    "refusal_reason",
    "unsupported_format",
]

FORMATS = {
    "claude-code": import_claude_code,
    "codex": import_codex,
    "pi": import_pi,
    "atif": import_atif,
    "openhands": import_openhands,
    "swe-agent": import_swe_agent,
    "mini-swe-agent": import_mini_swe_agent,
    "openhands-v0": import_openhands_v0,
}
# The formats whose importer takes `subagents=` (see import_any).
TAKES_SUBAGENTS = frozenset({"claude-code"})
KNOWN = "Claude Code, Codex, pi, ATIF, OpenHands (V0 and V1), SWE-agent or mini-swe-agent"
PEEK_BYTES = 256 * 1024
MAX_DOCUMENT = 64 * 1024 * 1024


def _first_records(path: Path) -> list[dict[str, Any]]:
    return _sniff(path)[0]


def _sniff(path: Path) -> tuple[list[dict[str, Any]], bytes]:
    """The JSON object lines among the first 50 lines of the file, and its first bytes."""
    with open(path, "rb") as f:
        head = f.read(PEEK_BYTES)
    return list(_objects(head)), head


def _objects(head: bytes) -> Iterator[dict[str, Any]]:
    """The JSON object lines among the first 50 lines of `head`, parsed as they are
    asked for (a surface log is told by its first)."""
    for line in head.splitlines()[:50]:
        try:  # orjson (jsonvalue.loads) refuses nesting past 1024 levels, never recursing
            value = loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield value


_NO_DOCUMENT = object()
JSONL_JOIN = re.compile(rb"\}[ \t\r]*\n\{")


def _document(path: Path, head: bytes) -> Any:
    """The file as one JSON document when it is one (a `[` or `{` first, small enough to
    read whole); `_NO_DOCUMENT` otherwise."""
    if head.lstrip()[:1] not in (b"{", b"[") or path.stat().st_size > MAX_DOCUMENT:
        return _NO_DOCUMENT
    if JSONL_JOIN.search(head):  # an object line then another: JSONL, not read whole
        return _NO_DOCUMENT
    raw = path.read_bytes()
    try:
        return loads(raw)
    except ValueError as err:  # several lines (JSONL), not JSON, too deep, not UTF-8
        if "surrogate" not in str(err):
            return _NO_DOCUMENT
    try:  # a lone surrogate escape: the document is still recognised (its importer then
        return json.loads(raw)  # refuses that string with its line)
    except (ValueError, RecursionError):
        return _NO_DOCUMENT


def _looks_like_output_jsonl(records: list[dict[str, Any]], head: bytes) -> bool:
    """An OpenHands evaluation `output.jsonl`: lines `{instance_id, history: [V0 events],
    ...}`; a first line longer than the peek is recognised by its opening keys."""
    if records:
        first = records[0]
        history = first.get("history")
        return ("instance_id" in first and isinstance(history, list) and bool(history)
                and is_v0_event(next((e for e in history if isinstance(e, dict)), None)))
    line = head.split(b"\n", 1)[0]
    return (line.startswith(b'{"instance_id"') and b'"history": [' in line[:PEEK_BYTES]
            and (b'"action": "' in line or b'"observation": "' in line))


def _detect(path: Path) -> tuple[str | None, str | None, bool]:
    """(importer format, unsupported agent, is JSON) of a file."""
    with open(path, "rb") as f:
        head = f.read(PEEK_BYTES)
    first = next(_objects(head), None)  # a pi or surface log is told by its first record
    if first is not None:
        if is_pi_header(first):
            return "pi", None, True
        if first.get("type") == "session" and "createdAt" in first:
            return None, None, True
    records = list(_objects(head))
    if records:
        if looks_like_codex(records):
            return "codex", None, True
        if _looks_like_output_jsonl(records, head):
            return "openhands-v0", None, True
    elif _looks_like_output_jsonl(records, head):
        return "openhands-v0", None, True
    # Two object lines make it JSONL, never one document: a long log is not read whole.
    document = _NO_DOCUMENT if len(records) > 1 else _document(path, head)
    found = None if document is _NO_DOCUMENT else document
    agent = unsupported_agent(records, found, head, path)
    if agent is not None:
        return None, agent, True
    if records:
        if looks_like_claude_code(records):
            return "claude-code", None, True
        if looks_like_atif(records[0]):
            return "atif", None, True
    if document is not _NO_DOCUMENT:
        for fmt, test in (("atif", looks_like_atif), ("mini-swe-agent",
                                                      looks_like_mini_swe_agent),
                          ("swe-agent", looks_like_swe_agent),
                          ("openhands-v0", looks_like_openhands_v0)):
            if test(document):
                return fmt, None, True
    return None, None, bool(records) or document is not _NO_DOCUMENT


def detect_format(path: str | Path) -> str | None:
    """The importer format of a file or folder, or None (a surface log, or unknown: see
    `unsupported_format` for the agents recognised but not imported)."""
    path = Path(path)
    if path.is_dir():
        if looks_like_openhands(path):
            return "openhands"
        return "openhands-v0" if looks_like_openhands_v0_folder(path) else None
    if not path.is_file():
        return None
    return _detect(path)[0]


def unsupported_format(path: str | Path) -> str | None:
    """The agent whose log `path` is, when surface-lab recognises it but cannot import it
    yet ("Gemini CLI", "Aider", ...); None otherwise."""
    path = Path(path)
    if not path.is_file():
        return None
    return _detect(path)[1]


def _surface_like(record: dict[str, Any]) -> bool:
    """A record that reads as a (broken) surface log's header or event."""
    return record.get("type") == "session" or "createdAt" in record or "seq" in record or (
        "version" in record and "id" in record)


def refusal_reason(path: Path) -> str | None:
    """Why `path` cannot be read or imported, when it is JSON of some other kind: an
    agent we do not import yet, or JSON that is no agent log at all."""
    if not path.is_file():
        return None
    fmt, agent, is_json = _detect(path)
    if fmt is not None:
        return None
    if agent is not None:
        return f"{agent} logs are not supported yet (surface-lab imports {KNOWN} logs)"
    if not is_json:
        return None
    records = _first_records(path)
    if records and _surface_like(records[0]):
        return None  # a surface log's header or event: the reader says what is wrong
    return f"JSON that is no agent log: neither a surface log nor a {KNOWN} log"


def import_any(source: str | Path, *, fmt: str | None = None, leaf: str | None = None,
               tombstones: bool = False, strict: bool = False,
               subagents: bool = False) -> ImportResult:
    """Import with the given or detected format.

    `subagents=True` is passed to the importers that take it (Claude Code: each subagent
    file beside the session is imported into its `ImportResult.subagents` link); the
    formats without subagent files ignore it. Every importer is guarded by
    `common.no_foreign_errors`: a record of a shape no check foresaw is an `ImportFailure`
    (`importer-error`) naming the file, never a foreign exception."""
    fmt = fmt or detect_format(source)
    if fmt is None:
        refused = refusal_reason(Path(source))
        raise ImportFailure(f"{source}: {refused or 'not a format surface-lab can import'}"
                           + ("" if refused else f" ({KNOWN})"),
                           code="format-unsupported", path=str(source))
    if fmt not in FORMATS:
        raise ImportFailure(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}",
                            code="format-unsupported", path=str(source))
    options: dict[str, Any] = {"tombstones": tombstones, "strict": strict}
    if leaf is not None:
        if fmt not in ("claude-code", "pi", "openhands", "openhands-v0"):
            raise ImportFailure(f"--leaf does not apply to {fmt}", code="format-unsupported",
                               path=str(source))
        options["leaf"] = leaf
    if subagents and fmt in TAKES_SUBAGENTS:
        options["subagents"] = True
    importer: Any = FORMATS[fmt]
    result: ImportResult = importer(source, **options)
    return result
