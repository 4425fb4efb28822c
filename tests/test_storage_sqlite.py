"""The SQLite backend: the contract suite plus schema versioning and refusal."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from builders import assistant_data, ev
from store_contract import HEADER, StoreContract, chat

from surface_lab import StorageError, UnsupportedFormatError, read_log
from surface_lab.storage import SqliteStore, Store
from surface_lab.storage.sqlite import APPLICATION_ID, DDL, SCHEMA_VERSION


class TestSqliteContract(StoreContract):
    @staticmethod
    def make_store_static(root: Path) -> Store:
        return SqliteStore(root / "sessions.db")

    def make_store(self, root: Path) -> Store:
        return self.make_store_static(root)


class TestSchema:
    def test_a_new_database_is_created_at_version_2(self, tmp_path: Path) -> None:
        SqliteStore(tmp_path / "s.db").close()
        db = sqlite3.connect(tmp_path / "s.db")
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
        assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = [r[0] for r in db.execute(
            "SELECT sql FROM sqlite_schema WHERE type = 'table' ORDER BY name")]
        assert all(t.endswith("STRICT") for t in tables)
        db.close()

    def test_reopening_a_good_database_works(self, tmp_path: Path) -> None:
        with SqliteStore(tmp_path / "s.db") as store:
            store.create(HEADER)
            store.append("s1", chat(1))
        with SqliteStore(tmp_path / "s.db") as store:
            assert store.list() == ["s1"]

    @staticmethod
    def _version_1(db: sqlite3.Connection) -> None:
        ddl = DDL.replace("  source_event_seqs TEXT,\n  surface_op TEXT,\n", "")
        db.executescript(ddl)
        db.execute("PRAGMA user_version = 1")
        db.execute(f"PRAGMA application_id = {APPLICATION_ID}")

    @staticmethod
    def _version_3(db: sqlite3.Connection) -> None:
        db.executescript(DDL)
        db.execute("PRAGMA user_version = 3")
        db.execute(f"PRAGMA application_id = {APPLICATION_ID}")

    @staticmethod
    def _foreign(db: sqlite3.Connection) -> None:
        db.executescript(DDL)
        db.execute("PRAGMA user_version = 2")
        db.execute(f"PRAGMA application_id = {0x44534850}")

    @staticmethod
    def _altered(db: sqlite3.Connection) -> None:
        db.executescript(DDL)
        db.execute("ALTER TABLE events ADD COLUMN extra TEXT")
        db.execute("PRAGMA user_version = 2")
        db.execute(f"PRAGMA application_id = {APPLICATION_ID}")

    @staticmethod
    def _unmarked(db: sqlite3.Connection) -> None:
        db.execute("CREATE TABLE notes (x)")

    @pytest.mark.parametrize(("build", "found"), [
        ("_version_1", "found schema version 1"),
        ("_version_3", "found schema version 3"),
        ("_foreign", "found application id 0x44534850 at schema version 2"),
        ("_altered", "schema that differs"),
        ("_unmarked", "found application id 0x0 at schema version 0"),
    ])
    def test_other_databases_are_refused_untouched(self, tmp_path: Path, build: str,
                                                   found: str) -> None:
        path = tmp_path / "other.db"
        db = sqlite3.connect(path)
        getattr(self, build)(db)
        db.commit()
        db.close()
        before = hashlib.sha256(path.read_bytes()).hexdigest()
        for read_only in (False, True):
            with pytest.raises(UnsupportedFormatError, match=found) as info:
                SqliteStore(path, read_only=read_only)
            assert info.value.code == "schema-unsupported"
            assert str(path) in str(info.value)
            assert "expected a surface_lab database at schema version 2" in str(info.value)
        with pytest.raises(UnsupportedFormatError):
            read_log(path)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]

    def test_a_failed_batch_rolls_back(self, tmp_path: Path) -> None:
        with SqliteStore(tmp_path / "s.db") as store:
            store.create(HEADER)
            store.append("s1", chat(1)[:2])
            store._db.execute("CREATE TEMP TRIGGER fail BEFORE INSERT ON events "
                              "WHEN NEW.seq = 3 BEGIN SELECT RAISE(ABORT, 'injected'); END")
            with pytest.raises(StorageError, match="session 's1': appending from seq 2 failed "
                               "and was rolled back: injected") as info:
                store.append("s1", [ev(2, "step/start", {}), ev(3, "step/end", {})])
            assert info.value.seq == 2
            assert len(store.read_suffix("s1", 0)) == 2
            revision = store._db.execute("SELECT revision FROM sessions").fetchone()[0]
            assert revision == 1

    def test_provenance_null_and_empty_stay_different(self, tmp_path: Path) -> None:
        with SqliteStore(tmp_path / "s.db") as store:
            store.create(HEADER)
            store.append("s1", [
                ev(0, "assistant/message", assistant_data(), op="append", sources=[]),
                ev(1, "assistant/message", assistant_data("a2"), op="append")])
            rows = store._db.execute(
                "SELECT source_event_seqs, surface_op FROM events ORDER BY seq").fetchall()
        assert rows == [("[]", '"append"'), (None, '"append"')]

    def test_sessions_of_one_database_are_separate(self, tmp_path: Path) -> None:
        with SqliteStore(tmp_path / "s.db") as store:
            for sid in ("a", "b"):
                store.create({**HEADER, "id": sid})
                store.append(sid, chat(1))
        with pytest.raises(StorageError, match="holds 2 sessions"):
            read_log(tmp_path / "s.db")
        assert read_log(tmp_path / "s.db", session_id="b").session_id == "b"
