"""What-if policies (surface_lab.analysis.policies): the recorded history is taken out, another
policy is applied before every request, and the result is a valid surface log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from shared_logs import SHARED

from surface_lab import (
    AdmissionError,
    Compact,
    MaskObservations,
    Prune,
    Rewrite,
    read_log,
    replay_policy,
)
from surface_lab.analysis.compaction import ExtractiveSummarizer
from surface_lab.analysis.policies import PolicyView, history_removed
from surface_lab.cli import main
from surface_lab.contract import check_loop_contract
from surface_lab.importers import import_any
from surface_lab.messages import message_text

ROOT = Path(__file__).resolve().parents[1]
LONG = ROOT / "sample_logs" / "long-compaction.jsonl"
PRUNED = ROOT / "sample_logs" / "pruned-tool-results.jsonl"
CLAUDE = SHARED / "real_logs" / "other" / (
    "meridianlabs-ai__inspect_scout__tests_sources_claude_code_source_fixtures_compaction_"
    "session.jsonl")
CODEX = SHARED / "real_logs" / "other" / (
    "jazzyalex__agent-sessions__Resources_Fixtures_stage0_agents_codex_small.jsonl")
PI = SHARED / "real_logs" / "other" / (
    "jazzyalex__agent-sessions__Resources_Fixtures_stage0_agents_pi_small.jsonl")
DSH = SHARED / "real_logs" / "dsh" / (
    "deepseek-ai__deepseek-harness__examples_headless-agent_tests_snapshots_compaction-"
    "recovery_session.jsonl")


def _surface_texts(session: Any) -> list[str]:
    return [message_text(session.events[s]) for s in session.surface.nodes]


class TestReplay:
    def test_the_recorded_settings_reproduce_the_recorded_surface(self) -> None:
        recorded = read_log(LONG)
        replayed = replay_policy(LONG, Compact(900, 300), summarizer=ExtractiveSummarizer(
            fail_calls=frozenset({3})))
        assert _surface_texts(replayed) == [message_text(recorded.events[s])
                                            for s in recorded.fold.nodes]
        assert len(replayed.events) == len(recorded.events)

    def test_no_policy_keeps_every_message_and_no_trace(self) -> None:
        replayed = replay_policy(LONG, None)
        types = [e["type"] for e in replayed.events]
        assert not any(t.startswith("compaction/") for t in types)
        kept = history_removed(list(read_log(LONG).events))
        assert len(replayed.surface.nodes) == sum(
            1 for e in kept if e.get("surfaceOp") == "append")

    def test_the_log_follows_the_loop_contract_and_validates(self, tmp_path: Path,
                                                              capsys: Any) -> None:
        out = tmp_path / "masked.jsonl"
        replayed = replay_policy(LONG, [MaskObservations(keep_last=2), Compact(1500, 500)],
                                 out=out)
        assert check_loop_contract(list(replayed.events)) == []
        assert main(["validate", str(out)]) == 0
        assert ": valid:" in capsys.readouterr().err
        assert list(tmp_path.iterdir()) == [out]
        assert read_log(out).header["id"] == "long-compaction~whatif"

    def test_every_kind_of_source_replays_alike(self) -> None:
        from surface_lab.notebook import load_source

        reading = read_log(LONG)
        expected = _surface_texts(replay_policy(LONG, Compact(900, 300)))
        for source in (reading, list(reading.events), load_source(reading)):
            assert _surface_texts(replay_policy(source, Compact(900, 300))) == expected
        with pytest.raises(TypeError, match="cannot replay int"):
            replay_policy(3, None)

    def test_masking_leaves_only_the_latest_results_whole(self) -> None:
        replayed = replay_policy(LONG, MaskObservations(keep_last=2))
        results = [s for s in replayed.surface.nodes
                   if replayed.events[s]["type"] == "tool/result"]
        texts = [message_text(replayed.events[s]) for s in results]
        assert all(t.startswith("[tool result of ") for t in texts[:-2])
        assert not any(t.startswith("[tool result of ") for t in texts[-2:])

    def test_prune_with_another_threshold(self) -> None:
        replayed = replay_policy(PRUNED, Prune(threshold=100, head=40, tail=20))
        rewrites = [e for e in replayed.events if e["type"] == "compaction/prune"]
        assert len(rewrites) == 2  # the build log and now the grep result too
        assert all(len(message_text(replayed.events[s])) < 200
                   for s in replayed.surface.nodes
                   if replayed.events[s]["type"] == "tool/result")


class TestUserPolicies:
    def test_a_callable_returning_a_replace_plan(self) -> None:
        seen: list[PolicyView] = []

        def drop_the_first_turn(view: PolicyView) -> list[Rewrite]:
            seen.append(view)
            if view.turn == 3 and view.step == 1:
                return [Rewrite(view.nodes[0], view.nodes[4])]
            return []

        replayed = replay_policy(LONG, drop_the_first_turn,
                                 summarizer=lambda events: f"{len(events)} entries before")
        [summary] = [e for e in replayed.events if e["type"] == "compaction/summary"]
        assert summary["data"]["summary"] == [{"type": "text", "text": "5 entries before"}]
        assert summary["data"]["provider"] == "user"
        assert len(seen) == 28 and all(len(v.tokens) == len(v.nodes) for v in seen)

    def test_the_tokenizer_counts_what_the_policy_sees(self) -> None:
        seen: list[tuple[int, ...]] = []
        replay_policy(LONG, lambda view: seen.append(view.tokens) or [],
                      tokenizer=lambda text: 1)
        assert {n for tokens in seen for n in tokens} == {5}  # 1 + the message overhead

    def test_a_plan_the_surface_refuses_names_the_rule(self) -> None:
        with pytest.raises(AdmissionError, match="seq 999 is not on the surface") as err:
            replay_policy(LONG, lambda view: [Rewrite(999, 999)])
        assert err.value.code == "replace-start-missing"
        with pytest.raises(AdmissionError,
                           match="text rewrites one tool result or observation only"):
            replay_policy(LONG, lambda view: [Rewrite(view.nodes[0], view.nodes[0], "x")])


class TestImportedLogs:
    @pytest.mark.parametrize("path", [CLAUDE, CODEX, PI], ids=["claude-code", "codex", "pi"])
    def test_an_import_replays_without_its_brackets(self, path: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]
                                                    ) -> None:
        result = import_any(path)
        out = tmp_path / "out.jsonl"
        replayed = replay_policy(result, MaskObservations(keep_last=1), out=out)
        assert not any(e["type"] == "compaction/start" for e in replayed.events)
        assert [p for p in read_log(out).problems if p.severity == "error"] == []
        # The Codex sample (stitched from several sessions) has a call whose output was
        # never recorded; Codex compacted it away, so without the brackets it stays
        # unanswered at the next request, and validate says so.
        capsys.readouterr()
        assert main(["validate", str(out)]) == (1 if path == CODEX else 0)
        printed = [line for line in capsys.readouterr().out.splitlines()
                   if ": note: " not in line]
        assert all(": unanswered-tool-call: " in line for line in printed)
        assert len(printed) == (1 if path == CODEX else 0)

    def test_a_real_dsh_compaction_is_taken_out_and_replaced(self, tmp_path: Path) -> None:
        recorded = read_log(DSH)
        assert [r.seq for r in recorded.fold.replacements] == [21]
        replayed = replay_policy(DSH, Compact(budget_tokens=100, keep_tail_tokens=20, min_run=1),
                                 out=tmp_path / "dsh.jsonl")
        summaries = [e for e in replayed.events if e["type"] == "compaction/summary"]
        assert summaries and all(e["data"]["provider"] == "offline" for e in summaries)
        assert read_log(tmp_path / "dsh.jsonl").fold.nodes == list(replayed.surface.nodes)


def test_the_what_if_presets_are_importable_from_the_analysis_package() -> None:
    """`from surface_lab.analysis import CodexAutoCompact` works, and is the same class as
    in `analysis.policies` (one definition, re-exported)."""
    import surface_lab.analysis as analysis
    from surface_lab.analysis import policies

    presets = ["WindowCompact", "CodexAutoCompact", "ClaudeCodeAutoCompact", "PiCompaction",
               "OpenHandsSummarizing", "LastNObservations", "SummarizeEvery",
               "ClearToolUses", "MaskObservations", "Compact", "Prune", "Policy"]
    for name in presets:
        assert name in analysis.__all__, name
        assert getattr(analysis, name) is getattr(policies, name), name
    assert issubclass(analysis.CodexAutoCompact, analysis.WindowCompact)
    assert issubclass(analysis.ClaudeCodeAutoCompact, analysis.WindowCompact)
