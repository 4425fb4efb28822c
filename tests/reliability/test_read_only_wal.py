"""A SQLite database on a read-only mount with a `-wal` but no `-shm` (issue 30, point 2):
its committed events are read, never a silently shorter log. SQLite cannot open such a
database `mode=ro` (it must make the `-shm`), and `immutable=1` ignores the `-wal`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from surface_lab.storage import SqliteStore

from .common import read_only_mount, record
from .test_sqlite_hostile import _database, _quiet, _titles

pytestmark = pytest.mark.reliability


def _with_uncheckpointed_wal(folder: Path, committed: int, in_wal: int) -> Path:
    """A copy, in `folder`, of a database whose last `in_wal` events are committed in its
    `-wal` only (as a copy or a snapshot taken while a writer had it open), with no `-shm`."""
    work = folder.parent / f"{folder.name}-work"
    work.mkdir()
    db = _database(work / "s.db", committed)
    folder.mkdir()
    with SqliteStore(db) as store:
        store.append("crash", _titles(committed, committed + in_wal))
        # copied while the writer has it open: its close would checkpoint the -wal
        shutil.copy2(db, folder / "s.db")
        shutil.copy2(f"{db}-wal", folder / "s.db-wal")
    assert (folder / "s.db-wal").stat().st_size > 0 and not (folder / "s.db-shm").exists()
    _quiet(folder / "s.db")
    return folder / "s.db"


def test_a_wal_without_shm_on_a_read_only_mount_is_read_whole(tmp_path: Path) -> None:
    db = _with_uncheckpointed_wal(tmp_path / "ro", 100, 5)
    out = read_only_mount(db.parent, f"python -m surface_lab.cli validate {db}")
    assert "Traceback" not in out.stderr, out.stderr
    assert f"{db}#crash: valid: 105 events" in out.stderr, out.stdout + out.stderr
    assert out.returncode == 0, out.stdout + out.stderr
    assert sorted(p.name for p in db.parent.iterdir()) == ["s.db", "s.db-wal"]
    record("sqlite-read-only-wal", committed=105, read=105)


def test_the_read_only_copy_leaves_no_file_behind(tmp_path: Path) -> None:
    db = _with_uncheckpointed_wal(tmp_path / "ro", 10, 3)
    out = read_only_mount(db.parent, f"python -m surface_lab.cli info {db} --json && "
                                     f"ls -A ${{TMPDIR:-/tmp}} > {tmp_path}/after.txt")
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["events"] == 13, out.stdout
    assert "surface-lab-wal" not in (tmp_path / "after.txt").read_text()
