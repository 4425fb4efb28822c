"""The research frames (surface_lab.notebook.research): lost_evidence_df, tokens_df and the
policy comparison with its figure."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from shared_logs import SHARED

from surface_lab import Compact, MaskObservations
from surface_lab.importers import import_any
from surface_lab.notebook import (
    SCHEMAS,
    audit_report,
    compaction_audit,
    compare_policies,
    lost_evidence_df,
    tokens_df,
)

ROOT = Path(__file__).resolve().parents[1]
LONG = ROOT / "sample_logs" / "long-compaction.jsonl"
CHAT = ROOT / "sample_logs" / "chat.jsonl"
CLAUDE = SHARED / "real_logs" / "other" / (
    "meridianlabs-ai__inspect_scout__tests_sources_claude_code_source_fixtures_compaction_"
    "session.jsonl")


def _schema(name: str, frame: pd.DataFrame) -> None:
    assert [(c.name, str(c.dtype)) for c in SCHEMAS[name]] == [
        (c, str(t)) for c, t in frame.dtypes.items()]


class TestLostEvidence:
    def test_one_row_per_action_and_a_count_per_replace_in_the_audit(self) -> None:
        frame = lost_evidence_df(LONG)
        _schema("lost_evidence", frame)
        assert len(frame) == 10 and set(frame["replace_kind"]) == {"compaction"}
        audit = compaction_audit(LONG)
        assert list(audit["lost_evidence"]) == [3, 1, 3, 1, 0, 1, 1]
        assert audit["lost_evidence"].dtype == "int64"
        counted = frame.groupby("replace_seq").size()
        assert all(counted.get(s, 0) == n for s, n in zip(audit["seq"],
                                                          audit["lost_evidence"], strict=True))

    def test_the_report_shows_the_count(self, tmp_path: Path) -> None:
        result = audit_report(LONG, tmp_path)
        assert " redone" in result["summary"].splitlines()[0]
        # the re-dos of the ledger (analysis.ledger): 2 re-reads, 2 re-runs, 2 re-instructs
        assert "· 6 redone</summary>" in result["html"].read_text()

    def test_a_log_without_replaces_gives_an_empty_frame(self) -> None:
        frame = lost_evidence_df(CHAT)
        assert len(frame) == 0
        _schema("lost_evidence", frame)


class TestTokens:
    def test_the_sample_s_usage_beside_the_estimate(self) -> None:
        frame = tokens_df(LONG)
        _schema("tokens", frame)
        assert len(frame) == 28
        assert set(frame["input_source"]) == {"usage"} and set(frame["usage_source"]) == {
            "chunk"}
        assert frame["tokenizer_tokens"].isna().all()
        assert (frame["input_tokens"] == frame["input_total"]).all()
        assert (frame["input_total"] == frame["input_uncached"] + frame["cache_read"].fillna(0)
                + frame["cache_write"].fillna(0)).all()

    def test_a_tokenizer_fills_its_column(self) -> None:
        frame = tokens_df(LONG, tokenizer=lambda text: len(text.split()))
        assert frame["tokenizer_tokens"].notna().all()
        assert (frame["tokenizer_tokens"] < frame["estimated_tokens"]).any()

    def test_an_imported_log_s_usage(self) -> None:
        frame = tokens_df(list(import_any(CLAUDE).events))
        assert list(frame["input_uncached"]) == [100, 80]
        assert list(frame["usage_source"].astype(str)) == ["message", "message"]


class TestComparePolicies:
    def test_the_recorded_policy_is_a_row_and_every_row_adds_up(self) -> None:
        result = compare_policies(LONG, {"none": None, "compact 1500": Compact(1500, 500),
                                         "mask 2": MaskObservations(2)})
        frame = result.frame
        _schema("policies", frame)
        _schema("policy_steps", result.steps)
        assert list(frame["policy"]) == ["recorded", "none", "compact 1500", "mask 2"]
        recorded = frame.iloc[0]
        audit = compaction_audit(LONG)
        assert (recorded["replaces"], recorded["facts_at_risk"], recorded["lost_evidence"],
                recorded["failed_compactions"]) == (7, audit["n_at_risk"].sum(), 10, 1)
        none = frame.iloc[1]
        assert (none["replaces"], none["lost_evidence"]) == (0, 0)
        assert none["peak_tokens"] > recorded["peak_tokens"]
        assert frame["requests"].eq(28).all() and len(result.steps) == 4 * 28
        assert frame["recorded_input_tokens"].isna().tolist() == [False, True, True, True]
        assert set(result.logs) == set(frame["policy"])

    def test_the_figure_has_a_line_per_policy_and_the_bars(self) -> None:
        result = compare_policies(LONG, {"none": None})
        lines, bars = result.figure.axes
        assert [line.get_label() for line in lines.get_lines()] == ["recorded", "none"]
        assert len(bars.patches) == 2 * 3

    def test_an_imported_log_and_a_reserved_name(self) -> None:
        result = compare_policies(import_any(CLAUDE), {"mask 1": MaskObservations(1)})
        assert list(result.frame["policy"]) == ["recorded", "mask 1"]
        with pytest.raises(ValueError, match="names the recorded policy"):
            compare_policies(LONG, {"recorded": None})
