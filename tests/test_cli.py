"""The surface-lab command: exit codes, one line per problem, never a traceback."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from builders import ev, user
from store_contract import HEADER, chat

from surface_lab import StorageError, read_log
from surface_lab.cli import main
from surface_lab.storage.jsonl import dumps_header, encode_events

ROOT = Path(__file__).resolve().parents[1]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out.splitlines(), err


def _log(path: Path, body: bytes, header: dict[str, Any] | None = None) -> Path:
    path.write_bytes(dumps_header(header or HEADER) + body)
    return path


BAD_INPUTS: dict[str, tuple[Any, str]] = {
    "empty": (b"", r"^{p}:1: log-corrupt: empty or header-less log$"),
    "cut-in-header": (b'{"type":"session","vers', r"^{p}:1: log-corrupt: empty or header-less"),
    "binary": (bytes(range(256)) * 4, r"^{p}:1: line-unparsable: header line: not JSON"),
    "newer-version": (b'{"type":"session","version":3,"id":"s","createdAt":0}\n',
                      r"^{p}:1: format-unsupported: .*written by a newer version"),
    "malformed-json": (lambda: dumps_header(HEADER) + encode_events(chat(1)[:3])
                       + b"{not json\n" + encode_events([ev(4, "turn/end", {"turn": 1})]),
                       r"^{p}:5: line-unparsable: bad line 5 \(not JSON.*line 6 records a "
                       r"turn/end, so this is not a crash tail$"),
    "surface-op": (lambda: dumps_header(HEADER) + encode_events(
        [{**user(0), "surfaceOp": "push"}]),
        r"^{p}:2: seq 0 user/message: surface-op-invalid: corrupt log \(session 's1'\): "
        r"surfaceOp must be"),
    "seq-gap": (lambda: dumps_header(HEADER) + encode_events([user(0), user(2)]),
                r"^{p}:3: seq-gap: crash tail from line 3: 1 complete line\(s\) would be "
                r"dropped \(seq is 2, expected 1\); run surface-lab repair$"),
    "nan": (lambda: dumps_header(HEADER) + b'{"type":"x","seq":0,"time":0,"data":NaN}\n',
            r"^{p}:2: line-unparsable: crash tail from line 2"),
    "no-header-type": (b'{"version":0,"id":"s","createdAt":0}\n',
                       r"^{p}:1: header-invalid: the first line must be a session header"),
    "header-invalid": (b'{"type":"session","version":0,"id":"s","createdAt":-5}\n',
                       r"^{p}:1: header-invalid: header field createdAt is -5"),
}


class TestValidate:
    @pytest.mark.parametrize("case", sorted(BAD_INPUTS))
    def test_bad_input_gets_one_line_and_exit_1(self, tmp_path: Path, case: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
        import re

        body, pattern = BAD_INPUTS[case]
        path = tmp_path / f"{case}.jsonl"
        path.write_bytes(body() if callable(body) else body)
        code, lines, _ = _run(capsys, "validate", str(path))
        errors = [line for line in lines if ": note: " not in line]
        assert code == 1
        assert len(errors) == 1, lines
        assert re.search(pattern.format(p=re.escape(str(path))), errors[0]), errors[0]

    def test_a_header_only_file_is_valid(self, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
        assert _run(capsys, "validate", str(_log(tmp_path / "s.jsonl", b"")))[:2] == (0, [])

    def test_a_torn_fragment_and_an_open_turn_are_notes(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = _log(tmp_path / "s.jsonl", encode_events(chat(1)[:8]) + b'{"type":"st')
        code, lines, _ = _run(capsys, "validate", str(path))
        assert code == 0
        assert [line.split(": note: ")[1].split(":")[0] for line in lines] == [
            "torn-tail", "open-turn"]
        assert lines[0].startswith(f"{path}:7: note: torn-tail")

    def test_any_bad_log_fails_the_run(self, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
        good = _log(tmp_path / "good.jsonl", encode_events(chat(1)))
        bad = tmp_path / "bad.jsonl"
        bad.write_bytes(b"")
        code, lines, _ = _run(capsys, "validate", str(good), str(bad))
        assert code == 1 and len(lines) == 1 and lines[0].startswith(str(bad))

    def test_missing_files_are_one_line(self, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
        code, lines, _ = _run(capsys, "validate", str(tmp_path / "nope.jsonl"))
        assert code == 1
        assert lines == [f"{tmp_path / 'nope.jsonl'}: path-refused: no such file or folder"]

    def test_usage_errors_exit_2(self, capsys: pytest.CaptureFixture[str]) -> None:
        with pytest.raises(SystemExit) as info:
            main(["validate"])
        assert info.value.code == 2
        with pytest.raises(SystemExit) as info:
            main(["frobnicate"])
        assert info.value.code == 2

    def test_the_console_script_never_prints_a_traceback(self, tmp_path: Path) -> None:
        path = tmp_path / "garbage.jsonl"
        path.write_bytes(b"\x00\x01garbage")
        exe = shutil.which("surface-lab")
        argv = [exe] if exe else [sys.executable, "-m", "surface_lab.cli"]
        result = subprocess.run([*argv, "validate", str(path)], capture_output=True,
                                text=True, check=False)
        assert result.returncode == 1
        assert "Traceback" not in result.stdout + result.stderr
        assert result.stdout.startswith(f"{path}:1: log-corrupt")


class TestSurfaceAndInfo:
    def test_surface_json(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = _log(tmp_path / "s.jsonl", encode_events(chat(1)))
        code, lines, _ = _run(capsys, "surface", "--json", str(path))
        assert code == 0
        assert json.loads(lines[0]) == {
            "nodes": [10], "replace_generation": 1, "form": "stored", "notes": [],
            "replacements": [{"seq": 10, "start": 1, "end": 7, "shadowed_seqs": [1, 7]}]}

    def test_surface_text(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = _log(tmp_path / "s.jsonl", encode_events(chat(1)))
        code, lines, _ = _run(capsys, "surface", str(path))
        assert code == 0
        assert lines == ["nodes (1): [10]", "replace generation: 1",
                         "  seq 10 user/message replaced 1..7: shadowed [1, 7]"]

    def test_info(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = _log(tmp_path / "s.jsonl", encode_events(chat(2)))
        code, lines, _ = _run(capsys, "info", "--json", str(path))
        assert code == 0
        info = json.loads(lines[0])
        assert (info["events"], info["turns"], info["steps"], info["replacements"]) == (
            22, 2, 2, 1)
        assert info["time_span_ms"] == 21 * 7
        assert info["types"]["assistant/chunk"] == 8


class TestRepairAndConvert:
    def _crashed(self, tmp_path: Path) -> Path:
        return _log(tmp_path / "s.jsonl", encode_events(chat(1)[:8]) + b"{bad\n" + b'{"to')

    def test_repair_shows_without_writing(self, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
        path = self._crashed(tmp_path)
        before = hashlib.sha256(path.read_bytes()).hexdigest()
        code, lines, err = _run(capsys, "repair", str(path))
        assert code == 0
        assert [json.loads(line)["type"] for line in lines] == ["step/end", "turn/end"]
        assert "nothing written" in err
        assert hashlib.sha256(path.read_bytes()).hexdigest() == before

    def test_the_dry_run_hints_at_write_not_at_itself(
            self, capsys: pytest.CaptureFixture[str]) -> None:
        path = ROOT / "sample_logs" / "invalid-crash-tail.jsonl"
        code, _, err = _run(capsys, "repair", str(path))
        assert code == 0
        assert "surface-lab repair" not in err
        assert err.splitlines() == [
            f"{path}:29: seq-gap: crash tail from line 29: 1 complete line(s) would be "
            f"dropped (seq is 62, expected 61)",
            f"{path}: 1 tail problem(s) to drop, 0 closer(s) to append; nothing written "
            f"(add --write to commit the repair)"]

    def test_repair_write_commits_durably(self, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
        path = self._crashed(tmp_path)
        assert _run(capsys, "repair", "--write", str(path))[0] == 0
        log = read_log(path)
        assert log.problems == [] and log.closers == []
        assert [e["type"] for e in log.events[8:]] == ["step/end", "turn/end"]
        assert _run(capsys, "repair", str(path))[1] == [f"{path}: nothing to repair"]

    def test_convert_round_trips_through_sqlite(self, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
        src = _log(tmp_path / "s.jsonl", encode_events(chat(2)))
        db, back = tmp_path / "s.db", tmp_path / "back.jsonl"
        assert _run(capsys, "convert", str(src), str(db))[0] == 0
        assert _run(capsys, "convert", str(db), str(back))[0] == 0
        assert back.read_bytes() == src.read_bytes()
        code, _, err = _run(capsys, "convert", str(src), str(back))
        lines = err.splitlines()  # an error: on stderr
        assert code == 1 and "already exists" in lines[0]

    def test_convert_refuses_an_invalid_source(self, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
        code, _, err = _run(capsys, "convert", str(self._crashed(tmp_path)),
                            str(tmp_path / "x.db"))
        assert code == 1 and "repair --write first" in err
        assert not (tmp_path / "x.db").exists()

    def test_sqlite_repair_write(self, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
        src = _log(tmp_path / "s.jsonl", encode_events(chat(1)[:8]))
        db = tmp_path / "s.db"
        assert _run(capsys, "convert", str(src), str(db))[0] == 0
        assert _run(capsys, "repair", "--write", str(db))[0] == 0
        assert [e["type"] for e in read_log(db).events[8:]] == ["step/end", "turn/end"]


class TestUsage:
    @pytest.mark.parametrize("argv", [["convert", "sample_logs/chat.jsonl"],
                                      ["generate", "out", "--events", "-5"],
                                      ["generate", "out", "--events", "many"],
                                      ["corpus", "build", "src", "out", "--workers", "0"],
                                      ["convert", "a.jsonl", "b.jsonl", "-o", "c.jsonl"]])
    def test_usage_errors_exit_2_with_the_usage_line(
            self, argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
            monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.chdir(ROOT)
        try:
            code = main(argv)
        except SystemExit as exit_:  # argparse's own checks
            code = int(str(exit_.code))
        _, err = capsys.readouterr()
        assert code == 2
        assert err.startswith(f"usage: surface-lab {argv[0]}")
        assert f"surface-lab {' '.join(argv[:2] if argv[0] == 'corpus' else argv[:1])}: " \
               f"error: " in err
        assert not (tmp_path / "out").exists()

    def test_every_subcommand_has_a_description(self) -> None:
        import argparse

        from surface_lab.cli import _parser

        def commands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
            found = []
            for action in parser._actions:
                if isinstance(action, argparse._SubParsersAction):
                    for sub in action.choices.values():
                        found += [sub, *commands(sub)]
            return found

        subs = commands(_parser())
        assert len(subs) == 11  # the nine commands, corpus build and corpus sql
        for sub in subs:
            assert sub.description and len(sub.description) > 20, sub.prog
            assert sub.description.split()[0] in sub.format_help(), sub.prog

    def test_a_closed_pipe_ends_quietly(self, tmp_path: Path) -> None:
        path = _log(tmp_path / "s.jsonl", encode_events(chat(3)))
        proc = subprocess.Popen([sys.executable, "-m", "surface_lab.cli", "info", str(path)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # like `| head` that has already gone
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == 1
        assert err == ""


class TestSessionOption:
    def test_convert_picks_a_session_of_a_database(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        out = tmp_path / "chat.jsonl"
        code, _, err = _run(capsys, "convert", str(ROOT / "sample_logs" / "sessions.db"),
                            str(out), "--session", "chat")
        assert code == 0 and "1 session(s), 61 events" in err
        assert read_log(out).session_id == "chat"
        assert read_log(out).events == read_log(ROOT / "sample_logs" / "sessions.db",
                                                session_id="chat").events

    def test_convert_output_option_names_the_destination(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        out = tmp_path / "chat.db"
        code, _, err = _run(capsys, "convert", str(ROOT / "sample_logs" / "chat.jsonl"),
                            "-o", str(out))
        assert code == 0 and err.rstrip().endswith(f"-> {out}: 1 session(s), 61 events")
        assert "None" not in err

    @pytest.mark.parametrize("command", ["info", "surface", "repair"])
    def test_errors_name_the_session_option(
            self, command: str, capsys: pytest.CaptureFixture[str]) -> None:
        db = str(ROOT / "sample_logs" / "sessions.db")
        code, _, err = _run(capsys, command, db)
        lines = err.splitlines()  # an error: on stderr
        assert code == 1
        assert lines == [f"{db}: session-ambiguous: holds 3 sessions; pick one with --session ID "
                         f"('chat', 'max-tokens', 'tools-parallel')"]

    def test_python_callers_still_read_the_argument_name(self) -> None:
        with pytest.raises(StorageError, match="pick one with session_id"):
            read_log(ROOT / "sample_logs" / "sessions.db")

    def test_a_jsonl_destination_for_several_sessions_points_to_the_option(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        code, _, err = _run(capsys, "convert", str(ROOT / "sample_logs" / "sessions.db"),
                            str(tmp_path / "all.jsonl"))
        lines = err.splitlines()  # an error: on stderr
        assert code == 1 and "pick one with --session ID" in lines[0]


class TestGenerate:
    def test_refuses_to_overwrite_files_without_force(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        out = tmp_path / "mine"
        out.mkdir()
        (out / "chat.jsonl").write_text("my own notes\n")
        (out / "keep.txt").write_text("unrelated\n")
        code, _, err = _run(capsys, "generate", str(out))
        lines = err.splitlines()  # an error: on stderr
        assert code == 1
        assert lines == [f"{out}: target-exists: already holds chat.jsonl; nothing written "
                         f"(--force replaces them)"]
        assert sorted(p.name for p in out.iterdir()) == ["chat.jsonl", "keep.txt"]
        assert (out / "chat.jsonl").read_text() == "my own notes\n"
        assert _run(capsys, "generate", str(out), "--force")[0] == 0
        assert read_log(out / "chat.jsonl").session_id == "chat"
        assert (out / "keep.txt").read_text() == "unrelated\n"

    def test_writes_into_a_new_or_unrelated_folder(self, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
        from surface_lab.agent.samples import sample_file_names

        code, lines, _ = _run(capsys, "generate", str(tmp_path / "new"))
        assert code == 0
        assert lines == [str(tmp_path / "new" / name) for name in sample_file_names()]

    def test_a_large_session_is_not_overwritten_without_force(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        (tmp_path / "large-50.jsonl").write_text("mine\n")
        code, _, err = _run(capsys, "generate", str(tmp_path), "--events", "50")
        lines = err.splitlines()  # an error: on stderr
        assert code == 1 and "already exists; nothing written (--force" in lines[0]
        assert (tmp_path / "large-50.jsonl").read_text() == "mine\n"
        assert _run(capsys, "generate", str(tmp_path), "--events", "50", "--force")[0] == 0
        assert len(read_log(tmp_path / "large-50.jsonl").events) >= 50


class TestInfoTimes:
    def test_times_are_shown_as_iso_beside_milliseconds(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = _log(tmp_path / "s.jsonl", encode_events(
            [{**e, "time": 1767225600000 + e["time"]} for e in chat(1)]))
        code, lines, _ = _run(capsys, "info", str(path))
        assert code == 0
        assert "time_first:       1767225601000 (2026-01-01T00:00:01.000Z)" in lines
        assert "time_last:        1767225601077 (2026-01-01T00:00:01.077Z)" in lines
        info = json.loads(_run(capsys, "info", "--json", str(path))[1][0])
        assert (info["time_first_utc"], info["time_last_utc"]) == (
            "2026-01-01T00:00:01.000Z", "2026-01-01T00:00:01.077Z")


def test_session_is_a_usage_error_for_an_imported_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trajectory = tmp_path / "run.trajectory.json"
    trajectory.write_text(json.dumps({"schema_version": "ATIF-v1.7", "session_id": "s",
                                      "steps": [{"step_id": 1, "source": "user",
                                                 "message": "hi"}]}))
    code = main(["convert", str(trajectory), str(tmp_path / "out.jsonl"), "--session", "s"])
    assert code == 2
    assert "--session picks a session of a store or database" in capsys.readouterr().err
    assert not (tmp_path / "out.jsonl").exists()
