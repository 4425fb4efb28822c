"""The documentation site: the README and every notebook are pages, the notebooks run at
build time, and a built page shows its figures (the replay widget as a static snapshot)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from browser import CHROMIUM, CHROMIUM_FLAGS, need_chromium

from surface_lab.notebook import ReplayWidget

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CONFIG = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
PAGES = {name: page for entry in CONFIG["nav"] for name, page in entry.items()}


def test_the_home_page_is_the_readme_and_every_notebook_is_a_page() -> None:
    assert (DOCS / PAGES["Home"]).resolve() == ROOT / "README.md"
    notebooks = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
    listed = {Path(p).name for p in PAGES.values() if p.endswith(".ipynb")}
    assert listed == notebooks
    assert all((DOCS / p).resolve().parent == ROOT / "notebooks"
               for p in PAGES.values() if p.endswith(".ipynb"))
    jupyter = next(p["mkdocs-jupyter"] for p in CONFIG["plugins"]
                   if isinstance(p, dict) and "mkdocs-jupyter" in p)
    assert jupyter["execute"] is True and jupyter["allow_errors"] is False


def test_a_static_page_gets_the_widgets_snapshot() -> None:
    widget = ReplayWidget(ROOT / "sample_logs" / "pruned-tool-results.jsonl", start=14)
    bundle = widget._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/html"].startswith('<img alt="surface size')
    assert "data:image/png;base64,iVBORw0KGgo" in bundle["text/html"]
    assert "step 14 of 63: tool/result" in bundle["text/html"]


@pytest.mark.slow
def test_the_built_tour_shows_its_figures(tmp_path: Path) -> None:
    need_chromium()
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "--site-dir", str(site)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    for page in ("01_tour", "02_audit_compaction", "04_other_agents"):
        assert 'src="data:image/png;base64,' in (
            site / "notebooks" / page / "index.html").read_text()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page()
            page.goto((site / "notebooks" / "01_tour" / "index.html").as_uri())
            page.wait_for_load_state("load")
            sizes = page.evaluate("[...document.images].map(i => i.naturalWidth)")
            # The widget's snapshot and the two figures, all decoded.
            assert len(sizes) >= 3 and all(width > 0 for width in sizes), sizes
            assert page.inner_text(".sl-head").startswith("step 0 of 887: turn/start")
        finally:
            browser.close()
