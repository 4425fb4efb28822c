import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from shared_logs import REQUIRED, SHARED, missing_reason, require_shared


def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers", "shared(*parts): needs these files of the shared real logs (see "
        "tests/shared_logs.py)")


def pytest_runtest_setup(item: Any) -> None:
    """A test marked `shared(...)` skips, with the reason, where those shared files are
    missing, and fails instead where `$SURFACE_LAB_REQUIRE_SHARED=1` (CI)."""
    for mark in item.iter_markers("shared"):
        require_shared(*mark.args)


def _missing_shared_file(error: BaseException) -> str | None:
    """The reason to skip a test that failed only because a shared file is not there: the
    error names a path below the shared folder that does not exist."""
    shared = str(SHARED)
    named = [getattr(error, "filename", None), getattr(error, "path", None), str(error)]
    for text in named:
        if not isinstance(text, str) or shared not in text:
            continue
        rest = text[text.index(shared) + len(shared):].lstrip("/").split(":")[0].split()
        part = rest[0] if rest else ""
        reason = missing_reason(part) if part else missing_reason(".")
        if reason is not None:
            return reason
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Iterator[None]:
    """The one helper for tests that read the shared real logs: one that fails for a
    shared file that is missing is a skip with the reason (a failure where
    `$SURFACE_LAB_REQUIRE_SHARED=1`, so CI never skips them unseen)."""
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is None or report.outcome != "failed" or REQUIRED:
        return
    reason = _missing_shared_file(call.excinfo.value)
    if reason is not None:
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {reason}")
