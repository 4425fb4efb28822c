"""Both readers and every command give the full pipeline's answer on the inputs that used
to split them: numbers too large for a double, lines nested past any parser's bound, a
writer appending while the log is read; and a read changes nothing process-wide."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

import pytest
from builders import read_outcome

from surface_lab import read_log
from surface_lab.cli import main
from surface_lab.errors import SurfaceLabError
from surface_lab.reading import codec
from surface_lab.reading.sequences import LogEvents

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"
HUGE = [b"1e400", b"-1.7976931348623159e308", b"1E+309", b"1" + b"0" * 400,
        b"1" + b"0" * 300 + b"e10"]
IDS = ["1e400", "-max-double-above", "1E+309", "400-digit-integer", "301-digits-e10"]


def _lines(name: str) -> list[bytes]:
    return (SAMPLES / f"{name}.jsonl").read_bytes().splitlines(keepends=True)




def _with_number(tmp_path: Path, name: str, kind: bytes, number: bytes, *,
                 last: bool = False) -> tuple[Path, int]:
    lines = _lines(name)
    hits = [i for i, line in enumerate(lines) if b'"type":"' + kind + b'"' in line]
    i = hits[-1] if last else hits[0]
    lines[i] = lines[i].replace(b'"content":[', b'"content":[{"type":"x","n":' + number
                                + b"},", 1)
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(b"".join(lines))
    return path, i + 1


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    return code, out.out + out.err


class TestNumbersTooLargeForADouble:
    @pytest.mark.parametrize("number", HUGE, ids=IDS)
    def test_in_committed_data_both_readers_refuse_the_line(
            self, tmp_path: Path, number: bytes) -> None:
        path, line = _with_number(tmp_path, "chat", b"user/message", number)
        fast, full = read_outcome(path, "fast"), read_outcome(path, "full")
        assert fast == full == ("error", ("CorruptLogError", "line-unparsable", line, None))

    @pytest.mark.parametrize("number", HUGE, ids=IDS)
    def test_in_an_open_turn_it_is_a_crash_tail_for_every_command(
            self, tmp_path: Path, number: bytes, capsys: pytest.CaptureFixture[str]) -> None:
        path, line = _with_number(tmp_path, "crash-needs-repair", b"assistant/message",
                                  number, last=True)
        fast, full = read_outcome(path, "fast"), read_outcome(path, "full")
        assert fast == full and fast[0] == "read"
        log = read_log(path)
        assert not log.valid and not isinstance(log.events, LogEvents)
        assert [(p.code, p.line) for p in log.problems if p.severity == "error"] == [
            ("line-unparsable", line)]
        assert _run(capsys, "surface", str(path))[0] == 1
        assert _run(capsys, "validate", str(path))[0] == 1
        code, out = _run(capsys, "repair", str(path))
        assert code == 0 and "line-unparsable" in out and "nothing to repair" not in out
        assert _run(capsys, "repair", "--write", str(path))[0] == 0
        assert _run(capsys, "validate", str(path))[0] == 0

    def test_text_that_only_looks_like_one_is_read_fast(self, tmp_path: Path) -> None:
        lines = _lines("chat")
        lines[2] = lines[2].replace(b'"text":"', b'"text":"1e400 and ' + b"9" * 300, 1)
        path = tmp_path / "s.jsonl"
        path.write_bytes(b"".join(lines))
        assert read_outcome(path, "fast") == read_outcome(path, "full")
        assert isinstance(read_log(path).events, LogEvents)


class TestDeepNesting:
    DEEP = b"[" * 1100 + b"]" * 1100

    def _paths(self, tmp_path: Path) -> list[Path]:
        lines = _lines("chat")
        first = tmp_path / "first.jsonl"
        first.write_bytes(self.DEEP + b"\n" + b"".join(lines[1:]))
        header = tmp_path / "header.jsonl"
        header.write_bytes(lines[0].replace(b'"cwd"', b'"x":' + self.DEEP + b',"cwd"', 1)
                           + b"".join(lines[1:]))
        gap = tmp_path / "gap.jsonl"
        gap.write_bytes(b"".join(lines[:3]) + b'{"type":"x","seq":99,"time":0,"data":'
                        + self.DEEP + b"}\n" + b"".join(lines[3:]))
        deep = tmp_path / "deep.jsonl"
        deep.write_bytes(b"".join(lines[:3]) + lines[3].replace(
            b'"data":{', b'"data":{"deep":' + self.DEEP + b",", 1) + b"".join(lines[4:]))
        return [first, header, gap, deep]

    def test_no_recursion_error_leaves_read_log(self, tmp_path: Path) -> None:
        for path in self._paths(tmp_path):
            fast, full = read_outcome(path, "fast"), read_outcome(path, "full")
            assert fast == full
            assert fast[0] == "error", path.name

    @pytest.mark.parametrize("command", ["validate", "surface", "info", "repair", "audit"])
    def test_no_command_prints_a_traceback(self, tmp_path: Path, command: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
        for path in self._paths(tmp_path):
            code, out = _run(capsys, command, str(path))
            assert code == 1 and "internal error" not in out, (path.name, out)


class TestReadingUnderAWriter:
    """An append announces its byte range in the lock file, writes, syncs and clears the
    announcement; a read taken at any point in between sees whole batches only."""

    def _log(self, tmp_path: Path) -> tuple[Path, bytes]:
        lines = _lines("chat")
        path = tmp_path / "session.jsonl"
        path.write_bytes(b"".join(lines[:16]))  # ends after turn 1's turn/end
        return path, b"".join(lines[16:])

    @pytest.mark.parametrize("check", ["fast", "full"])
    @pytest.mark.parametrize("cut", [10, 200, 400])
    def test_a_batch_written_during_the_read_is_seen_whole_or_not_at_all(
            self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, check: str,
            cut: int) -> None:
        path, batch = self._log(tmp_path)
        before = len(read_log(path).events)
        lock = codec.lock_path(path)
        size = path.stat().st_size
        real = codec.read_log_bytes
        steps = iter([
            # the writer announces the batch and has written part of it when the bytes
            # are read; then it finishes and clears the announcement
            lambda: (lock.write_bytes(f"pending {size} {size + len(batch)}\n".encode()),
                     path.write_bytes(path.read_bytes() + batch[:cut])),
            lambda: (path.write_bytes(path.read_bytes() + batch[cut:]), lock.write_bytes(b"")),
        ])

        def reading(p: Path) -> tuple[bytes, bool]:
            step = next(steps, None)
            if step is not None:
                step()
                if lock.read_bytes() == b"":  # cleared just after these bytes were read
                    data = real(p)
                    return data[0][: size + cut], data[1]
            return real(p)

        monkeypatch.setattr(codec, "read_log_bytes", reading)
        log = read_log(path, check=check)  # type: ignore[arg-type]
        assert len(log.events) in (before, before + 25)
        assert log.valid and not [p for p in log.problems if p.code == "torn-tail"]

    def test_an_unfinished_append_left_by_a_crash_is_dropped_with_a_note(
            self, tmp_path: Path) -> None:
        path, batch = self._log(tmp_path)
        size = path.stat().st_size
        before = len(read_log(path).events)
        codec.lock_path(path).write_bytes(f"pending {size} {size + len(batch)}\n".encode())
        path.write_bytes(path.read_bytes() + batch[:300])
        for check in ("fast", "full"):
            log = read_log(path, check=check)  # type: ignore[arg-type]
            assert len(log.events) == before
            assert [p.code for p in log.problems] == ["unfinished-batch"]


def test_a_read_changes_no_process_wide_state(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(sys, "setrecursionlimit", lambda n: calls.append(n))
    limit = sys.getrecursionlimit()
    for path in sorted(SAMPLES.glob("*.jsonl")):
        with contextlib.suppress(SurfaceLabError):
            read_log(path)
    assert calls == [] and sys.getrecursionlimit() == limit


def test_detect_format_reads_a_deep_first_line_without_recursing(tmp_path: Path) -> None:
    from surface_lab.importers import detect_format

    for name in ("deep.jsonl", "deep.json"):
        path = tmp_path / name
        path.write_bytes(TestDeepNesting.DEEP + b"\n")
        assert detect_format(path) is None
