"""Out of memory is never evidence about the bytes (issue 30, point 1): under an
address-space limit no command drops, truncates or rewrites anything, and each ends with
one line and a non-zero exit, never a signal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from surface_lab import jsonvalue, read_log
from surface_lab.reading import codec
from surface_lab.storage import JsonlStore

from .common import HEADER, PROJECT, record

pytestmark = pytest.mark.reliability
MB = 1 << 20

# Run a command with RLIMIT_AS set to the address space the imports took plus argv[1]
# MiB (the limit a batch scheduler's `ulimit -v` sets), as the red team did.
_UNDER_LIMIT = """
import resource, sys
import numpy, msgspec, orjson, zstandard, surface_lab.reading.fast, surface_lab.storage
from surface_lab.cli import main
size = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status")
            if line.startswith("VmSize:"))
extra = int(sys.argv[1]) << 20
resource.setrlimit(resource.RLIMIT_AS, (size + extra, size + extra))
sys.exit(main(sys.argv[2:]))
"""


# MiB over the imports for the sweep; SURFACE_LAB_MEMORY_STEP=100 gives the 14 limits of
# the figures in RELIABILITY.md
LIMITS_MB = range(100, 1500, int(os.environ.get("SURFACE_LAB_MEMORY_STEP", "300")))


def _open_turn_log(path: Path, text_bytes: int) -> bytes:
    """A valid log whose open turn holds one large committed user message."""
    events = [
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
        {"type": "user/message", "seq": 1, "time": 2, "surfaceOp": "append",
         "data": {"id": "u1", "role": "user", "source": {"kind": "user"},
                  "content": [{"type": "text", "text": "x" * text_bytes}]}},
    ]
    data = b"".join(json.dumps(x).encode() + b"\n" for x in [{"type": "session", **HEADER},
                                                            *events])
    path.write_bytes(data)
    return data


def _run_limited(extra_mb: int, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _UNDER_LIMIT, str(extra_mb), *argv],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(PROJECT)})


def _check_outcome(out: subprocess.CompletedProcess[str], path: Path, before: bytes) -> str:
    """Either the command did its work or it said "out of memory" in one line and left
    the file byte-identical; never a signal, never a shorter log."""
    assert out.returncode >= 0, f"killed by signal {-out.returncode}: {out.stderr[-500:]}"
    after = path.read_bytes()
    assert after.startswith(before), f"the log lost bytes: {len(before)} -> {len(after)}"
    if out.returncode == 0:
        return "done"
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    # the last line says it (a library may warn before, as matplotlib does when its 3-D
    # module fails to load); a C extension that fails without setting an exception
    # (pandas, rarely) is an "internal error": one line all the same
    last = out.stderr.rstrip("\n").rsplit("\n", 1)[-1]
    assert last.startswith(("surface-lab: out of memory", "surface-lab: internal error")), (
        out.stderr[-500:])
    assert after == before
    return "out-of-memory"


class TestParserMemory:
    def test_the_parsers_out_of_memory_error_is_a_memory_error_not_a_bad_line(
            self, monkeypatch: pytest.MonkeyPatch) -> None:
        def exhausted(_: Any) -> Any:
            raise orjson.JSONDecodeError(
                "Not enough memory to allocate buffer for parsing", "", 0)

        monkeypatch.setattr(orjson, "loads", exhausted)
        with pytest.raises(MemoryError, match="parsing 9 bytes of JSON"):
            codec.parse_line(b'{"a": 1 }')

    def test_a_large_input_is_parsed_only_when_its_parse_fits(
            self, monkeypatch: pytest.MonkeyPatch) -> None:
        asked: list[int] = []

        def no_room(nbytes: int) -> None:
            asked.append(nbytes)
            raise MemoryError(f"{nbytes} bytes of memory are not available")

        monkeypatch.setattr(jsonvalue, "check_room", no_room)
        line = b'{"t": "' + b"x" * (1 * MB) + b'"}'
        with pytest.raises(MemoryError):
            jsonvalue.loads(line)
        assert asked == [13 * len(line) + MB]  # ASCII: yyjson's 12N and the string's N
        assert jsonvalue.loads(b'{"small": true}') == {"small": True}  # never sized

    def test_a_store_out_of_memory_while_repairing_changes_nothing(
            self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        path = tmp_path / "s.jsonl"
        before = _open_turn_log(path, 200_000)
        real = jsonvalue.check_room

        def no_room(nbytes: int) -> None:
            real(1 << 62)  # no address space is that large: a real MemoryError

        monkeypatch.setattr(jsonvalue, "check_room", no_room)
        with JsonlStore.for_file(path) as store, pytest.raises(MemoryError):
            store.load(HEADER["id"])
        assert path.read_bytes() == before


class TestRepairUnderLimit:
    """The red team's reproduction: a valid 50 MB log with a large committed user message
    in an open turn, `repair --write` under an address-space limit (it cut the log to 267
    bytes, deleting the message, and said "0 tail problem(s) dropped")."""

    @pytest.mark.parametrize("extra_mb", [300, 550])
    def test_repair_write_never_drops_a_committed_event(self, tmp_path: Path,
                                                       extra_mb: int) -> None:
        path = tmp_path / "s.jsonl"
        before = _open_turn_log(path, 50 * MB)
        out = _run_limited(extra_mb, "repair", "--write", str(path))
        outcome = _check_outcome(out, path, before)
        if outcome == "done":
            assert read_log(path).events[-1]["type"] == "turn/end"
        record("memory-repair", limit_extra_mb=extra_mb, outcome=outcome)

    @pytest.mark.slow
    @pytest.mark.parametrize("command", ["validate", "info", "surface", "repair", "audit"])
    def test_every_command_ends_in_one_line_at_every_limit(self, tmp_path: Path,
                                                          command: str) -> None:
        path = tmp_path / "s.jsonl"
        before = _open_turn_log(path, 50 * MB)
        outcomes = []
        for extra_mb in LIMITS_MB:
            argv = [command, str(path)]
            if command == "repair":
                argv.append("--write")
            if command == "audit":
                argv += ["--out", str(tmp_path / f"report-{extra_mb}")]
            out = _run_limited(extra_mb, *argv)
            outcomes.append(_check_outcome(out, path, before))
            before = path.read_bytes()  # a repair that was done appended its closer
        record("memory-commands", command=command, runs=len(outcomes),
               out_of_memory=outcomes.count("out-of-memory"), done=outcomes.count("done"))
