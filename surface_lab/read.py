"""`read_log`: open any stored log for analysis, never writing (SPEC 7.3)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .errors import CorruptLogError, StorageError, UnsupportedFormatError
from .events import Event
from .jsonvalue import FrozenDict
from .session import Session
from .storage.base import Problem, Scan
from .storage.jsonl import LOG_NAME, ZSTD_NAME, JsonlStore, Progress, scan_file
from .storage.load import CheckedLog, check_log
from .storage.sqlite import SqliteStore, is_sqlite_file
from .surface import FoldResult

__all__ = ["LogReading", "read_log"]


@dataclass
class LogReading:
    """A log as read: header, logical events, the surface fold, what repair would add
    (not applied) and the problems found."""

    path: str
    header: FrozenDict
    events: list[Event]
    form: Literal["stored", "fixture"]
    mode: Literal["surface", "linear"]
    fold: FoldResult
    closers: list[Event]
    problems: list[Problem]
    lines: list[int]

    @property
    def valid(self) -> bool:
        """No problem of severity `error` (notes do not count)."""
        return not any(p.severity == "error" for p in self.problems)

    @property
    def session_id(self) -> str:
        return str(self.header["id"])

    def session(self) -> Session:
        """A new Session seeded from the events plus the closers (in memory only)."""
        return Session(self.session_id, seed=[*self.events, *self.closers], header=self.header)

    @classmethod
    def _from(cls, checked: CheckedLog) -> LogReading:
        return cls(checked.path, checked.header, checked.events, checked.form, checked.mode,
                   checked.fold, checked.closers, checked.problems, checked.lines)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)


def _pick(ids: list[str], session_id: str | None, where: str) -> str:
    if session_id is not None:
        if session_id not in ids:
            raise StorageError(f"{where}: no session {session_id!r} (it holds "
                               f"{len(ids)} session(s))", path=where)
        return session_id
    if len(ids) != 1:
        listed = ", ".join(repr(i) for i in ids[:10])
        raise StorageError(f"{where}: holds {len(ids)} sessions; pick one with session_id "
                           f"({listed}{', ...' if len(ids) > 10 else ''})", path=where)
    return ids[0]


def _scan(path: Path, session_id: str | None, progress: Progress | None = None) -> Scan:
    if path.is_dir():
        for name in (LOG_NAME, ZSTD_NAME):
            if (path / name).is_file():
                return _scan(path / name, session_id, progress)
        store = JsonlStore(path)
        return store.scan(_pick(store.list(), session_id, str(path)))
    if not path.exists():
        raise StorageError(f"{path}: no such file or folder", path=str(path))
    if is_sqlite_file(path):
        with SqliteStore(path, read_only=True) as db:
            return db.scan(_pick(db.list(), session_id, str(path)))
    scan = scan_file(path, progress)
    if session_id is not None and isinstance(scan.header, dict) \
            and scan.header.get("id") != session_id:
        raise StorageError(f"{path}: holds session {scan.header.get('id')!r}, not "
                           f"{session_id!r}", path=str(path))
    return scan


def read_log(path: str | os.PathLike[str], *, session_id: str | None = None,
             progress: Progress | None = None) -> LogReading:
    """Read a log for analysis; nothing is ever written.

    Args:
        path: a `.jsonl` or `.jsonl.zstd` file, a JSONL store folder, or a SQLite database.
        session_id: which session of a store or database (the only one by default).
        progress: called now and then with (lines read, lines in all) while scanning.

    Returns:
        A `LogReading` with `.header`, `.events`, `.form`, `.fold`, `.closers`,
        `.problems` and `.session()`.

    Raises:
        CorruptLogError: damaged committed data (the inner code kept, with line and seq).
        UnsupportedFormatError: another format or schema version.
        StorageError: a missing file or an ambiguous session.
    """
    try:
        scan = _scan(Path(path), session_id, progress)
        return LogReading._from(check_log(scan))
    except OSError as err:
        raise StorageError(f"{path}: {err.strerror or err}", path=str(path)) from err
    except (CorruptLogError, UnsupportedFormatError, StorageError) as err:
        if err.line not in (None, 1) and err.code != "seq-gap":
            raise
        from .importers import foreign_format_hint

        hint = foreign_format_hint(Path(path))
        if hint is None:
            raise
        raise UnsupportedFormatError(hint, code="format-unsupported", path=str(path),
                                     line=1 if Path(path).is_file() else None) from err
