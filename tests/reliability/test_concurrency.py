"""Concurrent writers: racing appends to one session take each seq once; writers of
different sessions of one SQLite database never fail each other."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from surface_lab import StorageError

from .common import BACKENDS, HEADER, make_store, record

pytestmark = pytest.mark.reliability
WRITERS, APPENDS = 4, 40


def _racer(kind: str, root: str, writer: int, out: Any) -> None:
    store = make_store(kind, Path(root))
    acked, conflicts = [], 0
    while len(acked) < APPENDS:
        seq = len(store.read_suffix("crash", 0))
        try:
            store.append("crash", [{"type": "session/title", "seq": seq, "time": writer,
                                    "data": {"writer": writer, "n": len(acked)}}])
            acked.append(seq)
        except StorageError as err:
            assert err.code == "seq-conflict", err
            conflicts += 1
    store.close()
    out.put((writer, acked, conflicts))


@pytest.mark.parametrize("kind", BACKENDS)
def test_free_running_writers_on_one_session(kind: str, tmp_path: Path) -> None:
    with make_store(kind, tmp_path) as store:
        store.create(HEADER)
        store.append("crash", [{"type": "session/title", "seq": 0, "time": 0, "data": {}}])
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_racer, args=(kind, str(tmp_path), w, out))
             for w in range(WRITERS)]
    for p in procs:
        p.start()
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    with make_store(kind, tmp_path) as store:
        events = store.read_suffix("crash", 0)
    assert [e["seq"] for e in events] == list(range(1 + WRITERS * APPENDS))
    owner = {seq: writer for writer, acked, _ in results for seq in acked}
    assert len(owner) == WRITERS * APPENDS  # no seq acknowledged twice
    for event in events[1:]:
        assert owner[event["seq"]] == event["data"]["writer"]  # someone's acknowledged append
    conflicts = sum(c for _, _, c in results)
    record(f"concurrency-{kind}", writers=WRITERS, appends=WRITERS * APPENDS,
           conflicts=conflicts)


def _session_writer(root: str, writer: int, out: Any) -> None:
    store = make_store("sqlite", Path(root))
    sid = f"s{writer}"
    store.create({**HEADER, "id": sid})
    errors = []
    for seq in range(200):
        try:
            store.append(sid, [{"type": "session/title", "seq": seq, "time": 0,
                                "data": {"n": seq}}])
        except StorageError as err:  # pragma: no cover - the assertion reports it
            errors.append(str(err))
    store.close()
    out.put((writer, errors))


def test_writers_of_different_sessions_never_fail_each_other(tmp_path: Path) -> None:
    make_store("sqlite", tmp_path).close()
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_session_writer, args=(str(tmp_path), w, out))
             for w in range(4)]
    for p in procs:
        p.start()
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert all(errors == [] for _, errors in results)
    with make_store("sqlite", tmp_path) as store:
        assert store.list() == ["s0", "s1", "s2", "s3"]
        assert all(len(store.read_suffix(f"s{w}", 0)) == 200 for w in range(4))
    record("concurrency-sqlite-sessions", writers=4, appends=800, errors=0)
