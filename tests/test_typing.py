"""The typed append: mypy refuses a literal surface type without surface_op (and only that)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CASES = Path(__file__).parent / "typing_cases"


def _mypy(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--no-incremental", str(path)],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )


@pytest.mark.slow
def test_surface_append_without_surface_op_fails_type_checking() -> None:
    result = _mypy(CASES / "append_bad.py")
    must_fail = [i for i, line in enumerate((CASES / "append_bad.py").read_text().splitlines(), 1)
                 if "MUST-FAIL" in line]
    flagged = sorted({int(line.split(":")[1]) for line in result.stdout.splitlines()
                      if ": error:" in line})
    assert result.returncode == 1, result.stdout
    assert flagged == must_fail, result.stdout
    assert "need surface_op" in result.stdout


@pytest.mark.slow
def test_correct_appends_type_check() -> None:
    result = _mypy(CASES / "append_ok.py")
    assert result.returncode == 0, result.stdout
