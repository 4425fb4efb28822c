"""The next-seq cache notices a log rewritten in place to the same size, with its mtime
put back and its last 4 KiB unchanged (issue 30, point 5): an append is never acknowledged
at a seq the log does not continue."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from surface_lab import StorageError, read_log
from surface_lab.storage import JsonlStore
from surface_lab.storage.jsonl import dumps_header, encode_events

from .common import HEADER

pytestmark = pytest.mark.reliability


def _titles(texts: list[str]) -> list[dict[str, Any]]:
    return [{"type": "session/title", "seq": seq, "time": 0, "data": {"x": text}}
            for seq, text in enumerate(texts)]


def test_an_in_place_rewrite_with_the_same_tail_size_and_mtime_is_read_again(
        tmp_path: Path) -> None:
    # twenty events, then one longer than the 4 KiB of tail the cache compares
    texts = ["y" * 10] * 20
    store = JsonlStore(tmp_path / "root")
    store.create(HEADER)
    store.append("crash", _titles(texts))
    [log] = (tmp_path / "root").rglob("session.jsonl")
    before = log.read_bytes()
    store.append("crash", [{"type": "session/title", "seq": 20, "time": 0,
                            "data": {"x": "z" * 6000}}])  # the store now caches next seq 21
    now = log.read_bytes()
    # the same log with one early event dropped (the seqs after it renumbered: the same
    # digits) and the first event padded to keep the size: 20 events, next seq 20
    kept = texts[:3] + texts[4:] + ["z" * 6000]
    padded = dumps_header(HEADER) + encode_events(_titles(kept), pack=False)
    kept[0] += "p" * (len(now) - len(padded))
    rewritten = dumps_header(HEADER) + encode_events(_titles(kept), pack=False)
    assert len(rewritten) == len(now) and rewritten[-4096:] == now[-4096:]
    assert len(before) < len(now)
    stat = log.stat()
    with open(log, "r+b") as f:  # the same inode
        f.write(rewritten)
    os.utime(log, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert log.stat().st_mtime_ns == stat.st_mtime_ns and log.stat().st_size == stat.st_size
    with pytest.raises(StorageError, match=r"stored next seq is 20") as info:
        store.append("crash", [{"type": "session/title", "seq": 21, "time": 0,
                                "data": {"x": "late"}}])
    assert info.value.code == "seq-conflict"
    assert log.read_bytes() == rewritten
    assert [e["seq"] for e in read_log(log).events] == list(range(20))
