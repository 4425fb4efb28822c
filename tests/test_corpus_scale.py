"""Planning a corpus build for parallel workers: without a task size, the corpus is cut
into enough tasks for several a worker, at a size that moves only when the corpus
doubles, with cuts that a smaller size keeps; parallel engines start the largest
tasks first."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from surface_lab import SurfaceLabError, corpus
from surface_lab.agent.samples import generate_corpus

MB = 1024 * 1024


def _fake_sources(monkeypatch: pytest.MonkeyPatch, sizes: list[int],
                  date: str = "2026-01-01") -> list[Path]:
    """Sources that plan as one session each of the given sizes (no file is read)."""
    by_path = {f"/nowhere/s-{n:05d}.jsonl": size for n, size in enumerate(sizes)}
    monkeypatch.setattr(corpus, "_refs", lambda path: [corpus.SessionRef(
        str(path), None, date, by_path[str(path)], id=Path(path).stem)])
    return [Path(p) for p in by_path]


def _cuts(tasks: list[corpus.Task]) -> set[str]:
    return {t.sessions[-1].path for t in tasks[:-1]}


def test_auto_task_mb_is_a_power_of_two_between_the_bounds() -> None:
    assert corpus.auto_task_mb(0) == corpus.TASK_MB_MIN
    assert corpus.auto_task_mb(10 * MB) == corpus.TASK_MB_MIN
    assert corpus.auto_task_mb(172 * MB) == 2.0  # the bench's corpus: ~86 tasks
    assert corpus.auto_task_mb(255 * MB) == 2.0  # moves only when the corpus doubles
    assert corpus.auto_task_mb(256 * MB) == 4.0
    assert corpus.auto_task_mb(10**6 * MB) == corpus.TASK_MB_MAX


def test_default_plan_gives_parallel_workers_several_tasks_each(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3)
    sources = _fake_sources(monkeypatch, [rng.randint(40_000, 130_000) for _ in range(2000)])
    tasks = corpus.plan_tasks([], expanded=sources)
    assert len(corpus.plan_tasks([], expanded=sources, task_mb=64)) <= 4  # the old default
    assert len(tasks) >= 32  # 2 workers get 16 each, 8 workers 4 each
    assert sum(len(t.sessions) for t in tasks) == 2000


def test_a_smaller_task_size_keeps_every_cut_of_a_larger_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(6)
    sources = _fake_sources(monkeypatch, [rng.randint(1000, 4000) for _ in range(3000)])
    # 7.5 MB of input: below twice either size, so only the content-defined cuts apply
    coarse = corpus.plan_tasks([], expanded=sources, task_mb=4)
    fine = corpus.plan_tasks([], expanded=sources, task_mb=1)
    assert _cuts(coarse)  # the test means something
    assert _cuts(coarse) < _cuts(fine)


def test_auto_size_cuts_stay_put_when_a_session_is_added(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7)
    sizes = [rng.randint(40_000, 130_000) for _ in range(1000)]
    before = corpus.plan_tasks([], expanded=_fake_sources(monkeypatch, sizes))
    after = corpus.plan_tasks([], expanded=_fake_sources(monkeypatch, [*sizes, 90_000]))
    same = {t.fingerprint for t in before} & {t.fingerprint for t in after}
    assert len(same) >= len(before) - 2  # the last task changes, and at most the next


def test_task_size_must_be_positive(monkeypatch: pytest.MonkeyPatch) -> None:
    sources = _fake_sources(monkeypatch, [1000, 2000])
    for bad in (0, -1, float("nan")):
        with pytest.raises(SurfaceLabError) as err:
            corpus.plan_tasks([], expanded=sources, task_mb=bad)
        assert err.value.code == "usage"


def test_parallel_engines_start_the_largest_tasks_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(11)
    sources = _fake_sources(monkeypatch, [rng.randint(1000, 400_000) for _ in range(300)])
    tasks = corpus.plan_tasks([], expanded=sources, task_mb=1)
    order = corpus._largest_first(tasks)
    sizes = [sum(r.size for r in t.sessions) for t in order]
    assert sizes == sorted(sizes, reverse=True) and sorted(order, key=lambda t: t.name) == \
        sorted(tasks, key=lambda t: t.name)


def test_default_rebuild_of_an_unchanged_corpus_reuses_every_task(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    generate_corpus(logs, 6)
    first = corpus.to_parquet(logs, tmp_path / "out")
    again = corpus.to_parquet(logs, tmp_path / "out")
    assert again.reused == again.tasks == first.tasks
