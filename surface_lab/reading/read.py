"""`read_log`: open any stored log for analysis, never writing (SPEC 7.3)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..errors import CorruptLogError, StorageError, SurfaceLabError, UnsupportedFormatError
from ..events import Event
from ..jsonvalue import FrozenDict
from ..problems import Problem
from ..session import Session
from ..storage.jsonl import LOG_NAME, ZSTD_NAME, JsonlStore
from ..storage.sqlite import SqliteStore, is_sqlite_file
from ..surface import FoldResult, Plan
from .codec import (
    BadLine,
    Progress,
    parse_line,
    read_committed,
    scan_committed,
    scan_file,
)
from .fast import fast_check
from .pipeline import CheckedLog, check_header_line, check_log
from .scan import Scan

__all__ = ["LogReading", "read_log"]


@dataclass
class LogReading:
    """A log as read: header, logical events, the surface fold, what repair would add
    (not applied) and the problems found."""

    path: str
    header: FrozenDict
    events: Sequence[Event]
    form: Literal["stored", "fixture"]
    mode: Literal["surface", "linear"]
    fold: FoldResult
    closers: list[Event]
    problems: list[Problem]
    lines: Sequence[int]
    # The plan of every event, when the reader kept them (the fast reader does).
    plans: Sequence[Plan] | None = None

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


def _session_file(folder: Path) -> Path | None:
    """The session file of a single-session folder, if it holds one."""
    for name in (LOG_NAME, ZSTD_NAME):
        if (folder / name).is_file():
            return folder / name
    return None


def _jsonl_file(path: Path) -> Path | None:
    """The JSONL file `path` names (itself, or a folder's session file), if it is one."""
    if path.is_dir():
        return _session_file(path)
    return path if path.is_file() and not is_sqlite_file(path) else None


def _same_session(scan: Scan, session_id: str | None, path: Path) -> Scan:
    if session_id is not None and isinstance(scan.header, dict) \
            and scan.header.get("id") != session_id:
        raise StorageError(f"{path}: holds session {scan.header.get('id')!r}, not "
                           f"{session_id!r}", path=str(path))
    return scan


def _read_fast(path: Path, session_id: str | None,
               progress: Progress | None) -> LogReading | Scan | None:
    """A plain JSONL log with nothing pending, read by the fast reader. When the fast
    checks do not take it, the full scan of the same bytes (the file is read once); None
    when `path` is not such a file."""
    file = _jsonl_file(path)
    if file is None:
        return None
    committed = read_committed(file)
    data, torn = committed.data, committed.torn_frame

    def full_scan() -> Scan:
        return _same_session(scan_committed(committed, str(file), progress), session_id, file)

    if committed.unfinished is not None:
        return full_scan()
    end = data.find(b"\n")
    if torn or end < 0:
        return full_scan()
    try:
        raw = parse_line(data[:end])
    except BadLine:
        return full_scan()
    if session_id is not None and raw.get("id") != session_id:
        return full_scan()
    problems: list[Problem] = []

    def note(code: str, message: str, *, line: int | None = None, seq: int | None = None,
             event_type: str | None = None) -> None:
        problems.append(Problem("note", code, message, str(file), line, seq, event_type))

    try:
        header = check_header_line(Scan(path=str(file), header=raw), resume=False, note=note)
    except SurfaceLabError:
        return full_scan()
    checked = fast_check(data, str(file), end + 1, note)
    if checked is None:
        return full_scan()
    events, plans, fold, closers = checked
    if progress is not None:
        progress(len(events), len(events))
    return LogReading(str(file), header, events, "stored", "surface", fold, closers, problems,
                      events.lines, plans)


def _scan(path: Path, session_id: str | None, progress: Progress | None = None) -> Scan:
    if path.is_dir():
        file = _session_file(path)
        if file is not None:
            return _scan(file, session_id, progress)
        store = JsonlStore(path)
        return store.scan(_pick(store.list(), session_id, str(path)))
    if not path.exists():
        raise StorageError(f"{path}: no such file or folder", path=str(path))
    if is_sqlite_file(path):
        with SqliteStore(path, read_only=True) as db:
            return db.scan(_pick(db.list(), session_id, str(path)))
    return _same_session(scan_file(path, progress), session_id, path)


def read_log(path: str | os.PathLike[str], *, session_id: str | None = None,
             progress: Progress | None = None,
             check: Literal["fast", "full"] = "fast") -> LogReading:
    """Read a log for analysis; nothing is ever written.

    Args:
        path: a `.jsonl` or `.jsonl.zstd` file, a JSONL store folder, or a SQLite database.
        session_id: which session of a store or database (the only one by default).
        progress: called now and then with (lines read, lines in all) while scanning.
        check: "fast" reads a JSONL log with the fast reader when it can (events parsed
            on access; a number too large for a double inside message text is reported
            when its event is read); "full" always runs the whole load pipeline.

    Returns:
        A `LogReading` with `.header`, `.events`, `.form`, `.fold`, `.closers`,
        `.problems` and `.session()`.

    Raises:
        CorruptLogError: damaged committed data (the inner code kept, with line and seq).
        UnsupportedFormatError: another format or schema version.
        StorageError: a missing file or an ambiguous session.
    """
    try:
        read = _read_fast(Path(path), session_id, progress) if check == "fast" else None
        if isinstance(read, LogReading):
            return read
        scan = read if read is not None else _scan(Path(path), session_id, progress)
        return LogReading._from(check_log(scan))
    except OSError as err:
        raise StorageError(f"{path}: {err.strerror or err}", path=str(path)) from err
    except (CorruptLogError, UnsupportedFormatError, StorageError) as err:
        if err.line not in (None, 1) and err.code != "seq-gap":
            raise
        from ..importers import foreign_format_hint

        hint = foreign_format_hint(Path(path))
        if hint is None:
            raise
        raise UnsupportedFormatError(hint, code="format-unsupported", path=str(path),
                                     line=1 if Path(path).is_file() else None) from err
