"""Bidirectional and invisible format characters in ids and texts (issue 30, point 6):
isolated and made visible in HTML, escaped on the terminal. A U+202E in a compaction id
reversed the report's summary line ("374 -> 362 tokens" shown as "snekot 263 -> 473")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from surface_lab.notebook.audit import audit_report
from surface_lab.notebook.render import esc

from .common import PROJECT

pytestmark = pytest.mark.reliability
SAMPLE = PROJECT / "sample_logs" / "long-compaction.jsonl"
# every character the issue names: embeddings and overrides, isolates, marks, zero-width
TRICKS = [*map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A)), "\u200e",
          "\u200f", "\u061c", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"]
HEBREW = "\u05e9\u05dc\u05d5\u05dd"  # a right-to-left word


def _hostile_log(path: Path, session_id: str) -> Path:
    data = SAMPLE.read_bytes()
    data = data.replace(b'"cmp-1"', json.dumps("cmp-\u202e1").encode())
    data = data.replace(b'"cmp-2"', json.dumps(f"cmp-{HEBREW}").encode())
    data = data.replace(b'"cmp-3"', json.dumps("cmp-" + "".join(TRICKS)).encode())
    header, rest = data.split(b"\n", 1)
    first = json.loads(header)
    first["id"] = session_id
    path.write_bytes(json.dumps(first).encode() + b"\n" + rest)
    return path


def test_the_escaping_helper_leaves_no_trick_and_isolates_right_to_left_text() -> None:
    for trick in TRICKS:
        out = esc(f"id{trick}x")
        assert trick not in out and f"\\u{ord(trick):04x}" in out
    assert esc(f"cmp-{HEBREW}") == f"\u2068cmp-{HEBREW}\u2069"
    assert esc("374 -> 362 tokens") == "374 -&gt; 362 tokens"  # nothing added to plain text


def test_the_audit_report_holds_no_trick_and_isolates_each_right_to_left_id(
        tmp_path: Path) -> None:
    log = _hostile_log(tmp_path / "s.jsonl", "sess\u202eion")
    report = audit_report(log, tmp_path / "out", progress=False)["html"].read_text()
    for trick in TRICKS:
        if trick in report:  # only the balanced isolates the escaping adds
            assert trick in "\u2068\u2069", f"U+{ord(trick):04X} in the report"
    assert report.count("\u2068") == report.count("\u2069") > 0
    assert HEBREW in report and f"\u2068cmp-{HEBREW}\u2069" in report
    assert "cmp-\\u202e1" in report and "sess\\u202eion" in report


@pytest.mark.parametrize("command", ["validate", "info", "surface", "audit"])
def test_no_command_prints_a_trick(tmp_path: Path, command: str) -> None:
    log = _hostile_log(tmp_path / "s.jsonl", "s" + "".join(TRICKS))
    argv = [command, str(log)]
    if command == "audit":
        argv += ["--out", str(tmp_path / "out"), "--no-progress"]
    out = subprocess.run([sys.executable, "-m", "surface_lab.cli", *argv],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(PROJECT)})
    assert out.returncode in (0, 1) and "Traceback" not in out.stderr, out.stderr
    printed = out.stdout + out.stderr
    assert printed.strip()
    for trick in TRICKS:
        assert trick not in printed, f"U+{ord(trick):04X} printed by {command}"
