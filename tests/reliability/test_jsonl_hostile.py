"""The JSONL store under hostile conditions: symbolic links never lead a write outside the
root, a replaced log never gets an append at the wrong seq, new folders and lock files are
durable, an announced append is settled by its CRC, and folder names and header ids agree."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import pytest

from surface_lab import CorruptLogError, StorageError, read_log
from surface_lab.cli import main
from surface_lab.storage import JsonlStore, jsonl
from surface_lab.storage.jsonl import decode_id, dumps_header, encode_events, lock_path

from .common import HEADER, stream

pytestmark = pytest.mark.reliability
EVENTS = stream(1, 40)


def _store(root: Path, events: int = 10) -> tuple[JsonlStore, Path]:
    store = JsonlStore(root)
    store.create(HEADER)
    store.append("crash", EVENTS[:events])
    [log] = root.rglob("session.jsonl")
    return store, log


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


class TestSymlinks:
    def test_a_log_that_links_outside_the_root_is_never_appended_to(self,
                                                                   tmp_path: Path) -> None:
        store, log = _store(tmp_path / "root")
        outside = tmp_path / "outside"
        outside.mkdir()
        os.replace(log, outside / "session.jsonl")
        log.symlink_to(outside / "session.jsonl")
        before = _tree(outside)
        with pytest.raises(StorageError, match=r"is a symbolic link") as info:
            store.append("crash", EVENTS[10:12])
        assert info.value.code == "store-layout" and info.value.path == str(log)
        assert _tree(outside) == before  # no append and no lock file out there

    def test_a_project_folder_that_links_outside_the_root_is_never_written(
            self, tmp_path: Path) -> None:
        root, outside = tmp_path / "root", tmp_path / "outside"
        _, log = _store(root)
        project = log.parent.parent
        os.replace(project, outside)
        project.symlink_to(outside, target_is_directory=True)
        before = _tree(outside)
        store = JsonlStore(root)
        with pytest.raises(StorageError, match=r"is a symbolic link"):
            store.append("crash", EVENTS[10:12])
        store.create({**HEADER, "id": "new"})  # a new session in the same project folder
        with pytest.raises(StorageError, match=r"is a symbolic link"):
            store.append("new", EVENTS[:3])
        assert _tree(outside) == before

    def test_a_lock_file_that_links_outside_the_root_is_never_written(self,
                                                                     tmp_path: Path) -> None:
        store, log = _store(tmp_path / "root")
        target = tmp_path / "precious"
        target.write_bytes(b"do not truncate me")
        lock_path(log).symlink_to(target)
        with pytest.raises(StorageError, match=r"is a symbolic link"):
            store.append("crash", EVENTS[10:12])
        assert target.read_bytes() == b"do not truncate me"


class TestNextSeqCache:
    @staticmethod
    def _one_fewer_same_size(log: Path) -> bytes:
        """The log with its last event dropped and the one before padded to the same size."""
        lines = log.read_bytes().splitlines(keepends=True)
        shorter = b"".join(lines[:-1])
        padding = len(lines[-1])
        last = dict(EVENTS[8], data={**EVENTS[8]["data"], "pad": ""})
        body = encode_events([*EVENTS[:8]], pack=False)
        fixed = dumps_header(HEADER) + body
        grown = len(log.read_bytes()) - len(fixed) - len(encode_events([last], pack=False))
        last["data"]["pad"] = "p" * grown
        replaced = fixed + encode_events([last], pack=False)
        assert len(replaced) == len(log.read_bytes()) and padding and shorter
        return replaced

    @pytest.mark.parametrize("how", ["renamed-over", "rewritten-in-place"])
    def test_a_log_replaced_by_one_of_the_same_size_is_read_again(self, tmp_path: Path,
                                                                 how: str) -> None:
        store, log = _store(tmp_path / "root", 9)
        store.append("crash", EVENTS[9:10])  # the store now knows: size S, next seq 10
        replaced = self._one_fewer_same_size(log)
        stat = log.stat()
        if how == "renamed-over":
            (log.parent / "new").write_bytes(replaced)
            os.replace(log.parent / "new", log)
        else:  # the same inode, and the mtime put back, as within one tick of the clock
            log.write_bytes(replaced)
            os.utime(log, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        with pytest.raises(StorageError, match=r"stored next seq is 9") as info:
            store.append("crash", EVENTS[10:11])
        assert info.value.code == "seq-conflict"
        assert log.read_bytes() == replaced
        store.append("crash", [dict(EVENTS[9])])
        assert len(read_log(log).events) == 10


class TestDurableFolders:
    def test_new_folders_and_the_lock_file_are_fsynced_in_their_parents(
            self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        synced: list[Path] = []
        real = jsonl._fsync_dir

        def record(path: Path) -> None:
            synced.append(Path(path))
            real(path)

        monkeypatch.setattr(jsonl, "_fsync_dir", record)
        root = tmp_path / "root"
        store, log = _store(root)
        session, project = log.parent, log.parent.parent
        # Each new folder's entry is made durable in its parent, the log's in its folder.
        assert synced == [tmp_path, root, project, session]
        synced.clear()
        store.append("crash", EVENTS[10:12])  # creates the lock file
        assert synced == [session]
        synced.clear()
        store.append("crash", EVENTS[12:14])  # the lock file exists: nothing new
        assert synced == []


class TestAnnouncedAppends:
    @staticmethod
    def _announce(log: Path, payload: bytes, start: int) -> None:
        crc = zlib.crc32(payload)
        lock_path(log).write_bytes(f"pending {start} {start + len(payload)} {crc:08x}\n"
                                   .encode())

    def test_a_finished_batch_with_later_appends_is_kept(self, tmp_path: Path) -> None:
        """The writer died after its fsync, before clearing the announcement, and a writer
        that knows nothing of announcements (dsh) appended after it: nothing is dropped."""
        store, log = _store(tmp_path / "root")
        start = log.stat().st_size
        batch = encode_events(EVENTS[10:15])
        with open(log, "ab") as f:
            f.write(batch + encode_events(EVENTS[15:18]))
        self._announce(log, batch, start)
        assert len(read_log(log).events) == 18
        store.append("crash", EVENTS[18:20])
        assert [e["seq"] for e in read_log(log).events] == list(range(20))

    def test_a_batch_of_the_announced_size_but_other_bytes_is_dropped(self,
                                                                     tmp_path: Path) -> None:
        """What a power cut can leave: the size made durable, the data not (zeros)."""
        store, log = _store(tmp_path / "root")
        start = log.stat().st_size
        batch = encode_events(EVENTS[10:15])
        with open(log, "ab") as f:
            f.write(b"\0" * (len(batch) - 1) + b"\n")
        self._announce(log, batch, start)
        reading = read_log(log)
        assert len(reading.events) == 10
        assert [p.code for p in reading.problems][:1] == ["unfinished-batch"]
        store.append("crash", EVENTS[10:15])
        assert len(read_log(log).events) == 15 and read_log(log).valid

    @pytest.mark.parametrize("announcement", ["other-bytes", "without-crc"])
    def test_a_log_longer_than_an_announcement_it_does_not_match_is_refused(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str], announcement: str,
            ) -> None:
        store, log = _store(tmp_path / "root")
        start = log.stat().st_size
        written = encode_events(EVENTS[10:15])
        with open(log, "ab") as f:
            f.write(written)
        half = len(written) // 2  # the announced batch ends half-way
        if announcement == "other-bytes":
            self._announce(log, written[: half - 1] + b"x", start)
        else:  # an older version's announcement: whether the batch finished is unknown
            lock_path(log).write_bytes(f"pending {start} {start + half}\n".encode())
        before = log.read_bytes()
        with pytest.raises(StorageError, match=r"nothing was changed") as info:
            store.append("crash", EVENTS[15:17])
        assert info.value.code == "log-corrupt"
        assert log.read_bytes() == before
        reading = read_log(log)
        assert not reading.valid and reading.problems[0].code == "log-corrupt"
        assert main(["repair", str(log), "--write"]) == 1
        assert log.read_bytes() == before
        assert "Traceback" not in capsys.readouterr().err


class TestLayout:
    @pytest.mark.parametrize("name", ["~GGGG", "~00e9", "a~12", "a b", ".", "~002E~002"])
    def test_a_name_encode_id_never_makes_is_refused(self, name: str) -> None:
        with pytest.raises(StorageError, match=r"is not an encoded session id") as info:
            decode_id(name)
        assert info.value.code == "store-layout"

    def test_a_store_with_a_folder_that_is_not_an_encoded_id_is_refused(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        _, log = _store(tmp_path / "root")
        os.rename(log.parent, log.parent.parent / "~GGGG")
        with pytest.raises(StorageError, match=r"'~GGGG' is not an encoded session id"):
            JsonlStore(tmp_path / "root").list()
        assert main(["validate", str(tmp_path / "root")]) == 1
        captured = capsys.readouterr()
        assert "store-layout" in captured.out and "internal error" not in captured.err

    def test_a_header_naming_another_session_than_its_folder_is_refused(
            self, tmp_path: Path) -> None:
        root = tmp_path / "root"
        _, log = _store(root)
        other = log.parent.parent / "other"
        os.rename(log.parent, other)
        store = JsonlStore(root)
        assert store.list() == ["other"]
        with pytest.raises(CorruptLogError, match=r"the header names session 'crash'") as info:
            store.load("other")
        assert info.value.code == "store-layout" and info.value.line == 1
        with pytest.raises(CorruptLogError, match=r"the header names session 'crash'"):
            store.append("other", EVENTS[10:11])
