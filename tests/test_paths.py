"""One answer to "what is this path?" (`reading.paths`), given by read_log, every command,
the frames and the corpus alike."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from surface_lab import read_log
from surface_lab.cli import main
from surface_lab.errors import StorageError
from surface_lab.reading.paths import resolve

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out.splitlines(), err


@pytest.fixture
def unreadable(tmp_path: Path) -> list[Path]:
    """A FIFO, a device, a /proc file and a symbolic link loop."""
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    loop = tmp_path / "loop.jsonl"
    os.symlink(tmp_path / "other.jsonl", loop)
    os.symlink(loop, tmp_path / "other.jsonl")
    return [fifo, Path("/dev/zero"), Path("/proc/self/status"), loop]


class TestRefusedUnopened:
    def test_read_log_refuses_them(self, unreadable: list[Path]) -> None:
        for path in unreadable:
            with pytest.raises(StorageError, match=r"refused without opening it|cannot be "
                                                   r"looked at"):
                read_log(path)

    @pytest.mark.parametrize("command", ["validate", "info", "surface", "repair", "audit"])
    def test_every_command_refuses_them_in_one_line(
            self, unreadable: list[Path], command: str,
            capsys: pytest.CaptureFixture[str]) -> None:
        for path in unreadable:
            code, out, err = _run(capsys, command, str(path))
            # validate's problems are its results; any other command's error is on stderr
            lines = out if command == "validate" else err.splitlines()
            assert code == 1 and len(lines) == 1 and lines[0].startswith(f"{path}: path-refused: ")

    def test_the_frames_and_the_corpus_refuse_them(self, unreadable: list[Path],
                                                   tmp_path: Path) -> None:
        from surface_lab import corpus
        from surface_lab.notebook import events_df

        for path in unreadable:
            with pytest.raises(StorageError):
                events_df(path, progress=False)
        # planning looks at them without opening them; each is then a row of problems
        out = tmp_path / "out"
        manifest = corpus.to_parquet([str(p) for p in unreadable], out)
        assert len(manifest.problems) == len(unreadable)


class TestFolders:
    def _folder(self, tmp_path: Path) -> Path:
        folder = tmp_path / "logs"
        folder.mkdir()
        for name in ("chat", "max-tokens", "invalid-crash-tail", "invalid-message"):
            shutil.copy(SAMPLES / f"{name}.jsonl", folder / f"{name}.jsonl")
        return folder

    def test_validate_checks_every_log_of_a_folder(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        folder = self._folder(tmp_path)
        code, lines, err = _run(capsys, "validate", str(folder))
        assert code == 1
        assert [line.split(":")[0] for line in lines] == [
            f"{folder}/invalid-crash-tail.jsonl", f"{folder}/invalid-message.jsonl"]
        assert err.splitlines()[-1] == "validated 4 logs: 2 valid, 2 invalid"

    def test_validate_says_so_when_a_folder_holds_no_log(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        (tmp_path / "empty").mkdir()
        code, lines, _ = _run(capsys, "validate", str(tmp_path / "empty"))
        assert code == 1 and lines == [f"{tmp_path / 'empty'}: source-empty: holds no log or "
                                       f"session to validate"]

    def test_a_glob_of_plain_logs_is_a_folder_of_them(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        folder = self._folder(tmp_path)
        found = resolve(f"{folder}/m*.jsonl")
        assert found.kind == "logs" and found.members == (folder / "max-tokens.jsonl",)
        assert read_log(f"{folder}/m*.jsonl").session_id == "max-tokens"
        assert _run(capsys, "validate", f"{folder}/ch*.jsonl")[0] == 0
        with pytest.raises(StorageError, match="matches no log"):
            read_log(f"{folder}/nothing*.jsonl")

    def test_a_folder_of_several_sessions_names_how_to_pick_one(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        folder = self._folder(tmp_path)
        with pytest.raises(StorageError, match=r"holds 4 sessions; pick one with "
                                               r"session_id= \('chat', 'chat', 'tools-parallel', "
                                               r"'max-tokens'\)"):
            read_log(folder)
        assert read_log(folder, session_id="max-tokens").session_id == "max-tokens"
        for command in ("info", "surface"):  # audit takes every session (tests/test_audit)
            code, _, err = _run(capsys, command, str(folder))
            lines = err.splitlines()  # an error: on stderr
            assert code == 1 and "pick one with --session ID ('chat'" in lines[0], lines
        code, lines, _ = _run(capsys, "info", str(folder), "--session", "max-tokens")
        assert code == 0

    def test_a_session_held_twice_in_a_folder_is_not_guessed(self, tmp_path: Path) -> None:
        folder = self._folder(tmp_path)  # invalid-crash-tail is session 'chat' too
        with pytest.raises(StorageError, match="session 'chat' is held 2 times"):
            read_log(folder, session_id="chat")

    def test_a_store_a_database_and_a_session_folder_resolve(self, tmp_path: Path) -> None:
        assert resolve(SAMPLES / "sessions.db").kind == "sqlite"
        assert resolve(SAMPLES / "chat.jsonl").kind == "log"
        one = tmp_path / "one"
        one.mkdir()
        shutil.copy(SAMPLES / "chat.jsonl", one / "session.jsonl")
        assert resolve(one).file == one / "session.jsonl"
        store = tmp_path / "store" / "--work--" / "chat"
        store.mkdir(parents=True)
        shutil.copy(SAMPLES / "chat.jsonl", store / "session.jsonl")
        assert resolve(tmp_path / "store").kind == "store"
        assert read_log(tmp_path / "store").session_id == "chat"
