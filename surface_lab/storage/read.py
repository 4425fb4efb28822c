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
    # "surface", or the importer format of another agent's log imported on the fly.
    source_format: str = "surface"

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
    if (session_id is not None and isinstance(scan.header, dict)
            and scan.header.get("id") != session_id):
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


def _imported(path: Path, fmt: str, session_id: str | None) -> LogReading:
    """Another agent's log, imported in memory (`importers.import_any`) and checked by the
    load pipeline like any log; the importer's notes and problems come first."""
    from ..importers import import_any

    result = import_any(path, fmt=fmt)
    if session_id is not None and result.header.get("id") != session_id:
        raise StorageError(f"{path}: holds session {result.header.get('id')!r}, not "
                           f"{session_id!r}", path=str(path))
    header = {"type": "session", "delegationDepth": 0, **result.header}
    reading = LogReading._from(check_log(Scan(path=str(path), header=header,
                                              events=list(result.events))))
    reading.problems[:0] = [*result.notes, *result.problems]
    reading.source_format = fmt
    return reading


def _foreign(path: Path) -> str | None:
    """The importer format of `path`, when looking can tell (never raises)."""
    from ..importers import detect_format

    try:
        return detect_format(path)
    except (RecursionError, ValueError, OSError):  # UnicodeDecodeError is a ValueError
        return None


def _refused(path: Path) -> str | None:
    """Why another kind of JSON at `path` is no log this package reads (never raises)."""
    from ..importers import refusal_reason

    try:
        return refusal_reason(path)
    except (RecursionError, ValueError, OSError):  # UnicodeDecodeError is a ValueError
        return None


def _no_session(where: str, option: str) -> StorageError:
    """A folder that holds no log itself, with what lies below it when something does."""
    from ..reading.paths import discover

    try:
        below = discover(where)
    except StorageError:
        below = None
    if below is None or not len(below):
        return StorageError(f"{where}: holds no session", code="no-session", path=where)
    how = ("audit takes them all, or give one of them" if option != "session_id=" else
           "surface_lab.discover(folder) lists them; read one of them")
    return StorageError(f"{where}: holds no log itself, but {below.summary()} below it; "
                        f"{how}", code="logs-below", path=where)


def _read(path: str | os.PathLike[str], session_id: str | None, progress: Progress | None,
          fast: bool, option: str) -> LogReading | Scan:
    """Read what `path` resolves to (`reading.paths`); another agent's log is imported."""
    where = os.fspath(path)
    found = resolve(path)
    if found.kind == "logs":
        member = found.members[choose_session(found.member_ids(), session_id, where,
                                              option=option)]
        return _read(member, session_id, progress, fast, option)
    if found.kind == "store":
        store = JsonlStore(found.path)
        ids = store.list()
        if not ids:
            fmt = _foreign(found.path)  # an OpenHands conversation folder, say
            if fmt is not None:
                return _imported(found.path, fmt, session_id)
            raise _no_session(where, option)
        return store.scan(ids[choose_session(ids, session_id, where, option=option)])
    if found.kind == "sqlite":
        with SqliteStore(found.path, read_only=True) as db:
            ids = db.list()
            return db.scan(ids[choose_session(ids, session_id, where, option=option)])
    assert found.file is not None
    try:
        read = _read_file(found.file, session_id, progress, fast)
        return read if isinstance(read, LogReading) else LogReading._from(check_log(read))
    except (CorruptLogError, UnsupportedFormatError, StorageError) as err:
        # another agent's file fails as a surface log on its first line
        first_line = err.line in (None, 1) or err.code == "seq-gap"
        if not first_line or refusal(found.file) is not None:
            raise
        fmt = _foreign(found.file)
        if fmt is None:
            why = _refused(found.file)  # an agent not imported yet, JSON that is no log
            if why is None:
                raise
            raise UnsupportedFormatError(f"{found.file}: {why}", code="format-unsupported",
                                         path=str(found.file), line=1) from err
        return _imported(found.file, fmt, session_id)


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


def read_log(path: str | os.PathLike[str], *, session_id: str | None = None,
             progress: Progress | None = None,
             check: Literal["fast", "full"] = "fast") -> LogReading:
    """Read a log for analysis; nothing is ever written.

    Args:
        path: a `.jsonl` or `.jsonl.zstd` file (or a folder holding one), a JSONL store
            folder, a SQLite database, another agent's log (imported in memory, the
            importer's notes first among `.problems`; `.source_format` names it), or a
            folder or glob of logs (see `reading.paths`; a FIFO, a device or a file
            under /proc is refused unopened).
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
        ImportFailure: another agent's log its importer cannot read.
    """
    return read_path(path, session_id=session_id, progress=progress, check=check)
