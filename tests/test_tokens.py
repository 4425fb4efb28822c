"""Token counts with their source (surface_lab.analysis.tokens): recorded usage first, then a
tokenizer, then the 4-characters estimate; adapters wrap encoders the caller built."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from shared_logs import SHARED

from surface_lab import count_tokens, hf_tokenizer, read_log, tiktoken_tokenizer
from surface_lab.analysis.tokens import recorded_usage, request_tokens
from surface_lab.importers import import_any

ROOT = Path(__file__).resolve().parents[1]
CLAUDE = SHARED / "real_logs" / "other" / (
    "meridianlabs-ai__inspect_scout__tests_sources_claude_code_source_fixtures_compaction_"
    "session.jsonl")
DSH = SHARED / "real_logs" / "dsh" / (
    "deepseek-ai__deepseek-harness__examples_acp-agent_tests_snapshots_parallel-tool-calls_"
    "session.jsonl")


def _user(text: str) -> dict[str, Any]:
    return {"type": "user/message", "seq": 0, "time": 0,
            "data": {"id": "u", "role": "user", "source": {"kind": "user"},
                     "content": [{"type": "text", "text": text}]}}


def words(text: str) -> int:
    return len(text.split())


class TestCounting:
    def test_the_estimate_and_a_tokenizer_say_which_they_are(self) -> None:
        event = _user("one two three four five six seven eight")
        assert count_tokens(event) == (4 + 10, "estimate")
        assert count_tokens(event, words) == (4 + 8, "tokenizer")

    def test_the_adapters_wrap_encoders_built_by_the_caller(self) -> None:
        class Tiktoken:
            def encode(self, text: str, disallowed_special: Any) -> list[int]:
                assert disallowed_special == ()
                return [0] * len(text.split())

        class Hf:
            def encode(self, text: str, add_special_tokens: bool) -> Any:
                assert add_special_tokens is False
                return SimpleNamespace(ids=[0] * len(text))

        assert tiktoken_tokenizer(Tiktoken())("a b c") == 3
        assert hf_tokenizer(Hf())("abcd") == 4


class TestRecordedUsage:
    def test_a_dsh_message_s_usage_and_the_usage_chunk_it_cites(self) -> None:
        events = list(read_log(DSH).events)
        seqs = [e["seq"] for e in events if e["type"] == "assistant/message"]
        assert [recorded_usage(events, s) for s in seqs] == [
            ({"input": 10, "output": 5}, "message"), ({"input": 10, "output": 1}, "message")]
        without = [{**e, "data": {k: v for k, v in e["data"].items() if k != "usage"}}
                   if e["type"] == "assistant/message" else e for e in events]
        assert [recorded_usage(without, s)[1] for s in seqs] == ["chunk", "chunk"]

    def test_an_imported_claude_message_carries_its_usage(self) -> None:
        events = list(import_any(CLAUDE).events)
        seq = next(e["seq"] for e in events if e["type"] == "assistant/message")
        assert recorded_usage(events, seq) == ({"input": 100, "output": 15}, "message")

    def test_without_usage_the_tokenizer_then_the_estimate(self) -> None:
        events = [_user("a b c d e f g h"), {**_user("x"), "seq": 1, "type":
                                             "assistant/message", "data": {"message": {
                                                 "role": "assistant", "content": []}}}]
        estimate = request_tokens(events, [0], 1)
        counted = request_tokens(events, [0], 1, words)
        assert (estimate.input_tokens, estimate.input_source) == (4 + 4, "estimate")
        assert (counted.input_tokens, counted.input_source, counted.counted) == (
            4 + 8, "tokenizer", 12)

    def test_an_atif_prompt_counts_its_cached_tokens_once(self, tmp_path: Path) -> None:
        path = tmp_path / "trajectory.json"
        path.write_text(json.dumps({"schema_version": "ATIF-v1.5", "session_id": "s",
                                    "steps": [
            {"step_id": 1, "source": "user", "message": "task"},
            {"step_id": 2, "source": "agent", "message": "done", "metrics": {
                "prompt_tokens": 1000, "cached_tokens": 400, "completion_tokens": 50}}]}))
        events = list(import_any(path).events)
        seq = next(e["seq"] for e in events if e["type"] == "assistant/message")
        recorded = recorded_usage(events, seq)
        assert recorded == ({"input": 600, "output": 50, "cache_read": 400}, "message")
        assert request_tokens(events, [0], seq).input_tokens == 1000
