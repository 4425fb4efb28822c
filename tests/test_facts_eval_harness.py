"""The evaluation harness (issue 26, 3c) on a made-up label file over a scripted sample's
replaces: the figures are those the labels imply, old rules beside new, recorded and
replay apart, bootstrap intervals seeded. Never run here on real labels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from facts_eval_scripts import script

from surface_lab import read_log
from surface_lab.analysis.ledger import fact_ledger
from surface_lab.analysis.source import load_source

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT / "tests" / "data" / "facts_eval"
SAMPLE = ROOT / "sample_logs" / "long-compaction.jsonl"



evaluate = script("evaluate")


@pytest.fixture(scope="module")
def cases() -> list[object]:
    events = [dict(e) for e in read_log(SAMPLE).events]
    log = load_source(events, progress=False)
    first, second = log.replaces[:2]
    return [evaluate.Case("demo-rec", "recorded", events, first.seq, list(first.shadowed)),
            evaluate.Case("demo-rep", "replay", events, second.seq, list(second.shadowed))]


def _labels(cases: list[object]) -> tuple[dict[str, dict[str, object]],
                                          dict[str, dict[str, object]]]:
    """Labels that agree with the new rules' items except: the first reported item of the
    first replace gets another kind, and one hidden item the rules do not report is a
    fact; every new re-do is labelled a re-do, and one other action a re-do too."""
    items: dict[str, dict[str, object]] = {}
    actions: dict[str, dict[str, object]] = {}
    for n, case in enumerate(cases):
        got = evaluate.new_rules(case)
        reported = {i for i, _, _ in got.items}
        for seq in case.run:
            items[f"{case.rid}:{seq}"] = {"label": "not", "kind": None, "kept": None}
        for k, (i, kind, kept) in enumerate(got.items):
            items[i] = {"label": "fact", "kind": "other" if (n, k) == (0, 0) else kind,
                        "kept": kept}
        if n == 0:
            missed = next(f"{case.rid}:{s}" for s in case.run
                          if f"{case.rid}:{s}" not in reported)
            items[missed] = {"label": "fact", "kind": "instruction", "kept": "no"}
        for a, kind, recovers in got.actions:
            actions[a] = {"redo": "yes", "kind": kind, "recovers": recovers}
        if n == 0:
            actions[f"{case.rid}:a999999"] = {"redo": "yes", "kind": "re-read",
                                             "recovers": None}
    return items, actions


class TestHarness:
    def test_figures_follow_the_labels(self, cases: list[object]) -> None:
        items, actions = _labels(cases)
        report = evaluate.evaluate(cases, items, actions, resamples=200, seed=1)
        new = report["results"]["new"]["all"]
        facts = sum(1 for r in items.values() if r["label"] == "fact")
        reported = facts - 1  # all but the one the rules missed
        top = sum(min(len(evaluate.new_rules(c).items), 10) for c in cases)
        assert new["facts precision (normalised)"]["value"] == 1.0
        assert new["facts precision (exact)"]["hits"] == reported - 1
        assert new["facts recall@10 (normalised)"]["n"] == facts
        assert new["facts recall@10 (normalised)"]["hits"] == top
        assert new["kept accuracy"]["value"] == 1.0
        n_redos = len(actions)
        assert new["re-do recall (normalised)"]["value"] == pytest.approx(
            (n_redos - 1) / n_redos)
        assert all(v["value"] == 1.0 for k, v in new.items()
                   if k.startswith("evidence precision"))

    def test_old_beside_new_and_groups_apart(self, cases: list[object]) -> None:
        items, actions = _labels(cases)
        report = evaluate.evaluate(cases, items, actions, resamples=50, seed=1)
        assert set(report["results"]) == {"old", "new"}
        for name in ("old", "new"):
            assert report["results"][name]["replaces"] == {"all": 2, "recorded": 1,
                                                           "replay": 1}
        rec = report["results"]["new"]["recorded"]["facts recall@10 (normalised)"]
        rep = report["results"]["new"]["replay"]["facts recall@10 (normalised)"]
        every = report["results"]["new"]["all"]["facts recall@10 (normalised)"]
        assert rec["n"] + rep["n"] == every["n"]
        # the old rules' mentions land on hidden items too, and are scored as such
        assert report["results"]["old"]["all"]["facts precision (normalised)"]["n"] > 0

    def test_intervals_are_seeded_and_hold_the_point(self, cases: list[object]) -> None:
        items, actions = _labels(cases)
        a = evaluate.evaluate(cases, items, actions, resamples=100, seed=7)
        b = evaluate.evaluate(cases, items, actions, resamples=100, seed=7)
        assert a == b
        for row in a["results"]["new"]["all"].values():
            if row["value"] is not None and row["low"] is not None:
                assert 0 <= row["low"] <= row["high"] <= 1

    def test_markdown_and_json(self, cases: list[object], tmp_path: Path) -> None:
        items, actions = _labels(cases)
        report = evaluate.evaluate(cases, items, actions, resamples=20, seed=1)
        table = evaluate.markdown(report)
        assert "| figure | group | old | new |" in table
        assert "| facts recall@10 (exact) | recorded |" in table
        json.loads(json.dumps(report))

    def test_a_bad_label_line_names_the_file_and_line(self, tmp_path: Path) -> None:
        path = tmp_path / "labels.jsonl"
        path.write_text('{"item": "x:1", "label": "fact"}\nnot json\n', encoding="utf-8")
        with pytest.raises(SystemExit, match=r"labels.jsonl:2: not JSON"):
            evaluate.read_labels(path)


class TestLedgerOnTheSample:
    def test_every_hidden_question_is_an_instruction_and_counts_are_true(self) -> None:
        ledger = fact_ledger(SAMPLE)
        # (an earlier summary hidden again that carries the user's request is one too)
        users = [f for f in ledger.facts if f.kind == "instruction"
                 and not f.text.startswith("This is an automatically generated checkpoint")]
        assert users and all(f.text.startswith("Question") for f in users)
        # ranks are 1..n within each replace
        for rows in ledger.by_replace().values():
            ranks = sorted(f.rank for f in rows if f.rank is not None)
            assert ranks == list(range(1, len(ranks) + 1))

    def test_re_reads_link_to_the_hidden_read(self) -> None:
        ledger = fact_ledger(SAMPLE)
        by = {(f.replace_seq, f.seq): f for f in ledger.facts}
        reads = [r for r in ledger.redos if r.kind == "re-read"]
        assert reads
        for r in reads:
            fact = by[(r.replace_seq, r.hidden_seq)]
            assert fact.kind == "file-read" and fact.needed and r.seq in fact.redo_seqs
