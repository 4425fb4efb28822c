"""What a path is: the one answer `read_log`, every command, the frames and the corpus use.

A path is a log file (`.jsonl`, `.jsonl.zstd`, or another agent's log, which reading
names the importer of), a folder holding one session's file, a JSONL store folder, a
SQLite database, or a folder or glob of plain logs. Anything else is refused before it
is opened: a FIFO (opening it would wait for a writer), a device (`/dev/zero` never
ends), a socket, a file under `/proc` or `/sys` (its size is not its length), a
symbolic link loop. Nothing here reads more than a header line.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..errors import StorageError
from .codec import MAX_LINE_BYTES, BadLine, open_regular, parse_line, refusal

__all__ = ["LOG_NAMES", "Resolved", "choose_session", "is_sqlite", "open_regular", "refusal",
           "resolve"]

LOG_NAMES = ("session.jsonl", "session.jsonl.zstd")  # a store's (or a folder's) session file
LOG_SUFFIXES = (".jsonl", ".jsonl.zstd")
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


def _is_member(path: Path) -> bool:
    """A log of a folder or glob. One named as a log that cannot be read (a FIFO, a
    dangling link, a device) is a member too, so that reading it is a problem line."""
    if not path.name.endswith((*LOG_SUFFIXES, *SQLITE_SUFFIXES)) or path.is_dir():
        return False
    if refusal(path) is not None:
        return os.path.lexists(path)
    return path.name.endswith(LOG_SUFFIXES) or is_sqlite(path)


def _is_store(folder: Path) -> bool:
    """A folder in the store layout: project folders holding `<id>/session.jsonl`."""
    return any(project.is_dir() and any(project.glob(f"*/{name}") for name in LOG_NAMES)
               for project in folder.iterdir() if refusal(project) is None)


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
