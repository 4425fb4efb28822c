"""Crash consistency: a writer killed with SIGKILL at random points loses no acknowledged
batch, leaves no partial batch, and the log loads, repairs and takes the next append."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from surface_lab.events import freeze_event
from surface_lab.storage.jsonl import dumps_record

from .common import BACKENDS, HEADER, batches, make_store, record, stream

pytestmark = pytest.mark.reliability
RUNS = 200
EVENTS = 400


def _writer(kind: str, root: str, seed: int, conn: Any) -> None:
    store = make_store(kind, Path(root))
    store.create(HEADER)
    for batch in batches(seed, stream(seed, EVENTS)):
        store.append("crash", batch)
        conn.send(batch[-1]["seq"] + 1)
    conn.send("done")


@pytest.mark.parametrize("kind", BACKENDS)
def test_sigkill_at_random_points(kind: str, tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    rng = random.Random(f"crash-{kind}")
    stats = {"runs": 0, "kills_mid_run": 0, "acknowledged": 0, "repaired": 0, "lost": 0}
    # "lost" stays 0: any loss fails the assertions below before it could be counted.
    for run in range(RUNS):
        root = tmp_path / f"run{run}"
        root.mkdir()
        seed = rng.randrange(10**6)
        expected = stream(seed, EVENTS)
        boundaries = {0} | {b[-1]["seq"] + 1 for b in batches(seed, expected)}
        receive, send = ctx.Pipe(duplex=False)
        child = ctx.Process(target=_writer, args=(kind, str(root), seed, send))
        child.start()
        send.close()
        # Let it write for a random while, then kill it without warning.
        time.sleep(rng.uniform(0, 0.03))
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        acked = 0
        while receive.poll():
            try:
                message = receive.recv()
            except EOFError:
                break
            if message != "done":
                acked = message
            else:
                stats["kills_mid_run"] -= 1
        stats["kills_mid_run"] += 1
        receive.close()

        stats["runs"] += 1
        stats["acknowledged"] += acked
        store = make_store(kind, root)
        try:
            stored = store.read_suffix("crash", 0) if store.list() else []
            # Every acknowledged batch is there, byte for byte; nothing partial follows.
            assert len(stored) >= acked, f"run {run}: lost acknowledged events"
            assert len(stored) in boundaries, f"run {run}: a partial batch ({len(stored)})"
            for got, want in zip(stored, expected, strict=False):
                assert dumps_record(got) == dumps_record(freeze_event(want)), \
                    f"run {run}: seq {got['seq']} differs"
            if not stored:
                continue
            _, loaded = store.load("crash")
            if len(loaded) > len(stored):
                stats["repaired"] += 1
            assert loaded[: len(stored)] == stored
            store.append("crash", [{"type": "session/title", "seq": len(loaded),
                                    "time": 0, "data": {"title": "after the crash"}}])
            assert len(store.read_suffix("crash", 0)) == len(loaded) + 1
        finally:
            store.close()
    record(f"crash-{kind}", **stats)
    assert stats["runs"] == RUNS
    assert stats["kills_mid_run"] > RUNS // 2  # most kills landed while it was writing
