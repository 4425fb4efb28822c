"""Codex `token_count` records become the recorded usage of the model request they follow
(IMPORTERS.md 4.2): the request's units are written with it, in their own order and time;
a count that measures no request of its own is left out with its reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from surface_lab.cli import main
from surface_lab.importers import import_codex
from surface_lab.importers.codex import codex_usage
from surface_lab.notebook import tokens_df

from .helpers import check_invariants, sample
from .test_real_shapes import unaccounted_lines

T = "2026-03-01T10:00:{:02d}Z"
USAGE_A = {"input_tokens": 1000, "cached_input_tokens": 600, "cache_write_input_tokens": 100,
           "output_tokens": 50, "reasoning_output_tokens": 20, "total_tokens": 1050}
USAGE_B = {"input_tokens": 1200, "cached_input_tokens": 1000, "output_tokens": 8,
           "reasoning_output_tokens": 0, "total_tokens": 1208}


def _line(second: int, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": T.format(second), "type": kind, "payload": payload}


def _count(second: int, last: dict[str, Any] | None, total: dict[str, Any] | None = None
           ) -> dict[str, Any]:
    info = None if last is None else {"total_token_usage": total or last,
                                      "last_token_usage": last, "model_context_window": 1}
    return _line(second, "event_msg", {"type": "token_count", "info": info,
                                       "rate_limits": {"primary": None}})


def _user(second: int, text: str) -> dict[str, Any]:
    return _line(second, "response_item", {"type": "message", "role": "user",
                                           "content": [{"type": "input_text", "text": text}]})


def rollout(path: Path, *, counts: bool = True) -> Path:
    """Two turns. Turn 1: a rate-limit count with no usage yet, a request (reasoning + a
    call) and its count, the call's output, the same count again (a rate-limit update),
    a second request (a message) and its count. Turn 2: one request, no count."""
    total_b = {k: USAGE_A.get(k, 0) + v for k, v in USAGE_B.items()}
    records = [
        _line(0, "session_meta", {"id": "u1", "timestamp": T.format(0), "cwd": "/r"}),
        _line(1, "turn_context", {"model": "gpt-x"}),
        _line(2, "event_msg", {"type": "task_started"}),
        _user(3, "list the files"),
        _count(4, None),
        _line(5, "response_item", {"type": "reasoning", "summary": [
            {"type": "summary_text", "text": "run ls"}]}),
        _line(6, "response_item", {"type": "function_call", "call_id": "c1",
                                   "name": "shell", "arguments": "{\"cmd\":\"ls\"}"}),
        _count(7, USAGE_A),
        _line(8, "response_item", {"type": "function_call_output", "call_id": "c1",
                                   "output": "a.txt"}),
        _count(9, USAGE_A),
        _line(10, "response_item", {"type": "message", "role": "assistant",
                                    "content": [{"type": "output_text", "text": "a.txt"}]}),
        _count(11, USAGE_B, total_b),
        _line(12, "event_msg", {"type": "task_complete"}),
        _line(13, "event_msg", {"type": "task_started"}),
        _user(14, "thanks"),
        _line(15, "response_item", {"type": "message", "role": "assistant",
                                    "content": [{"type": "output_text", "text": "ok"}]}),
        _line(16, "event_msg", {"type": "task_complete"}),
    ]
    if not counts:  # the counts' lines become UI events (line numbers, hence ids, stay)
        records = [{**r, "payload": {"type": "agent_reasoning"}}
                   if r["payload"].get("type") == "token_count" else r for r in records]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _messages(events: list[Any]) -> list[Any]:
    return [e for e in events if e["type"] == "assistant/message"]


class TestTokenCounts:
    def test_each_request_s_units_carry_its_usage(self, tmp_path: Path) -> None:
        result = import_codex(rollout(tmp_path / "r.jsonl"))
        check_invariants(result)
        usage_a = {"inputTokens": 300, "cacheReadTokens": 600, "cacheWriteTokens": 100,
                   "outputTokens": 50, "reasoningTokens": 20}
        usage_b = {"inputTokens": 200, "cacheReadTokens": 1000, "outputTokens": 8,
                   "reasoningTokens": 0}
        assert [m["data"].get("usage") for m in _messages(result.events)] == [
            usage_a, usage_a, usage_b, None]
        assert [result.origins[m["seq"]].get("usageLine") for m in _messages(
            result.events)] == [8, 8, 12, None]

    def test_events_order_and_times_are_those_of_the_import_without_counts(
            self, tmp_path: Path) -> None:
        with_counts = import_codex(rollout(tmp_path / "a.jsonl")).events
        without = import_codex(rollout(tmp_path / "b.jsonl", counts=False)).events

        def shape(events: list[Any]) -> list[Any]:
            return [(e["type"], e["time"], {k: v for k, v in e["data"].items()
                                            if k != "usage"}) for e in events]

        assert shape(with_counts) == shape(without)
        assert [e["type"] for e in with_counts][:9] == [
            "turn/start", "user/message", "step/start", "assistant/message",
            "assistant/message", "tool/call", "tool/result", "step/end", "step/start"]

    def test_counts_without_a_request_of_their_own_are_left_out_with_the_reason(
            self, tmp_path: Path) -> None:
        path = rollout(tmp_path / "r.jsonl")
        result = import_codex(path)
        assert [(r["reason"], r["kind"], r["line"]) for r in result.omitted
                if "token_count" in r["kind"]] == [
            ("usage-not-attached", "token_count:no-usage", 5),
            ("usage-not-attached", "token_count:repeat", 10)]
        assert unaccounted_lines(result, path) == set()

    def test_cache_figures_above_the_input_keep_the_input_unsplit(self) -> None:
        assert codex_usage({"input_tokens": 10, "cached_input_tokens": 40,
                            "output_tokens": 1}) == ({"outputTokens": 1,
                                                      "inputTokens": 10}, False)
        assert codex_usage({}) == ({}, True)

    def test_the_written_log_validates(self, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
        out = tmp_path / "out.jsonl"
        assert main(["convert", str(rollout(tmp_path / "r.jsonl")), "-o", str(out)]) == 0
        assert main(["validate", str(out)]) == 0
        printed = capsys.readouterr()
        assert "usage-not-attached: 2 record(s) left out" in printed.err  # a note
        assert "token_count" not in "".join(
            line for line in printed.out.splitlines() if "not-model-visible" in line)

    def test_tokens_df_shows_the_recorded_input_once_per_request(self, tmp_path: Path
                                                                  ) -> None:
        """The first request's two items carry its usage each; the row is the request."""
        frame = tokens_df(list(import_codex(rollout(tmp_path / "r.jsonl")).events))
        assert _values(frame["input_uncached"]) == [300, 200, None]
        assert _values(frame["cache_read"]) == [600, 1000, None]
        assert _values(frame["cache_write"]) == [100, None, None]
        assert _values(frame["usage_source"]) == ["message", "message", None]
        assert _values(frame["input_source"]) == ["usage", "usage", "estimate"]
        assert _values(frame["input_tokens"])[:2] == [1000, 1200]
        assert _values(frame["input_total"])[:2] == [1000, 1200]


def _values(column: Any) -> list[Any]:
    return [None if pd.isna(v) else v for v in column]


def test_the_shared_codex_log_s_counts_are_all_accounted_for() -> None:
    """The shared rollout is stitched from several sessions: none of its three counts
    follows an unwritten request (one follows an output, one is `info: null`)."""
    path = sample("codex_small")
    result = import_codex(path)
    assert [(r["kind"], r["line"]) for r in result.omitted if r["reason"] ==
            "usage-not-attached"] == [("token_count:no-request", 22),
                                      ("token_count:no-usage", 86),
                                      ("token_count:no-request", 87)]
    assert "event_msg:token_count" not in result.omitted_summary()["not-model-visible"][
        "kinds"]
    assert unaccounted_lines(result, path) == set()
    frame = tokens_df(list(result.events))
    assert len(frame) > 0 and frame["usage_source"].isna().all()
    assert set(frame["input_source"]) == {"estimate"}
