"""Facts at risk (surface_lab.facts): the kinds, the noise filters, the rules as data, and
precision and recall of the legacy and default rules on the labelled set
tests/data/facts_labels.json (the figures the README quotes)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from surface_lab import Session
from surface_lab.facts import (
    DEFAULT_RULES,
    LEGACY_RULES,
    FactRules,
    MentionKind,
    NoiseFilter,
    facts_at_risk,
    find_mentions,
    score_facts,
)

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SURFACE_LAB_SHARED", ROOT.parent / "shared"))
LABELS = ROOT / "tests" / "data" / "facts_labels.json"


def _user(text: str) -> dict[str, Any]:
    return {"type": "user/message", "seq": 0, "time": 0,
            "data": {"id": "u", "role": "user", "source": {"kind": "user"},
                     "content": [{"type": "text", "text": text}]}}


def _tool(text: str) -> dict[str, Any]:
    return {"type": "tool/result", "seq": 0, "time": 0, "data": {"message": {
        "id": "t", "role": "user", "source": {"kind": "tool", "callId": "call_1"},
        "content": [{"type": "tool-result", "toolCallId": "call_1",
                     "content": [{"type": "text", "text": text}]}]}}}


def _texts(mentions: list[Any]) -> list[str]:
    return [m.text for m in mentions]


class TestMentions:
    def test_paths_urls_symbols_and_named_numbers_are_found(self) -> None:
        found = _texts(find_mentions("see src/app.py and https://x.org/a at line 1234 in "
                                     "handle_request()", author="assistant"))
        assert set(found) == {"src/app.py", "https://x.org/a", "line 1234", "handle_request"}

    def test_counters_hashes_and_call_ids_are_noise(self) -> None:
        text = "[00081] step 81 call_0001 toolu_01AbC9 deadbeef1234 seq 42 4242"
        assert find_mentions(text, author="assistant") == []

    def test_a_repeated_log_line_counts_once_as_its_template(self) -> None:
        log = "".join(f"[{i:05d}] compiled module_{i}.o in {i % 7} ms\n" for i in range(50))
        [mention] = find_mentions(log, author="tool")
        assert (mention.text, mention.series, mention.count) == ("module_#.o", True, 50)

    def test_a_numbered_family_collapses_into_one_series(self) -> None:
        text = " ".join(f"handler_{i}" for i in range(10)) + " parse_args"
        assert _texts(find_mentions(text, author="assistant")) == ["parse_args", "handler_#"]

    def test_decisions_and_errors_are_found_by_author(self) -> None:
        said = "We must keep the JSONL format; deploy on Friday."
        assert _texts(find_mentions(said, author="user")) == ["We must keep the JSONL format"]
        assert find_mentions(said, author="assistant") == []
        failed = "build ok\nerror: cannot find module 'left-pad'\ndone\nmore\nlines\nhere\nx"
        assert "error: cannot find module 'left-pad'" in _texts(
            find_mentions(failed, author="tool"))

    def test_mentions_are_ranked_best_first(self) -> None:
        ranked = find_mentions("parse_args failed: no such file config.toml", author="tool")
        assert [m.kind for m in ranked] == ["output"]
        ranked = find_mentions("\n".join(["see config.toml", "and parse_args", *"abcdef"]),
                               author="tool")
        assert _texts(ranked) == ["config.toml", "parse_args"]


class TestAtRisk:
    def test_what_the_kept_text_still_shows_is_not_at_risk(self) -> None:
        hidden = [_user("see src/app.py and https://x.org/a at line 1234 in handle_request()")]
        kept = [_user("talked about src/app.py")]
        assert _texts(facts_at_risk(hidden, kept)) == ["https://x.org/a", "line 1234",
                                                      "handle_request"]

    def test_a_template_is_kept_when_any_member_is(self) -> None:
        log = "".join(f"[{i:05d}] compiled module_{i}.o\n" for i in range(50))
        assert facts_at_risk([_tool(log)], [_tool("[00049] compiled module_49.o")]) == []
        assert _texts(facts_at_risk([_tool(log)], [_tool("nothing")])) == ["module_#.o"]

    def test_tool_names_are_not_facts(self) -> None:
        session = Session("t", clock=lambda: 0)
        call = {"type": "tool-call", "id": "c1", "name": "read_file", "arguments": "{}"}
        event = session.append("assistant/message", {"message": {
            "id": "a", "role": "assistant", "source": {"kind": "model", "provider": "p",
                                                       "model": "m"},
            "content": [call]}}, surface_op="append", source_event_seqs=[])
        assert facts_at_risk([event], [_user("x")]) == []
        assert _texts(facts_at_risk([event], [_user("x")], rules=LEGACY_RULES)) == [
            "read_file"]


class TestRulesAsData:
    def test_the_default_rules_round_trip_through_json(self, tmp_path: Path) -> None:
        path = tmp_path / "rules.json"
        path.write_text(json.dumps(DEFAULT_RULES.to_dict()))
        assert FactRules.from_json(path) == DEFAULT_RULES

    def test_a_kind_and_a_filter_can_be_added_or_taken_out(self) -> None:
        rules = FactRules.from_dict({**DEFAULT_RULES.to_dict(), "kinds": [
            *DEFAULT_RULES.to_dict()["kinds"],
            {"name": "ticket", "pattern": r"\b[A-Z]+-\d+\b", "weight": 4.0}]})
        assert _texts(find_mentions("fix JIRA-42 now", rules=rules)) == ["JIRA-42"]
        assert find_mentions("fix JIRA-42 now", rules=rules.without("ticket")) == []
        strict = FactRules(kinds=(MentionKind("word", r"\w+"),),
                           noise=(NoiseFilter("short", r"\w{1,3}", "too short"),))
        assert _texts(find_mentions("a bb ccc dddd", rules=strict)) == ["dddd"]


def _log_of(item: dict[str, Any]) -> Any:
    from surface_lab.importers import import_any

    name = item["log"]
    path = SHARED / name[len("shared:"):] if name.startswith("shared:") else ROOT / name
    assert path.exists(), f"missing labelled log {path} (set SURFACE_LAB_SHARED)"
    return list(import_any(path, fmt=item["format"]).events) if "format" in item else path


def label_scores(rules: FactRules) -> dict[str, float]:
    """Precision and recall of the audit's facts_at_risk over the labelled set."""
    from surface_lab.notebook import compaction_audit

    items = json.loads(LABELS.read_text())["items"]
    tp = fp = fn = 0
    audits: dict[str, Any] = {}
    for item in items:
        key = item["log"]
        if key not in audits:
            audits[key] = compaction_audit(_log_of(item), rules=rules, progress=False)
        audit = audits[key]
        [facts] = audit.loc[audit["seq"] == item["replace_seq"], "facts_at_risk"]
        t, f, n = score_facts(facts, [m["mention"] for m in item["matters"]])
        tp, fp, fn = tp + t, fp + f, fn + n
    return {"replaces": len(items), "reported": tp + fp, "precision": round(tp / (tp + fp), 3),
            "recall": round(tp / (tp + fn), 3)}


class TestLabelledSet:
    def test_every_label_names_a_replace_and_gives_reasons(self) -> None:
        items = json.loads(LABELS.read_text())["items"]
        assert len(items) >= 15
        assert all(m["reason"] for item in items for m in item["matters"] + item["noise"])

    @pytest.mark.parametrize(("rules", "expected"), [
        (LEGACY_RULES, {"replaces": 16, "reported": 1905, "precision": 0.003,
                        "recall": 0.273}),
        (DEFAULT_RULES, {"replaces": 16, "reported": 21, "precision": 0.857,
                         "recall": 0.818}),
    ], ids=["legacy", "default"])
    def test_precision_and_recall_as_the_readme_reports(self, rules: FactRules,
                                                        expected: dict[str, float]) -> None:
        assert label_scores(rules) == expected
