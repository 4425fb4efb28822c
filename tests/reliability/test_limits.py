"""Limits that bound the cost of hostile input, checked before the work: zstd output,
newline bombs, members per packed row; and an exhausted memory is one line, not a
traceback."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import zstandard

from surface_lab import CorruptLogError, read_log
from surface_lab import cli as cli_module
from surface_lab.chunks import MAX_ROW_MEMBERS, pack_records
from surface_lab.cli import main
from surface_lab.events import freeze_event
from surface_lab.reading import codec

from .common import HEADER, PROJECT, record

pytestmark = pytest.mark.reliability
HEADER_LINE = json.dumps({"type": "session", **HEADER}).encode() + b"\n"
MB = 1 << 20


def _peak(work: Callable[[], Any]) -> tuple[Any, int]:
    """What `work` returns or raises, and the peak of the memory it allocated."""
    tracemalloc.start()
    try:
        try:
            result: Any = work()
        except Exception as err:  # the caller asserts on it
            result = err
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _zstd(path: Path, *parts: bytes, declare: bool = True) -> Path:
    if declare:
        path.write_bytes(b"".join(zstandard.ZstdCompressor().compress(p) for p in parts))
        return path
    buffer = io.BytesIO()
    for part in parts:  # a stream frame does not say its size
        with zstandard.ZstdCompressor().stream_writer(buffer, closefd=False) as writer:
            writer.write(part)
    path.write_bytes(buffer.getvalue())
    return path


class TestZstd:
    def test_a_frame_declaring_too_much_is_refused_before_decompressing(
            self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        path = _zstd(tmp_path / "s.jsonl.zstd", HEADER_LINE, b"0" * (100 * MB))
        monkeypatch.setattr(codec, "MAX_DECOMPRESSED_BYTES", 10 * MB)
        error, peak = _peak(lambda: read_log(path))
        assert isinstance(error, CorruptLogError) and error.code == "log-corrupt"
        assert "would exceed the limit of 10485760 bytes" in str(error)
        assert peak < 8 * MB  # less than one piece of output: nothing was decompressed

    def test_a_frame_that_does_not_say_its_size_is_cut_off_at_the_limit(
            self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        path = _zstd(tmp_path / "s.jsonl.zstd", HEADER_LINE, b"0" * (200 * MB), declare=False)
        assert path.stat().st_size < 100_000
        monkeypatch.setattr(codec, "MAX_DECOMPRESSED_BYTES", 10 * MB)
        error, peak = _peak(lambda: read_log(path))
        assert isinstance(error, CorruptLogError) and "would exceed the limit" in str(error)
        # The limit plus at most one piece's output (8 MiB) and its copy, never the 200 MB.
        assert peak < 10 * MB + 24 * MB
        record("limit-zstd-stream", expanded_mb=200, limit_mb=10, peak_mb=peak // MB)

    def test_many_frames_are_read_in_linear_time(self, tmp_path: Path) -> None:
        lines = [json.dumps({"type": "session/title", "seq": i, "time": 0, "data": {}})
                 .encode() + b"\n" for i in range(3000)]
        path = _zstd(tmp_path / "s.jsonl.zstd", HEADER_LINE, *lines)
        assert len(read_log(path).events) == 3000


class TestNewlineBomb:
    def test_millions_of_empty_lines_are_a_cheap_crash_tail(self, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str],
                                                          ) -> None:
        lines = 4_000_000
        path = _zstd(tmp_path / "s.jsonl.zstd", HEADER_LINE, b"\n" * lines)
        assert path.stat().st_size < 1000
        reading, peak = _peak(lambda: read_log(path))
        [problem] = reading.problems
        assert problem.code == "line-unparsable" and problem.line == 2
        assert f"{lines} complete line(s) would be dropped (empty line)" in problem.message
        # The 4 MB of bytes about twice over: a list of its lines alone would take 32 MB.
        assert peak < 16 * MB
        assert main(["validate", str(path)]) == 1
        assert "crash tail from line 2" in capsys.readouterr().out
        record("limit-newline-bomb", lines=lines, compressed_bytes=path.stat().st_size,
               peak_mb=peak // MB)

    def test_a_turn_end_after_many_empty_lines_is_still_found(self, tmp_path: Path) -> None:
        path = tmp_path / "s.jsonl"
        path.write_bytes(HEADER_LINE + b"\n" * 100_000 + b'{"type":"turn\\/end"}\n')
        with pytest.raises(CorruptLogError, match=r"line 100002 records a turn/end"):
            read_log(path)


def _row(members: int) -> bytes:
    return json.dumps({"type": "text-chunks", "seq0": 0, "time0": 0, "data": {
        "turn": 1, "step": 1, "index": 0, "dt": [0] * (members - 1),
        "texts": [""] * members}}, separators=(",", ":")).encode() + b"\n"


class TestPackedRows:
    @pytest.mark.parametrize("check", ["fast", "full"])
    def test_a_row_over_the_member_limit_is_refused_before_it_is_expanded(
            self, tmp_path: Path, check: str) -> None:
        path = tmp_path / "s.jsonl"
        path.write_bytes(HEADER_LINE + _row(MAX_ROW_MEMBERS + 1))
        reading, peak = _peak(lambda: read_log(path, check=check))  # type: ignore[arg-type]
        [problem] = reading.problems
        assert problem.code == "row-malformed" and problem.line == 2
        assert f"more than the limit of {MAX_ROW_MEMBERS}" in problem.message
        assert peak < 64 * MB  # 100,001 expanded events would take ~60 MB

    def test_a_row_at_the_limit_is_read(self, tmp_path: Path) -> None:
        path = tmp_path / "s.jsonl"
        path.write_bytes(HEADER_LINE + _row(1000))
        assert len(read_log(path).events) == 1000

    def test_writers_split_a_longer_run_into_rows_within_the_limit(self) -> None:
        chunks = [freeze_event({"type": "assistant/chunk", "seq": i, "time": 0, "data": {
            "turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "w"}}})
            for i in range(MAX_ROW_MEMBERS + 5)]
        rows = list(pack_records(chunks))
        assert [len(r["data"]["texts"]) for r in rows] == [MAX_ROW_MEMBERS, 5]


class TestOutOfMemory:
    def test_a_memory_error_is_one_line_without_a_traceback(
            self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
            capsys: pytest.CaptureFixture[str]) -> None:
        def exhausted(_: Any) -> int:
            held = [bytearray(1024)]  # the frames still hold this when the handler runs
            raise MemoryError(held)

        monkeypatch.setattr(cli_module, "cmd_validate", exhausted)
        assert main(["validate", str(tmp_path)]) == 1
        captured = capsys.readouterr()
        assert captured.err.startswith("surface-lab: out of memory")
        assert "Traceback" not in captured.err and captured.out == ""

    @pytest.mark.slow
    def test_a_command_out_of_address_space_says_so_in_one_line(self, tmp_path: Path) -> None:
        """A real exhaustion: 100 MB of address space over what the imports took, and a
        5.7 MB line of two million empty objects (about 330 MB to read). orjson reports
        it as a SystemError caused by the MemoryError."""
        path = tmp_path / "s.jsonl"
        path.write_bytes(HEADER_LINE + b'{"type":"session/title","seq":0,"time":0,"data":'
                         b'{"x":[' + b",".join([b"{}"] * 2_000_000) + b"]}}\n")
        out = subprocess.run([sys.executable, "-c", _UNDER_LIMIT, str(path)],
                             capture_output=True, text=True, timeout=300,
                             env={**os.environ, "PYTHONPATH": str(PROJECT)})
        assert out.returncode == 1, out.stdout + out.stderr
        assert out.stderr.startswith("surface-lab: out of memory"), out.stderr
        assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1


_UNDER_LIMIT = """
import resource, sys
import numpy, msgspec, orjson, surface_lab.reading.fast
from surface_lab.cli import main
size = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status")
            if line.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (size + 100 * 2**20, size + 100 * 2**20))
sys.exit(main(["validate", sys.argv[1]]))
"""
