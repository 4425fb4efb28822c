"""MkDocs hook: nbconvert (which mkdocs-jupyter runs) reads its configuration from this
folder too. It puts a widget's static HTML before the widget view (a page of the site has
no kernel, so the replay widget shows its snapshot instead of nothing) and gives each cell
a timeout (nbclient has none by default), so a stuck cell fails the build; and it
rewrites the README's `docs/` links for the home page."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def on_config(config: Any) -> Any:
    here = str(Path(__file__).resolve().parent)
    paths = [p for p in os.environ.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep) if p]
    if here not in paths:
        os.environ["JUPYTER_CONFIG_PATH"] = os.pathsep.join([here, *paths])
    return config


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """The home page is the README, whose links to the other pages start with `docs/`
    (right on GitHub, where the README sits above docs/); on the site it sits inside
    docs/, so those links lose that prefix."""
    if page.file.src_uri == "index.md":
        return markdown.replace("](docs/", "](")
    return markdown
