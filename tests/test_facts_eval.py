"""The facts-eval labelled set (issue 26, 3a): the agreement script on a made-up pair of
annotations, the committed packet's structure, and the guidelines' examples."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from facts_eval_scripts import script

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT / "tests" / "data" / "facts_eval"
PACKET = EVAL / "packet"



agreement = script("agreement")


def _jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _item(i: str, label: str, kind: str | None = None, kept: str | None = None,
          ) -> dict[str, object]:
    return {"item": i, "label": label, "kind": kind,
            "fact": "read a.py" if label == "fact" else None, "kept": kept, "reason": "r"}


def _action(i: str, redo: str, kind: str | None = None, recovers: str | None = None,
            ) -> dict[str, object]:
    return {"action": i, "redo": redo, "kind": kind, "recovers": recovers, "reason": "r"}


ITEMS = ["r1:1", "r1:2", "r1:3", "r1:4"]
ACTIONS = ["r1:a5", "r1:a6", "r1:a7", "r1:a8"]
A = [_item("r1:1", "fact", "file-read", "no"), _item("r1:2", "fact", "instruction", "yes"),
     _item("r1:3", "not"), _item("r1:4", "unmeasurable"),
     _action("r1:a5", "yes", "re-read", "r1:1"), _action("r1:a6", "no"),
     _action("r1:a7", "no"), _action("r1:a8", "yes", "re-instruct", "r1:2")]
B = [_item("r1:1", "fact", "file-read", "no"), _item("r1:2", "not"),
     _item("r1:3", "not"), _item("r1:4", "unmeasurable"),
     _action("r1:a5", "yes", "re-read", "r1:1"), _action("r1:a6", "yes", "re-run", "r1:2"),
     _action("r1:a7", "no"), _action("r1:a8", "no")]


@pytest.fixture
def packet(tmp_path: Path) -> Path:
    rows = [{"record": "replace", "replace": "r1"}]
    rows += [{"record": "item", "id": i, "replace": "r1"} for i in ITEMS]
    rows += [{"record": "action", "id": i, "replace": "r1"} for i in ACTIONS]
    return _jsonl(tmp_path / "items.jsonl", rows)


class TestCohenKappa:
    def test_perfect_agreement_is_one(self) -> None:
        assert agreement.cohen_kappa(["a", "b", "a"], ["a", "b", "a"]) == 1.0

    def test_agreement_at_chance_is_zero(self) -> None:
        assert agreement.cohen_kappa(["y", "n", "n", "y"], ["y", "y", "n", "n"]) == 0.0

    def test_a_known_value(self) -> None:
        # observed 3/4, chance 1/2*1/4 + 1/2*3/4 = 1/2
        assert agreement.cohen_kappa(list("ffnn"), list("fnnn")) == pytest.approx(0.5)

    def test_one_label_everywhere_has_no_kappa(self) -> None:
        assert agreement.cohen_kappa(["n", "n"], ["n", "n"]) is None
        assert agreement.cohen_kappa([], []) is None

    def test_unequal_lengths_are_refused(self) -> None:
        with pytest.raises(ValueError, match="as many labels from each rater, got 2 and 1"):
            agreement.cohen_kappa(["a", "b"], ["a"])


class TestCompare:
    def test_the_figures_of_a_made_up_pair(self, tmp_path: Path, packet: Path) -> None:
        a = agreement.load_annotations(_jsonl(tmp_path / "a.jsonl", A))
        b = agreement.load_annotations(_jsonl(tmp_path / "b.jsonl", B))
        report = agreement.compare(a, b, ITEMS, ACTIONS)
        figures = {f.name: f for f in report.figures}
        assert report.complete
        assert figures["facts: fact / not"].kappa == pytest.approx(0.5)
        assert figures["facts: fact / not"].agreement == pytest.approx(0.75)
        assert figures["facts: fact / not / unmeasurable"].n == 4
        assert figures["facts: kind, where both say fact"].n == 1
        assert figures["evidence: re-do / not"].kappa == pytest.approx(0.0)
        # kinds: A re-read none none re-instruct, B re-read re-run none none;
        # observed 1/2, chance (1*1 + 2*2)/16
        assert figures["evidence: kind (none when not a re-do)"].kappa == \
            pytest.approx((0.5 - 5 / 16) / (1 - 5 / 16))
        assert figures["evidence: recovers, where both say re-do"].agreement == 1.0

    def test_disagreements_are_listed_in_packet_order(self, tmp_path: Path) -> None:
        a = agreement.load_annotations(_jsonl(tmp_path / "a.jsonl", A))
        b = agreement.load_annotations(_jsonl(tmp_path / "b.jsonl", B))
        report = agreement.compare(a, b, ITEMS, ACTIONS)
        listed = [(d.get("item") or d.get("action"), d["differ"])
                  for d in report.disagreements]
        assert listed == [("r1:2", ["label"]), ("r1:a6", ["redo"]), ("r1:a8", ["redo"])]
        assert all(d["adjudicated"] is None for d in report.disagreements)

    def test_missing_and_unknown_ids_are_problems(self, tmp_path: Path) -> None:
        short = [r for r in A if r.get("item") != "r1:3"] + [_item("r9:1", "not")]
        a = agreement.load_annotations(_jsonl(tmp_path / "a.jsonl", short))
        b = agreement.load_annotations(_jsonl(tmp_path / "b.jsonl", B))
        report = agreement.compare(a, b, ITEMS, ACTIONS)
        assert not report.complete
        assert any("1 item(s) not labelled, first r1:3" in p for p in report.problems)
        assert any("1 item id(s) not in the packet, first r9:1" in p for p in report.problems)
        # the figures are still computed over what both labelled
        assert {f.name: f.n for f in report.figures}["facts: fact / not"] == 3


class TestLoadAnnotations:
    def test_bad_lines_name_the_file_line_and_rule(self, tmp_path: Path) -> None:
        rows = [json.dumps(_item("r1:1", "maybe")), "not json",
                json.dumps(_item("r1:2", "fact", "file-read", None)),
                json.dumps({**_action("r1:a5", "yes", "re-read", None)}),
                json.dumps({**_item("r1:3", "not"), "reason": ""}),
                json.dumps(_item("r1:3", "not")), json.dumps({"label": "not"})]
        path = tmp_path / "a.jsonl"
        path.write_text("\n".join(rows) + "\n", encoding="utf-8")
        problems = agreement.load_annotations(path).problems
        assert problems == [
            f"{path}:1: r1:1: label 'maybe' is not one of fact, not, unmeasurable",
            f"{path}:2: not JSON (Expecting value: line 1 column 1 (char 0))",
            f"{path}:3: r1:2: kept None is not one of yes, partly, no",
            f"{path}:4: r1:a5: a re-do needs 'recovers': a hidden item id or a list of ids",
            f"{path}:5: every label needs a one-line 'reason'",
            f"{path}:6: r1:3 is labelled twice",
            f"{path}:7: a line needs an 'item' or an 'action' id",
        ]

    def test_an_unreadable_file_is_an_annotation_error(self, tmp_path: Path) -> None:
        with pytest.raises(agreement.AnnotationError, match="cannot read annotations"):
            agreement.load_annotations(tmp_path / "absent.jsonl")


class TestMain:
    def test_complete_files_exit_zero_and_write_the_disagreements(
            self, tmp_path: Path, packet: Path, capsys: pytest.CaptureFixture[str]) -> None:
        a, b = _jsonl(tmp_path / "a.jsonl", A), _jsonl(tmp_path / "b.jsonl", B)
        out = tmp_path / "disagreements.jsonl"
        code = agreement.main([str(a), str(b), "--packet", str(packet),
                               "--disagreements", str(out)])
        printed = capsys.readouterr().out
        assert code == 0
        assert re.search(r"facts: fact / not\s+4\s+0\.750\s+0\.500", printed)
        assert "3 disagreement(s):" in printed
        assert len(out.read_text(encoding="utf-8").splitlines()) == 3

    def test_an_incomplete_file_exits_one(self, tmp_path: Path, packet: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
        a = _jsonl(tmp_path / "a.jsonl", A[:-1])
        b = _jsonl(tmp_path / "b.jsonl", B)
        assert agreement.main([str(a), str(b), "--packet", str(packet)]) == 1
        assert "1 action(s) not labelled, first r1:a8" in capsys.readouterr().out

    def test_a_missing_file_exits_two_without_a_traceback(
            self, tmp_path: Path, packet: Path, capsys: pytest.CaptureFixture[str]) -> None:
        b = _jsonl(tmp_path / "b.jsonl", B)
        code = agreement.main([str(tmp_path / "nope.jsonl"), str(b), "--packet", str(packet)])
        err = capsys.readouterr().err
        assert code == 2
        assert err.startswith("agreement: ") and "Traceback" not in err


def _records() -> list[dict[str, object]]:
    return [json.loads(line) for line in
            (PACKET / "items.jsonl").read_text(encoding="utf-8").splitlines()]


class TestCommittedPacket:
    def test_it_has_45_replaces_or_more_over_4_formats_or_more(self) -> None:
        replaces = [r for r in _records() if r["record"] == "replace"]
        assert len(replaces) >= 45
        assert len({r["format"] for r in replaces}) >= 4
        assert any(r["origin"] == "recorded" for r in replaces)
        assert all(int(str(r["hidden"])) >= 1 for r in replaces)

    def test_every_id_is_unique_and_headed_on_its_page(self) -> None:
        records = _records()
        ids = [r["id"] for r in records if r["record"] in ("item", "action")]
        assert len(ids) == len(set(ids))
        pages = {p.stem: p.read_text(encoding="utf-8") for p in PACKET.glob("*.md")}
        for r in records:
            if r["record"] in ("item", "action"):
                assert f"### `{r['id']}` · " in pages[str(r["replace"])], r["id"]

    def test_the_index_lists_every_page(self) -> None:
        index = (PACKET / "INDEX.md").read_text(encoding="utf-8")
        for page in PACKET.glob("*.md"):
            if page.name != "INDEX.md":
                assert f"]({page.name})" in index

    def test_the_pages_stay_readable_in_one_sitting(self) -> None:
        size = sum(len(p.read_bytes()) for p in PACKET.glob("*.md"))
        assert size < 1_300_000


def test_the_guidelines_examples_are_valid_labels() -> None:
    text = (EVAL / "GUIDELINES.md").read_text(encoding="utf-8")
    lines = [line for block in re.findall(r"```json\n(.*?)```", text, re.DOTALL)
             for line in block.splitlines() if line.startswith("{") and "<" not in line]
    assert len(lines) >= 10
    for line in lines:
        row = json.loads(line)
        check = agreement._check_item if "item" in row else agreement._check_action
        assert check(row) == [], line
