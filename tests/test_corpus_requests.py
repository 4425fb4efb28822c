"""The corpus's `requests` table: each session's billed requests with their tokens and
dollars, the rows `requests_df` gives for the same source, on real logs of every kind."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from shared_logs import require_shared

from surface_lab import corpus
from surface_lab.notebook import requests_df

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    shared = require_shared("real_logs", "agent_logs")
    out = tmp_path_factory.mktemp("requests") / "out"
    corpus.to_parquet([shared / "real_logs", shared / "agent_logs", ROOT / "sample_logs"],
                      out)
    return out


def test_every_session_s_requests_are_requests_df_s(built: Path) -> None:
    c = corpus.open_corpus(built)
    rows = c.sql("select source, count(*) as n, sum(cost_usd) as usd, "
                 "sum(input_total) as input, sum(output) as output from requests "
                 "where source not like '%.db' "  # a database of several sessions
                 "group by source order by source")
    sessions = c.sql("select source, problems from sessions")
    c.close()
    assert len(rows) >= 10  # Claude Code, Codex, pi, ATIF, SWE-agent, dsh ... all bill
    checked = 0
    for row in rows.itertuples():
        frame, _ = requests_df(row.source, strict=False)
        assert len(frame) == row.n, row.source
        assert int(frame["input_total"].fillna(0).sum()) == int(row.input or 0), row.source
        assert int(frame["output"].fillna(0).sum()) == int(row.output or 0), row.source
        expected = float(frame["cost_usd"].sum())  # NaN (unpriced) rows are skipped
        assert math.isclose(expected, float(row.usd) if row.usd == row.usd else 0.0,
                            rel_tol=1e-9, abs_tol=1e-12), row.source
        checked += 1
    assert checked == len(rows) and len(sessions) > checked


def test_dollars_per_compaction_are_a_query(built: Path) -> None:
    c = corpus.open_corpus(built)
    summarizers = c.sql(
        "select r.session_key, r.compaction_id, q.input_total, q.output from replaces r "
        "join requests q on q.session_key = r.session_key "
        "and q.request_id = 'compaction:' || r.compaction_id "
        "where q.agent = 'summarizer'")
    c.close()
    assert len(summarizers) > 0 and (summarizers["input_total"] > 0).all()
