"""The documentation site: the README and every notebook are pages, the notebooks run at
build time, and a built page shows its figures (the replay widget as a static snapshot)."""

from __future__ import annotations

import re
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
            # a table wider than the page scrolls in its box instead of being cut
            page.set_viewport_size({"width": 900, "height": 900})
            page.goto((site / "notebooks" / "04_other_agents" / "index.html").as_uri())
            page.wait_for_load_state("load")
            tables = page.evaluate("""[...document.querySelectorAll('table')].map(t =>
                [t.scrollWidth > t.clientWidth + 1, getComputedStyle(t).overflowX])""")
            assert any(wide for wide, _ in tables), tables
            assert all(overflow in ("auto", "scroll") for wide, overflow in tables if wide)
        finally:
            browser.close()


# Pages other branches write (tokens: w25, importers: the importer helpers, layout: w24,
# reliability: wrel); the README links them already. Drop a name once its page is here.
PENDING = {"tokens.md", "importers.md", "layout.md", "reliability.md"}
RUN_BLOCKS = ["README.md", "docs/audit.md", "docs/notebook.md", "docs/reading.md"]


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


class TestReadme:
    def test_it_opens_with_the_two_commands_and_reads_in_a_minute(self) -> None:
        text = (ROOT / "README.md").read_text()
        first = re.search(r"```bash\n(.*?)```", text, re.S)
        assert first and first.group(1).splitlines() == [
            'python -m pip install -e ".[notebook]" && surface-lab audit',
            'python -m pip install -e ".[dev]" && python -m pytest']
        assert len(text.splitlines()) < 90
        quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
        code = [line for block in re.findall(r"```\w+\n(.*?)```", quick, re.S)
                for line in block.splitlines() if line.strip()]
        assert len(code) <= 10 and any(".claude/projects" in c for c in code)
        assert any(".codex/sessions" in c for c in code)

    @pytest.mark.parametrize("page", RUN_BLOCKS)
    def test_its_python_blocks_run(self, page: str, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
        import matplotlib

        matplotlib.use("Agg")
        (tmp_path / "sample_logs").symlink_to(ROOT / "sample_logs")
        monkeypatch.chdir(tmp_path)  # relative paths as in a checkout; writes stay here
        blocks = _python_blocks((ROOT / page).read_text())
        assert blocks, page
        for block in blocks:
            exec(compile(block, f"{page} block", "exec"), {"__name__": "__readme__"})

    def test_every_link_to_a_page_resolves(self) -> None:
        links = {"README.md": re.findall(r"\]\(([^)#]+)\)", (ROOT / "README.md").read_text())}
        for page in DOCS.glob("*.md"):
            if page.name == "index.md":  # the README itself
                continue
            links[f"docs/{page.name}"] = re.findall(r"\]\(([^)#:]+\.(?:md|ipynb))\)",
                                                    page.read_text())
        missing = []
        for page, targets in links.items():
            base = ROOT if page == "README.md" else DOCS
            missing += [(page, t) for t in targets if not (base / t).exists()
                        and Path(t).name not in PENDING]
        assert missing == []

    def test_every_page_is_in_the_nav_and_links_from_the_readme(self) -> None:
        listed = set(PAGES.values())
        pages = {p.name for p in DOCS.glob("*.md")}
        assert pages <= listed, pages - listed
        readme = (ROOT / "README.md").read_text()
        assert all(f"docs/{p}" in readme for p in pages - {"index.md"})


@pytest.mark.slow
def test_the_audit_report_in_chromium(tmp_path: Path) -> None:
    """The report as a browser shows it: figures decoded, nothing wider than the page
    but the scrolling tables, the glossary opens, a header click sorts."""
    need_chromium()
    from playwright.sync_api import sync_playwright

    from surface_lab.notebook import audit_report

    html = audit_report(ROOT / "sample_logs" / "long-compaction.jsonl", tmp_path,
                        progress=False)["html"]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 900})
            page.goto(html.as_uri())
            page.wait_for_load_state("load")
            sizes = page.evaluate("[...document.images].map(i => i.naturalWidth)")
            assert len(sizes) == 2 and all(width > 0 for width in sizes), sizes
            # the page itself never scrolls sideways: wide tables scroll in their box
            assert page.evaluate("document.documentElement.scrollWidth <= innerWidth + 1")
            page.click("details.sl-glossary > summary")
            assert page.is_visible("details.sl-glossary dd")
            column = "table.sl-sortable th:nth-child(9)"  # saved
            page.click(column)
            values = page.evaluate("[...document.querySelectorAll("
                                   "'table.sl-sortable tbody tr td:nth-child(9)')]"
                                   ".map(td => parseFloat(td.textContent))")
            assert values == sorted(values) and len(values) == 7
            shot = tmp_path / "report.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 20_000
        finally:
            browser.close()
