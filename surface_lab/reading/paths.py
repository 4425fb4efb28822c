"""What a path is, and which logs a set of paths holds: the one answer `read_log`, every
command, the audit, the frames and the corpus use.

A path is a log file (`.jsonl`, `.jsonl.zstd`, or another agent's log, which reading
imports), a folder holding one session's file, a JSONL store folder, a SQLite database,
another agent's log folder, or a folder or glob of logs. Anything else is refused before
it is opened: a FIFO (opening it would wait for a writer), a device (`/dev/zero` never
ends), a socket, a file under `/proc` or `/sys` (its size is not its length), a
symbolic link loop. `discover` walks a folder for every log below it, wherever the
agents keep them (`~/.claude/projects`, `~/.codex/sessions`, pi's session folders, a
SWE-bench run's `trajs/`). Nothing here reads more than the head of a file.
"""

from __future__ import annotations

import glob
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..errors import StorageError
from ..importers import detect_format
from .codec import MAX_LINE_BYTES, BadLine, open_regular, parse_line, refusal

__all__ = ["LOG_NAMES", "Discovery", "Found", "Resolved", "choose_session", "discover",
           "expand", "is_sqlite", "log_format", "open_regular", "refusal", "resolve"]

LOG_NAMES = ("session.jsonl", "session.jsonl.zstd")  # a store's (or a folder's) session file
# The one suffix list: surface logs, and the files other agents write (what detect_format
# names; `.traj.json` ends with `.json`). A database is known by its first bytes.
SURFACE_SUFFIXES = (".jsonl", ".jsonl.zstd")
AGENT_SUFFIXES = (".jsonl", ".json", ".traj")
LOG_SUFFIXES = tuple(dict.fromkeys((*SURFACE_SUFFIXES, *AGENT_SUFFIXES)))
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
_SQLITE_MAGIC = b"SQLite format 3\x00"

Kind = Literal["log", "store", "sqlite", "logs"]


def is_sqlite(path: Path) -> bool:
    """A regular file that starts with SQLite's magic; never opens anything else."""
    if refusal(path) is not None or not path.is_file():
        return False
    try:
        with open_regular(path) as f:
            return f.read(16) == _SQLITE_MAGIC
    except (OSError, StorageError):
        return False


def _header_id(path: Path) -> str | None:
    """The session id in a plain log's first line, if it has one."""
    if path.name.endswith(".zstd"):
        from .codec import read_log_bytes

        first = read_log_bytes(path)[0].split(b"\n", 1)[0]
    else:
        with open_regular(path) as f:
            first = f.readline(MAX_LINE_BYTES)
    try:
        header = parse_line(first)
    except BadLine:
        return None
    found = header.get("id")
    return found if isinstance(found, str) else None


@dataclass(frozen=True)
class Resolved:
    """What a path is. `log`: one log file (`file`); `store`: a JSONL store folder;
    `sqlite`: a database; `logs`: a folder or glob of plain logs (`members`, each a log
    file or a database)."""

    path: Path
    kind: Kind
    file: Path | None = None
    members: tuple[Path, ...] = field(default=())

    def member_ids(self) -> list[str | None]:
        """The session id of each plain log among the members (None for a database or a
        log without one)."""
        return [None if is_sqlite(m) else _header_id(m) for m in self.members]


def log_format(path: Path) -> str | None:
    """What `path` holds as logs: `surface` (a log file, or a folder of one session's
    file), `store` (a JSONL store folder), `sqlite`, an importer's format name (another
    agent's file or folder, `importers.detect_format`), or None (a `.json` or `.traj`
    file no importer names, any other file). Never opens a FIFO or a
    device; a continuation file (`*.cont-N.json`) is its main file's, so None."""
    if refusal(path) is not None:
        return None
    if path.is_dir():
        if any((path / name).is_file() for name in LOG_NAMES):
            return "surface"
        fmt = detect_format(path)
        if fmt is not None:
            return fmt
        return "store" if _is_store(path) else None
    if not path.is_file() or ".cont-" in path.name:
        return None
    if path.name.endswith(SQLITE_SUFFIXES) or not path.name.endswith(LOG_SUFFIXES):
        return "sqlite" if is_sqlite(path) else None
    try:
        fmt = detect_format(path)
    except (OSError, ValueError, RecursionError):  # unreadable: not a log we can name
        return None
    if fmt is not None:
        return fmt
    # a `.jsonl` no importer names is taken for a surface log: reading says what is wrong
    return "surface" if path.name.endswith(SURFACE_SUFFIXES) else None


def _is_member(path: Path) -> bool:
    """A log of a folder or glob: a file some reader names (`log_format`). One named as
    a log that cannot be read (a FIFO, a dangling link, a device) is a member too, so that
    reading it is a problem line."""
    if path.is_dir():
        return False
    if refusal(path) is not None:
        return _named_log(path)
    return path.is_file() and log_format(path) is not None


def _named_log(path: Path) -> bool:
    """A path named as a log (its suffix) that exists as a name (a dangling link too)."""
    return os.path.lexists(path) and path.name.endswith((*LOG_SUFFIXES, *SQLITE_SUFFIXES))


def _is_store(folder: Path) -> bool:
    """A folder in the store layout: project folders holding `<id>/session.jsonl`."""
    try:
        return any(project.is_dir() and any(next(project.glob(f"*/{name}"), None) is not None
                                            for name in LOG_NAMES)
                   for project in folder.iterdir() if refusal(project) is None)
    except OSError:  # a folder that cannot be listed holds no store we can read
        return False


def resolve(path: str | os.PathLike[str]) -> Resolved:
    """What `path` is (see the module's docstring).

    Raises:
        StorageError: a missing path, one refused unopened, a glob matching no log.
    """
    text = os.fspath(path)
    where = Path(text)
    if not os.path.lexists(text) and any(ch in text for ch in "*?["):
        members = tuple(Path(p) for p in sorted(glob.glob(text, recursive=True))
                        if _is_member(Path(p)))
        if not members:
            raise StorageError(f"{text}: matches no log (.jsonl, .jsonl.zstd or a SQLite "
                               f"database)", code="no-log-found", path=text)
        return Resolved(where, "logs", members=members)
    why = refusal(where)
    if why is not None:
        raise StorageError(f"{where}: {why}", code="path-refused", path=text)
    if where.is_dir():
        for name in LOG_NAMES:
            if (where / name).is_file() and refusal(where / name) is None:
                return Resolved(where, "log", file=where / name)
        if _is_store(where):
            return Resolved(where, "store")
        members = tuple(child for child in sorted(where.iterdir()) if _is_member(child))
        if members:
            return Resolved(where, "logs", members=members)
        return Resolved(where, "store")  # an empty store, or another agent's folder
    return Resolved(where, "sqlite" if is_sqlite(where) else "log", file=where)


def choose_session(ids: Sequence[str | None], session_id: str | None, where: str, *,
                   option: str = "session_id=") -> int:
    """The index of the session to read among `ids`: `session_id`'s, or the only one.
    `option` is how the caller names the choice (`session_id=` in Python, `--session
    ID` on the command line).

    Raises:
        StorageError: no such session, none at all, or several and none chosen.
    """
    if not ids:
        raise StorageError(f"{where}: holds no session", code="no-session", path=where)
    if session_id is not None:
        if session_id not in ids:
            raise StorageError(f"{where}: no session {session_id!r} (it holds {len(ids)} "
                               f"session(s))", code="session-not-found", path=where)
        if ids.count(session_id) > 1:
            raise StorageError(f"{where}: session {session_id!r} is held {ids.count(session_id)}"
                               f" times; give the file itself", code="session-duplicated",
                               path=where)
        return ids.index(session_id)
    if len(ids) != 1:
        named = [repr(i) for i in ids if i is not None]
        listed = ", ".join(named[:10]) + (", ..." if len(named) > 10 else "")
        raise StorageError(f"{where}: holds {len(ids)} sessions; pick one with {option} "
                           f"({listed})", code="session-ambiguous", path=where,
                           argument="session_id" if option == "session_id=" else None)
    return 0


@dataclass(frozen=True)
class Found:
    """One log source: a file or folder and its format (`log_format`); a Claude Code
    session's subagent files (`<session>/subagents/agent-*.jsonl`) are `attached` to it,
    not sources of their own (the importer reads them from the session's path)."""

    path: Path
    format: str
    attached: tuple[Path, ...] = ()


@dataclass(frozen=True)
class Discovery:
    """What `discover` or `expand` found: the logs, in path order, and the files with a
    log's suffix that no reader recognises (`skipped`, so nothing is left out unsaid)."""

    logs: tuple[Found, ...]
    skipped: tuple[Path, ...] = ()

    def __iter__(self) -> Iterator[Found]:
        return iter(self.logs)

    def __len__(self) -> int:
        return len(self.logs)

    def by_format(self) -> dict[str, int]:
        """How many logs of each format, most first."""
        counts = Counter(f.format for f in self.logs)
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def summary(self) -> str:
        """`3 logs: 2 claude-code (4 subagent files attached), 1 codex` (and what was
        skipped)."""
        parts = []
        for fmt, n in self.by_format().items():
            extra = sum(len(f.attached) for f in self.logs if f.format == fmt)
            parts.append(f"{n} {fmt}" + (f" ({extra} subagent file"
                                          f"{'' if extra == 1 else 's'} attached)"
                                          if extra else ""))
        text = f"{len(self.logs)} log{'' if len(self.logs) == 1 else 's'}"
        text += (": " + ", ".join(parts)) if parts else ""
        if self.skipped:
            text += (f"; {len(self.skipped)} file(s) with a log's name that no reader "
                     f"recognises left out")
        return text


def _subagent_owner(path: Path) -> Path | None:
    """The session file a Claude Code subagent file belongs to:
    `<dir>/<session>/subagents/agent-*.jsonl` -> `<dir>/<session>.jsonl`, if it exists."""
    if path.parent.name != "subagents" or not path.name.startswith("agent-"):
        return None
    session = path.parent.parent
    owner = session.with_name(session.name + ".jsonl")
    return owner if owner.is_file() else None


def discover(root: str | os.PathLike[str]) -> Discovery:
    """Every log below `root`, whichever agent wrote it: surface logs, stores and
    databases, Claude Code projects (each session with its subagent files attached),
    Codex `sessions/YYYY/MM/DD/`, pi session folders, SWE-agent and mini-swe-agent
    `trajs/`, OpenHands folders and anything else `importers.detect_format` names. A
    folder that is one source (a store, a session folder, an OpenHands conversation) is
    not walked into.

    Raises:
        StorageError: `root` is missing or refused unopened.
    """
    base = Path(root)
    why = refusal(base)
    if why is not None:
        raise StorageError(f"{base}: {why}", code="path-refused", path=str(base))
    if not base.exists():
        raise StorageError(f"{base}: no such file or folder", code="path-refused",
                           path=str(base))
    if not base.is_dir():
        fmt = log_format(base)
        return Discovery((Found(base, fmt),) if fmt else (), () if fmt else (base,))
    logs: list[Found] = []
    skipped: list[Path] = []
    attached: dict[Path, list[Path]] = {}
    for folder, dirs, files in os.walk(base, followlinks=False):
        here = Path(folder)
        whole = log_format(here)
        if whole is not None:
            logs.append(Found(here, whole))
            dirs[:] = []
            continue
        dirs[:] = sorted(d for d in dirs if refusal(here / d) is None)
        for name in sorted(files):
            path = here / name
            if ".cont-" in name:
                continue
            if refusal(path) is not None:  # a FIFO, a device, a dangling link
                if _named_log(path):  # kept: reading it refuses it unopened, a problem line
                    logs.append(Found(path, "surface"))
                continue
            owner = _subagent_owner(path) if name.endswith(".jsonl") else None
            if owner is not None:
                attached.setdefault(owner, []).append(path)
                continue
            fmt = log_format(path)
            if fmt is not None:
                logs.append(Found(path, fmt))
            elif name.endswith(LOG_SUFFIXES):
                skipped.append(path)
    out = [Found(f.path, f.format, tuple(sorted(attached.get(f.path, ())))) for f in logs]
    return Discovery(tuple(sorted(out, key=lambda f: str(f.path))), tuple(skipped))


def expand(names: Sequence[str | os.PathLike[str]]) -> Discovery:
    """The logs a list of names holds: a file named is taken as it is (reading says what
    is wrong with it); a glob takes the logs it matches (and the logs below a folder it
    matches); a folder is `discover`ed.

    Raises:
        StorageError: a missing name, one refused unopened, a glob matching no log.
    """
    logs: list[Found] = []
    skipped: list[Path] = []
    for name in names:
        text = os.fspath(name)
        if not os.path.lexists(text) and any(ch in text for ch in "*?["):
            found = []
            for match in sorted(glob.glob(text, recursive=True)):
                path = Path(match)
                fmt = "surface" if refusal(path) is not None and _named_log(path) else (
                    log_format(path))
                if fmt is not None:
                    found.append(Found(path, fmt))
                elif path.is_dir() and refusal(path) is None:  # `projects/*`: walk each
                    below = discover(path)
                    found += below.logs
                    skipped += below.skipped
            if not found:
                raise StorageError(f"{text}: matches no log (.jsonl, .jsonl.zstd, another "
                                   f"agent's log or a SQLite database)", code="no-log-found",
                                   path=text)
            logs += found
            continue
        where = Path(text)
        why = refusal(where)
        if why is not None:
            raise StorageError(f"{where}: {why}", code="path-refused", path=text)
        if not os.path.lexists(text):
            raise StorageError(f"{where}: no such file or folder", code="path-refused",
                               path=text)
        if where.is_dir():
            found_below = discover(where)
            logs += found_below.logs
            skipped += found_below.skipped
        else:
            logs.append(Found(where, log_format(where) or "surface"))
    return Discovery(tuple(logs), tuple(skipped))
