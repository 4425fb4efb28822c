"""Packet v3 (held out, issue 26 point 3) and the v3 additions to the scoring tools: the
packet builder's sets, fitted budgets and halves; the `key` field in the agreement script;
capped recall@10 and key-fact recall@10 in the evaluation, on hand-built labels and on v2.
Nothing here runs the rules on packet v3."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from facts_eval_scripts import script
from shared_logs import require_shared

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT / "tests" / "data" / "facts_eval"
PACKET_V3 = EVAL / "packet_v3"



agreement = script("agreement")
evaluate = script("evaluate")
build_packet = script("build_packet")


def _jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _fact(i: str, key: bool | None, kind: str = "file-read") -> dict[str, object]:
    row: dict[str, object] = {"item": i, "label": "fact", "kind": kind, "fact": "read a.py",
                              "kept": "no", "reason": "r"}
    if key is not None:
        row["key"] = key
    return row


def _not(i: str) -> dict[str, object]:
    return {"item": i, "label": "not", "kind": None, "fact": None, "kept": None,
            "reason": "r"}


def _no(i: str) -> dict[str, object]:
    return {"action": i, "redo": "no", "kind": None, "recovers": None, "reason": "r"}


def _packet(tmp_path: Path, name: str, items: list[str], actions: list[str],
            v3: bool) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    replaces = sorted({i.rsplit(":", 1)[0] for i in items + actions})
    rows: list[dict[str, object]] = [
        {"record": "replace", "replace": r} | ({"packet": "v3", "half": 1} if v3 else {})
        for r in replaces]
    rows += [{"record": "item", "id": i, "replace": i.rsplit(":", 1)[0]} for i in items]
    rows += [{"record": "action", "id": i, "replace": i.rsplit(":", 1)[0]} for i in actions]
    _jsonl(folder / "items.jsonl", rows)
    return folder


ITEMS = ["r1:1", "r1:2", "r1:3", "r1:4", "r1:5"]
ACTIONS = ["r1:a6"]
# both call r1:1 .. r1:4 facts; keys: A T T F F, B T F F F -> agree 3/4
A = [_fact("r1:1", True), _fact("r1:2", True), _fact("r1:3", False), _fact("r1:4", False),
     _not("r1:5"), _no("r1:a6")]
B = [_fact("r1:1", True), _fact("r1:2", False), _fact("r1:3", False), _fact("r1:4", False),
     _not("r1:5"), _no("r1:a6")]


class TestAgreementKey:
    def test_key_kappa_on_a_v3_packet(self, tmp_path: Path) -> None:
        packet = agreement.read_packet(_packet(tmp_path, "p3", ITEMS, ACTIONS, v3=True))
        a = agreement.load_annotations(_jsonl(tmp_path / "a.jsonl", A))
        b = agreement.load_annotations(_jsonl(tmp_path / "b.jsonl", B))
        report = agreement.compare(a, b, packet.items, packet.actions, packet=packet)
        assert report.complete, report.problems
        figures = {f.name: f for f in report.figures}
        key = figures["facts: key, where both say fact"]
        # A: T T F F, B: T F F F: observed 3/4, chance (2*1 + 2*3)/16 = 1/2
        assert key.n == 4
        assert key.agreement == pytest.approx(0.75)
        assert key.kappa == pytest.approx((0.75 - 0.5) / 0.5)
        assert [(d["item"], d["differ"]) for d in report.disagreements] == [("r1:2", ["key"])]

    def test_no_key_figure_on_a_v2_packet(self, tmp_path: Path) -> None:
        packet = agreement.read_packet(_packet(tmp_path, "p2", ITEMS, ACTIONS, v3=False))
        a = agreement.load_annotations(_jsonl(tmp_path / "a.jsonl", A))
        b = agreement.load_annotations(_jsonl(tmp_path / "b.jsonl", B))
        report = agreement.compare(a, b, packet.items, packet.actions, packet=packet)
        assert not any("key" in f.name for f in report.figures)
        assert report.disagreements == []

    def test_a_fact_without_key_names_the_file_and_line(self, tmp_path: Path) -> None:
        packet = agreement.read_packet(_packet(tmp_path, "p3", ITEMS, ACTIONS, v3=True))
        rows = [_fact("r1:1", None), *A[1:]]
        a = agreement.load_annotations(_jsonl(tmp_path / "a.jsonl", rows))
        b = agreement.load_annotations(_jsonl(tmp_path / "b.jsonl", B))
        report = agreement.compare(a, b, packet.items, packet.actions, packet=packet)
        assert report.problems == [f"{tmp_path / 'a.jsonl'}:1: r1:1: a fact of packet p3 "
                                   "needs 'key': true or false"]

    def test_more_than_ten_key_facts_in_a_replace_is_a_problem(self, tmp_path: Path) -> None:
        items = [f"r2:{n}" for n in range(1, 13)]
        packet = agreement.read_packet(_packet(tmp_path, "p3", items, [], v3=True))
        path = _jsonl(tmp_path / "a.jsonl", [_fact(i, n < 11) for n, i in enumerate(items)])
        a = agreement.load_annotations(path)
        report = agreement.compare(a, a, packet.items, packet.actions, packet=packet)
        assert f"{path}: replace r2 has 11 key facts, at most 10 allowed" in report.problems

    def test_key_must_be_a_boolean_on_a_fact(self) -> None:
        assert agreement._check_item(_fact("r1:1", "yes")) == [  # type: ignore[arg-type]
            "key 'yes' must be true or false"]
        assert agreement._check_item({**_not("r1:5"), "key": True}) == [
            "key is True but only a fact carries key (label 'not')"]
        assert agreement._check_item({**_not("r1:5"), "key": None}) == []

    def test_the_packet_is_found_from_the_ids(self, tmp_path: Path) -> None:
        v2 = _packet(tmp_path, "packet", ["x:1"], ["x:a2"], v3=False)
        v3 = _packet(tmp_path, "packet_v3", ITEMS, ACTIONS, v3=True)
        a = agreement.load_annotations(_jsonl(tmp_path / "a.jsonl", A))
        assert agreement.find_packet(a, (v2, v3)) == v3
        other = agreement.load_annotations(_jsonl(tmp_path / "o.jsonl", [_not("x:1")]))
        assert agreement.find_packet(other, (v2, v3)) == v2

    def test_main_takes_a_packet_folder(self, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
        folder = _packet(tmp_path, "packet_v3", ITEMS, ACTIONS, v3=True)
        a, b = _jsonl(tmp_path / "a.jsonl", A), _jsonl(tmp_path / "b.jsonl", B)
        assert agreement.main([str(a), str(b), "--packet", str(folder)]) == 0
        out = capsys.readouterr().out
        assert "packet = packet_v3" in out
        assert "facts: key, where both say fact" in out


def _case(rid: str, n: int) -> object:
    return evaluate.Case(rid, "replay", [], 0, list(range(1, n + 1)))


class TestCappedAndKeyRecall:
    """Two replaces: r1 hides 15 facts (4 of them key), the rules' top 10 holds 6 facts
    (3 key, one of those of another kind); r2 hides 3 facts (1 key), the rules report 2
    of them (not the key one)."""

    @pytest.fixture
    def counted(self) -> list[dict[str, float]]:
        items: dict[str, dict[str, object]] = {}
        for i in range(1, 21):
            items[f"r1:{i}"] = {"label": "fact", "kind": "command", "key": i <= 4} \
                if i <= 15 else {"label": "not"}
        for i in range(1, 4):
            items[f"r2:{i}"] = {"label": "fact", "kind": "command", "key": i == 3}
        got1 = evaluate.Predicted(items=[(f"r1:{i}", "command", "no") for i in
                                         (1, 2, 16, 17, 18, 19, 5, 6, 7)]
                                  + [("r1:3", "error", "no"), ("r1:4", "command", "no")])
        got2 = evaluate.Predicted(items=[("r2:1", "command", "no"), ("r2:2", "command", "no")])
        return [evaluate.count(_case("r1", 20), got1, items, {}, key=True),
                evaluate.count(_case("r2", 3), got2, items, {}, key=True)]

    def test_capped_recall_divides_by_min_ten_and_the_facts(
            self, counted: list[dict[str, float]]) -> None:
        figures = evaluate.figures(counted)
        # r1: top 10 = 1 2 16 17 18 19 5 6 7 3 -> facts 1 2 5 6 7 3 (6; 5 of the kind);
        # r4 is ranked 11th, outside the top 10.  r2: 2 hits of 3.
        assert figures["facts recall@10 (normalised)"] == (8, 18)
        assert figures["facts capped recall@10 (normalised)"] == (8, 13)
        assert figures["facts capped recall@10 (exact)"] == (7, 13)

    def test_recall_per_replace_is_the_mean_of_each_replaces_recall(
            self, counted: list[dict[str, float]]) -> None:
        figures = evaluate.figures(counted)
        # r1: 6 of 15 in its top 10 (5 of the kind); r2: 2 of 3; every replace weighs the same
        hits, n = figures["facts recall@10 per replace (normalised)"]  # type: ignore[misc]
        assert n == 2 and hits == pytest.approx(6 / 15 + 2 / 3)
        hits, n = figures["facts recall@10 per replace (exact)"]  # type: ignore[misc]
        assert n == 2 and hits == pytest.approx(5 / 15 + 2 / 3)

    def test_a_replace_without_facts_is_not_in_the_mean(self) -> None:
        items = {"r2:1": {"label": "fact", "kind": "command"}, "r3:1": {"label": "not"}}
        got = evaluate.Predicted(items=[("r2:1", "command", "no"), ("r3:1", "command", "no")])
        counts = [evaluate.count(_case("r2", 1), got, items, {}),
                  evaluate.count(_case("r3", 1), got, items, {})]
        assert evaluate.figures(counts)["facts recall@10 per replace (exact)"] == (1, 1)

    def test_key_fact_recall(self, counted: list[dict[str, float]]) -> None:
        figures = evaluate.figures(counted)
        # keys r1:1-4 and r2:3; in the top 10: r1:1, r1:2, r1:3 (kind error: not exact)
        assert figures["key-fact recall@10 (normalised)"] == (3, 5)
        assert figures["key-fact recall@10 (exact)"] == (2, 5)

    def test_no_key_figures_without_key_labels(self) -> None:
        items = {"r2:1": {"label": "fact", "kind": "command"}}
        got = evaluate.Predicted(items=[("r2:1", "command", "no")])
        figures = evaluate.figures([evaluate.count(_case("r2", 1), got, items, {})])
        assert figures["facts capped recall@10 (normalised)"] == (1, 1)
        assert not any(name.startswith("key-fact") for name in figures)

    def test_evaluate_adds_key_figures_when_labels_carry_key(self) -> None:
        items = {"r2:1": {"label": "fact", "kind": "command", "key": True},
                 "r2:2": {"label": "fact", "kind": "command", "key": False}}

        def rules(case: object) -> object:
            return evaluate.Predicted(items=[("r2:2", "command", "no")])

        report = evaluate.evaluate([_case("r2", 2)], items, {}, resamples=20, seed=1,
                                   rule_sets={"new": rules})
        row = report["results"]["new"]["all"]["key-fact recall@10 (normalised)"]
        assert (row["hits"], row["n"], row["value"]) == (0, 1, 0.0)
        capped = report["results"]["new"]["all"]["facts capped recall@10 (normalised)"]
        assert (capped["hits"], capped["n"]) == (1, 2)


def test_capped_recall_on_v2_counts_min_ten_per_replace() -> None:
    """On the committed v2 scores: the capped figures' denominator is the sum over replaces
    of min(10, facts labelled), and their hits are those of recall@10."""
    labels = [json.loads(line) for line in
              (EVAL / "labels" / "adjudicated.jsonl").read_text(encoding="utf-8").splitlines()]
    facts = Counter(r["item"].rsplit(":", 1)[0] for r in labels
                    if "item" in r and r.get("label") == "fact")
    scores = json.loads((EVAL / "labels" / "scores.json").read_text(encoding="utf-8"))
    for name in ("old", "new"):
        every = scores["results"][name]["all"]
        for match in ("exact", "normalised"):
            capped = every[f"facts capped recall@10 ({match})"]
            plain = every[f"facts recall@10 ({match})"]
            assert capped["n"] == sum(min(10, n) for n in facts.values())
            assert capped["hits"] == plain["hits"]
            assert capped["value"] >= plain["value"]
        assert not any(k.startswith("key-fact") for k in every)


class TestBuilder:
    def test_halves_balance_the_work(self) -> None:
        assert build_packet.halves([5, 5, 5, 5]) == 2
        assert build_packet.halves([10, 1, 1, 1, 7]) == 1
        assert build_packet.halves([1, 1, 10]) == 2
        assert build_packet.halves([3]) == 0

    def test_fitted_compaction_budgets_follow_the_log(self) -> None:
        events = [{"type": "user/message", "surfaceOp": "append", "seq": i,
                   "data": {"content": [{"type": "text", "text": "x" * 4000}]}}
                  for i in range(10)]
        described, policy = build_packet.FitCompact(0.5, 0.15).make(events)
        total = sum(build_packet.count_tokens(e)[0] for e in events)
        assert policy.budget_tokens == round(total * 0.5 / 100) * 100
        assert policy.keep_tail_tokens == round(total * 0.15 / 100) * 100
        assert described.startswith(f"Compact(budget_tokens={policy.budget_tokens}, ")
        assert f"of the log's {total} estimated tokens" in described

    def test_a_missing_source_names_its_path_without_a_traceback(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str],
            monkeypatch: pytest.MonkeyPatch) -> None:
        require_shared()
        gone = build_packet.Source("gone", "tests/data/heldout/absent.jsonl", "claude-code",
                                   "real", root="repo")
        packet = build_packet.PacketSet("v3", [gone], {}, tmp_path / "out", halves=True)
        monkeypatch.setitem(build_packet.SETS, "v3", packet)
        assert build_packet.main(["--set", "v3"]) == 2
        err = capsys.readouterr().err
        assert "tests/data/heldout/absent.jsonl: the source log of 'gone' is missing" in err
        assert "Traceback" not in err
        assert not (tmp_path / "out").exists()

    def test_v2_is_unchanged(self) -> None:
        require_shared()
        done = subprocess.run([sys.executable, str(EVAL / "build_packet.py"), "--check"],
                              capture_output=True, text=True, cwd=ROOT, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr


def _v3_records() -> list[dict[str, object]]:
    if not (PACKET_V3 / "items.jsonl").is_file():
        pytest.skip("packet v3 is not built")
    return [json.loads(line) for line in
            (PACKET_V3 / "items.jsonl").read_text(encoding="utf-8").splitlines()]


class TestCommittedPacketV3:
    def test_it_fits_two_labellings_of_35_minutes(self) -> None:
        records = _v3_records()
        replaces = [r for r in records if r["record"] == "replace"]
        items = [r for r in records if r["record"] == "item"]
        actions = [r for r in records if r["record"] == "action"]
        assert 20 <= len(replaces) <= 28
        assert len(items) <= 500
        assert len(actions) <= 300
        assert len({r["format"] for r in replaces}) >= 3
        assert any(r["origin"] == "recorded" for r in replaces)
        assert all(r["packet"] == "v3" for r in replaces)

    def test_the_index_states_the_totals_and_two_similar_halves(self) -> None:
        records = _v3_records()
        index = (PACKET_V3 / "INDEX.md").read_text(encoding="utf-8")
        work: Counter[object] = Counter()  # hidden items plus actions, per half
        for r in records:
            if r["record"] == "replace":
                assert r["half"] in (1, 2)
                work[r["half"]] += int(str(r["hidden"])) + int(str(r["actions"]))
                assert f"| {r['half']} | [{r['replace']}]({r['replace']}.md) |" in index
        assert abs(work[1] - work[2]) <= max(work.values()) * 0.5
        n_items = sum(r["record"] == "item" for r in records)
        assert f"{n_items} hidden items" in index
        assert "half 1: " in index and "half 2: " in index

    def test_v2_and_v3_share_no_source(self) -> None:
        v3 = {str(r["source"]) for r in _v3_records() if r["record"] == "replace"}
        v2 = {json.loads(line)["source"] for line in
              (EVAL / "packet" / "items.jsonl").read_text(encoding="utf-8").splitlines()
              if json.loads(line)["record"] == "replace"}
        assert v2.isdisjoint(v3)

    def test_the_committed_packet_is_what_the_builder_writes(self) -> None:
        _v3_records()
        require_shared()
        missing = [s.path for s in build_packet.SOURCES_V3
                   if not build_packet.source_path(s).is_file()]
        if missing:
            pytest.skip(f"held-out logs missing: {', '.join(missing)}")
        done = subprocess.run([sys.executable, str(EVAL / "build_packet.py"), "--set", "v3",
                               "--check"], capture_output=True, text=True, cwd=ROOT,
                              timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr


class TestCommittedPacketV3r:
    """Packet v3r: the recorded compactions of a real session, held out like v3."""

    def test_its_sources_are_in_neither_v2_nor_v3(self) -> None:
        v3r = {s.path for s in build_packet.SOURCES_V3R}
        others = {s.path for s in [*build_packet.SOURCES, *build_packet.SOURCES_V3]}
        assert v3r and v3r.isdisjoint(others)

    def test_the_committed_packet_is_what_the_builder_writes(self) -> None:
        done = subprocess.run([sys.executable, str(EVAL / "build_packet.py"), "--set", "v3r",
                               "--check"], capture_output=True, text=True, cwd=ROOT,
                              timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr

    def test_every_replace_is_recorded_and_its_labels_carry_key(self) -> None:
        records = [json.loads(line) for line in (EVAL / "packet_v3r" / "items.jsonl")
                   .read_text(encoding="utf-8").splitlines()]
        replaces = [r for r in records if r["record"] == "replace"]
        assert replaces and all(r["origin"] == "recorded" for r in replaces)
        assert all(r["packet"] == "v3r" for r in replaces)  # agreement.py asks for key


class TestEvaluateOnV3:
    """evaluate.py's v3 option, without running any rule on v3."""

    @pytest.fixture
    def v3_cases(self) -> list[object]:
        records = _v3_records()
        require_shared()
        missing = [s.path for s in build_packet.SOURCES_V3
                   if not build_packet.source_path(s).is_file()]
        if missing:
            pytest.skip(f"held-out logs missing: {', '.join(missing)}")
        cases = evaluate.packet_cases("v3")
        assert [c.rid for c in cases] == [r["replace"] for r in records
                                         if r["record"] == "replace"]
        return cases

    def test_the_cases_are_the_packets_replaces_and_items(self, v3_cases: list[object]
                                                          ) -> None:
        records = _v3_records()
        items = {str(r["id"]) for r in records if r["record"] == "item"}
        from_cases = {f"{c.rid}:{s}" for c in v3_cases for s in c.run}  # type: ignore[attr-defined]
        assert from_cases == items

    def test_labels_of_another_packet_are_refused(
            self, v3_cases: list[object], tmp_path: Path,
            capsys: pytest.CaptureFixture[str]) -> None:
        labels = _jsonl(tmp_path / "v2.jsonl", [_not("cc258-rec-s661:3")])
        assert evaluate.main([str(labels), "--packet", "v3"]) == 2
        assert "no label is of a replace of packet v3" in capsys.readouterr().err


class TestCommittedPacketV4:
    """Packet v4: more replays over held-out real logs, labelled as v3 (issue 26 point 3a
    asks for 40 replaces; v3 and v3r hold 25)."""

    @pytest.fixture
    def records(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in (EVAL / "packet_v4" / "items.jsonl")
                .read_text(encoding="utf-8").splitlines()]

    def test_no_source_is_of_the_development_set(self) -> None:
        v4 = {s.path for s in build_packet.SOURCES_V4}
        assert v4 and v4.isdisjoint(s.path for s in build_packet.SOURCES)

    def test_its_replaces_are_replays_none_of_v3r(self, records: list[dict[str, object]]
                                                  ) -> None:
        replaces = [r for r in records if r["record"] == "replace"]
        assert replaces and all(r["origin"] == "replay" for r in replaces)
        assert all(r["packet"] == "v4" and r["half"] in (1, 2) for r in replaces)
        v3r = (EVAL / "packet_v3r" / "items.jsonl").read_text(encoding="utf-8")
        assert not any(f'"replace": "{r["replace"]}"' in v3r for r in replaces)

    def test_with_v3_and_v3r_the_held_out_set_has_40_replaces_in_4_formats(
            self, records: list[dict[str, object]]) -> None:
        held_out = list(records)
        for name in ("packet_v3", "packet_v3r"):
            held_out += [json.loads(line) for line in (EVAL / name / "items.jsonl")
                         .read_text(encoding="utf-8").splitlines()]
        replaces = [r for r in held_out if r["record"] == "replace"]
        assert len({r["replace"] for r in replaces}) == len(replaces) >= 40
        assert len({r["format"] for r in replaces}) >= 4

    def test_the_committed_packet_is_what_the_builder_writes(self) -> None:
        done = subprocess.run([sys.executable, str(EVAL / "build_packet.py"), "--set", "v4",
                               "--check"], capture_output=True, text=True, cwd=ROOT,
                              timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr


class TestBootstrapByLog:
    """`evaluate(..., by_log=True)`: the replaces of one log are resampled together."""

    def _report(self, by_log: bool) -> dict[str, object]:
        items = {"a1:1": {"label": "fact", "kind": "command"},
                 "a2:1": {"label": "fact", "kind": "command"},
                 "b1:1": {"label": "fact", "kind": "command"}}
        cases = [evaluate.Case("a1", "replay", [], 0, [1], "log-a"),
                 evaluate.Case("a2", "replay", [], 0, [1], "log-a"),
                 evaluate.Case("b1", "replay", [], 0, [1], "log-b")]

        def rules(case: object) -> object:  # finds the fact of log a's replaces only
            rid = case.rid  # type: ignore[attr-defined]
            return evaluate.Predicted(items=[(f"{rid}:1", "command", "no")]
                                      if rid.startswith("a") else [])

        return evaluate.evaluate(cases, items, {}, resamples=200, seed=3,
                                 rule_sets={"new": rules}, by_log=by_log)

    def test_the_values_are_those_of_replaces_and_the_draws_are_of_logs(self) -> None:
        plain, clustered = self._report(False), self._report(True)
        row = clustered["results"]["new"]["all"]["facts recall@10 (exact)"]  # type: ignore[index]
        assert row["value"] == plain["results"]["new"]["all"][  # type: ignore[index]
            "facts recall@10 (exact)"]["value"] == pytest.approx(2 / 3)
        # two logs: a resample holds log a twice (1.0), b twice (0.0) or both (2/3)
        assert row["low"] == 0.0 and row["high"] == 1.0
        assert clustered["resampled"] == "logs" and "resampled" not in plain

    def test_the_markdown_says_what_was_resampled(self) -> None:
        assert "resamplings of the source logs" in evaluate.markdown(self._report(True))
        assert "resamplings of the replaces" in evaluate.markdown(self._report(False))
