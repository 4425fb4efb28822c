"""Terminal injection: log content (types, ids, messages) printed by any command cannot
drive the terminal or forge a line; --json output stays exact JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builders import ev
from store_contract import HEADER, chat

from surface_lab.cli import main
from surface_lab.storage.jsonl import dumps_header, encode_events

pytestmark = pytest.mark.reliability


def _log(path: Path, body: bytes, header: dict[str, Any]) -> Path:
    path.write_bytes(dumps_header(header) + body)
    return path


EVIL = "x\x1b]0;pwned\x07\x1b[2J\r\n/elsewhere.jsonl: valid: 0 events\x00\u202e"


def _evil_log(path: Path) -> Path:
    """A valid log whose session id and one (unknown) type carry terminal controls."""
    events = chat(1)
    events.append(ev(len(events), EVIL, {}, time=9000))
    return _log(path, encode_events(events), {**HEADER, "id": f"id{EVIL}"})


def _no_controls(text: str) -> None:
    assert all(ch in "\n" or ch.isprintable() for ch in text), repr(text)


class TestTerminalSafety:
    @pytest.mark.parametrize("command", ["validate", "info", "surface"])
    def test_log_content_is_printed_with_controls_escaped(
            self, tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]) -> None:
        path = _evil_log(tmp_path / "s.jsonl")
        code = main([command, str(path)])
        out, err = capsys.readouterr()
        assert code == 0
        _no_controls(out + err)
        assert r"x\x1b]0;pwned\x07\x1b[2J\r\n/elsewhere.jsonl: valid: 0 events\x00\u202e" \
            in out + err

    def test_a_type_name_with_a_newline_cannot_forge_a_verdict_line(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        path = _evil_log(tmp_path / "s.jsonl")
        assert main(["validate", str(path)]) == 0
        out, err = capsys.readouterr()
        lines = (out + err).splitlines()
        assert [line for line in lines if ": valid: " in line and line.startswith(
            "/elsewhere")] == []
        assert len(lines) == 2  # the type-unknown note and the verdict, nothing more

    def test_a_session_id_listed_from_a_database_is_escaped(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        from surface_lab.storage.sqlite import SqliteStore

        db = tmp_path / "s.db"
        with SqliteStore(db) as store:
            store.create({**HEADER, "id": f"id{EVIL}"})
            store.append(f"id{EVIL}", chat(1))
        assert main(["validate", str(db)]) == 0
        out, err = capsys.readouterr()
        _no_controls(out + err)
        assert err.startswith(f"{db}#id" + r"x\x1b]0;pwned")

    @pytest.mark.parametrize("command", ["info", "surface"])
    def test_json_output_is_one_line_of_exact_json(
            self, tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]) -> None:
        path = _evil_log(tmp_path / "s.jsonl")
        assert main([command, "--json", str(path)]) == 0
        out = capsys.readouterr().out
        _no_controls(out)
        assert out.count("\n") == 1
        doc = json.loads(out)
        if command == "info":
            assert doc["session"] == f"id{EVIL}" and doc["types"][EVIL] == 1
        else:
            assert any(EVIL in note for note in doc["notes"])

    def test_the_escapes(self) -> None:
        from surface_lab.cli import json_safe, terminal_safe

        text = "a\tb\x9b\x7f\ud800\U000e0001 é ✓"
        assert terminal_safe(text) == r"a\tb\x9b\x7f\ud800\U000e0001 é ✓"
        assert json_safe(text) == r'"a\tb\u009b\u007f\ud800\udb40\udc01 é ✓"'
        assert json.loads(json_safe(text)) == text

    @pytest.mark.parametrize("csv", [False, True])
    def test_corpus_output_is_escaped(self, tmp_path: Path, csv: bool,
                                      capsys: pytest.CaptureFixture[str]) -> None:
        path = _evil_log(tmp_path / "s.jsonl")
        out = tmp_path / "out"
        assert main(["corpus", "build", str(path), str(out), "--engine", "serial"]) == 0
        capsys.readouterr()
        assert main(["corpus", "sql", str(out), "select session_id, type from events "
                     "where type like 'x%'", *(["--csv"] if csv else [])]) == 0
        printed = capsys.readouterr().out
        _no_controls(printed)
        assert len(printed.splitlines()) == 2  # the header and one row
        assert r"id" + r"x\x1b]0;pwned\x07" in printed
