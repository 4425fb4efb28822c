"""FIFOs and dangling symbolic links inside folders and stores are problem lines in
`validate` and rows in `corpus build`, never skipped without a word (issue 30, point 7).
Nothing is opened: a FIFO would block the reader."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from surface_lab import corpus
from surface_lab.agent.samples import sample_session
from surface_lab.storage import JsonlStore

from .common import PROJECT

pytestmark = pytest.mark.reliability
CHAT = PROJECT / "sample_logs" / "chat.jsonl"


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    # a subprocess with a timeout: a FIFO opened by mistake blocks instead of failing
    return subprocess.run([sys.executable, "-m", "surface_lab.cli", *argv],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(PROJECT)})


def _folder(path: Path) -> Path:
    path.mkdir()
    shutil.copy(CHAT, path / "chat.jsonl")
    os.mkfifo(path / "fifo.jsonl")
    os.symlink(path / "gone.jsonl", path / "dangling.jsonl")
    return path


def _store(path: Path) -> Path:
    chat = sample_session("chat")
    store = JsonlStore(path)
    for sid in ("chat", "fifo", "dangling"):
        store.create({**chat.header, "id": sid})
        store.append(sid, chat.events)
    fifo = next(path.glob("*/fifo/session.jsonl"))
    fifo.unlink()
    os.mkfifo(fifo)
    dangling = next(path.glob("*/dangling/session.jsonl"))
    dangling.unlink()
    os.symlink(path / "gone", dangling)
    return path


@pytest.mark.parametrize("layout", ["folder", "glob", "store"])
def test_validate_names_each_fifo_and_dangling_link(tmp_path: Path, layout: str) -> None:
    root = _store(tmp_path / "s") if layout == "store" else _folder(tmp_path / "logs")
    out = _cli("validate", f"{root}/*" if layout == "glob" else str(root))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 2, out.stdout
    assert any("is a FIFO" in line and "path-refused" in line for line in lines)
    assert any("dangling symbolic link" in line and "path-refused" in line for line in lines)
    assert "1 valid, 2 invalid" in out.stderr, out.stderr


@pytest.mark.parametrize("layout", ["folder", "store"])
def test_corpus_build_gives_each_a_row(tmp_path: Path, layout: str) -> None:
    root = _store(tmp_path / "s") if layout == "store" else _folder(tmp_path / "logs")
    out = _cli("corpus", "build", str(root), str(tmp_path / "out"), "--engine", "serial")
    assert out.returncode == 0, out.stdout + out.stderr
    c = corpus.open_corpus(tmp_path / "out")
    try:
        rows = c.sql("select source, problem_code, problem from sessions "
                     "order by source")
    finally:
        c.close()
    assert len(rows) == 3, rows
    refused = rows[rows["problem_code"] == "path-refused"]
    assert len(refused) == 2
    assert sorted("FIFO" in m for m in refused["problem"]) == [False, True]


def test_audit_names_each_and_audits_the_rest(tmp_path: Path) -> None:
    root = _folder(tmp_path / "logs")
    out = _cli("audit", str(root), "--out", str(tmp_path / "out"), "--no-progress")
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stdout + out.stderr
    assert sum("path-refused" in line for line in out.stderr.splitlines()) == 2, out.stderr
    assert (tmp_path / "out" / "chat-audit.html").is_file()
    assert "not audited: path-refused" in (tmp_path / "out" / "index.html").read_text()
