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
from ..reading.codec import (
    BadLine,
    Progress,
    parse_line,
    read_committed,
    refusal,
    scan_committed,
)
from ..reading.fast import fast_check
from ..reading.paths import choose_session, resolve
from ..reading.pipeline import CheckedLog, check_header_line, check_log
from ..reading.scan import Scan
from ..session import Session
from ..surface import FoldResult, Plan
from .jsonl import JsonlStore
from .sqlite import SqliteStore

__all__ = ["LogReading", "read_log", "read_path"]


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
    # The plan each event committed, from whichever reader (SPEC 4.1; linear: SPEC 10).
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
                   checked.fold, checked.closers, checked.problems, checked.lines,
                   checked.plans)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)


def _same_session(scan: Scan, session_id: str | None, path: Path) -> Scan:
    if session_id is not None and isinstance(scan.header, dict) \
            and scan.header.get("id") != session_id:
        raise StorageError(f"{path}: holds session {scan.header.get('id')!r}, not "
                           f"{session_id!r}", path=str(path))
    return scan


def _read_file(file: Path, session_id: str | None, progress: Progress | None,
               fast: bool) -> LogReading | Scan:
    """A JSONL log file, read by the fast reader when it takes it; else the full scan of
    the same bytes (the file is read once)."""
    committed = read_committed(file)
    data, torn = committed.data, committed.torn_frame

    def full_scan() -> Scan:
        return _same_session(scan_committed(committed, str(file), progress), session_id, file)

    if not fast or committed.unfinished is not None:
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


def _read(path: str | os.PathLike[str], session_id: str | None, progress: Progress | None,
          fast: bool, option: str) -> LogReading | Scan:
    """Read what `path` resolves to (`reading.paths`)."""
    where = os.fspath(path)
    found = resolve(path)
    if found.kind == "logs":
        member = found.members[choose_session(found.member_ids(), session_id, where,
                                              option=option)]
        return _read(member, session_id, progress, fast, option)
    if found.kind == "store":
        store = JsonlStore(found.path)
        ids = store.list()
        return store.scan(ids[choose_session(ids, session_id, where, option=option)])
    if found.kind == "sqlite":
        with SqliteStore(found.path, read_only=True) as db:
            ids = db.list()
            return db.scan(ids[choose_session(ids, session_id, where, option=option)])
    assert found.file is not None
    return _read_file(found.file, session_id, progress, fast)


def read_path(path: str | os.PathLike[str], *, session_id: str | None = None,
              progress: Progress | None = None, check: Literal["fast", "full"] = "fast",
              option: str = "session_id=") -> LogReading:
    """`read_log`, naming the choice of a session as `option` does (`--session ID` for
    the command line) when a path holds several."""
    try:
        read = _read(path, session_id, progress, check == "fast", option)
        return read if isinstance(read, LogReading) else LogReading._from(check_log(read))
    except OSError as err:
        raise StorageError(f"{path}: {err.strerror or err}", path=str(path)) from err
    except (CorruptLogError, UnsupportedFormatError, StorageError) as err:
        if err.line not in (None, 1) and err.code != "seq-gap":
            raise
        from ..importers import foreign_format_hint

        if refusal(Path(path)) is not None:
            raise
        hint = foreign_format_hint(Path(path))
        if hint is None:
            raise
        raise UnsupportedFormatError(hint, code="format-unsupported", path=str(path),
                                     line=1 if Path(path).is_file() else None) from err


def read_log(path: str | os.PathLike[str], *, session_id: str | None = None,
             progress: Progress | None = None,
             check: Literal["fast", "full"] = "fast") -> LogReading:
    """Read a log for analysis; nothing is ever written.

    Args:
        path: a `.jsonl` or `.jsonl.zstd` file (or a folder holding one), a JSONL store
            folder, a SQLite database, or a folder or glob of plain logs (see
            `reading.paths`; a FIFO, a device or a file under /proc is refused unopened).
        session_id: which session of a store, database or folder of logs (the only one
            by default).
        progress: called now and then with (lines read, lines in all) while scanning.
        check: "fast" reads a JSONL log with the fast reader when it can (events parsed
            on access, the same answer as the full pipeline); "full" always runs the
            whole load pipeline (and keeps no plans).

    Returns:
        A `LogReading` with `.header`, `.events`, `.form`, `.fold`, `.closers`,
        `.problems` and `.session()`.

    Raises:
        CorruptLogError: damaged committed data (the inner code kept, with line and seq).
        UnsupportedFormatError: another format or schema version.
        StorageError: a missing or refused path, or an ambiguous session.
    """
    return read_path(path, session_id=session_id, progress=progress, check=check)
