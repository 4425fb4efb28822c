"""A researcher's first hour (issue 29): the command's output conventions checked through
the real command in a subprocess, the one vocabulary, and the report read as a finding."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from surface_lab import CorruptLogError, read_log
from surface_lab.glossary import TERMS, glossary_markdown, label, plural
from surface_lab.notebook import audit_report
from surface_lab.notebook.audit import (
    SUMMARY_FRAMES,
    audit_index,
    replacement_preview,
    shared_opening,
    summary_body,
)

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_logs"
SHARED = Path(os.environ.get("SURFACE_LAB_SHARED", ROOT.parent / "shared"))
CLAUDE = SHARED / "agent_logs" / "claude_code"
PI = SHARED / "real_logs" / "other" / "jazzyalex__agent-sessions__Resources_Fixtures_stage0_agents_pi_small.jsonl"  # noqa: E501
need_pi = pytest.mark.skipif(not PI.exists(), reason="needs ../shared/real_logs")
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def cli(*argv: str, cwd: Path = ROOT, stdin: bytes | None = None,
        prelude: str = "") -> subprocess.CompletedProcess[bytes]:
    """Run `python -m surface_lab.cli ARGV` (or, with a prelude, the same entry point
    after a few lines of setup) and check that it never prints a traceback."""
    command = [sys.executable, "-m", "surface_lab.cli", *argv] if not prelude else [
        sys.executable, "-c", f"{prelude}\nimport sys\nfrom surface_lab.cli import main\n"
                              f"sys.argv[0] = 'surface-lab'\nsys.exit(main({list(argv)!r}))"]
    done = subprocess.run(command, capture_output=True, cwd=cwd, env=ENV, input=stdin,
                          timeout=300)
    assert b"Traceback" not in done.stdout + done.stderr, done.stderr.decode()[-2000:]
    return done


class TestStreams:
    def test_an_error_goes_to_stderr_not_into_the_results(self, tmp_path: Path) -> None:
        done = cli("audit", "/nonexistent/x.jsonl", "--out", str(tmp_path))
        assert done.returncode == 1 and done.stdout == b""
        assert done.stderr.decode().splitlines() == [
            "/nonexistent/x.jsonl: path-refused: no such file or folder"]

    @need_pi
    def test_results_on_stdout_notes_on_stderr(self, tmp_path: Path) -> None:
        done = cli("audit", str(PI), "--out", str(tmp_path))
        out, err = done.stdout.decode(), done.stderr.decode()
        assert done.returncode == 0
        assert "-> " in out and "wrote " in out and ": note: " not in out
        assert ": note: " in err

    def test_no_progress_bars_when_stderr_is_a_file(self, tmp_path: Path) -> None:
        # every step would show its bar at once (no delay, no size floor) on a terminal
        prelude = ("import surface_lab.analysis.source as s\n"
                   "s.PROGRESS_DELAY = 0\ns.PROGRESS_MIN_BYTES = 0")
        done = cli("audit", str(SAMPLES / "long-compaction.jsonl"), "--out", str(tmp_path),
                   prelude=prelude)
        assert done.returncode == 0
        assert b"\r" not in done.stderr and b"facts at risk:" not in done.stderr

    def test_version(self) -> None:
        done = cli("--version")
        assert done.returncode == 0
        assert re.fullmatch(rb"surface-lab \S+\n", done.stdout), done.stdout


class TestConvertToStdout:
    @pytest.mark.parametrize("spelling", [["-"], ["-o", "-"], ["-o", "/dev/stdout"]])
    def test_writes_the_log_to_stdout(self, tmp_path: Path, spelling: list[str]) -> None:
        src = SAMPLES / "chat.jsonl"
        done = cli("convert", str(src), *spelling, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout == src.read_bytes()
        assert list(tmp_path.iterdir()) == []  # no file named "-"
        assert b"-> stdout" in done.stderr

    @need_pi
    def test_an_import_writes_to_stdout_what_it_writes_to_a_file(self, tmp_path: Path) -> None:
        assert cli("convert", str(PI), str(tmp_path / "a.jsonl")).returncode == 0
        done = cli("convert", str(PI), "-")
        assert done.returncode == 0 and done.stdout == (tmp_path / "a.jsonl").read_bytes()

    def test_several_sessions_to_stdout_are_refused(self) -> None:
        done = cli("convert", str(SAMPLES / "sessions.db"), "-")
        assert done.returncode == 1 and done.stdout == b""
        assert b"pick one with --session ID" in done.stderr


class TestAuditOutputs:
    def test_json_is_one_document_with_every_session(self, tmp_path: Path) -> None:
        done = cli("audit", str(SAMPLES / "long-compaction.jsonl"), str(SAMPLES / "chat.jsonl"),
                   "--out", str(tmp_path), "--json")
        assert done.returncode == 0
        document = json.loads(done.stdout)  # one document, nothing else on stdout
        first, second = document["sessions"]
        assert first["input"] == "long-compaction.jsonl" and second["totals"]["replace"] == 0
        frame = read_back = pd.read_csv(first["csv"])
        assert len(first["replaces"]) == len(frame) == first["totals"]["replace"] > 0
        assert first["totals"]["removed"] == sum(len(r["removed_seqs"])
                                                 for r in first["replaces"])
        read_back = pd.read_parquet(first["parquet"])
        assert list(read_back["seq"]) == [r["seq"] for r in first["replaces"]]
        assert list(read_back["saved_tokens"]) == list(frame["saved_tokens"])
        assert document["index"] == str(tmp_path / "index.html")

    def test_without_pyarrow_the_table_is_csv_and_a_note_says_why(self, tmp_path: Path
                                                                  ) -> None:
        done = cli("audit", str(SAMPLES / "chat.jsonl"), "--out", str(tmp_path),
                   prelude="import sys\nsys.modules['pyarrow'] = None")
        assert done.returncode == 0
        assert (tmp_path / "chat-audit.csv").exists()
        assert not (tmp_path / "chat-audit.parquet").exists()
        assert b"corpus extra" in done.stderr and b"corpus extra" not in done.stdout

    def test_a_json_file_that_is_no_log_says_so(self, tmp_path: Path) -> None:
        config = tmp_path / "config.json"
        config.write_text('{"name": "x", "debug": true}\n')
        done = cli("audit", str(config), "--out", str(tmp_path / "out"))
        assert done.returncode == 1 and done.stdout == b""
        assert re.fullmatch(rf"{re.escape(str(config))}:1: format-unsupported: JSON that is no "
                            r"agent log: neither a surface log nor a .* log\n",
                            done.stderr.decode())


class TestCorpusSources:
    def test_a_missing_source_fails_and_leaves_the_dataset_alone(self, tmp_path: Path
                                                                 ) -> None:
        out = tmp_path / "corpus"
        assert cli("corpus", "build", str(SAMPLES / "chat.jsonl"), str(out),
                   "--engine", "serial").returncode == 0
        before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
        done = cli("corpus", "build", str(SAMPLES / "chat.jsonl"), "/nonexistent", str(out),
                   "--engine", "serial")
        assert done.returncode == 1 and done.stdout == b""
        assert done.stderr.decode() == ("/nonexistent: source-missing: no such file or "
                                        "folder; nothing written\n")
        assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before

    def test_a_source_with_no_log_fails_naming_it(self, tmp_path: Path) -> None:
        empty = tmp_path / "empty"
        empty.mkdir()
        (empty / "notes.txt").write_text("no log here")
        done = cli("corpus", "build", str(empty), str(tmp_path / "out"))
        assert done.returncode == 1
        assert done.stderr.decode().startswith(f"{empty}: source-empty: holds no session log")
        assert not (tmp_path / "out").exists()
        done = cli("corpus", "build", str(tmp_path / "nothing-*.jsonl"), str(tmp_path / "out"))
        assert done.returncode == 1 and b"matches no file" in done.stderr

    def test_sql_on_a_missing_corpus_says_it_does_not_exist(self) -> None:
        done = cli("corpus", "sql", "/nonexistent", "select 1")
        assert done.returncode == 1
        assert done.stderr.decode().startswith("/nonexistent: corpus-missing: no such corpus")

    def test_a_query_error_keeps_its_line_breaks(self, tmp_path: Path) -> None:
        out = tmp_path / "corpus"
        assert cli("corpus", "build", str(SAMPLES / "chat.jsonl"), str(out),
                   "--engine", "serial").returncode == 0
        done = cli("corpus", "sql", str(out), "selec * from sessions")
        err = done.stderr.decode()
        assert done.returncode == 1 and done.stdout == b""
        assert "\\n" not in err and "LINE 1: selec * from sessions" in err.splitlines()
        assert err.startswith(f"{out}: query-invalid: query failed: Parser Error")


class TestErrors:
    def test_a_corrupt_log_error_names_its_file(self, tmp_path: Path) -> None:
        path = tmp_path / "bad.jsonl"
        path.write_text('{"type":"session","version":0,"id":"s","createdAt":0}\n'
                        '{"type":"user/message","seq":0,"time":0,"data":{"id":"u","role":'
                        '"user","source":{"kind":"user"},"content":[]},"surfaceOp":"push"}\n')
        with pytest.raises(CorruptLogError) as info:
            read_log(path)
        assert str(info.value).startswith(f"{path}:2: seq 0 user/message: ")
        assert str(info.value).count(str(path)) == 1


class TestVocabulary:
    def test_docs_glossary_is_written_from_the_terms(self) -> None:
        assert (ROOT / "docs" / "glossary.md").read_text() == glossary_markdown()
        assert all(f"**{t.label}**" in glossary_markdown() for t in TERMS)

    def test_plurals(self) -> None:
        assert [plural(1, "fact at risk"), plural(2, "fact at risk"), plural(3, "entry"),
                plural(0, "failed compaction")] == [
            "1 fact at risk", "2 facts at risk", "3 entries", "0 failed compactions"]

    def test_the_command_and_the_report_use_the_same_words(self, tmp_path: Path) -> None:
        done = cli("audit", str(SAMPLES / "long-compaction.jsonl"), "--out", str(tmp_path))
        out = done.stdout.decode()
        header = out.splitlines()[0].split()
        html = (tmp_path / "long-compaction-audit.html").read_text()
        words = [label(c) for c in ("n_shadowed", "removed_seqs", "restored_seqs",
                                    "saved_tokens", "redos", "recorded_matches")]
        for word in words:
            assert word in header and f"<th>{word}</th>" in html
        assert "moved" not in header and "lost_evidence</th>" not in html
        line = next(x for x in out.splitlines() if x.startswith("long-compaction.jsonl: "))
        counts = re.search(r"hid (\d+) entries \((\d+) removed, (\d+) restored\)", line)
        assert counts and counts.group(0) in html
        assert not re.search(r"\b1 facts", out + html) and "Glossary" in html


class TestReport:
    def test_the_preview_shows_the_summary_not_its_framing(self, tmp_path: Path) -> None:
        result = audit_report(SAMPLES / "long-compaction.jsonl", tmp_path, progress=False)
        html = result["html"].read_text()
        cells = re.findall(r"<td><code>(.*?)</code></td>", html, re.S)
        assert cells and not any(c.startswith(SUMMARY_FRAMES) for c in cells)
        assert all(not c.startswith("&lt;compacted-summary&gt;") for c in cells)
        for frame in SUMMARY_FRAMES:
            text = f"{frame}: framing words.\n\n<summary>\nthe user asked for X\n</summary>"
            assert summary_body(text) == "the user asked for X"
        texts = ["Handoff note v2.\nfirst says A", "Handoff note v2.\nsecond says B"]
        shared = shared_opening(texts)
        assert shared == "Handoff note v2.\n"
        assert replacement_preview(texts[1], shared=shared) == "second says B"
        assert summary_body("Analysis:\nthinking\n\nSummary:\n1. the request") == \
            "1. the request"

    def test_the_index_has_format_model_saved_facts_redone_and_a_cost_hook(
            self, tmp_path: Path) -> None:
        result = audit_report(SAMPLES / "long-compaction.jsonl", tmp_path, progress=False)
        index = audit_index(tmp_path, [("long-compaction.jsonl", result)]).read_text()
        heads = re.findall(r"<th>(.*?)</th>", index)
        assert heads[:4] == ["input", "session", "format", "model"]
        assert {"saved", "facts at risk", "redone", "replays"} <= set(heads)
        assert "cost" not in heads and "sl-sortable" in index
        frame = pd.read_csv(tmp_path / "index.csv")
        assert frame.loc[0, "saved"] == int(result["audit"]["saved_tokens"].sum())
        assert frame.loc[0, "format"] == "dsh" and frame.loc[0, "model"] == result["model"]
        with_cost: dict[str, Any] = {**result, "audit": result["audit"].assign(cost_usd=0.25)}
        index = audit_index(tmp_path, [("x", with_cost)]).read_text()
        assert "<th>cost</th>" in index
        assert pd.read_csv(tmp_path / "index.csv").loc[0, "cost"] == 0.25 * len(
            result["audit"])

    @pytest.mark.skipif(not CLAUDE.is_dir(), reason="needs ../shared/agent_logs")
    def test_paths_are_shown_relative_to_the_audited_folder(self, tmp_path: Path) -> None:
        folder = tmp_path / "projects"
        shutil.copytree(CLAUDE, folder, ignore=shutil.ignore_patterns("*.md"))
        done = cli("audit", str(folder), "--out", str(tmp_path / "out"))
        assert done.returncode == 0
        reports = list((tmp_path / "out").glob("*-audit.html"))
        assert reports
        for report in reports:
            assert str(folder) not in report.read_text()
        index = (tmp_path / "out" / "index.html").read_text()
        assert str(folder) not in index and "claude-code" in index
        assert re.search(r"<td class='nowrap'>claude-\w+-\d", index)  # the model of the session
