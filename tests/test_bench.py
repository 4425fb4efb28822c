"""The benchmark command runs end to end on tiny inputs (no timing is asserted here:
figures belong to `surface-lab bench`, not to tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from surface_lab.cli import main


@pytest.mark.slow
def test_bench_prints_every_measure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--events", "3000", "--runs", "1", "--corpus-sessions", "4",
                 "--cache", str(tmp_path), "--skip", "memory"]) == 0
    out = capsys.readouterr().out
    for measure in ("read_log (parse+validate+fold)", "events_df(path) (typed schema)",
                    "last 10k of", "surface.nodes, nothing new", "Replay.seek (random)",
                    "ReplayWidget step (", "Play interval of the tour",
                    "plot_shadowing", "replacements_df(path)", "compaction_audit(path)",
                    "compaction_audit(path), ", "find_lost_evidence(events, plans)",
                    "tokens_df(path) (one row per request)",
                    "corpus build, serial (", "corpus build, processes",
                    "corpus build, dask", "corpus rebuild, nothing changed (incremental)",
                    "corpus rebuild, one session grew (incremental)",
                    "peak memory, serial build of 4 sessions, 16 MB tasks",
                    "corpus query: events by type (DuckDB)"):
        assert measure in out
    assert "baseline/time" in out.splitlines()[1]
