"""SQLite under hostile conditions: readers racing writers never see false corruption,
databases created by several processes at once, locked and read-only databases, and
damaged stored text or nesting reported as package errors."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from surface_lab import CorruptLogError, StorageError, SurfaceLabError, read_log
from surface_lab.cli import main
from surface_lab.storage import SqliteStore, sqlite

from .common import HEADER, read_only_mount, record

pytestmark = pytest.mark.reliability


def _titles(start: int, stop: int, size: int = 10) -> list[dict[str, Any]]:
    return [{"type": "session/title", "seq": seq, "time": 0, "data": {"x": "y" * size}}
            for seq in range(start, stop)]


def _database(path: Path, events: int) -> Path:
    with SqliteStore(path) as store:
        store.create(HEADER)
        store.append("crash", _titles(0, events))
    return path


def _quiet(db: Path) -> Path:
    """Make a database look untouched for a minute (as most stored databases are)."""
    old = time.time() - 60
    os.utime(db, (old, old))
    return db


class TestReaders:
    @pytest.mark.parametrize("age", ["just-written", "quiet"])
    def test_a_reader_sees_what_a_writer_commits_after_it_opened(self, tmp_path: Path,
                                                                 age: str) -> None:
        """With no `-wal` file at its open, the reader used to open the file as immutable
        and kept reading its stale page cache (100 events) after the writer's checkpoint."""
        db = _database(tmp_path / "s.db", 100)
        if age == "quiet":
            _quiet(db)
        assert not Path(f"{db}-wal").exists()  # the writer's close checkpointed it away
        with SqliteStore(db, read_only=True) as reader:
            assert len(reader.scan("crash").events) == 100
            with SqliteStore(db) as writer:
                writer.append("crash", _titles(100, 300, 500))
            assert len(reader.scan("crash").events) == 300
            assert len(reader.read_suffix("crash", 290)) == 10

    def test_reading_a_quiet_database_makes_no_file_beside_it(self, tmp_path: Path) -> None:
        db = _quiet(_database(tmp_path / "s.db", 5))
        before = db.read_bytes()
        assert main(["validate", str(db)]) == 0
        with SqliteStore(db, read_only=True) as store:
            assert len(store.read_suffix("crash", 2)) == 3
        assert sorted(p.name for p in tmp_path.iterdir()) == ["s.db"]
        assert db.read_bytes() == before

    @pytest.mark.slow
    @pytest.mark.parametrize("quiet_seconds", [sqlite.QUIET_SECONDS, 0.02])
    def test_readers_racing_a_writer_that_opens_and_closes_see_no_corruption(
            self, tmp_path: Path, quiet_seconds: float, monkeypatch: pytest.MonkeyPatch,
            ) -> None:
        """With 0.02 s, readers often open the file as immutable between two of the
        writer's closes: each read is then checked against the file and done again."""
        monkeypatch.setattr(sqlite, "QUIET_SECONDS", quiet_seconds)  # the forks inherit it
        db = _database(tmp_path / "s.db", 1)
        ctx = multiprocessing.get_context("fork")
        stop, out = ctx.Event(), ctx.Queue()
        readers = [ctx.Process(target=_reader, args=(str(db), stop, out)) for _ in range(2)]
        for p in readers:
            p.start()
        writer = ctx.Process(target=_opening_writer, args=(str(db), WRITER_CYCLES))
        writer.start()
        writer.join(timeout=120)
        stop.set()
        results = [out.get(timeout=60) for _ in readers]
        for p in readers:
            p.join(timeout=60)
        assert writer.exitcode == 0
        reads = sum(n for n, _ in results)
        failures = [f for _, found in results for f in found]
        assert reads > 0 and failures == []
        assert len(read_log(db).events) == 1 + WRITER_CYCLES * 5
        record(f"sqlite-readers-racing-writer-quiet-{quiet_seconds}",
               writer_cycles=WRITER_CYCLES, reads=reads, failures=len(failures))

    def test_a_database_on_a_read_only_mount_is_read(self, tmp_path: Path) -> None:
        db = _database(tmp_path / "s.db", 5)
        out = read_only_mount(tmp_path, f"python -m surface_lab.cli validate {db}")
        assert out.returncode == 0, out.stdout + out.stderr
        assert f"{db}#crash: valid: 5 events" in out.stderr, out.stdout + out.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["s.db"]


WRITER_CYCLES = 200


def _opening_writer(path: str, cycles: int) -> None:
    """Open, append five events and close, so that each close checkpoints and removes the
    `-wal` file: the moment a reader used to take the file for an immutable one."""
    for cycle in range(cycles):
        with SqliteStore(path) as store:
            start = 1 + cycle * 5
            store.append("crash", _titles(start, start + 5, 2000))


def _reader(path: str, stop: Any, out: Any) -> None:
    reads, failures = 0, []
    while not stop.is_set() or reads == 0:
        try:
            reading = read_log(path)
            reads += 1
            if not reading.valid:
                failures.append(str(reading.problems[0]))
        except Exception as err:  # every failure is reported by the parent
            failures.append(f"{type(err).__name__}: {err}")
    out.put((reads, failures))


class TestCreation:
    @pytest.mark.slow
    def test_processes_creating_one_database_at_once_all_succeed(self, tmp_path: Path) -> None:
        ctx = multiprocessing.get_context("fork")
        failures: list[str] = []
        for run in range(CREATION_RUNS):
            path = tmp_path / f"s{run}.db"
            barrier, out = ctx.Barrier(CREATORS), ctx.Queue()
            procs = [ctx.Process(target=_creator, args=(str(path), barrier, out))
                     for _ in range(CREATORS)]
            for p in procs:
                p.start()
            failures += [f for f in (out.get(timeout=60) for _ in procs) if f]
            for p in procs:
                p.join(timeout=60)
            assert all(p.exitcode == 0 for p in procs)
            db = sqlite3.connect(path)
            assert db.execute("PRAGMA application_id").fetchone()[0] == sqlite.APPLICATION_ID
            db.close()
        assert failures == []
        record("sqlite-concurrent-creation", opens=CREATION_RUNS * CREATORS,
               failures=len(failures))

    def test_a_locked_database_is_reported_as_locked(self, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
        db = _database(tmp_path / "s.db", 5)
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("PRAGMA locking_mode = EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        monkeypatch.setattr(sqlite, "BUSY_TIMEOUT_MS", 50)
        try:
            for read_only in (False, True):
                with pytest.raises(StorageError, match=r"locked by another connection") as info:
                    SqliteStore(db, read_only=read_only)
                assert info.value.code == "database-locked" and info.value.path == str(db)
        finally:
            holder.close()
        with SqliteStore(db, read_only=True) as store:
            assert len(store.scan("crash").events) == 5

    def test_a_database_on_a_read_only_mount_is_reported_as_read_only(
            self, tmp_path: Path) -> None:
        db = _database(tmp_path / "s.db", 5)
        sample = Path(__file__).resolve().parents[2] / "sample_logs" / "chat.jsonl"
        out = read_only_mount(tmp_path, f"python -m surface_lab.cli convert {sample} {db}")
        assert out.returncode == 1, out.stdout + out.stderr
        assert "storage-read-only" in out.stderr and "Traceback" not in out.stderr
        assert "not a SQLite database" not in out.stderr


CREATION_RUNS, CREATORS = 40, 4


def _creator(path: str, barrier: Any, out: Any) -> None:
    barrier.wait()
    try:
        SqliteStore(path).close()
        out.put("")
    except Exception as err:  # every failure is reported by the parent
        out.put(f"{type(err).__name__}: {err}")


class TestDamagedData:
    @staticmethod
    def _insert(db: Path, seq: int, kind: str, data: str) -> None:
        con = sqlite3.connect(db)
        con.execute(f"INSERT INTO events VALUES ('crash', ?, {kind}, 0, {data}, NULL, NULL, "
                    f"NULL)", (seq,))
        con.commit()
        con.close()

    @pytest.mark.parametrize(("kind", "data", "match", "code"), [
        ("'session/title'", "CAST(X'7B2278223A22FF227D' AS TEXT)", r"stored JSON is unparsable",
         "line-unparsable"),
        ("CAST(X'FF41' AS TEXT)", "'{}'", r"the stored type is not UTF-8", "log-corrupt"),
        ("'session/title'", "'" + '{"a":' * 500 + "1" + "}" * 500 + "'",
         r"nested deeper than 400 levels", "data-not-json"),
    ], ids=["data-not-utf8", "type-not-utf8", "nested-500-deep"])
    def test_damaged_rows_are_corruption_with_their_seq(self, tmp_path: Path, kind: str,
                                                        data: str, match: str, code: str,
                                                        capsys: pytest.CaptureFixture[str],
                                                        ) -> None:
        db = _database(tmp_path / "s.db", 3)
        self._insert(db, 3, kind, data)
        with pytest.raises(CorruptLogError, match=match) as info:
            read_log(db)
        assert info.value.code == code and info.value.seq == 3
        assert len(str(info.value)) < 400  # a path 500 levels deep is abbreviated
        assert main(["validate", str(db)]) == 1
        printed = capsys.readouterr()
        assert f"{db}: seq 3" in printed.out and "internal error" not in printed.err

    def test_a_header_that_is_not_utf8_is_corruption(self, tmp_path: Path) -> None:
        db = _database(tmp_path / "s.db", 3)
        con = sqlite3.connect(db)
        con.execute("UPDATE sessions SET cwd = CAST(X'2FFF' AS TEXT)")
        con.commit()
        con.close()
        with pytest.raises(CorruptLogError, match=r"session 'crash': stored text is not UTF-8"):
            read_log(db)
        with pytest.raises(SurfaceLabError):
            SqliteStore(db).load("crash")
