"""Debian's Chromium for the real-browser tests (Playwright never downloads one here)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"]


def need_chromium() -> None:
    """Skip without Chromium, except in CI, where .ci/run must have installed it."""
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: .ci/run must install it")
        pytest.skip("chromium is not installed (apt-get install chromium)")
