"""Another agent's log with text that is not valid Unicode is a located package error
through `convert`, never an internal error, and nothing is written (issue 16 item 7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from surface_lab.cli import main

pytestmark = pytest.mark.reliability


def test_an_atif_lone_surrogate_is_refused_with_its_line_by_convert(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "trajectory.json"
    path.write_text('{"schema_version": "ATIF-v1.5", "session_id": "s",\n'
                    '"steps": [{"step_id": 1, "source": "user", "message": "\\udc80"}]}')
    out = tmp_path / "out.jsonl"
    assert main(["convert", str(path), str(out)]) == 1
    printed = capsys.readouterr()
    assert printed.err.startswith(f"{path}:2: line-unparsable: ")  # errors: stderr
    assert "Traceback" not in printed.err and "internal error" not in printed.err
    assert not out.exists()
