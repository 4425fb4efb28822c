"""Progress bars are for a person: the Python API decides as the commands do (bars only
when stderr is a terminal or in a Jupyter kernel, unless SURFACE_LAB_PROGRESS forces it)."""

from __future__ import annotations

import io
import sys
import types
from pathlib import Path

import pytest

from surface_lab.analysis.source import PROGRESS_ENV, _NoBar, shows_progress, step_bar

ROOT = Path(__file__).resolve().parents[1]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _bar_shown(monkeypatch: pytest.MonkeyPatch, stderr: io.StringIO, progress: bool) -> bool:
    monkeypatch.setattr(sys, "stderr", stderr)
    with step_bar("step", 3, progress) as bar:
        bar.update(1)
        return not isinstance(bar, _NoBar)


@pytest.fixture(autouse=True)
def _no_forcing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PROGRESS_ENV, raising=False)


def test_no_bar_off_a_terminal_even_with_progress_true(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    assert not _bar_shown(monkeypatch, io.StringIO(), progress=True)


def test_a_bar_on_a_terminal_unless_progress_is_false(monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    assert _bar_shown(monkeypatch, _Terminal(), progress=True)
    assert not _bar_shown(monkeypatch, _Terminal(), progress=False)


def test_the_environment_forces_bars_on_or_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROGRESS_ENV, "1")
    assert _bar_shown(monkeypatch, io.StringIO(), progress=True)
    assert not _bar_shown(monkeypatch, io.StringIO(), progress=False)  # False stays off
    monkeypatch.setenv(PROGRESS_ENV, "0")
    assert not _bar_shown(monkeypatch, _Terminal(), progress=True)


def test_a_jupyter_kernel_shows_its_widget(monkeypatch: pytest.MonkeyPatch) -> None:
    shell = types.SimpleNamespace(config={"IPKernelApp": {}})
    fake = types.SimpleNamespace(get_ipython=lambda: shell)
    monkeypatch.setitem(sys.modules, "IPython", fake)
    assert shows_progress(True)
    monkeypatch.setattr(shell, "config", {"TerminalIPythonApp": {}})  # plain IPython
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert not shows_progress(True)


def test_a_closed_or_missing_stderr_shows_no_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    closed = io.StringIO()
    closed.close()
    assert not _bar_shown(monkeypatch, closed, progress=True)
    monkeypatch.setattr(sys, "stderr", None)
    assert not shows_progress(True)


def test_the_api_writes_no_bar_into_a_redirected_stderr(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An audit run with the default progress=True in a script whose stderr goes to a file
    leaves no bar in it (the bars wait a second, so the forced run shows one is drawn)."""
    from surface_lab.analysis import source
    from surface_lab.notebook import compaction_audit

    monkeypatch.setattr(source, "PROGRESS_DELAY", 0)
    sample = ROOT / "sample_logs" / "long-compaction.jsonl"
    for forced, drawn in (("", False), ("1", True)):
        monkeypatch.setenv(PROGRESS_ENV, forced)
        captured = io.StringIO()
        monkeypatch.setattr(sys, "stderr", captured)
        compaction_audit(sample)
        assert ("facts at risk" in captured.getvalue()) is drawn, captured.getvalue()
