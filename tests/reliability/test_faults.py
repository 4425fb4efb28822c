"""Fault injection: a failed write, fsync or commit leaves the store exactly as before and
the error names the session and the seq."""

from __future__ import annotations

import errno
import hashlib
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from surface_lab import StorageError
from surface_lab.storage import JsonlStore, SqliteStore, jsonl

from .common import HEADER, record, stream

pytestmark = pytest.mark.reliability


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _jsonl_store(tmp_path: Path) -> tuple[JsonlStore, Path]:
    store = JsonlStore(tmp_path)
    store.create(HEADER)
    store.append("crash", stream(1, 20)[:10])
    [log] = tmp_path.rglob("session.jsonl")
    return store, log


@pytest.mark.parametrize("fault", ["enospc-at-once", "enospc-part-way", "eio-fsync"])
def test_jsonl_faults_leave_the_file_as_before(tmp_path: Path, fault: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    store, log = _jsonl_store(tmp_path)
    before = _digest(log)
    real_write, real_fsync = os.write, os.fsync
    calls = {"n": 0}

    def write(fd: int, data: Any) -> int:
        if fault == "enospc-part-way" and calls["n"] == 0:
            calls["n"] += 1
            return real_write(fd, bytes(data[: len(data) // 2]))
        if fault.startswith("enospc"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    def fsync(fd: int) -> None:
        if fault == "eio-fsync" and os.readlink(f"/proc/self/fd/{fd}") == str(log.resolve()):
            raise OSError(errno.EIO, "Input/output error")  # the data's fsync
        real_fsync(fd)

    monkeypatch.setattr(jsonl.os, "write", write)
    monkeypatch.setattr(jsonl.os, "fsync", fsync)
    with pytest.raises(StorageError, match=r"session 'crash': appending from seq 10 failed "
                                           r"and was rolled back") as info:
        store.append("crash", stream(1, 20)[10:15])
    monkeypatch.undo()
    assert info.value.seq == 10 and info.value.__cause__ is not None
    assert _digest(log) == before
    store.append("crash", stream(1, 20)[10:15])  # and the store still works
    assert len(store.read_suffix("crash", 0)) == 15
    record(f"fault-jsonl-{fault}", injected=1, changed=0)


class _FailingCommit:
    """A connection whose COMMIT fails, as a full disk or an I/O error would make it."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)

    def execute(self, sql: str, *args: Any) -> Any:
        if sql.strip().upper() == "COMMIT":
            raise sqlite3.OperationalError("database or disk is full")
        return self._db.execute(sql, *args)


def test_sqlite_failed_commit_rolls_back(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    store.create(HEADER)
    store.append("crash", stream(1, 20)[:10])
    real = store._db
    store._db = _FailingCommit(real)  # type: ignore[assignment]
    with pytest.raises(StorageError, match=r"session 'crash': appending from seq 10 failed "
                                           r"and was rolled back: database or disk is full"):
        store.append("crash", stream(1, 20)[10:15])
    store._db = real
    assert not real.in_transaction
    assert len(store.read_suffix("crash", 0)) == 10
    assert real.execute("SELECT revision FROM sessions").fetchone()[0] == 1
    store.append("crash", stream(1, 20)[10:15])
    assert len(store.read_suffix("crash", 0)) == 15
    store.close()
    record("fault-sqlite-commit", injected=1, changed=0)


def test_a_read_only_file_system_is_a_clear_error(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    store, _ = _jsonl_store(tmp_path)

    def refuse(*_: Any, **__: Any) -> int:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(jsonl.os, "open", refuse)
    with pytest.raises(StorageError, match=r"session 'crash': appending from seq 10 failed: "
                                           r".*Read-only file system") as info:
        store.append("crash", stream(1, 20)[10:12])
    assert info.value.seq == 10
    monkeypatch.undo()
    assert len(store.read_suffix("crash", 0)) == 10


def test_an_unfinished_batch_is_never_taken_as_committed(tmp_path: Path) -> None:
    """What a writer killed in the middle of write() leaves: the announced range in the
    lock file and only part of the batch in the log."""
    from surface_lab import read_log
    from surface_lab.storage.jsonl import encode_events, lock_path

    store, log = _jsonl_store(tmp_path)
    size = log.stat().st_size
    payload = encode_events(stream(1, 20)[10:15])
    lock_path(log).write_bytes(f"pending {size} {size + len(payload)}\n".encode())
    with open(log, "ab") as f:
        f.write(payload[: len(payload) * 2 // 3])  # some complete lines, then a fragment
    reading = read_log(log)
    assert len(reading.events) == 10
    assert [p.code for p in reading.problems] == ["unfinished-batch", "open-turn"]
    store.append("crash", stream(1, 20)[10:15])  # the next writer drops it and goes on
    assert len(store.read_suffix("crash", 0)) == 15
    assert lock_path(log).read_bytes() == b""
    assert [p.code for p in read_log(log).problems] == ["open-turn"]  # seq 14 is mid-turn

