"""The notebook layer: frames, replay, widget, plots, audit and the audit command."""

from __future__ import annotations

import io
from pathlib import Path

import ipywidgets as widgets
import matplotlib
import numpy as np
import pandas as pd
import pytest
from builders import ev, user, user_msg
from matplotlib.collections import LineCollection, PathCollection, PolyCollection, QuadMesh
from matplotlib.figure import Figure
from PIL import Image
from shared_logs import SHARED

from surface_lab import Session, fold_surface, read_log
from surface_lab.analysis.facts import DEFAULT_RULES
from surface_lab.cli import main
from surface_lab.notebook import (
    SCHEMAS,
    Replay,
    ReplayWidget,
    compaction_audit,
    events_df,
    extract_facts,
    failed_compactions,
    load_source,
    messages_df,
    plot_shadowing,
    plot_surface_size,
    plot_visibility,
    replacements_df,
    schema_table,
    surface_df,
    visibility_df,
)
from surface_lab.notebook.audit import SORT_SCRIPT, audit_report
from surface_lab.notebook.render import step_html
from surface_lab.notebook.widgets import SurfaceSizeFigure

matplotlib.use("Agg")
ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_logs"
VALID = sorted(p for p in SAMPLES.glob("*.jsonl") if "invalid" not in p.name)
DSH = sorted((SHARED / "real_logs" / "dsh").glob("*.jsonl"))
COMPACTION_LOG = SHARED / "real_logs" / "dsh" / (
    "deepseek-ai__deepseek-harness__examples_headless-agent_tests_snapshots_"
    "compaction-recovery_session.jsonl")
FRAMES = {"events": events_df, "surface": surface_df, "replacements": replacements_df,
          "messages": messages_df, "visibility": visibility_df}
HOSTILE = "<script>alert('x')</script><img src=x onerror=alert(1)>"


def _expected_dtypes(name: str, frame: pd.DataFrame) -> None:
    assert list(frame.columns) == [c.name for c in SCHEMAS[name]]
    for column in SCHEMAS[name]:
        got = frame[column.name].dtype
        if isinstance(column.dtype, pd.CategoricalDtype):
            assert isinstance(got, pd.CategoricalDtype), column.name
            assert set(column.dtype.categories) <= set(got.categories)
        else:
            assert str(got) == str(column.dtype), (column.name, got)


class TestFrames:
    @pytest.mark.parametrize("path", [*VALID, *DSH], ids=lambda p: p.name[-40:])
    def test_every_frame_on_every_log(self, path: Path) -> None:
        log = read_log(path)
        data = load_source(log)
        for name, function in FRAMES.items():
            frame = function(log)
            _expected_dtypes(name, frame)
            assert isinstance(frame.index, pd.RangeIndex)
        events = events_df(log)
        assert len(events) == len(log.events)
        assert list(events["seq"]) == list(range(len(log.events)))
        assert events["on_surface"].sum() == len(data.fold.nodes)
        assert len(surface_df(log)) == len(data.fold.nodes)
        assert len(replacements_df(log)) == len(data.fold.replacements)
        entries = sum(1 for p in data.plans if p.kind)
        assert len(visibility_df(log)) == entries * len(log.events)

    def test_exact_values_on_the_pruned_sample(self) -> None:
        log = read_log(SAMPLES / "pruned-tool-results.jsonl")
        events = events_df(log)
        row = events.set_index("seq").loc[14]
        assert (row["type"], row["surface_op"], row["on_surface"], row["shadowed_by"]) == (
            "tool/result", "append", False, 18)
        assert events["ts"].iloc[0] == pd.Timestamp("2026-01-01T00:00:00Z")
        [rep] = replacements_df(log).to_dict("records")
        assert (rep["seq"], rep["kind"], rep["shadowed_seqs"], rep["recorded_matches"]) == (
            18, "prune", [14], True)
        assert rep["chars_before"] > rep["chars_after"]
        assert list(surface_df(log, at=14)["seq"]) == [1, 12, 14]
        assert list(surface_df(log)["seq"]) == log.fold.nodes
        messages = messages_df(log, at=18)
        assert list(messages["seq"]) == [1, 12, 18]
        assert list(messages["role"]) == ["user", "assistant", "user"]

    def test_a_resumed_session_has_one_more_row_its_end_seed_marker(self) -> None:
        log = read_log(SAMPLES / "long-compaction.jsonl")
        from_file, from_session = events_df(log), events_df(log.session())
        assert len(from_file) == len(log.events) == 888
        assert len(from_session) == 889
        marker = from_session.iloc[-1]
        assert (marker["seq"], marker["type"], marker["on_surface"]) == (
            888, "session/end-seed", False)
        assert pd.isna(marker["surface_op"]) and pd.isna(marker["shadowed_by"])
        kept = from_session[from_session["type"] != "session/end-seed"]
        same = [c for c in from_file.columns if c != "line"]  # a Session has no lines
        pd.testing.assert_frame_equal(kept[same], from_file[same])
        assert surface_df(log.session()).equals(surface_df(log))

    def test_the_real_compaction_log(self) -> None:
        rep = replacements_df(COMPACTION_LOG).iloc[0]
        assert (rep["seq"], rep["kind"], rep["compaction_id"], rep["recorded_matches"]) == (
            21, "compaction", rep["compaction_id"], True)
        assert rep["shadowed_seqs"] == [4]

    @pytest.mark.parametrize("name", sorted(FRAMES))
    def test_empty_input_keeps_columns_and_dtypes(self, name: str) -> None:
        frame = FRAMES[name]([])
        assert frame.empty
        _expected_dtypes(name, frame)

    def test_a_session_a_store_and_events_are_sources(self, tmp_path: Path) -> None:
        from surface_lab.storage import SqliteStore

        session = Session("s")
        session.append("user/message", user_msg(), surface_op="append")
        assert list(events_df(session)["type"]) == ["user/message"]
        assert list(events_df(list(session.events))["seq"]) == [0]
        with SqliteStore(tmp_path / "s.db") as store:
            store.create(session.header)
            store.append("s", session.events)
            assert len(events_df((store, "s"))) == 1

    def test_strict_raises_and_lenient_returns_problems(self) -> None:
        path = SAMPLES / "invalid-surface.jsonl"
        with pytest.raises(Exception, match=r"replace-sources-incomplete|sourceEventSeqs"):
            events_df(path)
        frame, problems = events_df(path, strict=False)
        [problem] = problems
        assert problem.code == "replace-sources-incomplete"
        assert len(frame) == problem.seq  # the prefix that folds
        frame, problems = replacements_df(path, strict=False)
        assert len(problems) == 1 and len(frame) == 0

    def test_lenient_frames_of_a_damaged_event_list(self) -> None:
        events = [user(0), ev(1, "user/message", user_msg(), op=(9, 9), sources=[9])]
        frame, problems = surface_df(events, strict=False)
        assert list(frame["seq"]) == [0]
        assert problems[0].code == "replace-start-missing"

    def test_unknown_types_become_categories(self) -> None:
        frame = events_df([ev(0, "my/plugin", {})])
        assert frame["type"].iloc[0] == "my/plugin"

    def test_the_schema_is_documented(self) -> None:
        table = schema_table()
        assert set(table["frame"]) == set(SCHEMAS)
        assert table["meaning"].str.len().min() > 5
        shown = table[table["frame"] == "replacements"].set_index("column")["shown as"]
        assert shown["n_shadowed"] == "hid" and shown["removed_seqs"] == "removed"
        assert shown["recorded_matches"] == "replays"


class TestReplay:
    def test_a_linear_log_replays_every_message(self) -> None:
        log = read_log(SAMPLES / "legacy-linear.jsonl")
        replay = Replay(log).seek(len(log.events) - 1)
        assert list(replay.nodes) == log.fold.nodes

    @pytest.mark.parametrize("path", [p for p in [*VALID, COMPACTION_LOG]
                                      if "legacy" not in p.name], ids=lambda p: p.name[-40:])
    def test_replay_agrees_with_the_fold_at_every_step(self, path: Path) -> None:
        log = read_log(path)
        replay = Replay(log)
        for seq in range(len(log.events)):
            replay.seek(seq)
            assert list(replay.nodes) == fold_surface(log.events[: seq + 1]).nodes
        for seq in reversed(range(-1, len(log.events) - 1)):
            replay.back()
            assert replay.seq == seq
            assert list(replay.nodes) == fold_surface(log.events[: seq + 1]).nodes

    def test_long_seeks_use_checkpoints_and_agree(self) -> None:
        session = Session("big", clock=lambda: 0)
        for i in range(5000):
            session.append("user/message", user_msg(f"m{i}"), surface_op="append")
            if i % 700 == 699:
                nodes = list(session.surface.nodes)
                session.append("user/message", user_msg(f"s{i}"), surface_op={
                    "op": "replace", "start": nodes[0], "end": nodes[-1]},
                    source_event_seqs=nodes)
        replay = Replay(session)
        for target in (4000, 17, 5005, 2500, -1, 3100):
            replay.seek(target)
            assert list(replay.nodes) == fold_surface(session.events[: target + 1]).nodes

    def test_what_a_step_did(self) -> None:
        replay = Replay(SAMPLES / "pruned-tool-results.jsonl")
        replay.seek(18)
        assert (replay.appended, replay.shadowed) == (18, (14,))
        replay.back()
        assert (replay.appended, replay.shadowed) == (None, ())
        assert [seq for seq, _ in replay.seek(12).messages()] == [1, 12]
        with pytest.raises(IndexError):
            replay.seek(10_000)


class TestWidget:
    def test_setting_the_slider_shows_that_steps_messages(self) -> None:
        widget = ReplayWidget(SAMPLES / "pruned-tool-results.jsonl", figure=False)
        widget.slider.value = 14
        assert "step 14 of 63: tool/result" in widget.html.value
        assert "appended seq 14" in widget.html.value
        widget.slider.value = 18
        assert "replaced 1 entry with seq 18" in widget.html.value
        assert "shadowed by this step" in widget.html.value
        widget.step_button.click()
        assert widget.slider.value == 19 and widget.replay.seq == 19
        widget.back_button.click()
        assert widget.replay.seq == 18

    def test_the_figure_is_a_png(self) -> None:
        widget = ReplayWidget(SAMPLES / "chat.jsonl", start=5)
        assert bytes(widget.image.value).startswith(b"\x89PNG")

    def test_it_composes_like_any_other_widget(self) -> None:
        widget = ReplayWidget(SAMPLES / "chat.jsonl", start=5, layout={"width": "90%"})
        box = widgets.VBox([widgets.Label("before"), widget])
        assert box.children[1] is widget and isinstance(widget, widgets.DOMWidget)
        assert widget.layout.width == "90%"
        assert widget.image in widget.children and widget.html in widget.children
        bundle = widget._repr_mimebundle_()
        assert "application/vnd.jupyter.widget-view+json" in bundle

    def test_view_still_works_but_warns(self) -> None:
        widget = ReplayWidget(SAMPLES / "chat.jsonl", figure=False)
        assert widget.image not in widget.children
        with pytest.warns(DeprecationWarning, match="ReplayWidget is a VBox itself"):
            assert widget.view is widget

    def test_the_position_line_follows_the_step(self) -> None:
        figure = SurfaceSizeFigure(load_source(SAMPLES / "long-compaction.jsonl"))
        first = figure.png(100)
        for seq in (100, 400, 800):
            pixels = np.asarray(Image.open(io.BytesIO(figure.png(seq))).convert("RGB"))
            red, green, blue = (pixels[..., k].astype(int) for k in range(3))
            # The line's colour (#D55E00), far from the tokens' orange (#E69F00).
            columns = np.nonzero(((abs(red - 0xD5) < 20) & (abs(green - 0x5E) < 20)
                                  & (blue < 30)).sum(axis=0) > 50)[0]
            expected = figure._ax.transData.transform((seq, 0))[0]
            assert len(columns) and abs(columns.mean() - expected) < 2, (seq, columns)
        # Blitting leaves no line behind: the same step gives the same image.
        assert figure.png(100) == first

    def test_log_text_is_escaped(self, tmp_path: Path) -> None:
        session = Session("x")
        session.append("user/message", user_msg("u", HOSTILE), surface_op="append")
        session.append("user/message", user_msg(HOSTILE, "sum"), surface_op={
            "op": "replace", "start": 0, "end": 0}, source_event_seqs=[0])
        widget = ReplayWidget(session, figure=False)
        for value in (widget.html.value, widget.snapshot_html(),
                      step_html(widget.replay.seek(0))):
            assert "<script>" not in value and "<img src=x" not in value
            assert "&lt;script&gt;" in value
        report = audit_report(session, tmp_path)["html"].read_text()
        assert report.count("<script>") == report.count(SORT_SCRIPT) == 1  # the sorter
        report = report.replace(SORT_SCRIPT, "")
        assert "<script>" not in report and "<img src=x" not in report
        assert "&lt;img src=x onerror=alert(1)&gt;" in report


class TestPlots:
    def test_shadowing_draws_lanes_hatched_spans_and_arrows(self) -> None:
        ax = Figure().add_subplot()
        log = load_source(SAMPLES / "long-compaction.jsonl")
        assert plot_shadowing(log, ax=ax) is ax
        hatched = [c for c in ax.collections if isinstance(c, PolyCollection) and c.get_hatch()]
        [spans, removed] = hatched
        assert len(spans.get_paths()) == len(log.fold.replacements) == 7
        # each replace hid one run of adjacent entries (none restored): one block each
        assert len(removed.get_paths()) == 7
        lines = [c for c in ax.collections if isinstance(c, LineCollection)]
        shown = sum(len(c.get_segments()) for c in lines) - 7  # the arrows' shafts
        assert shown in (0, sum(len(r.shadowed_seqs) for r in log.fold.replacements))
        [failed, heads] = [c for c in ax.collections if isinstance(c, PathCollection)]
        assert len(heads.get_offsets()) == 7 and len(failed.get_offsets()) == 1
        assert [t.get_text() for t in ax.get_yticklabels()][:2] == ["events", "seq 250 cmp-1"]

    def test_a_dense_removed_run_is_one_hatched_block_not_a_dark_bar(self) -> None:
        from PIL import Image

        session = Session("dense", clock=lambda: 0)
        for i in range(406):
            session.append("user/message", user_msg(f"m{i}"), surface_op="append")
        session.append("user/message", user_msg("summary"), surface_op={
            "op": "replace", "start": 0, "end": 405}, source_event_seqs=list(range(406)))
        figure = Figure(figsize=(10, 2), dpi=100)
        ax = plot_shadowing(session, ax=figure.add_subplot())
        [_, removed] = [c for c in ax.collections
                        if isinstance(c, PolyCollection) and c.get_hatch()]
        assert len(removed.get_paths()) == 1 and removed.get_hatch()
        lines = [c for c in ax.collections if isinstance(c, LineCollection)]
        assert sum(len(c.get_segments()) for c in lines) == 1  # the arrow, no 406 ticks
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png")
        image = np.asarray(Image.open(buffer).convert("L"), dtype=float)
        (x0, y0), (x1, y1) = ax.transData.transform([(50, 0.85), (350, 1.15)])
        height = image.shape[0]
        rows = sorted((int(height - y0), int(height - y1)))
        lane = image[rows[0]:rows[1], int(x0):int(x1)]
        assert lane.size and (lane < 90).mean() < 0.5, (lane < 90).mean()

    def test_visibility_is_plotted_in_surface_entries_and_keeps_replacements(self) -> None:
        log = load_source(SAMPLES / "long-compaction.jsonl")
        ax = plot_visibility(log, ax=Figure().add_subplot(), max_entries=20)
        assert ax.get_xlim() == (-0.5, len(log.entries) - 0.5)
        assert "surface entry" in ax.get_xlabel() and "20 of them" not in ax.get_xlabel()
        from surface_lab.notebook.plots import _visibility_matrix

        state, _steps, entries, positions = _visibility_matrix(log, 1000, 20)
        assert {p.seq for p in log.replaces} <= set(entries.tolist())
        assert (np.array(log.entries)[positions] == entries).all()
        assert (state == 2).any(axis=0).sum() == len(log.replaces)

    def test_shadowing_artist_count_does_not_grow_with_events(self) -> None:
        def artists(n: int) -> int:
            session = Session("n", clock=lambda: 0)
            for i in range(n):
                session.append("user/message", user_msg(f"m{i}"), surface_op="append")
                if i % 10 == 9:
                    nodes = list(session.surface.nodes)[-5:]
                    session.append("user/message", user_msg(f"s{i}"), surface_op={
                        "op": "replace", "start": nodes[0], "end": nodes[-1]},
                        source_event_seqs=nodes)
            ax = Figure().add_subplot()
            plot_shadowing(session, ax=ax, max_lanes=10)
            return len(ax.get_children())

        assert artists(200) == artists(2000)

    def test_visibility_and_surface_size_return_their_axes(self) -> None:
        log = load_source(SAMPLES / "long-compaction.jsonl")
        ax = Figure().add_subplot()
        assert plot_visibility(log, ax=ax, highlight=100, max_steps=1000) is ax
        [mesh] = [c for c in ax.collections if isinstance(c, QuadMesh)]
        assert mesh.get_array().shape[0] == len(log.events)
        assert any(line.get_ydata()[0] == 100 for line in ax.get_lines())
        ax = Figure().add_subplot()
        assert plot_surface_size(log, ax=ax, marker=10) is ax
        assert len(ax.get_lines()) == 2  # surface length and the marker
        assert ax.collections  # the replace markers

    def test_plots_do_not_mutate_their_input(self) -> None:
        events = [dict(e) for e in read_log(SAMPLES / "chat.jsonl").events]
        snapshot = [dict(e) for e in events]
        plot_shadowing(events, ax=Figure().add_subplot())
        assert events == snapshot


class TestAudit:
    def test_the_long_sample(self) -> None:
        audit = compaction_audit(SAMPLES / "long-compaction.jsonl")
        assert len(audit) == 7
        assert audit["recorded_matches"].all()
        # the sample records usage, so the audit's tokens are the recorded ones
        assert set(audit["tokens_source"]) == {"usage"}
        assert (audit["estimated_tokens_before"] > audit["estimated_tokens_after"]).all()
        assert [f["compaction_id"] for f in failed_compactions(
            SAMPLES / "long-compaction.jsonl")] == ["cmp-3"]

    def test_facts_at_risk(self) -> None:
        session = Session("f", clock=lambda: 0)
        for text in ("see src/app.py and https://x.org/a at line 1234 in handle_request()",
                     "ok, also notes.txt"):
            session.append("user/message", user_msg(text[:5], text), surface_op="append")
        session.append("user/message", user_msg("sum", "talked about src/app.py"),
                       surface_op={"op": "replace", "start": 0, "end": 0},
                       source_event_seqs=[0])
        [row] = compaction_audit(session).to_dict("records")
        # the ledger: the hidden user message is one instruction, whatever its words
        assert row["facts_at_risk"] == [
            "instruction: see src/app.py and https://x.org/a at line 1234 in "
            "handle_request()"]
        assert row["n_at_risk"] == 1 and row["n_unmeasurable"] == 0
        # the old lexical rules, kept for comparison
        [old] = compaction_audit(session, rules=DEFAULT_RULES).to_dict("records")
        assert old["facts_at_risk"] == ["https://x.org/a", "line 1234", "handle_request"]

    def test_extract_facts(self) -> None:
        facts = extract_facts("read logs/build.log, call parseArgs(x), id 4242, v1.2\n"
                              "12: return 7")
        assert facts >= {"logs/build.log", "parseArgs", "id 4242"}
        assert not facts & {"12", "7", "1.2", "4242"}

    def test_a_mismatched_record_is_flagged(self) -> None:
        events = [dict(e) for e in read_log(COMPACTION_LOG).events]
        summary = next(i for i, e in enumerate(events) if e["type"] == "compaction/summary")
        events[summary] = {**events[summary], "data": {**events[summary]["data"],
                                                        "shadowedSeqs": [3]}}
        assert list(compaction_audit(events)["recorded_matches"]) == [False]

    def test_the_real_compaction_log(self, tmp_path: Path) -> None:
        audit = compaction_audit(COMPACTION_LOG)
        assert list(audit["seq"]) == [21] and bool(audit["recorded_matches"].iloc[0])
        result = audit_report(COMPACTION_LOG, tmp_path)
        assert result["png"].read_bytes().startswith(b"\x89PNG")
        assert "data:image/png;base64," in result["html"].read_text()


class TestAuditCommand:
    def test_with_no_path_it_audits_the_long_sample(self, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
        monkeypatch.chdir(tmp_path)
        assert main(["audit"]) == 0
        out = capsys.readouterr().out
        assert "cmp-8" in out and "failed compaction cmp-3" in out
        written = sorted(p.name for p in (tmp_path / "surface-lab-audit").iterdir())
        assert written == ["index.csv", "index.html", "long-compaction-audit.csv",
                           "long-compaction-audit.html", "long-compaction-audit.parquet",
                           "long-compaction-swimlane.png"]

    def test_a_path_and_an_out_dir(self, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["audit", str(COMPACTION_LOG), "--out", str(tmp_path)]) == 0
        stem = COMPACTION_LOG.name.removesuffix(".jsonl")  # reports are named after the input
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([
            "index.csv", "index.html", f"{stem}-audit.csv", f"{stem}-audit.html",
            f"{stem}-audit.parquet", f"{stem}-swimlane.png"])

    def test_bad_input_is_one_line(self, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["audit", str(SAMPLES / "invalid-surface.jsonl"), "--out",
                     str(tmp_path)]) == 1
        captured = capsys.readouterr()  # an error: one line on stderr, no result
        assert captured.out == ""
        assert captured.err.count("\n") == 1 and "replace-sources-incomplete" in captured.err


class TestProgress:
    def test_a_long_load_shows_a_bar_that_can_be_turned_off(
            self, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
        from surface_lab.analysis import source
        from surface_lab.reading import codec

        monkeypatch.setattr(source, "PROGRESS_MIN_BYTES", 0)
        monkeypatch.setattr(source, "PROGRESS_DELAY", 0)
        monkeypatch.setattr(codec, "PROGRESS_EVERY", 100)
        monkeypatch.setenv(source.PROGRESS_ENV, "1")  # stderr is no terminal here
        events_df(SAMPLES / "long-compaction.jsonl")
        assert "long-compaction.jsonl" in capfd.readouterr().err
        events_df(SAMPLES / "long-compaction.jsonl", progress=False)
        assert capfd.readouterr().err == ""
