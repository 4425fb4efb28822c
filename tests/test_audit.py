"""The compaction audit at scale: what it reads, its progress, the report, the command over
many sources, literal text in figures and figures that save whole."""

from __future__ import annotations

import math
import re
import shutil
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib
import pytest
from builders import user_msg
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from shared_logs import SHARED

from surface_lab import Session, read_log
from surface_lab.agent.samples import generate_large
from surface_lab.analysis.audit import facts_at_risk_by_replace
from surface_lab.analysis.brackets import brackets
from surface_lab.analysis.facts import DEFAULT_RULES, Mention, _natural, author_of, tool_names
from surface_lab.analysis.source import LogData, _NoBar
from surface_lab.cli import expand_audit_paths, main
from surface_lab.errors import StorageError
from surface_lab.events import freeze_event, mapping_at, message_of
from surface_lab.importers import import_any
from surface_lab.jsonvalue import dumps
from surface_lab.messages import message_text
from surface_lab.notebook import (
    compaction_audit,
    load_source,
    plot_shadowing,
    plot_surface_size,
    plot_visibility,
    replacements_df,
)
from surface_lab.notebook.audit import (
    NO_REPLACES,
    audit_report,
    replacement_preview,
    replay_differences,
)
from surface_lab.notebook.frames import nodes_at
from surface_lab.notebook.plots import RESTORED_COLOR
from surface_lab.reading.sequences import LogEvents
from surface_lab.surface import APPEND, REPLACE, Plan

matplotlib.use("Agg")
ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_logs"
OTHER = SHARED / "real_logs" / "other"
DSH = sorted((SHARED / "real_logs" / "dsh").glob("*.jsonl"))
COMPACTION_LOG = SHARED / "real_logs" / "dsh" / (
    "deepseek-ai__deepseek-harness__examples_headless-agent_tests_snapshots_"
    "compaction-recovery_session.jsonl")
PI = OTHER / "jazzyalex__agent-sessions__Resources_Fixtures_stage0_agents_pi_small.jsonl"


def _definition_raw_mentions(text: str, author: str) -> list[tuple[str, str, bool]]:
    """`facts._raw_mentions` the straightforward way: every line templated on its own,
    every match's line sliced and templated again."""
    rules = DEFAULT_RULES
    text = re.sub("|".join(f"(?:{p})" for p in rules.strip), " ", text)
    counts = Counter(re.sub(r"\d+", "#", line.strip()) for line in text.splitlines())
    repeated = {t for t, n in counts.items() if n >= rules.repeated_line_min and t}
    out: list[tuple[str, str, bool]] = []
    for kind in rules.kinds:
        if kind.authors and author not in kind.authors:
            continue
        found: list[tuple[int, int]] = []
        for match in re.finditer(kind.pattern, text, re.I if kind.ignore_case else 0):
            groups = match.groupdict()
            value = next((v for v in groups.values() if v), None) if groups else None
            mention = (value or match.group(0)).strip()
            if not mention:
                continue
            start = text.rfind("\n", 0, match.start()) + 1
            end = text.find("\n", match.end())
            line = text[start : end if end >= 0 else len(text)].strip()
            out.append((mention, kind.name, re.sub(r"\d+", "#", line) in repeated))
            found.append(match.span())
        if kind.consume and found:
            pieces, at = [], 0
            for a, b in found:
                pieces += [text[at:a], " " * (b - a)]
                at = b
            text = "".join([*pieces, text[at:]])
    return out


def _definition_facts(hidden: list[Any], kept: list[Any]) -> list[str]:
    """`facts_at_risk` by its definition: every hidden event matched anew, each match
    counted one at a time."""
    rules = DEFAULT_RULES
    raw = [m for e in hidden for m in _definition_raw_mentions(message_text(e), author_of(e))]
    counts: Counter[tuple[str, str, bool]] = Counter()
    for mention, kind, from_repeated in raw:
        series = from_repeated and bool(re.search(r"\d", mention))
        counts[(re.sub(r"\d+", "#", mention) if series else mention, kind, series)] += 1
    families: dict[tuple[str, str], list[tuple[str, str, bool]]] = {}
    for key in counts:
        if not key[2] and re.search(r"\d", key[0]):
            families.setdefault((re.sub(r"\d+", "#", key[0]), key[1]), []).append(key)
    for (template, kind), members in families.items():
        if len(members) >= rules.series_min:
            counts[(template, kind, True)] += sum(counts.pop(m) for m in members)
    ignore = tool_names([*hidden, *kept])
    weights = {k.name: k.weight for k in rules.kinds}
    mentions = []
    for (text, kind, series), n in counts.items():
        if text in ignore or any(f.regex.fullmatch(text) for f in rules.noise
                                 if not f.kinds or kind in f.kinds):
            continue
        score = weights[kind] * 0.5 if series else weights[kind] + 0.25 * math.log(n)
        mentions.append(Mention(text, kind, n, round(score, 3), series))
    mentions.sort(key=lambda m: (-m.score, _natural(m.text)))
    kept_text = "\n".join(re.sub("|".join(f"(?:{p})" for p in rules.strip), " ",
                                  message_text(e)) for e in kept)
    at_risk = [m.text for m in mentions if m.regex.search(kept_text) is None]
    return at_risk[: rules.max_mentions]


def _reference_facts_at_risk(log: LogData) -> dict[int, list[str]]:
    """The definition, the slow way: the surface refolded from every plan at each
    replace, every hidden text matched anew."""
    traces = brackets(log)
    out = {}
    for plan in log.replaces:
        at = next((b.end for b in traces if b.start < plan.seq < b.end), plan.seq)
        nodes = nodes_at(log, min(at, len(log.events) - 1))
        out[plan.seq] = _definition_facts([log.events[s] for s in plan.shadowed],
                                          [log.events[s] for s in nodes])
    return out


class TestCostFollowsTheReplaces:
    def test_the_audit_pauses_the_collector_and_leaves_it_as_it_was(self) -> None:
        """No collection walks the audit's many acyclic objects while it runs (they are
        freed by reference counts before it is back: at most the one collection just
        after, of what survives); a log given in keeps no decoded assistant lines."""
        import gc

        log = load_source(SAMPLES / "long-compaction.jsonl", progress=False)
        seen: list[bool] = []
        calls = gc.callbacks
        calls.append(lambda phase, info: seen.append(phase == "start"))
        try:
            assert gc.isenabled()
            compaction_audit(log, progress=False)
            assert gc.isenabled() and sum(seen) <= 1
            gc.disable()
            compaction_audit(log, progress=False)
            assert not gc.isenabled()  # off stays off
        finally:
            gc.enable()
            calls.pop()
        assert "message_lines" not in log.cache

    def test_the_audit_parses_only_replaces_what_they_hid_traces_and_the_surface(
            self, monkeypatch: pytest.MonkeyPatch) -> None:
        parsed: list[int] = []
        texts: list[int] = []
        parse, message_texts = LogEvents.parse_record, LogEvents.message_texts

        def spy_parse(self: LogEvents, record: int) -> Any:
            parsed.append(self.first_seqs[record])
            return parse(self, record)

        def spy_texts(self: LogEvents, seqs: Any) -> list[str]:
            seqs = list(seqs)
            texts.extend(seqs)
            return message_texts(self, seqs)

        log = load_source(read_log(SAMPLES / "long-compaction.jsonl"))
        assert isinstance(log.events, LogEvents)
        monkeypatch.setattr(LogEvents, "parse_record", spy_parse)
        monkeypatch.setattr(LogEvents, "message_texts", spy_texts)
        replacements_df(log)
        replaces = {p.seq for p in log.replaces}
        traces = set(log.seqs_of_type("compaction/start", "compaction/summary",
                                      "compaction/end", "compaction/prune"))
        assert set(parsed) <= replaces | traces  # whole events: replaces and traces only
        assert set(texts) <= replaces | {s for p in log.replaces for s in p.shadowed}
        found = brackets(log)
        parsed.clear()
        facts_at_risk_by_replace(log, DEFAULT_RULES, traces=found, bar=_NoBar())
        assert set(parsed) <= set(log.entries)  # the facts: surface entries only
        assert len(set(parsed)) < len(log.events) / 10

    @pytest.mark.parametrize("source", [
        SAMPLES / "long-compaction.jsonl", SAMPLES / "pruned-tool-results.jsonl",
        *DSH, *(p for p in sorted(OTHER.glob("*.json*")) if "compact" in p.name
                or "summarization" in p.name or "pi_small" in p.name)],
        ids=lambda p: p.name[-60:])
    def test_facts_at_risk_equal_the_definition(self, source: Path) -> None:
        """The memoised audit (each distinct text matched once, lines templated once)
        reports exactly the facts of the definition, on the samples and real logs."""
        log = load_source(source if source.parent == SAMPLES or source in DSH
                          else list(import_any(source).events), progress=False)
        audit = compaction_audit(log, progress=False, rules=DEFAULT_RULES)
        expected = _reference_facts_at_risk(log)
        assert {int(s): list(f) for s, f in zip(audit["seq"], audit["facts_at_risk"],
                                                strict=True)} == expected

    def test_facts_at_risk_equal_the_definition_on_a_generated_log(
            self, tmp_path: Path) -> None:
        """A generated log's replaces hide repeated log lines, series and the same texts
        again: what the memo and the once-templated lines must get right."""
        path, _ = generate_large(tmp_path / "g.jsonl", 20000)
        log = load_source(path, progress=False)
        audit = compaction_audit(log, progress=False, rules=DEFAULT_RULES)
        expected = _reference_facts_at_risk(log)
        assert sum(map(len, expected.values())) > 20
        assert {int(s): list(f) for s, f in zip(audit["seq"], audit["facts_at_risk"],
                                                strict=True)} == expected

    def test_a_fast_read_log_and_its_events_in_memory_audit_the_same(self) -> None:
        fast = compaction_audit(SAMPLES / "long-compaction.jsonl", progress=False)
        events = [dict(e) for e in read_log(SAMPLES / "long-compaction.jsonl").events]
        slow = compaction_audit(events, progress=False)
        assert fast.drop(columns="shadowed_type_counts").to_json() == \
            slow.drop(columns="shadowed_type_counts").to_json()

    def test_message_texts_equal_message_text_of_the_parsed_event(self) -> None:
        log = read_log(SAMPLES / "long-compaction.jsonl")
        assert isinstance(log.events, LogEvents)
        seqs = list(range(len(log.events)))
        assert log.events.message_texts(seqs) == [
            (message_text(e), mapping_at(message_of(e), "source") or None)
            for e in log.events]


class TestProgress:
    def test_every_step_shows_one_bar_and_progress_false_silences_all(
            self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
            capfd: pytest.CaptureFixture[str]) -> None:
        from surface_lab.analysis import source

        monkeypatch.setattr(source, "PROGRESS_MIN_BYTES", 0)
        monkeypatch.setattr(source, "PROGRESS_DELAY", 0)
        monkeypatch.setenv(source.PROGRESS_ENV, "1")  # stderr is no terminal here
        audit_report(SAMPLES / "long-compaction.jsonl", tmp_path / "a")
        err = capfd.readouterr().err
        for step in ("reading long-compaction.jsonl", "facts at risk", "figures and page"):
            assert step in err
        audit_report(SAMPLES / "long-compaction.jsonl", tmp_path / "b", progress=False)
        assert capfd.readouterr().err == ""

    def test_a_quick_step_shows_no_bar(self, tmp_path: Path,
                                       capfd: pytest.CaptureFixture[str]) -> None:
        compaction_audit(SAMPLES / "pruned-tool-results.jsonl")
        assert capfd.readouterr().err == ""


def _mismatched_events(path: Path = COMPACTION_LOG) -> list[dict[str, Any]]:
    """The log's events with its first compaction recording seq 3 as all it shadowed."""
    events = [dict(e) for e in read_log(path).events]
    summary = next(i for i, e in enumerate(events) if e["type"] == "compaction/summary")
    events[summary] = {**events[summary], "data": {**events[summary]["data"],
                                                    "shadowedSeqs": [3]}}
    return events


class TestReport:
    def test_tables_are_html_sortable_and_self_contained(self, tmp_path: Path) -> None:
        html = audit_report(SAMPLES / "long-compaction.jsonl", tmp_path,
                            progress=False)["html"].read_text()
        assert html.count('<table class="sl-sortable">') == 1
        assert "<th>tokens before</th>" in html and '<a href="#seq-250">250</a>' in html
        assert 'id="seq-250"' in html
        for external in ("http://", "https://", "<link", "src=\"/", "<pre>seq"):
            assert external not in html.replace("data:image/png;base64,", "")

    def test_whole_texts_are_reachable_collapsed(self, tmp_path: Path) -> None:
        session = Session("long", clock=lambda: 0)
        long_text = "start " + "word " * 2000 + "THE-VERY-END"
        session.append("user/message", user_msg("a", long_text), surface_op="append")
        session.append("user/message", user_msg("s", "summary " * 400 + "SUMMARY-END"),
                       surface_op={"op": "replace", "start": 0, "end": 0},
                       source_event_seqs=[0])
        html = audit_report(session, tmp_path, progress=False)["html"].read_text()
        assert "THE-VERY-END" in html and "SUMMARY-END" in html
        assert "more characters" not in html
        hidden_card = html.index("THE-VERY-END")
        assert html.rfind("<details>", 0, hidden_card) > html.rfind("</details>", 0,
                                                                    hidden_card)

    def test_the_prune_preview_keeps_its_marker(self, tmp_path: Path) -> None:
        log = load_source(SAMPLES / "pruned-tool-results.jsonl")
        [seq] = [p.seq for p in log.replaces]
        text = message_text(log.events[seq])
        preview = replacement_preview(text)
        assert "characters pruned from the middle" in preview and len(preview) < 240
        html = audit_report(log, tmp_path, progress=False)["html"].read_text()
        assert preview.replace("<", "&lt;").replace(">", "&gt;") in html

    def test_a_failed_replay_shows_recorded_and_computed_side_by_side(
            self, tmp_path: Path) -> None:
        events = _mismatched_events()
        log = load_source(events)
        audit = compaction_audit(log, progress=False)
        [diff] = replay_differences(log, audit)
        assert diff["recorded"] == [3] and diff["computed"] == list(audit["shadowed_seqs"][0])
        assert diff["only_recorded"] == [3] and 3 not in diff["computed"]
        html = audit_report(log, tmp_path, progress=False)["html"].read_text()
        assert "recorded seqs</th><th>computed seqs (the fold)</th>" in html
        assert "1 recorded decision that do not replay" in html

    def test_restored_copies_count_apart_from_removed(self, tmp_path: Path) -> None:
        result = import_any(PI)
        log = load_source(list(result.events))
        frame = replacements_df(log)
        first = frame.iloc[0]
        assert list(first["restored_seqs"]) == list(first["shadowed_seqs"])
        assert list(first["removed_seqs"]) == []
        # tokens after: the replacement and the copies the bracket appended after it
        [bracket] = [b for b in brackets(log) if b.start < first["seq"] < b.end]
        after = [s for s in log.entries if first["seq"] <= s < bracket.end]
        assert len(after) == 1 + len(first["restored_seqs"])
        assert first["tokens_after"] == sum(
            4 + -(-len(message_text(log.events[s])) // 4) for s in after)
        ax = plot_shadowing(log, ax=Figure().add_subplot())
        restored = [c for c in ax.collections if isinstance(c, LineCollection)
                    and matplotlib.colors.to_hex(c.get_colors()[0]) == RESTORED_COLOR.lower()]
        assert len(restored[0].get_segments()) == 2
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "restored: copied back (2)" in labels and "removed entries (1)" in labels
        html = audit_report(log, tmp_path, progress=False, notes=result.notes)["html"]
        text = html.read_text()
        assert "(1 removed, 2 restored)" in text and "restored-by-copy" in text

    def test_lanes_of_an_imported_log_name_the_source_ids(self) -> None:
        log = load_source(list(import_any(PI).events))
        ax = plot_shadowing(log, ax=Figure().add_subplot())
        ids = [str(b.compaction_id) for b in brackets(log)]
        labels = [t.get_text() for t in ax.get_yticklabels()]
        assert all(any(i in label for label in labels) for i in ids) and ids

    def test_a_replace_that_hides_nothing_keeps_its_row(self, tmp_path: Path) -> None:
        events = [freeze_event(e) for e in (
            {"seq": 0, "time": 0, "type": "user/message", "data": user_msg("a", "hi"),
             "surfaceOp": "append"},
            {"seq": 1, "time": 0, "type": "user/message", "data": user_msg("s", "sum"),
             "surfaceOp": {"op": "replace", "start": 0, "end": 0}})]
        log = LogData("empty-replace", events, [Plan(0, APPEND), Plan(1, REPLACE, 0, 0, ())])
        [row] = compaction_audit(log, progress=False).to_dict("records")
        assert row["n_shadowed"] == 0 and row["start"] == 0 and row["facts_at_risk"] == []
        html = audit_report(log, tmp_path, progress=False)["html"].read_text()
        assert "It hid nothing." in html

    def test_a_log_without_replaces_says_so_in_one_line(self, tmp_path: Path) -> None:
        result = audit_report(SAMPLES / "chat.jsonl", tmp_path, progress=False)
        assert result["summary"] == NO_REPLACES
        html = result["html"].read_text()
        assert html.count(NO_REPLACES) == 1 and "<h2>Replaces</h2>" not in html

    def test_extra_columns_of_the_audit_frame_are_shown(
            self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        from surface_lab.notebook import audit as audit_module

        original = audit_module.compaction_audit

        def with_signal(source: Any, **kwargs: Any) -> Any:
            frame = original(source, **kwargs)
            frame["evidence_of_loss"] = [f"<b>lost {s}</b>" for s in frame["seq"]]
            return frame

        monkeypatch.setattr(audit_module, "compaction_audit", with_signal)
        html = audit_report(SAMPLES / "long-compaction.jsonl", tmp_path,
                            progress=False)["html"].read_text()
        assert "<th>evidence_of_loss</th>" in html and "&lt;b&gt;lost 250&lt;/b&gt;" in html


class TestFigures:
    def test_failed_compactions_are_on_both_figures(self) -> None:
        log = load_source(SAMPLES / "long-compaction.jsonl")
        for plot in (plot_shadowing, plot_surface_size):
            ax = plot(log, ax=Figure().add_subplot())
            labels = [t.get_text() for t in ax.get_legend().get_texts()]
            assert "failed compaction (1)" in labels

    def test_mathtext_characters_are_shown_literally(self, tmp_path: Path) -> None:
        session = Session("a $\\undefined$", clock=lambda: 0)
        session.append("user/message", user_msg("a", "costs $5 and $6"), surface_op="append")
        session.append("compaction/start", {"compactionId": "$5 and $6_x^2", "turn": 1})
        session.append("user/message", {**user_msg("s", "sum $5"), "source": {
            "kind": "plugin", "plugin": "compact", "compactionId": "$5 and $6_x^2"}},
            surface_op={"op": "replace", "start": 0, "end": 0}, source_event_seqs=[0])
        session.append("compaction/end", {"compactionId": "$5 and $6_x^2", "turn": 1})
        result = audit_report(session, tmp_path, progress=False)  # draws without failing
        assert result["png"].read_bytes().startswith(b"\x89PNG")
        for plot in (plot_shadowing, plot_surface_size, plot_visibility):
            figure = Figure()
            ax = plot(session, ax=figure.add_subplot())
            figure.savefig(tmp_path / "x.png")
            assert ax.title.get_text().startswith("a $\\undefined$")
            assert not ax.title.get_parse_math()
        ax = plot_shadowing(session, ax=Figure().add_subplot())
        [lane] = [t for t in ax.get_yticklabels() if "$5 and $6_x^2" in t.get_text()]
        assert not lane.get_parse_math()

    @pytest.mark.parametrize("plot", [plot_shadowing, plot_visibility, plot_surface_size])
    def test_a_saved_figure_keeps_its_legend_and_labels(self, plot: Any,
                                                        tmp_path: Path) -> None:
        import matplotlib.pyplot as plt

        ax = plot(SAMPLES / "long-compaction.jsonl")
        figure = ax.figure
        figure.savefig(tmp_path / "f.png")
        inside = figure.bbox
        parts = [ax.get_legend(), *(t for t in (ax.xaxis.label, ax.yaxis.label, ax.title)
                                    if t.get_text())]
        for part in parts:
            box = part.get_window_extent()
            assert inside.x0 - 1 <= box.x0 and box.x1 <= inside.x1 + 1, part
            assert inside.y0 - 1 <= box.y0 and box.y1 <= inside.y1 + 1, part
        plt.close(figure)


def _write_log(events: list[dict[str, Any]], header: dict[str, Any], path: Path) -> Path:
    lines = [dumps({"type": "session", **header})] + [dumps(e) for e in events]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


class TestAuditCommand:
    def test_two_sessions_with_one_name_never_overwrite_each_other(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        for folder in ("a", "b"):
            (tmp_path / folder).mkdir()
            shutil.copy(SAMPLES / "long-compaction.jsonl", tmp_path / folder / "x.jsonl")
        out = tmp_path / "out"
        assert main(["audit", str(tmp_path / "a" / "x.jsonl"), str(tmp_path / "b" / "x.jsonl"),
                     "--out", str(out), "--no-progress"]) == 0
        written = sorted(p.name for p in out.iterdir())
        assert written == ["index.csv", "index.html", "x-2-audit.csv", "x-2-audit.html",
                           "x-2-audit.parquet", "x-2-swimlane.png", "x-audit.csv",
                           "x-audit.html", "x-audit.parquet", "x-swimlane.png"]
        index = (out / "index.html").read_text()
        assert 'href="x-audit.html"' in index and 'href="x-2-audit.html"' in index

    def test_csv_cells_from_a_hostile_log_are_never_formulas(self, tmp_path: Path) -> None:
        """Text from the log that starts like a spreadsheet formula gets a leading `'`
        (OWASP) in the per-log CSV and in index.csv; numbers stay numbers."""
        import csv

        text = (SAMPLES / "long-compaction.jsonl").read_text()
        hostile = {'"cmp-1"': '"=HYPERLINK(\\"http://evil\\",\\"x\\")"',
                   '"plugin":"compact"': '"plugin":"@SUM(1+1)"',
                   '"model":"script-1"': '"model":"+cmd|\' /C calc\'!A0"',
                   '"cmp-2"': '"-2+3"'}
        for old, new in hostile.items():
            assert old in text
            text = text.replace(old, new)
        source = tmp_path / "=evil.jsonl"
        source.write_text(text)
        out = tmp_path / "out"
        assert main(["audit", str(source), "--out", str(out), "--no-progress"]) == 0
        [table] = out.glob("*-audit.csv")
        rows = list(csv.DictReader(table.open(encoding="utf-8", newline="")))
        assert [r["compaction_id"] for r in rows][:3] == [
            "'=HYPERLINK(\"http://evil\",\"x\")", "'-2+3", "cmp-4"]
        assert {r["plugin"] for r in rows} == {"'@SUM(1+1)"}
        assert [r["saved_tokens"] for r in rows][:3] == ["-20", "-20", "-20"]  # numbers
        [index] = csv.DictReader((out / "index.csv").open(encoding="utf-8", newline=""))
        assert index["input"].startswith("'") and "=evil" in index["input"]
        assert index["model"] == "'+cmd|' /C calc'!A0"
        for row in [*rows, index]:
            for cell in row.values():
                assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell

    def test_formula_safe_prefixes_text_only(self) -> None:
        from surface_lab.notebook.render import formula_safe

        for text in ("=1+1", "+1", "-1", "@A1", "\tx", "\rx"):
            assert formula_safe(text) == "'" + text
        for value in (-1, -2.5, None, "plain", "", "a=b", ["=x"]):
            assert formula_safe(value) == value

    def test_folders_globs_stores_and_other_agents_logs(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        logs.mkdir()
        for name in ("chat.jsonl", "long-compaction.jsonl"):
            shutil.copy(SAMPLES / name, logs / name)
        (logs / "notes.txt").write_text("not a log")
        stems = [i.stem for i in expand_audit_paths([str(logs)])]
        assert stems == ["chat", "long-compaction"]
        assert [i.stem for i in expand_audit_paths([str(logs / "*.jsonl")])] == stems
        db = expand_audit_paths([str(SAMPLES / "sessions.db")])
        assert len(db) > 1 and all(i.session_id and i.stem == f"sessions-{i.session_id}"
                                   for i in db)
        [pi] = expand_audit_paths([str(PI)])
        assert pi.session_id is None
        with pytest.raises(StorageError, match="matches no log"):
            expand_audit_paths([str(tmp_path / "missing-*.jsonl")])
        with pytest.raises(StorageError, match="no such file"):
            expand_audit_paths([str(tmp_path / "missing.jsonl")])

    def test_an_imported_log_is_audited_with_the_importers_notes(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["audit", str(PI), "--out", str(tmp_path), "--no-progress"]) == 0
        captured = capsys.readouterr()
        assert "restored-by-copy" in captured.err and "2 restored" in captured.out
        html = next(tmp_path.glob("*pi_small-audit.html")).read_text()
        assert "Import notes" in html and "restored-by-copy" in html

    def test_exit_1_when_a_recorded_decision_does_not_replay(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        sample = SAMPLES / "long-compaction.jsonl"
        bad = _write_log(_mismatched_events(sample), dict(read_log(sample).header),
                         tmp_path / "bad.jsonl")
        assert main(["audit", str(bad), str(SAMPLES / "chat.jsonl"), "--out",
                     str(tmp_path / "out"), "--no-progress"]) == 1
        out = capsys.readouterr().out
        assert "recorded-mismatch: recorded [3]" in out and "do NOT replay" in out
        assert (tmp_path / "out" / "chat-audit.html").exists()  # the others still audited

    def test_a_bad_input_is_one_line_and_the_rest_is_audited(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["audit", str(SAMPLES / "invalid-surface.jsonl"), str(SAMPLES / "chat.jsonl"),
                     "--out", str(tmp_path), "--no-progress"]) == 1
        err = capsys.readouterr().err  # an error: on stderr, not in the results
        assert sum("replace-sources-incomplete" in line for line in err.splitlines()) == 1
        assert (tmp_path / "chat-audit.html").exists()

    def test_a_session_id_with_mathtext_does_not_fail_the_audit(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        reading = read_log(SAMPLES / "long-compaction.jsonl")
        header = {**dict(reading.header), "id": "a $\\undefined$"}
        path = _write_log([dict(e) for e in reading.events], header, tmp_path / "m.jsonl")
        assert main(["audit", str(path), "--out", str(tmp_path / "out"),
                     "--no-progress"]) == 0
        assert (tmp_path / "out" / "m-audit.html").exists()

    def test_a_compaction_id_with_a_line_break_stays_on_its_row(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        def renamed(value: Any) -> Any:
            if isinstance(value, Mapping):
                return {k: "two\nlines" if k == "compactionId" else renamed(v)
                        for k, v in value.items()}
            return [renamed(v) for v in value] if isinstance(value, list) else value

        reading = read_log(SAMPLES / "long-compaction.jsonl")
        path = _write_log([renamed(dict(e)) for e in reading.events], dict(reading.header),
                          tmp_path / "n.jsonl")
        assert main(["audit", str(path), "--out", str(tmp_path / "out"),
                     "--no-progress"]) == 0
        lines = capsys.readouterr().out.splitlines()
        rows = [line for line in lines if "two" in line]
        assert rows and all("two\\nlines" in line for line in rows)
        assert not any(line.startswith("lines") for line in lines)

    def test_a_folder_without_logs_is_one_line_and_exit_1(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        (tmp_path / "empty").mkdir()
        assert main(["audit", str(tmp_path / "empty"), "--out", str(tmp_path / "out")]) == 1
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err.count("\n") == 1 and "no log to audit" in captured.err
