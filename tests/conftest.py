import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def pytest_configure(config: object) -> None:
    config.addinivalue_line(  # type: ignore[attr-defined]
        "markers", "shared(*parts): needs these files of the shared real logs (see "
        "tests/shared_logs.py)")


def pytest_runtest_setup(item: object) -> None:
    """A test marked `shared(...)` skips, with the reason, where those shared files are
    missing, and fails instead where `$SURFACE_LAB_REQUIRE_SHARED=1` (CI)."""
    from shared_logs import require_shared

    for mark in item.iter_markers("shared"):  # type: ignore[attr-defined]
        require_shared(*mark.args)
