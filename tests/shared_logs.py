"""The shared real logs beside the checkout (`../shared`, or `$SURFACE_LAB_SHARED`): tests
that need them skip with the reason when they are absent, and fail instead where
`$SURFACE_LAB_REQUIRE_SHARED=1` (CI sets it, so no such test is skipped unseen)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SURFACE_LAB_SHARED", ROOT.parent / "shared"))
REQUIRED = os.environ.get("SURFACE_LAB_REQUIRE_SHARED") == "1"


def missing_reason(*parts: str) -> str | None:
    """Why the shared files under `parts` cannot be used, or None when they are there."""
    gone = [p for p in parts if not (SHARED / p).exists()]
    if not gone:
        return None
    return (f"needs the shared real logs ({', '.join(str(SHARED / p) for p in gone)} "
            f"missing; set SURFACE_LAB_SHARED to their folder)")


def require_shared(*parts: str) -> Path:
    """`SHARED`, once every one of `parts` exists below it; otherwise skip the test (fail
    it where `$SURFACE_LAB_REQUIRE_SHARED=1`)."""
    reason = missing_reason(*parts)
    if reason is not None:
        if REQUIRED:
            pytest.fail(reason + " and SURFACE_LAB_REQUIRE_SHARED=1", pytrace=False)
        pytest.skip(reason)
    return SHARED


def needs_shared(*parts: str) -> pytest.MarkDecorator:
    """A mark for a test, class or module needing these shared files: it skips with the
    reason where they are missing, and fails where `$SURFACE_LAB_REQUIRE_SHARED=1`
    (`conftest.py` applies it)."""
    return pytest.mark.shared(*parts)
