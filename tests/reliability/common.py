"""Shared pieces of the reliability suite: deterministic event streams and figures."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from surface_lab.storage import JsonlStore, SqliteStore, Store

HEADER = {"version": 0, "id": "crash", "createdAt": 1_767_225_600_000, "cwd": "/work/crash",
          "delegationDepth": 0}
BACKENDS = ["jsonl", "sqlite"]
PROJECT = Path(__file__).resolve().parents[2]


def make_store(kind: str, root: Path) -> Store:
    return JsonlStore(root / "store") if kind == "jsonl" else SqliteStore(root / "s.db")


def stream(seed: int, count: int) -> list[dict[str, Any]]:
    """`count` valid events: turns of a user message, chunks and an answer."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []

    def add(kind: str, data: Any, **extra: Any) -> int:
        events.append({"type": kind, "seq": len(events), "time": 1000 + len(events),
                       "data": data, **extra})
        return len(events) - 1

    turn = 0
    while len(events) < count:
        turn += 1
        add("turn/start", {"turn": turn})
        add("user/message", {"id": f"u{turn}", "role": "user", "source": {"kind": "user"},
                             "content": [{"type": "text", "text": f"question {turn} é"}]},
            surfaceOp="append")
        add("step/start", {"turn": turn, "step": 1})
        chunks = [add("assistant/chunk", {"turn": turn, "step": 1, "chunk": {
            "type": "text-delta", "index": 0, "text": f"w{i} "}})
            for i in range(rng.randint(1, 6))]
        add("assistant/message", {"turn": turn, "step": 1, "message": {
            "id": f"a{turn}", "role": "assistant",
            "content": [{"type": "text", "text": "answer"}],
            "source": {"kind": "model", "provider": "p", "model": "m"}}},
            surfaceOp="append", sourceEventSeqs=chunks)
        add("step/end", {"turn": turn, "step": 1})
        add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    return events[:count]


def batches(seed: int, events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Split a stream into batches of 1 to 8 events (each well under a page)."""
    rng = random.Random(seed + 1)
    out, i = [], 0
    while i < len(events):
        size = rng.randint(1, 8)
        out.append(events[i : i + size])
        i += size
    return out


def record(name: str, **figures: Any) -> None:
    """Append the figures of one reliability test to $SURFACE_LAB_RELIABILITY_LOG."""
    target = os.environ.get("SURFACE_LAB_RELIABILITY_LOG")
    if target:
        with open(target, "a") as f:
            f.write(json.dumps({"test": name, **figures}) + "\n")


def read_only_mount(folder: Path, command: str) -> subprocess.CompletedProcess[str]:
    """Run a shell command with `folder` mounted read-only in a private mount namespace
    (skips the test where that is not allowed: it needs root or user namespaces)."""
    folder = folder.resolve()
    mount = f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder}"
    if shutil.which("unshare") is None or subprocess.run(
            ["unshare", "-m", "sh", "-c", mount], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a folder read-only here (needs unshare and mount rights)")
    return subprocess.run(["unshare", "-m", "sh", "-c", f"{mount} && {command}"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(PROJECT)})
