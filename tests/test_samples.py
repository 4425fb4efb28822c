"""The bundled tour log is the output of real code paths, and it shows what it claims."""

from __future__ import annotations

from pathlib import Path

from surface_lab import read_log
from surface_lab.samples import build_tour, write_tour

SAMPLE = Path(__file__).resolve().parents[1] / "sample_logs" / "tour.jsonl"


def test_the_committed_sample_is_what_the_code_writes(tmp_path: Path) -> None:
    assert write_tour(tmp_path / "tour.jsonl").read_bytes() == SAMPLE.read_bytes()


def test_the_tour_shows_a_prune_and_a_compaction_of_it() -> None:
    log = read_log(SAMPLE)
    assert log.valid and log.problems == [] and log.closers == []
    prune, compaction = log.fold.replacements
    assert log.events[prune.seq]["type"] == "tool/result"
    assert prune.seq in compaction.shadowed_seqs  # a summary hides the earlier rewrite
    assert log.fold.nodes == list(build_tour().surface.nodes)
    types = {e["type"] for e in log.events}
    assert {"compaction/start", "compaction/summary", "compaction/end",
            "compaction/prune", "context/message"} <= types
