"""Incremental corpus builds: a rebuild reuses the tasks whose sources did not change and
ends byte for byte where a fresh build of the same sources ends; sessions added, grown,
changed or gone are reported in the manifest; a build killed midway leaves the earlier
dataset readable."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from surface_lab import SurfaceLabError, corpus
from surface_lab.agent.samples import generate_corpus
from surface_lab.cli import main

ROOT = Path(__file__).resolve().parents[1]
TASK_MB = 0.3  # a few sessions a task, several tasks a date


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pool") / "logs"
    generate_corpus(folder, 10)
    return folder


@pytest.fixture
def logs(pool: Path, tmp_path: Path) -> Path:
    """Eight of the ten sessions (the other two are added by the tests)."""
    folder = tmp_path / "logs"
    folder.mkdir()
    for path in sorted(pool.iterdir())[:8]:
        shutil.copy2(path, folder / path.name)
    return folder


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*.parquet"))}


def _fresh(logs: Path, tmp_path: Path) -> dict[str, bytes]:
    out = tmp_path / "fresh"
    shutil.rmtree(out, ignore_errors=True)
    corpus.to_parquet(logs, out, task_mb=TASK_MB)
    return _files(out)


def _no_task_written(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(task: corpus.Task, out: Any) -> dict[str, Any]:
        raise AssertionError(f"task {task.name} was rebuilt")

    monkeypatch.setattr(corpus, "write_chunk", refuse)


def test_an_unchanged_corpus_is_reused_whole(logs: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    first = corpus.to_parquet(logs, out, task_mb=TASK_MB)
    assert first.reused == 0 and first.tasks > 3
    before = _files(out)
    _no_task_written(monkeypatch)
    again = corpus.to_parquet(logs, out, task_mb=TASK_MB)
    assert again.reused == again.tasks == first.tasks
    assert (again.added, again.grown, again.changed, again.vanished) == ([], [], [], [])
    assert _files(out) == before
    assert (again.sessions, again.events) == (first.sessions, first.events)


def test_a_new_session_is_added(logs: Path, pool: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = corpus.to_parquet(logs, out, task_mb=TASK_MB)
    new = sorted(pool.iterdir())[8]
    shutil.copy2(new, logs / new.name)
    again = corpus.to_parquet(logs, out, task_mb=TASK_MB)
    assert again.added == [str((logs / new.name).resolve())]
    assert again.sessions == first.sessions + 1
    assert 0 < again.reused < again.tasks  # the other dates' tasks are kept
    assert _files(out) == _fresh(logs, tmp_path)
    c = corpus.open_corpus(out)
    assert int(c.sql(f"select count(*) as n from sessions where session_id = "
                     f"'{new.stem}'")["n"][0]) == 1
    c.close()


def test_a_session_that_grew_gets_its_new_events(pool: Path, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    whole = sorted(pool.iterdir())[0]
    lines = whole.read_bytes().splitlines(keepends=True)
    grows = logs / whole.name
    grows.write_bytes(b"".join(lines[:150]))  # the agent is still writing it
    for path in sorted(pool.iterdir())[1:6]:
        shutil.copy2(path, logs / path.name)
    out = tmp_path / "out"
    first = corpus.to_parquet(logs, out, task_mb=TASK_MB)
    with open(grows, "ab") as f:  # the agent appends the rest of its session
        f.write(b"".join(lines[150:]))
    again = corpus.to_parquet(logs, out, task_mb=TASK_MB)
    assert again.grown == [str(grows.resolve())] and again.changed == []
    assert again.events > first.events and again.sessions == first.sessions
    assert again.tasks - again.reused <= 2  # its own task (and at most the next)
    assert _files(out) == _fresh(logs, tmp_path)


def test_a_changed_source_replaces_its_rows(logs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = corpus.to_parquet(logs, out, task_mb=TASK_MB)
    changed = sorted(logs.iterdir())[3]
    lines = changed.read_bytes().splitlines(keepends=True)
    changed.write_bytes(b"".join(lines[:100]))  # rewritten, shorter
    again = corpus.to_parquet(logs, out, task_mb=TASK_MB)
    assert again.changed == [str(changed.resolve())] and again.grown == []
    assert again.events < first.events and again.sessions == first.sessions
    assert _files(out) == _fresh(logs, tmp_path)
    c = corpus.open_corpus(out)
    rows = c.sql(f"select count(*) as n, count(distinct seq) as u from events "
                 f"where session_id = '{changed.stem}'")
    assert int(rows["n"][0]) == int(rows["u"][0]) > 0  # its old rows are gone, not doubled
    c.close()


def test_a_vanished_source_is_reported_and_its_rows_removed(logs: Path,
                                                           tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = corpus.to_parquet(logs, out, task_mb=TASK_MB)
    gone = sorted(logs.iterdir())[5]
    gone.unlink()
    again = corpus.to_parquet(logs, out, task_mb=TASK_MB)
    assert again.vanished == [str(gone.resolve())]
    assert again.sessions == first.sessions - 1
    assert _files(out) == _fresh(logs, tmp_path)  # no file of the old task is left


def test_the_build_command_says_what_it_reused(logs: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["corpus", "build", str(logs), str(out), "--task-mb", str(TASK_MB)]) == 0
    gone = sorted(logs.iterdir())[0]
    gone.unlink()
    capsys.readouterr()
    assert main(["corpus", "build", str(logs), str(out), "--task-mb", str(TASK_MB)]) == 0
    err = capsys.readouterr().err
    tasks = corpus.Manifest.load(out).tasks
    reused = corpus.Manifest.load(out).reused
    assert f"reused {reused} of {tasks} tasks; 0 sources added, 0 grown, 0 changed, " \
           f"1 vanished" in err
    assert f"vanished: {gone.resolve()}" in err


def _slow_build(logs: Path, out: Path, body: str) -> subprocess.Popen[str]:
    """A build of `logs` into `out` in another process whose `write_chunk(task, out)` runs
    `body` (indented under it; `original` is the real one), its stdout a pipe."""
    script = ("import sys, time\nfrom surface_lab import corpus\n"
              "original = corpus.write_chunk\n"
              f"def slow(task, out):\n    {body}\n"
              "corpus.write_chunk = slow\n"
              f"corpus.to_parquet(sys.argv[1], sys.argv[2], task_mb={TASK_MB})\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", script, str(logs), str(out)],
                            stdout=subprocess.PIPE, text=True, env=env)


def test_a_build_killed_midway_leaves_the_earlier_dataset(logs: Path, pool: Path,
                                                          tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = corpus.to_parquet(logs, out, task_mb=TASK_MB)
    before = _files(out)
    for path in sorted(pool.iterdir())[8:]:  # new sessions, and every old one touched
        shutil.copy2(path, logs / path.name)
    for path in logs.iterdir():
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    build = _slow_build(logs, out, "result = original(task, out)\n"
                        "    print('wrote', task.name, flush=True)\n    time.sleep(120)\n"
                        "    return result")
    try:
        assert build.stdout is not None
        assert build.stdout.readline().startswith("wrote part-")  # one new task's files
    finally:
        build.send_signal(signal.SIGKILL)
        build.wait()
    assert len(_files(out)) > len(before)  # the killed build did write
    manifest = corpus.Manifest.load(out)
    assert (manifest.sessions, manifest.events) == (first.sessions, first.events)
    c = corpus.open_corpus(out)  # the earlier dataset, whole
    assert int(c.sql("select count(*) as n from events")["n"][0]) == first.events
    assert int(c.sql("select count(*) as n from sessions")["n"][0]) == first.sessions
    c.close()
    again = corpus.to_parquet(logs, out, task_mb=TASK_MB)  # the next build finishes it
    assert again.sessions == first.sessions + 2
    assert _files(out) == _fresh(logs, tmp_path)


@pytest.mark.skipif(sys.platform == "win32", reason="the build lock is POSIX flock")
def test_a_second_build_into_the_same_folder_is_refused_while_one_runs(
        logs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    build = _slow_build(logs, out, "print('writing', flush=True)\n    time.sleep(120)\n"
                        "    return original(task, out)")
    try:
        assert build.stdout is not None
        assert build.stdout.readline() == "writing\n"  # the first build holds the folder
        with pytest.raises(SurfaceLabError, match="another corpus build") as refused:
            corpus.to_parquet(logs, out, task_mb=TASK_MB)
        assert refused.value.code == "corpus-busy"
        assert build.poll() is None  # and the first build goes on
    finally:
        build.send_signal(signal.SIGKILL)
        build.wait()
    # the kill released the lock: the next build runs
    assert corpus.to_parquet(logs, out, task_mb=TASK_MB).sessions > 0


def test_a_missing_source_leaves_the_dataset_alone(logs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    corpus.to_parquet(logs, out, task_mb=TASK_MB)
    before = _files(out)
    with pytest.raises(SurfaceLabError, match="no such file or folder") as caught:
        corpus.to_parquet([logs, tmp_path / "nonexistent"], out, task_mb=TASK_MB)
    assert caught.value.code == "source-missing"
    assert _files(out) == before
    assert main(["corpus", "build", str(tmp_path / "nonexistent"), str(out)]) == 1
    assert _files(out) == before
