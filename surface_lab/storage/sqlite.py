"""The SQLite backend (SPEC 7.2): many sessions in one database, two STRICT tables,
bump-and-reject schema versioning, WAL and `BEGIN IMMEDIATE` appends."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from ..errors import CorruptLogError, StorageError, UnsupportedFormatError
from ..events import Event
from ..header import check_header
from ..jsonvalue import FrozenDict, dumps, freeze
from .base import Scan, Store, checked_batch, conflict

__all__ = ["APPLICATION_ID", "DDL", "SCHEMA_VERSION", "SqliteStore", "is_sqlite_file"]

SCHEMA_VERSION = 2
APPLICATION_ID = 0x534C4142  # "SLAB"; dsh's databases use 0x44534850 and are refused
BUSY_TIMEOUT_MS = 30_000

# The one definition of the schema; the README quotes it.
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


def _json(value: Any) -> str:
    return dumps(value).decode()


class SqliteStore(Store):
    """Sessions as rows of one SQLite database.

    Args:
        path: the database file (created empty at schema version 2 if it does not exist).
        read_only: open without ever writing (used by `read_log`).

    Raises:
        UnsupportedFormatError: `schema-unsupported` for another schema version, a foreign
            application id or an altered schema; nothing is written to such a file.
    """

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = str(path)
        self.read_only = read_only
        self._created: dict[str, Mapping[str, Any]] = {}
        try:
            if read_only:
                # A WAL database opened read-only would create -wal and -shm files beside
                # it; with no -wal there is no writer, so read it as immutable instead.
                resolved = Path(path).resolve()
                quiet = not Path(f"{resolved}-wal").exists()
                uri = resolved.as_uri() + ("?immutable=1" if quiet else "?mode=ro")
                self._db = sqlite3.connect(uri, uri=True, isolation_level=None)
            else:
                self._db = sqlite3.connect(self.path, isolation_level=None,
                                           timeout=BUSY_TIMEOUT_MS / 1000)
        except sqlite3.Error as err:
            raise StorageError(f"{self.path}: cannot open the database: {err}",
                               path=self.path) from err
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
        db = self._db
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            app_id = db.execute("PRAGMA application_id").fetchone()[0]
            objects = db.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0]
        except sqlite3.DatabaseError as err:
            raise UnsupportedFormatError(f"{self.path}: not a SQLite database: {err}",
                                         code="schema-unsupported", path=self.path) from err
        if version == 0 and app_id == 0 and objects == 0:
            if self.read_only:
                raise self._refuse("found an empty database (schema version 0)")
            with self._transaction():
                db.executescript(f"BEGIN IMMEDIATE; {DDL} PRAGMA user_version = "
                                 f"{SCHEMA_VERSION}; PRAGMA application_id = {APPLICATION_ID};")
        elif app_id != APPLICATION_ID:
            raise self._refuse(f"found application id {app_id:#x} at schema version {version}")
        elif version != SCHEMA_VERSION:
            raise self._refuse(f"found schema version {version}")
        elif _schema(db) != _expected_schema():
            raise self._refuse(f"found schema version {version} with a schema that differs "
                               f"from the expected tables")
        if not self.read_only:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = FULL")
            db.execute("PRAGMA foreign_keys = ON")
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")

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
        header = self._header(session_id)
        if header is None:
            raise StorageError(f"no stored session {session_id!r}", path=self.path)
        return Scan(path=self.path, header=header, events=self._events(session_id, 0))

    def _events(self, session_id: str, start: int) -> list[Event]:
        rows = self._db.execute(
            "SELECT seq, type, time, data, source_event_seqs, surface_op, ignorable "
            "FROM events WHERE session_id = ? AND seq >= ? ORDER BY seq",
            (session_id, start))
        events: list[Event] = []
        for seq, kind, time, data, sources, op, ignorable in rows:
            if seq != start + len(events):
                raise CorruptLogError(f"{self.path}: session {session_id!r} has no event at "
                                      f"seq {start + len(events)} (next stored is {seq})",
                                      code="seq-gap", path=self.path, seq=start + len(events))
            try:
                event: dict[str, Any] = {"type": kind, "seq": seq, "time": time,
                                         "data": orjson.loads(data)}
                if sources is not None:
                    event["sourceEventSeqs"] = orjson.loads(sources)
                if op is not None:
                    event["surfaceOp"] = orjson.loads(op)
            except orjson.JSONDecodeError as err:
                raise CorruptLogError(f"{self.path}: session {session_id!r}: stored JSON is "
                                      f"unparsable: {err}", code="line-unparsable",
                                      path=self.path, seq=seq, event_type=kind) from None
            if ignorable is not None:
                event["ignorable"] = True
            events.append(FrozenDict({k: freeze(v) for k, v in event.items()}))
        return events

    def read_suffix(self, session_id: str, seq: int) -> list[Event]:
        return self._events(session_id, seq)

    def list(self) -> list[str]:
        return [r[0] for r in self._db.execute("SELECT id FROM sessions ORDER BY id")]

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
        self._db.close()
