"""The SQLite backend (SPEC 7.2): many sessions in one database, two STRICT tables,
bump-and-reject schema versioning, WAL and `BEGIN IMMEDIATE` appends."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from time import monotonic, sleep
from time import time as wall_time
from typing import Any, TypeVar

import orjson

from ..errors import (
    AdmissionError,
    CorruptLogError,
    StorageError,
    SurfaceLabError,
    UnsupportedFormatError,
)
from ..events import Event, freeze_event
from ..header import check_header
from ..jsonvalue import dumps, loads
from .base import Scan, Store, checked_batch, conflict

__all__ = ["APPLICATION_ID", "DDL", "SCHEMA_VERSION", "ReadOnlyConnection", "SqliteStore",
           "is_sqlite_file"]

SCHEMA_VERSION = 2
APPLICATION_ID = 0x534C4142  # "SLAB"; dsh's databases use 0x44534850 and are refused
BUSY_TIMEOUT_MS = 30_000

# The one definition of the schema; docs/storage.md quotes it.
DDL = """\
CREATE TABLE sessions (
  id TEXT PRIMARY KEY,
  version INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  cwd TEXT,
  parent_session TEXT,
  seed_length INTEGER,
  origin TEXT,
  delegation_depth INTEGER NOT NULL,
  agent_preset TEXT,
  revision INTEGER NOT NULL
) STRICT;
CREATE TABLE events (
  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  type TEXT NOT NULL,
  time INTEGER NOT NULL,
  data TEXT NOT NULL,
  source_event_seqs TEXT,
  surface_op TEXT,
  ignorable INTEGER CHECK (ignorable IS NULL OR ignorable = 1),
  PRIMARY KEY (session_id, seq)
) STRICT;
"""

_HEADER_COLUMNS = (
    ("id", "id"),
    ("version", "version"),
    ("createdAt", "created_at"),
    ("cwd", "cwd"),
    ("parentSession", "parent_session"),
    ("seedLength", "seed_length"),
    ("origin", "origin"),
    ("delegationDepth", "delegation_depth"),
    ("agentPreset", "agent_preset"),
)
_SQLITE_MAGIC = b"SQLite format 3\x00"


def is_sqlite_file(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(16) == _SQLITE_MAGIC
    except OSError:
        return False


# A database not modified for this long, with no -wal beside it, has no writer: it is read
# as immutable (no -wal and -shm files made), and each read is checked afterwards.
QUIET_SECONDS = 2.0
_LOOKS = 3  # attempts of one read while the file keeps changing under it

T = TypeVar("T")


def _identity(path: Path) -> tuple[int, ...]:
    """Whether a -wal exists, and the database file's device, inode, size, mtime, ctime."""
    st = os.stat(path)
    return (os.path.exists(f"{path}-wal"), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns,
            st.st_ctime_ns)


class ReadOnlyConnection:
    """A connection that never writes a database and never sees a writer's half-done work.

    A reader of a WAL database that may be written while it reads must take part in its
    locking (SQLite's `mode=ro`), which makes the `-wal` and `-shm` files beside it if need
    be; `immutable=1` skips the locks and can read pages a writer's checkpoint is changing
    (false corruption) or keep stale pages. So: a database with a `-wal`, or modified in
    the last `QUIET_SECONDS`, is opened `mode=ro`; a quiet one is opened as immutable (no
    file is made beside it) and every read is checked against the file afterwards: if the
    file changed (any write moves its mtime past the quiet one) or a `-wal` appeared, the
    read is thrown away and done again `mode=ro`. Where `mode=ro` cannot open the file
    (a read-only mount without `-shm`), it is read as immutable, with the same checks, or,
    when a `-wal` holds data, from a private copy of the file and its `-wal`.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).resolve()
        self._copy: Path | None = None
        self.db, self.quiet = self._connect(force_locking=False)

    def _connect(self, *, force_locking: bool) -> tuple[sqlite3.Connection, tuple[int, ...] | None]:
        seen = _identity(self.path)
        uri = self.path.as_uri()
        if not force_locking and not seen[0] and wall_time() - seen[4] / 1e9 > QUIET_SECONDS:
            return sqlite3.connect(f"{uri}?immutable=1", uri=True, isolation_level=None), seen
        db = sqlite3.connect(f"{uri}?mode=ro", uri=True, isolation_level=None,
                             timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            db.execute("PRAGMA user_version").fetchone()
        except sqlite3.Error as err:
            db.close()
            if (err.sqlite_errorcode & 0xFF != sqlite3.SQLITE_CANTOPEN or
                    not _read_only_folder(self.path)):
                raise
            if seen[0] and os.path.getsize(f"{self.path}-wal") > 0:
                return self._copy_with_wal(), seen
            return sqlite3.connect(f"{uri}?immutable=1", uri=True, isolation_level=None), seen
        return db, None

    def _copy_with_wal(self) -> sqlite3.Connection:
        """A connection to a private copy of the database and its `-wal`. On a read-only
        mount SQLite cannot make the `-shm` a WAL reader needs, and `immutable=1` ignores
        the `-wal`: the events committed in it would be silently missing."""
        self._drop_copy()
        self._copy = Path(tempfile.mkdtemp(prefix="surface-lab-wal-"))
        try:
            shutil.copyfile(self.path, self._copy / "copy.db")
            shutil.copyfile(f"{self.path}-wal", self._copy / "copy.db-wal")
            return sqlite3.connect(f"{(self._copy / 'copy.db').as_uri()}?mode=ro", uri=True,
                                   isolation_level=None)
        except BaseException:
            self._drop_copy()
            raise

    def _drop_copy(self) -> None:
        if self._copy is not None:
            shutil.rmtree(self._copy, ignore_errors=True)
            self._copy = None

    def _changed(self) -> bool:
        return self.quiet is not None and _identity(self.path) != self.quiet

    def look(self, read: Callable[[sqlite3.Connection], T]) -> T:
        """`read(connection)` in one read transaction, done again if the file changed."""
        for _ in range(_LOOKS):
            if not self._changed():
                try:
                    self.db.execute("BEGIN")
                    try:
                        result = read(self.db)
                    finally:
                        if self.db.in_transaction:
                            self.db.execute("COMMIT")
                except (SurfaceLabError, sqlite3.Error):
                    if not self._changed():
                        raise
                else:
                    if not self._changed():
                        return result
            self.db.close()
            self.db, self.quiet = self._connect(force_locking=True)
        raise StorageError(f"{self.path}: the database kept changing while it was read "
                           f"({_LOOKS} attempts)", code="database-locked", path=str(self.path))

    def close(self) -> None:
        self.db.close()
        self._drop_copy()


def _switch_to_wal(db: sqlite3.Connection) -> None:
    """`PRAGMA journal_mode = WAL`, retried while busy: the switch of a new database needs
    an exclusive lock, and SQLite answers SQLITE_BUSY at once, without the busy handler,
    when another connection opening it at the same moment holds a shared lock."""
    deadline = monotonic() + BUSY_TIMEOUT_MS / 1000
    pause = 0.001
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as err:
            if err.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or monotonic() > deadline:
                raise
        sleep(pause)
        pause = min(pause * 2, 0.05)


def _read_only_folder(path: str | Path) -> bool:
    folder = Path(path).resolve().parent
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY) or not os.access(folder, os.W_OK)
    except OSError:
        return False


def _storage_error(path: str, what: str, err: sqlite3.Error) -> SurfaceLabError:
    """The package error for a SQLite error met while opening or checking a database."""
    code = getattr(err, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary == sqlite3.SQLITE_NOTADB:
        return UnsupportedFormatError(f"{path}: not a SQLite database: {err}",
                                      code="schema-unsupported", path=path)
    if primary == sqlite3.SQLITE_CORRUPT:
        return CorruptLogError(f"{path}: the database is damaged: {err}", code="log-corrupt",
                               path=path)
    if primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return StorageError(f"{path}: {what}: it is locked by another connection (waited "
                            f"{BUSY_TIMEOUT_MS / 1000:g} s): {err}", code="database-locked",
                            path=path)
    if primary == sqlite3.SQLITE_READONLY or (primary == sqlite3.SQLITE_CANTOPEN
                                             and _read_only_folder(path)):
        return StorageError(f"{path}: {what} for writing: its folder is read-only (a "
                            f"read-only mount or no write permission): {err}",
                            code="storage-read-only", path=path)
    return StorageError(f"{path}: {what}: {err}", path=path)


def _expected_schema() -> list[tuple[Any, ...]]:
    db = sqlite3.connect(":memory:")
    try:
        db.executescript(DDL)
        return _schema(db)
    finally:
        db.close()


def _schema(db: sqlite3.Connection) -> list[tuple[Any, ...]]:
    return db.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY type, name"
    ).fetchall()


_State = tuple[int, int, list[tuple[Any, ...]]]
_EMPTY: _State = (0, 0, [])
# The creation, one statement at a time inside the caller's BEGIN IMMEDIATE.
_CREATE = [*(f"{part.strip()};" for part in DDL.split(";\n") if part.strip()),
           f"PRAGMA user_version = {SCHEMA_VERSION}",
           f"PRAGMA application_id = {APPLICATION_ID}"]


def _state(db: sqlite3.Connection) -> _State:
    """User version, application id and schema (to be read in one transaction)."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    app_id = db.execute("PRAGMA application_id").fetchone()[0]
    return version, app_id, _schema(db)


def _json(value: Any) -> str:
    return dumps(value).decode()


class SqliteStore(Store):
    """Sessions as rows of one SQLite database.

    Args:
        path: the database file (created empty at schema version 2 if it does not exist).
        read_only: open without ever writing (used by `read_log`).

    Raises:
        UnsupportedFormatError: `schema-unsupported` for another schema version, a foreign
            application id, an altered schema or a file that is not a database; nothing is
            written to such a file.
        StorageError: `database-locked` when another connection holds it past the busy
            timeout, `storage-read-only` when writing is asked on a read-only folder.
        CorruptLogError: `log-corrupt` for a damaged database file.
    """

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = str(path)
        self.read_only = read_only
        self._created: dict[str, Mapping[str, Any]] = {}
        self._ro: ReadOnlyConnection | None = None
        try:
            if read_only:
                self._ro = ReadOnlyConnection(path)
                self._db = self._ro.db
            else:
                self._db = sqlite3.connect(self.path, isolation_level=None,
                                           timeout=BUSY_TIMEOUT_MS / 1000)
        except OSError as err:
            raise StorageError(f"{self.path}: cannot open the database: {err.strerror or err}",
                               path=self.path) from err
        except sqlite3.Error as err:
            raise _storage_error(self.path, "cannot open the database", err) from err
        try:
            self._check_or_create()
        except BaseException:
            self._db.close()
            raise

    def _refuse(self, found: str) -> UnsupportedFormatError:
        return UnsupportedFormatError(
            f"{self.path}: {found}; expected a surface_lab database at schema version "
            f"{SCHEMA_VERSION} (application id {APPLICATION_ID:#x})",
            code="schema-unsupported", path=self.path)

    def _check_or_create(self) -> None:
        """Check the database, creating the schema in an empty one. Each look at it is one
        transaction, so a creator in another process is seen before it starts or after it
        committed, never half-way; the creation re-checks under the write lock."""
        try:
            state = self._look(lambda: _state(self._db))
            db = self._db
            if state == _EMPTY:
                if self.read_only:
                    raise self._refuse("found an empty database (schema version 0)")
                db.execute("BEGIN IMMEDIATE")
                with self._transaction():
                    state = _state(db)
                    if state == _EMPTY:  # nobody created it while we waited for the lock
                        for statement in _CREATE:
                            db.execute(statement)
                        state = _state(db)
            self._check(*state)
            if not self.read_only:
                _switch_to_wal(db)
                db.execute("PRAGMA synchronous = FULL")
                db.execute("PRAGMA foreign_keys = ON")
                db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        except sqlite3.Error as err:
            raise _storage_error(self.path, "cannot open the database", err) from err

    def _check(self, version: int, app_id: int, schema: list[tuple[Any, ...]]) -> None:
        if app_id != APPLICATION_ID:
            raise self._refuse(f"found application id {app_id:#x} at schema version {version}")
        if version != SCHEMA_VERSION:
            raise self._refuse(f"found schema version {version}")
        if schema != _expected_schema():
            raise self._refuse(f"found schema version {version} with a schema that differs "
                               f"from the expected tables")

    def _look(self, read: Callable[[], T]) -> T:
        """One read: a consistent snapshot, done again by a read-only connection whose
        immutable file changed under it."""
        if self._ro is None:
            with self._reading():
                return read()

        def on(db: sqlite3.Connection) -> T:
            self._db = db
            return read()

        return self._ro.look(on)

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """One read transaction (a consistent snapshot), unless one is already open."""
        if self._db.in_transaction:
            yield
            return
        self._db.execute("BEGIN")
        try:
            yield
        finally:
            if self._db.in_transaction:
                self._db.execute("COMMIT")

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """Commit on success, roll back on any failure (the BEGIN is the caller's)."""
        try:
            yield
            if self._db.in_transaction:
                self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

    # reading

    def _header(self, session_id: str) -> dict[str, Any] | None:
        columns = ", ".join(c for _, c in _HEADER_COLUMNS)
        row = self._db.execute(f"SELECT {columns} FROM sessions WHERE id = ?",
                               (session_id,)).fetchone()
        if row is None:
            return None
        fields = zip(_HEADER_COLUMNS, row, strict=True)
        return {"type": "session", **{key: value for (key, _), value in fields
                                      if value is not None}}

    def scan(self, session_id: str) -> Scan:
        def read() -> Scan:
            header = self._header(session_id)
            if header is None:
                raise StorageError(f"no stored session {session_id!r}", path=self.path)
            return Scan(path=self.path, header=header, events=self._events(session_id, 0))

        with self._read_errors(session_id):
            return self._look(read)

    @contextlib.contextmanager
    def _read_errors(self, session_id: str | None = None) -> Iterator[None]:
        """SQLite errors met while reading as package errors (TEXT that is not UTF-8 is
        damaged data: SQLite does not check what it stores)."""
        try:
            yield
        except sqlite3.Error as err:
            if str(err).startswith("Could not decode to UTF-8"):
                whose = f"session {session_id!r}" if session_id is not None else "the sessions"
                raise CorruptLogError(f"{self.path}: {whose}: stored text is not UTF-8: {err}",
                                      code="log-corrupt", path=self.path) from None
            raise _storage_error(self.path, "reading failed", err) from err

    def _events(self, session_id: str, start: int) -> list[Event]:
        # JSON columns come as bytes (orjson checks their UTF-8) and the type is decoded
        # here, so that damaged text is reported with its seq.
        rows = self._db.execute(
            "SELECT seq, CAST(type AS BLOB), time, CAST(data AS BLOB), "
            "CAST(source_event_seqs AS BLOB), CAST(surface_op AS BLOB), ignorable "
            "FROM events WHERE session_id = ? AND seq >= ? ORDER BY seq",
            (session_id, start))
        events: list[Event] = []
        for seq, raw_kind, time, data, sources, op, ignorable in rows:
            if seq != start + len(events):
                raise CorruptLogError(f"{self.path}: session {session_id!r} has no event at "
                                      f"seq {start + len(events)} (next stored is {seq})",
                                      code="seq-gap", path=self.path, seq=start + len(events))
            try:
                kind = raw_kind.decode()
            except UnicodeDecodeError as err:
                raise CorruptLogError(f"{self.path}: session {session_id!r}: the stored type "
                                      f"is not UTF-8: {err}", code="log-corrupt",
                                      path=self.path, seq=seq) from None
            try:
                event: dict[str, Any] = {"type": kind, "seq": seq, "time": time,
                                         "data": loads(data)}
                if sources is not None:
                    event["sourceEventSeqs"] = loads(sources)
                if op is not None:
                    event["surfaceOp"] = loads(op)
            except orjson.JSONDecodeError as err:
                raise CorruptLogError(f"{self.path}: session {session_id!r}: stored JSON is "
                                      f"unparsable: {err}", code="line-unparsable",
                                      path=self.path, seq=seq, event_type=kind) from None
            if ignorable is not None:
                event["ignorable"] = True
            try:
                events.append(freeze_event(event))
            except AdmissionError as err:  # too deep: refused as a JSONL line would be
                raise CorruptLogError(f"{self.path}: session {session_id!r}: {err.detail}",
                                      code=err.code, path=self.path, seq=seq,
                                      event_type=kind) from None
        return events

    def read_suffix(self, session_id: str, seq: int) -> list[Event]:
        with self._read_errors(session_id):
            return self._look(lambda: self._events(session_id, seq))

    def list(self) -> list[str]:
        with self._read_errors():
            return self._look(lambda: [r[0] for r in self._db.execute(
                "SELECT id FROM sessions ORDER BY id")])

    # writing

    def create(self, header: Mapping[str, Any]) -> None:
        checked = check_header(header)
        if self._header(checked["id"]) is not None:
            raise StorageError(f"session {checked['id']!r} already exists", path=self.path)
        self._created[checked["id"]] = checked

    def append(self, session_id: str, events: Sequence[Mapping[str, Any]]) -> None:
        batch = checked_batch(events)
        if not batch:
            return
        if self.read_only:
            raise StorageError(f"{self.path}: opened read-only", path=self.path)
        try:
            self._db.execute("BEGIN IMMEDIATE")
            with self._transaction():
                self._append_locked(session_id, batch)
        except sqlite3.Error as err:
            raise StorageError(f"session {session_id!r}: appending from seq "
                               f"{batch[0]['seq']} failed and was rolled back: {err}",
                               path=self.path, seq=batch[0]["seq"]) from err
        self._created.pop(session_id, None)

    def _append_locked(self, session_id: str, batch: Sequence[Event]) -> None:
        db = self._db
        row = db.execute("SELECT revision FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            header = self._created.get(session_id)
            if header is None:
                raise StorageError(f"no session {session_id!r} to append to; create it first",
                                   path=self.path)
            values = {column: header.get(key) for key, column in _HEADER_COLUMNS}
            values["delegation_depth"] = values["delegation_depth"] or 0
            db.execute(
                f"INSERT INTO sessions ({', '.join(values)}, revision) "
                f"VALUES ({', '.join('?' * len(values))}, 0)", tuple(values.values()))
            expected = 0
        else:
            expected = db.execute("SELECT coalesce(max(seq) + 1, 0) FROM events "
                                  "WHERE session_id = ?", (session_id,)).fetchone()[0]
        if batch[0]["seq"] != expected:
            raise conflict(self.path, session_id, expected, batch[0]["seq"])
        db.executemany(
            "INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, "
            "surface_op, ignorable) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(session_id, e["seq"], e["type"], e["time"], _json(e["data"]),
              _json(e["sourceEventSeqs"]) if "sourceEventSeqs" in e else None,
              _json(e["surfaceOp"]) if "surfaceOp" in e else None,
              1 if e.get("ignorable") is True else None) for e in batch])
        db.execute("UPDATE sessions SET revision = revision + 1 WHERE id = ?", (session_id,))

    def _repair(self, session_id: str, scan: Scan, closers: Sequence[Event]) -> None:
        if closers:
            self.append(session_id, closers)

    def close(self) -> None:
        if self._ro is not None:
            self._ro.close()
        else:
            self._db.close()
