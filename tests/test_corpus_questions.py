"""The field's questions as corpus SQL (`surface_lab.corpus_questions`): each runs on a
corpus of the shared real logs and the samples, agrees with the same count made in
Python from the tables, and is shown in docs/corpus.md as it is run."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from shared_logs import require_shared

from surface_lab import corpus
from surface_lab.cli import main
from surface_lab.corpus_questions import EDIT_TOOLS, QUESTIONS

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> corpus.Corpus:
    shared = require_shared("real_logs", "agent_logs")
    out = tmp_path_factory.mktemp("questions") / "out"
    corpus.to_parquet([shared / "real_logs", shared / "agent_logs", ROOT / "sample_logs"],
                      out)
    c = corpus.open_corpus(out)
    yield c
    c.close()


def test_every_question_runs_and_answers(built: corpus.Corpus) -> None:
    for name, query in QUESTIONS.items():
        assert len(built.sql(query)) > 0, name


def test_actions_before_the_first_edit_match_a_count_in_python(
        built: corpus.Corpus) -> None:
    calls = built.sql("select session_key, seq, lower(tool) as tool from events "
                      "where type = 'tool/call' order by session_key, seq")
    compactions = built.sql("select session_key, seq from replaces "
                            "where kind = 'compaction' order by session_key, seq")
    cuts: dict[str, list[int]] = {}
    for row in compactions.itertuples():
        cuts.setdefault(row.session_key, []).append(int(row.seq))
    by_session: dict[str, list[tuple[int, str]]] = {}
    for row in calls.itertuples():
        by_session.setdefault(row.session_key, []).append((int(row.seq), row.tool))
    counted: dict[str, list[int]] = {"cold start": [], "compaction": []}
    for key, actions in by_session.items():
        marks = [-1, *cuts.get(key, [])]
        for i, start in enumerate(marks):
            end = marks[i + 1] if i + 1 < len(marks) else None
            window = [t for s, t in actions if s > start and (end is None or s < end)]
            edits = [k for k, t in enumerate(window) if t in EDIT_TOOLS]
            if edits:
                counted["cold start" if start == -1 else "compaction"].append(edits[0])
    answer = built.sql(QUESTIONS["actions before the first edit"]).set_index("after")
    for after, values in counted.items():
        assert int(answer.loc[after, "windows_with_an_edit"]) == len(values)
        assert float(answer.loc[after, "median_actions"]) == statistics.median(values)


def test_re_dos_per_compaction_count_each_lost_evidence_row(built: corpus.Corpus) -> None:
    answer = built.sql(QUESTIONS["re-dos per compaction by agent and policy"])
    total = built.sql("select count(*) as n from lost_evidence l join replaces r "
                      "on l.session_key = r.session_key and l.replace_seq = r.seq "
                      "where r.kind = 'compaction'")
    assert int(answer["redos"].sum()) == int(total["n"][0]) > 0
    compactions = built.sql("select count(*) as n from replaces where kind = 'compaction'")
    assert int(answer["compactions"].sum()) == int(compactions["n"][0])


def test_regrowth_starts_from_the_request_before_the_compaction(
        built: corpus.Corpus) -> None:
    answer = built.sql(QUESTIONS["context regrowth after a compaction"])
    assert (answer["threshold"] > 0).all()
    regrew = answer[answer["regrew"]]
    assert (regrew["requests_to_regrow"] >= 1).all()
    assert answer[~answer["regrew"]]["requests_to_regrow"].isna().all()


def test_the_questions_run_from_the_command_line(built: corpus.Corpus,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    query = QUESTIONS["re-dos per compaction by agent and policy"]
    assert main(["corpus", "sql", str(built.root), query, "--csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "agent,policy,compactions,redos,redos_per_compaction"


def test_the_docs_show_each_question_as_it_runs() -> None:
    page = (ROOT / "docs" / "corpus.md").read_text()
    for name, query in QUESTIONS.items():
        assert query.strip() in page, name
