"""The store contract (SPEC 7), written once and run against every backend.

A backend's test module subclasses `StoreContract` and provides `make_store(tmp_path)`.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest
from builders import assistant_data, ev, user, user_msg

from surface_lab import AdmissionError, StorageError, UnsupportedFormatError, read_log
from surface_lab.storage import Store

HEADER = {"version": 0, "id": "s1", "createdAt": 1700000000000, "cwd": "/work/project",
          "delegationDepth": 0}


def chat(n_turns: int = 2) -> list[dict[str, Any]]:
    """A closed log with chunks (so JSONL packs rows) and a replace."""
    log: list[dict[str, Any]] = []

    def add(event: dict[str, Any]) -> None:
        log.append({**event, "seq": len(log), "time": 1000 + 7 * len(log)})

    for turn in range(1, n_turns + 1):
        add(ev(0, "turn/start", {"turn": turn}))
        add(user(0, f"u{turn}", text="héllo ✓"))
        add(ev(0, "step/start", {"turn": turn, "step": 1}))
        first_chunk = len(log)
        for k in range(4):
            add(ev(0, "assistant/chunk", {"turn": turn, "step": 1, "chunk": {
                "type": "text-delta", "index": 0, "text": f"t{k}"}}))
        add(ev(0, "assistant/message", assistant_data(f"a{turn}", turn=turn),
               op="append", sources=list(range(first_chunk, len(log)))))
        add(ev(0, "step/end", {"turn": turn, "step": 1}))
        add(ev(0, "turn/end", {"turn": turn, "reason": {"kind": "completed"}}))
    add(ev(0, "user/message", user_msg("sum"), op=(1, 7), sources=[1, 7]))
    add(ev(0, "session/title", None))
    return log


def _writer(make: Any, root: str, writer: int, rounds: int, barrier: Any, results: Any) -> None:
    store: Store = make(Path(root))
    acknowledged, conflicts = [], 0
    for i in range(rounds):
        barrier.wait()
        start = len(store.read_suffix("race", 0))
        barrier.wait()
        event = {"type": "note/write", "seq": start, "time": i,
                 "data": {"writer": writer, "i": i}}
        try:
            store.append("race", [event])
            acknowledged.append(start)
        except StorageError as err:
            assert err.code == "seq-conflict", err
            conflicts += 1
        barrier.wait()
    store.close()
    results.put((writer, acknowledged, conflicts))


class StoreContract:
    """Every store must pass these."""

    def make_store(self, root: Path) -> Store:  # pragma: no cover - overridden
        raise NotImplementedError

    @pytest.fixture
    def store(self, tmp_path: Path) -> Any:
        with self.make_store(tmp_path) as store:
            yield store

    def test_round_trip_keeps_header_and_events(self, store: Store) -> None:
        log = chat()
        store.create(HEADER)
        store.append("s1", log[:5])
        store.append("s1", log[5:])
        header, events = store.load("s1")
        assert dict(header) == HEADER
        assert [dict(e) for e in events] == log
        assert [list(e) for e in events] == [list(e) for e in log]  # key order too

    def test_empty_provenance_and_ignorable_survive(self, store: Store) -> None:
        store.create(HEADER)
        events = [ev(0, "assistant/message", assistant_data(), op="append", sources=[]),
                  {**ev(1, "x/y", {"a": [1.5, None, True]}), "ignorable": True},
                  ev(2, "x/z", None)]
        store.append("s1", events)
        assert [dict(e) for e in store.read_suffix("s1", 0)] == events

    def test_a_batch_must_start_at_the_stored_next_seq(self, store: Store) -> None:
        log = chat()
        store.create(HEADER)
        store.append("s1", log[:3])
        for start in (2, 4, 0):
            with pytest.raises(StorageError, match="stored next seq is 3") as info:
                store.append("s1", log[start : start + 2])
            assert info.value.code == "seq-conflict"
        assert len(store.read_suffix("s1", 0)) == 3

    def test_the_first_batch_must_start_at_zero(self, store: Store) -> None:
        store.create(HEADER)
        with pytest.raises(StorageError) as info:
            store.append("s1", chat()[1:3])
        assert info.value.code == "seq-conflict"
        assert store.list() == []

    def test_a_batch_with_a_gap_writes_nothing(self, store: Store) -> None:
        log = chat()
        store.create(HEADER)
        store.append("s1", log[:2])
        with pytest.raises(AdmissionError, match="gap") as info:
            store.append("s1", [log[2], log[4]])
        assert info.value.code == "seq-not-contiguous"
        assert len(store.read_suffix("s1", 0)) == 2

    def test_non_json_data_is_refused_naming_the_type(self, store: Store) -> None:
        store.create(HEADER)
        store.append("s1", chat()[:1])
        with pytest.raises(AdmissionError, match="seq 1 note/bad") as info:
            store.append("s1", [ev(1, "note/bad", {"v": float("nan")})])
        assert info.value.code == "data-not-json"
        assert len(store.read_suffix("s1", 0)) == 1

    def test_list_leaves_out_sessions_never_appended(self, store: Store) -> None:
        store.create(HEADER)
        store.create({**HEADER, "id": "s2"})
        store.append("s2", chat()[:1])
        assert store.list() == ["s2"]

    def test_read_suffix_from_seq(self, store: Store) -> None:
        log = chat()
        store.create(HEADER)
        store.append("s1", log)
        for k in (0, 5, 6, len(log) - 1, len(log)):
            assert [e["seq"] for e in store.read_suffix("s1", k)] == list(range(k, len(log)))

    def test_unknown_sessions_are_a_clear_error(self, store: Store) -> None:
        with pytest.raises(StorageError, match=r"no .*session 'nope'"):
            store.append("nope", chat()[:1])

    def test_resume_repairs_an_open_turn_durably(self, store: Store) -> None:
        log = chat()[:8]  # a turn left open after the assistant message (seq 7)
        store.create(HEADER)
        store.append("s1", log)
        _, events = store.load("s1")
        assert [e["type"] for e in events[8:]] == ["step/end", "turn/end"]
        assert [e["seq"] for e in store.read_suffix("s1", 8)] == [8, 9]  # written durably
        session = store.resume("s1")
        assert [e["type"] for e in session.events[8:]] == [
            "step/end", "turn/end", "session/end-seed"]
        session.append("turn/start", {"turn": 9})
        assert [e["seq"] for e in store.read_suffix("s1", 8)] == [8, 9, 10, 11]
        assert session.first_live_seq == 10

    def test_a_resumed_session_writes_ahead(self, store: Store) -> None:
        store.create(HEADER)
        session = store.resume("s1")
        session.append("user/message", user_msg(), surface_op="append")
        session.append("turn/start", {"turn": 1})
        assert [e["type"] for e in store.read_suffix("s1", 0)] == ["user/message", "turn/start"]
        with pytest.raises(AdmissionError):
            session.append("user/message", user_msg())  # type: ignore[call-overload]
        assert len(store.read_suffix("s1", 0)) == 2

    def test_a_conflicting_writer_commits_nothing_in_memory(self, tmp_path: Path) -> None:
        with self.make_store(tmp_path) as a, self.make_store(tmp_path) as b:
            a.create(HEADER)
            a.append("s1", [ev(0, "session/title", {})])
            mine = a.resume("s1")
            b.append("s1", [ev(2, "note/other", {})])  # after mine's end-seed marker (seq 1)
            with pytest.raises(StorageError) as info:
                mine.append("turn/start", {"turn": 1})
            assert info.value.code == "seq-conflict"
            assert len(mine.events) == 2

    def test_resume_refuses_unknown_types_but_read_log_keeps_them(self, store: Store) -> None:
        store.create(HEADER)
        store.append("s1", [ev(0, "mystery/type", {"x": 1}),
                            {**ev(1, "other/type", {}), "ignorable": True}])
        with pytest.raises(UnsupportedFormatError, match="mystery/type") as info:
            store.resume("s1")
        assert (info.value.code, info.value.seq) == ("type-unknown", 0)
        reading = read_log(store.path, session_id="s1")
        assert [e["type"] for e in reading.events] == ["mystery/type", "other/type"]
        assert any(p.code == "type-unknown" for p in reading.problems)

    @pytest.mark.slow
    def test_racing_writers_take_each_seq_once(self, tmp_path: Path) -> None:
        with self.make_store(tmp_path) as store:
            store.create({**HEADER, "id": "race"})
            store.append("race", [ev(0, "note/start", {})])
        ctx = multiprocessing.get_context("spawn")
        rounds, writers = 12, 3
        barrier, results = ctx.Barrier(writers), ctx.Queue()
        procs = [ctx.Process(target=_writer, args=(type(self).make_store_static, str(tmp_path),
                                                    w, rounds, barrier, results))
                 for w in range(writers)]
        for p in procs:
            p.start()
        outcome = [results.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(timeout=60)
            assert p.exitcode == 0
        with self.make_store(tmp_path) as store:
            events = store.read_suffix("race", 0)
        assert [e["seq"] for e in events] == list(range(1 + rounds))
        acknowledged = sorted(s for _, acks, _ in outcome for s in acks)
        assert acknowledged == list(range(1, 1 + rounds))  # each seq acknowledged once
        assert sum(c for _, _, c in outcome) == rounds * (writers - 1)
        for event in events[1:]:
            writer = event["data"]["writer"]
            assert event["seq"] in dict((w, a) for w, a, _ in outcome)[writer]
