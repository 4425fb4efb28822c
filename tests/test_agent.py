"""The scripted agent loop (SPEC 8), compaction and pruning (SPEC 9), and the samples."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from surface_lab import Session, fold_surface, interrupted_turn_closers, read_log
from surface_lab.agent import (
    AgentLoop,
    Call,
    CompactionPolicy,
    Compactor,
    ExtractiveSummarizer,
    Reply,
    SimulatedCrash,
    ToolResultPruner,
    Turn,
    Workspace,
    balanced_cuts,
)
from surface_lab.agent.samples import INVALID, SAMPLES, generate_samples, sample_session
from surface_lab.cli import main
from surface_lab.contract import check_loop_contract

SAMPLE_DIR = Path(__file__).resolve().parents[1] / "sample_logs"
VALID = sorted(p for p in SAMPLE_DIR.glob("*.jsonl") if "invalid" not in p.name)


def _loop(**options: Any) -> AgentLoop:
    ticks = iter(range(10**6))
    session = Session("t", clock=lambda: next(ticks))
    return AgentLoop(session, workspace=Workspace({"a.txt": "alpha\n", "big": "x" * 20000}),
                     **options)


def _types(session: Session, start: int = 0) -> list[str]:
    return [e["type"] for e in session.events[start:]]


class TestLoop:
    def test_a_text_turn(self) -> None:
        loop = _loop()
        assert loop.run_turn(Turn("hi", (Reply(text="hello there", reasoning="greet"),))) \
            == "completed"
        s = loop.session
        message = next(e for e in s.events if e["type"] == "assistant/message")
        chunks = [e["seq"] for e in s.events if e["type"] == "assistant/chunk"]
        assert message["sourceEventSeqs"] == chunks
        assert [b["type"] for b in message["data"]["message"]["content"]] == ["reasoning",
                                                                               "text"]
        assert message["data"]["message"]["content"][1]["text"] == "hello there"
        assert check_loop_contract(s.events) == []

    def test_parallel_calls_are_logged_then_answered_in_model_order(self) -> None:
        loop = _loop()
        loop.run_turn(Turn("go", (Reply(calls=(Call("read", {"path": "a.txt"}),
                                               Call("run", {"command": "nope"}))),
                                  Reply(text="done"))))
        s = loop.session
        calls = [e for e in s.events if e["type"] == "tool/call"]
        results = [e for e in s.events if e["type"] == "tool/result"]
        assert calls[1]["seq"] == calls[0]["seq"] + 1 < results[0]["seq"]
        assert [r["sourceEventSeqs"] for r in results] == [[c["seq"]] for c in calls]
        assert results[1]["data"]["error"] == {"name": "ToolError", "code": "EXIT_127"}
        assert results[1]["data"]["message"]["content"][0]["isError"] is True
        assert check_loop_contract(s.events) == []

    def test_a_failed_attempt_is_retried_and_never_cited(self) -> None:
        loop = _loop()
        loop.run_turn(Turn("go", (Reply(text="broken answer", fail_after=2),
                                  Reply(empty=True), Reply(text="fine"))))
        s = loop.session
        assert _types(s).count("llm/retry") == 2
        message = next(e for e in s.events if e["type"] == "assistant/message")
        first_retry = next(e["seq"] for e in s.events if e["type"] == "llm/retry")
        assert all(c > first_retry for c in message["sourceEventSeqs"])
        assert check_loop_contract(s.events) == []

    def test_retries_are_bounded(self) -> None:
        loop = _loop()
        assert loop.run_turn(Turn("go", (Reply(empty=True),) * 3)) == "error"
        assert loop.session.events[-1]["data"]["reason"]["error"]["code"] == \
            "RETRIES_EXHAUSTED"

    def test_a_silent_stream_is_committed_citing_nothing(self) -> None:
        loop = _loop()
        loop.run_turn(Turn("go", (Reply(silent=True),)))
        message = next(e for e in loop.session.events if e["type"] == "assistant/message")
        assert message["sourceEventSeqs"] == []
        assert loop.session.derive_messages()[-1]["role"] == "user"  # empty: not projected

    def test_a_cancelled_stream_commits_what_arrived(self) -> None:
        loop = _loop()
        assert loop.run_turn(Turn("go", (Reply(text="one two three four five",
                                               cancel_after=4),))) == "aborted"
        message = next(e for e in loop.session.events if e["type"] == "assistant/message")
        assert message["data"]["interrupted"] is True
        assert message["data"]["message"]["content"] == [{"type": "text",
                                                          "text": "one two three "}]
        assert len(message["sourceEventSeqs"]) == 4
        assert loop.session.events[-1]["data"]["reason"] == {"kind": "aborted",
                                                              "reason": {"kind": "user"}}

    def test_max_tokens_ends_the_turn_and_drops_an_unfinished_call(self) -> None:
        loop = _loop()
        assert loop.run_turn(Turn("go", (Reply(text="partial", calls=(Call("read", {}),),
                                               finish="max-tokens"),))) == "max-tokens"
        message = next(e for e in loop.session.events if e["type"] == "assistant/message")
        assert [b["type"] for b in message["data"]["message"]["content"]] == ["text"]
        assert "tool/call" not in _types(loop.session)
        assert check_loop_contract(loop.session.events) == []

    def test_context_is_injected_as_a_context_message(self) -> None:
        loop = _loop()
        loop.run_turn(Turn("go", (Reply(text="ok"),), context="<workspace/>"))
        assert _types(loop.session)[:3] == ["turn/start", "context/message", "user/message"]

    @pytest.mark.parametrize(("point", "code"), [("after-tool-call", "TOOL_OUTCOME_UNKNOWN"),
                                                 ("before-tool-call", "TOOL_NOT_STARTED")])
    def test_a_crash_leaves_an_open_turn_for_repair(self, point: Any, code: str) -> None:
        loop = _loop()
        with pytest.raises(SimulatedCrash):
            loop.run_turn(Turn("go", (Reply(calls=(Call("read", {"path": "a.txt"}),)),)),
                          crash_at=point)
        closers = interrupted_turn_closers(loop.session.events)
        assert [c["type"] for c in closers] == ["tool/result", "step/end", "turn/end"]
        assert closers[0]["data"]["error"]["code"] == code
        repaired = [*loop.session.events, *closers]
        Session("r", seed=repaired)
        assert check_loop_contract(repaired) == []

    def test_a_crash_mid_stream_leaves_uncited_chunks(self) -> None:
        loop = _loop()
        with pytest.raises(SimulatedCrash):
            loop.run_turn(Turn("go", (Reply(text="a b c d e f"),)), crash_at="mid-stream")
        assert _types(loop.session)[-1] == "assistant/chunk"
        assert [c["type"] for c in interrupted_turn_closers(loop.session.events)] == [
            "step/end", "turn/end"]


class TestPruner:
    def test_an_oversized_result_is_rewritten_head_marker_tail(self) -> None:
        loop = _loop(pruner=ToolResultPruner(threshold=8192, head=4096, tail=1024))
        loop.run_turn(Turn("go", (Reply(calls=(Call("run", {"command": "cat big"}),)),
                                  Reply(text="done"))))
        s = loop.session
        prune = next(e for e in s.events if e["type"] == "compaction/prune")
        rewrite = s.events[prune["seq"] + 1]
        original = s.events[prune["data"]["shadowedSeqs"][0]]
        assert rewrite["surfaceOp"] == {"op": "replace", "start": original["seq"],
                                        "end": original["seq"]}
        assert rewrite["sourceEventSeqs"] == [original["seq"]]
        text = rewrite["data"]["message"]["content"][0]["content"][0]["text"]
        head, marker, tail = text.split("\n")
        assert (head, tail) == ("x" * 4096, "x" * 1024)
        assert "14880 characters pruned" in marker
        assert original["seq"] not in s.surface.nodes
        assert check_loop_contract(s.events) == []

    def test_code_points_not_bytes(self) -> None:
        loop = _loop(pruner=ToolResultPruner(threshold=10, head=3, tail=2))
        loop.workspace.files["u"] = "é😀" * 20
        loop.run_turn(Turn("go", (Reply(calls=(Call("run", {"command": "cat u"}),)),
                                  Reply(text="done"))))
        rewrite = next(e for e in loop.session.events
                       if e["type"] == "tool/result" and e["surfaceOp"] != "append")
        text = rewrite["data"]["message"]["content"][0]["content"][0]["text"]
        assert text.startswith("é😀é\n") and text.endswith("\né😀")

    def test_small_results_are_left_alone(self) -> None:
        loop = _loop(pruner=ToolResultPruner())
        loop.run_turn(Turn("go", (Reply(calls=(Call("read", {"path": "a.txt"}),)),
                                  Reply(text="ok"))))
        assert "compaction/prune" not in _types(loop.session)


def _compaction_loop(budget: int, tail: int, **summarizer: Any) -> AgentLoop:
    return _loop(compactor=Compactor(CompactionPolicy(budget_tokens=budget,
                                                      keep_tail_tokens=tail),
                                     ExtractiveSummarizer(**summarizer)))


def _questions(n: int) -> list[Turn]:
    return [Turn(f"question {i}: read a.txt please, and tell me what it says.",
                 (Reply(text=f"reading for {i}", calls=(Call("read", {"path": "a.txt"}),)),
                  Reply(text=f"answer {i}: it says alpha, as every time before.")))
            for i in range(n)]


class TestCompaction:
    def test_the_exact_event_sequence(self) -> None:
        loop = _compaction_loop(200, 60)
        loop.run(_questions(4))
        s = loop.session
        start = next(e for e in s.events if e["type"] == "compaction/start")
        summary, replacement, end = s.events[start["seq"] + 1 : start["seq"] + 4]
        assert (summary["type"], replacement["type"], end["type"]) == (
            "compaction/summary", "user/message", "compaction/end")
        cid = start["data"]["compactionId"]
        assert summary["data"]["compactionId"] == end["data"]["compactionId"] == cid
        shadowed = summary["data"]["shadowedSeqs"]
        assert replacement["sourceEventSeqs"] == [start["seq"], summary["seq"], *shadowed]
        assert replacement["surfaceOp"] == {"op": "replace", "start": shadowed[0],
                                            "end": shadowed[-1]}
        assert replacement["data"]["source"] == {"kind": "plugin", "plugin": "compact",
                                                 "compactionId": cid}
        content = replacement["data"]["content"]
        assert content[0]["text"].endswith("\n\n<compacted-summary>")
        assert "automatically generated checkpoint" in content[0]["text"]
        assert content[1:-1] == summary["data"]["summary"]
        assert content[-1] == {"type": "text", "text": "</compacted-summary>"}
        assert check_loop_contract(s.events) == []

    def test_a_later_summary_shadows_an_earlier_one(self) -> None:
        loop = _compaction_loop(200, 60)
        loop.run(_questions(8))
        fold = fold_surface(loop.session.events)
        summaries = [r.seq for r in fold.replacements]
        assert len(summaries) >= 3
        assert any(earlier in r.shadowed_seqs for r in fold.replacements
                   for earlier in summaries)
        text = loop.session.derive_messages()[0]["content"][1]["text"]
        assert "question 0" in text  # the first summary's lines are carried forward

    def test_a_failed_summary_is_start_then_end_with_error(self) -> None:
        loop = _compaction_loop(200, 60, fail_calls=frozenset({1}))
        loop.run(_questions(4))
        s = loop.session
        start = next(e for e in s.events if e["type"] == "compaction/start")
        end = s.events[start["seq"] + 1]
        assert end["type"] == "compaction/end"
        assert end["data"]["error"] == "summarizer call 1 failed (scripted)"
        assert check_loop_contract(s.events) == []

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.data())
    def test_compaction_never_splits_a_call_from_its_result(self, data: Any) -> None:
        turns = []
        for i in range(data.draw(st.integers(1, 8))):
            replies = [Reply(text="working " * data.draw(st.integers(0, 8)),
                             calls=tuple(Call("read", {"path": "a.txt"}) for _ in
                                         range(data.draw(st.integers(1, 3)))))
                       for _ in range(data.draw(st.integers(0, 3)))]
            replies.append(Reply(text="answer " * data.draw(st.integers(1, 30))))
            turns.append(Turn(f"q{i} " * data.draw(st.integers(1, 20)), tuple(replies)))
        loop = _compaction_loop(data.draw(st.integers(40, 400)), data.draw(st.integers(0, 200)))
        loop.run(turns)
        events = loop.session.events
        for r in fold_surface(events).replacements:
            before = fold_surface(events[: r.seq]).nodes
            first = before.index(r.start)
            last = before.index(r.end)
            cuts = balanced_cuts(events, before)
            assert first in cuts and last + 1 in cuts
        assert check_loop_contract(events) == []


class TestSamples:
    def test_generate_reproduces_the_committed_samples(self, tmp_path: Path) -> None:
        generate_samples(tmp_path)
        committed = sorted(p.name for p in SAMPLE_DIR.iterdir())
        assert sorted(p.name for p in tmp_path.iterdir()) == committed
        for name in committed:
            if name.endswith(".db"):
                # SQLite files record the library version that wrote them: compare content
                assert _db_content(tmp_path / name) == _db_content(SAMPLE_DIR / name)
            else:
                assert (tmp_path / name).read_bytes() == (SAMPLE_DIR / name).read_bytes(), name

    @pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
    def test_each_sample_validates_and_follows_the_loop_contract(self, path: Path) -> None:
        assert main(["validate", str(path)]) == 0
        log = read_log(path)
        assert path.stat().st_size < 1_000_000
        if log.mode == "surface":
            assert check_loop_contract(log.events) == []
            assert fold_surface(log.events).nodes == fold_surface(log.events).nodes \
                == list(Session("x", seed=log.events).surface.nodes)[:len(log.fold.nodes)]

    def test_the_database_holds_several_valid_sessions(self) -> None:
        before = sorted(SAMPLE_DIR.iterdir())
        assert main(["validate", str(SAMPLE_DIR / "sessions.db")]) == 0
        assert sorted(SAMPLE_DIR.iterdir()) == before  # reading wrote nothing beside it
        for sid in ("chat", "tools-parallel", "max-tokens"):
            log = read_log(SAMPLE_DIR / "sessions.db", session_id=sid)
            assert [dict(e) for e in log.events] == [dict(e) for e in
                                                     read_log(SAMPLE_DIR / f"{sid}.jsonl").events]

    @pytest.mark.parametrize("name", sorted(INVALID))
    def test_each_invalid_sample_fails_with_its_code(self, name: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["validate", str(SAMPLE_DIR / name)]) == 1
        code = INVALID[name][0]
        out = capsys.readouterr().out
        assert f": {code}: " in out
        assert f"fails with `{code}`" in (SAMPLE_DIR / "README.md").read_text()

    def test_the_readme_names_every_sample(self) -> None:
        readme = (SAMPLE_DIR / "README.md").read_text()
        for path in SAMPLE_DIR.iterdir():
            if path.name != "README.md":
                assert f"`{path.name}`" in readme

    def test_the_long_sample_has_the_compactions_it_promises(self) -> None:
        log = read_log(SAMPLE_DIR / "long-compaction.jsonl")
        ends = [e["data"] for e in log.events if e["type"] == "compaction/end"]
        assert sum("error" not in d for d in ends) >= 3
        assert any("error" in d for d in ends)
        replaced = [r.seq for r in log.fold.replacements]
        assert any(s in r.shadowed_seqs for r in log.fold.replacements for s in replaced)

    def test_the_legacy_sample_needs_the_fallback(self) -> None:
        log = read_log(SAMPLE_DIR / "legacy-linear.jsonl")
        assert log.mode == "linear"
        assert not any("surfaceOp" in e for e in log.events)

    def test_samples_are_deterministic_in_memory(self) -> None:
        for name in SAMPLES:
            assert [dict(e) for e in sample_session(name).events] == \
                [dict(e) for e in sample_session(name).events]


def _db_content(path: Path) -> Any:
    db = sqlite3.connect(path)
    try:
        pragmas = [db.execute(f"PRAGMA {p}").fetchone() for p in ("user_version",
                                                                  "application_id")]
        return pragmas, list(db.iterdump())
    finally:
        db.close()


def test_generate_large_writes_a_realistic_mix(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["generate", str(tmp_path), "--events", "5000"]) == 0
    [path] = tmp_path.iterdir()
    log = read_log(path)
    types = {e["type"] for e in log.events}
    assert len(log.events) >= 5000
    assert {"compaction/summary", "compaction/prune", "tool/call"} <= types
    chunks = sum(e["type"] == "assistant/chunk" for e in log.events)
    assert chunks > len(log.events) / 2
    assert check_loop_contract(log.events) == []
