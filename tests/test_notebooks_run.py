"""The notebooks run clean headless; in a real browser the tour works under Voila and the
replay widget composes and steps in JupyterLab."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest
from browser import CHROMIUM, CHROMIUM_FLAGS, need_chromium
from nbclient import NotebookClient

from surface_lab.notebook import Replay

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
SAMPLES = NOTEBOOKS.parent / "sample_logs"
NAMES = ["01_tour", "02_audit_compaction", "03_debug_replay", "04_other_agents",
         "05_compare_policies", "06_corpus"]


@pytest.mark.parametrize("name", NAMES)
def test_committed_without_outputs(name: str) -> None:
    book = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    code = [c for c in book.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_runs_clean(name: str) -> None:
    book = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    NotebookClient(book, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    errors = [o for c in book.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert errors == []
    assert any(o.output_type in ("display_data", "execute_result")
               for c in book.cells if c.cell_type == "code" for o in c.outputs)


def test_the_tours_replay_claims_match_the_replay() -> None:
    book = nbformat.read(NOTEBOOKS / "01_tour.ipynb", as_version=4)
    text = " ".join(" ".join(c.source.split()) for c in book.cells
                    if c.cell_type == "markdown")
    claim = re.search(r"Just after event (\d+) the raw tool result \(seq (\d+)\) is on the "
                      r"surface; just after event (\d+) the tool was only called\. The prune "
                      r"at seq (\d+) replaces the result", text)
    assert claim, "the tour no longer states when the tool result is on the surface"
    after, result, before, prune = map(int, claim.groups())
    replay = Replay(SAMPLES / "pruned-tool-results.jsonl", progress=False)
    assert replay.log.events[result]["type"] == "tool/result"
    assert result in replay.seek(after).nodes
    assert result not in replay.seek(before).nodes
    assert replay.event is not None and replay.event["type"] == "tool/call"
    assert replay.seek(prune).shadowed == (result,)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _serving(args: list[str], cwd: Path, name: str) -> Iterator[int]:
    """Run `python -m ARGS --port=P` in its own process group until the block ends."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", *args, f"--port={port}"], cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail(f"{name} did not start")
                time.sleep(0.2)
        yield port
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


@pytest.fixture
def voila_tour() -> Iterator[str]:
    need_chromium()
    with _serving(["voila", "01_tour.ipynb", "--no-browser", "--Voila.ip=127.0.0.1",
                   "--ServerApp.token="], NOTEBOOKS, "voila") as port:
        yield f"http://127.0.0.1:{port}/"


@pytest.fixture
def lab_notebook(tmp_path: Path) -> Iterator[str]:
    """JupyterLab serving a notebook that puts a ReplayWidget inside another VBox."""
    need_chromium()
    root = tmp_path / "root"
    root.mkdir()
    book = nbformat.v4.new_notebook()
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                   "language": "python"}
    log = str(SAMPLES / "long-compaction.jsonl")
    book.cells = [nbformat.v4.new_code_cell(
        "import ipywidgets as widgets\n"
        "from surface_lab.notebook import ReplayWidget\n"
        "widgets.VBox([widgets.HTML('<b class=\"composed\">composed</b>'),\n"
        f"              ReplayWidget({log!r}, start=0, interval=300)])")]
    nbformat.write(book, root / "replay.ipynb")
    with _serving(
            ["jupyter", "lab", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
             "--IdentityProvider.token=", f"--ServerApp.root_dir={root}",
             # The test drives the notebook through the app's command registry.
             "--LabApp.expose_app_in_browser=True",
             # Offline and isolated: no update check, news or PyPI extension manager, and
             # settings and workspaces of its own.
             "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
             "--LabApp.news_url=None", "--LabApp.extension_manager=readonly",
             f"--LabApp.user_settings_dir={tmp_path / 'settings'}",
             f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}"],
            root, "jupyter lab") as port:
        yield f"http://127.0.0.1:{port}/lab/tree/replay.ipynb"


@pytest.mark.slow
def test_the_tour_in_a_real_browser(voila_tour: str) -> None:
    from playwright.sync_api import sync_playwright

    head = ".sl-head"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page()
            page.goto(voila_tour, timeout=120_000)
            page.wait_for_selector(head, timeout=120_000)
            assert page.inner_text(head).startswith("step 0 of 887: turn/start")
            page.focus(".widget-slider .noUi-handle")
            page.keyboard.press("ArrowRight")
            page.wait_for_function(
                f"document.querySelector('{head}').innerText.startsWith('step 1 of')",
                timeout=30_000)
            assert "appended seq 1 to the surface" in page.inner_text(head)
            assert "Question 1: what is in a.txt?" in page.inner_text(".sl-card pre")
            page.click(".widget-play button >> nth=0")
            page.wait_for_function(
                f"parseInt(document.querySelector('{head}').innerText.split(' ')[1]) >= 3",
                timeout=30_000)
        finally:
            browser.close()


@pytest.mark.slow
def test_the_widget_composes_and_steps_in_jupyterlab(lab_notebook: str) -> None:
    from playwright.sync_api import sync_playwright

    head, kernel = ".sl-head", "window.jupyterapp?.shell.currentWidget?.sessionContext" \
        "?.session?.kernel"
    image = ".widget-image"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page()
            page.goto(lab_notebook, timeout=120_000)
            page.wait_for_function(f"{kernel}?.status === 'idle'", timeout=120_000)
            page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
            page.wait_for_selector(head, timeout=120_000)
            assert page.inner_text(".composed") == "composed"
            assert page.inner_text(head).startswith("step 0 of 887: turn/start")
            first = page.get_attribute(image, "src")
            page.focus(".widget-slider .noUi-handle")
            page.keyboard.press("ArrowRight")
            page.wait_for_function(
                f"document.querySelector('{head}').innerText.startsWith('step 1 of')",
                timeout=30_000)
            assert "Question 1: what is in a.txt?" in page.inner_text(".sl-card pre")
            # The figure's position line moved: the kernel sent a new PNG.
            page.wait_for_function(
                f"document.querySelector('{image}').src !== {first!r}", timeout=30_000)
            page.click(".widget-play button >> nth=0")
            page.wait_for_function(
                f"parseInt(document.querySelector('{head}').innerText.split(' ')[1]) >= 4",
                timeout=30_000)
        finally:
            browser.close()
