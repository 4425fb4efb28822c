"""Facts at risk (surface_lab.analysis.facts): the kinds, the noise filters, the rules as data, and
precision and recall of the legacy and default rules on the labelled set
tests/data/facts_labels.json (the figures the README quotes)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shared_logs import SHARED, require_shared

from surface_lab import Session
from surface_lab.analysis import facts
from surface_lab.analysis.facts import (
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
    if name.startswith("shared:"):
        require_shared(name[len("shared:"):])
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


def _plain(rules: FactRules) -> FactRules:
    """These rules without their speed-ups: every kind searched in every text."""
    return replace(rules, kinds=tuple(replace(k, within_word=False, needs=())
                                      for k in rules.kinds))


# Text made of what the patterns look at: words, paths, numbers, keywords, quotes, the
# line breaks and blanks str.split and `\s` agree on, and the letters re.IGNORECASE
# matches to ASCII ones without lowering to them.
_PIECES = st.sampled_from([
    "src/app.py", "./a/b", "~/x.toml", "https://x.org/a?b=1", "v1.2.3", "1.2.3-rc.1",
    "handler_12", "fooBar", "FooBar(", "call_0001", "line 12", "exit code 3", "PR #7",
    "error:", "Traceback", "not found", "can't", "must", "don't", "use", "keep it",
    "`ls -la`", '"quoted text"', "'type': 'text'", '"key":', "[trimmed for fixture]",
    "1234", "00081", "a.b.c", "x@y.z", "(", ")", ".", ";", "-", "_", "/", ":", "#",
    " ", "  ", "\n", "\t", "\r\n", "\x0b", "\x1c", "\u00a0", "\u2028", "\u3000",
    "\u0130", "\u0131", "\u017f", "\u212a", "Kelvin \u212aeep", "\u017fhould",
    "caf\u00e9", "\u00df", "\u03a3\u03bf\u03c6\u03af\u03b1",
])
_TEXTS = st.lists(_PIECES, max_size=40).map("".join)
_AUTHORS = st.sampled_from(["user", "assistant", "tool", "context", "summary"])


class TestSpeedUpsChangeNothing:
    """`within_word`, `needs` and the kept text's cheap test only skip work: the same
    mentions, flags, counts and order as searching every text with every pattern."""

    @settings(max_examples=300, deadline=None)
    @given(text=_TEXTS, author=_AUTHORS)
    def test_words_and_needs_give_what_the_patterns_give(self, text: str,
                                                         author: str) -> None:
        for rules in (DEFAULT_RULES, LEGACY_RULES):
            fast = facts._raw_mentions(text, author, rules)
            assert list(fast.items()) == list(
                facts._raw_mentions(text, author, _plain(rules)).items())

    @settings(max_examples=100, deadline=None)
    @given(line=_TEXTS, author=_AUTHORS)
    def test_so_do_they_on_repeated_lines(self, line: str, author: str) -> None:
        text = "\n".join(f"{line} {i}" for i in range(4)) + "\nend " + line
        fast = facts._raw_mentions(text, author, DEFAULT_RULES)
        assert list(fast.items()) == list(
            facts._raw_mentions(text, author, _plain(DEFAULT_RULES)).items())

    @settings(max_examples=300, deadline=None)
    @given(needle=_TEXTS, kept=st.lists(_TEXTS, max_size=4), series=st.booleans())
    def test_the_cheap_test_answers_as_the_regex(self, needle: str, kept: list[str],
                                                 series: bool) -> None:
        needle = needle.strip()
        if not needle:
            return
        mention = facts.Mention(needle, "path", series=series)
        shown = facts.KeptText.of(kept, DEFAULT_RULES)
        assert shown.shows(mention) == (mention.regex.search(shown.text) is not None)

    def test_fold_lowers_to_an_ascii_character_exactly_what_matches_it_ignoring_case(
            self) -> None:
        every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
        for ascii_char in map(chr, range(128)):
            for found in re.finditer(re.escape(ascii_char), every, re.I):
                assert facts.fold(found.group()) == ascii_char.lower(), hex(ord(found.group()))
        for char in every:
            folded = facts.fold(char)
            assert len(folded) >= 1
            if len(folded) == 1 and folded.isascii():
                assert re.fullmatch(re.escape(folded), char, re.I), hex(ord(char))

    def test_word_characters_are_what_backslash_w_matches(self) -> None:
        every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
        assert "".join(re.findall(r"\w", every)) == "".join(filter(facts._is_word, every))

    def test_a_word_memo_past_its_bound_starts_again_and_still_answers(
            self, monkeypatch: pytest.MonkeyPatch) -> None:
        rules = replace(DEFAULT_RULES)  # a fresh copy: its own memo
        text = " ".join(f"src/m{i}.py fn_{i}()" for i in range(300))
        before = facts._raw_mentions(text, "assistant", rules)
        matcher = rules.word_matches(next(k for k in rules.kinds if k.name == "path"))
        assert len(matcher.known) >= 300
        monkeypatch.setattr(facts, "_WORD_MEMO", 100)
        assert facts._raw_mentions(text, "assistant", rules) == before
        assert len(matcher.known) <= 700

    def test_a_mention_with_a_superscript_digit_is_ranked(self) -> None:
        """A digit that is not a decimal one ("²") sorts as text (it once failed int())."""
        assert [m.text for m in find_mentions("see a/1² and a/2", author="assistant")] == [
            "a/1²", "a/2"]
