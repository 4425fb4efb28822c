"""`surface-lab bench`: every figure beside a baseline measured in the same run, as a
ratio, because these machines are shared and noisy. Medians over several runs."""

from __future__ import annotations

import gc
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["run_bench"]



class _Slot:
    """One slot: the baseline of an attribute read."""

    __slots__ = ("value",)

    def __init__(self, value: int) -> None:
        self.value = value

def _median(func: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _baseline_read(path: Path) -> list[int]:
    """stdlib json per line, packed rows expanded, and the obvious fold."""
    events: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as f:
        f.readline()
        for line in f:
            record = json.loads(line)
            if record["type"].endswith("-chunks"):
                items = record["data"].get("texts") or record["data"].get("args") or []
                for _ in items:
                    events.append({"type": "assistant/chunk", "seq": len(events)})
            else:
                events.append(record)
    nodes: list[int] = []
    for event in events:
        op = event.get("surfaceOp")
        if op == "append":
            nodes.append(event["seq"])
        elif isinstance(op, dict):
            start, end = nodes.index(op["start"]), nodes.index(op["end"])
            nodes[start : end + 1] = [event["seq"]]
    return nodes


def _peak_ratio(code: str, path: Path) -> float:
    """Peak RSS growth of `code` (run in a fresh process) as a multiple of the file size."""
    # VmHWM, the peak RSS of this process image: ru_maxrss would carry the peak of the
    # (large) benchmark process across fork and execve.
    script = (
        "import sys, gc\n"
        "from pathlib import Path\n"
        "def hwm():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmHWM:'):\n"
        "            return int(line.split()[1]) * 1024\n"
        "path = Path(sys.argv[1])\n"
        "import surface_lab, surface_lab.notebook, pandas\n"
        "gc.collect()\n"
        "before = hwm()\n"
        f"{code}\n"
        "print(hwm() - before)\n")
    out = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                         text=True, check=True)
    return int(out.stdout.strip()) / path.stat().st_size


def _row(rows: list[list[str]], name: str, value: float, baseline_name: str,
         baseline: float, unit: str = "s") -> None:
    ratio = baseline / value if value else float("inf")
    rows.append([name, f"{value:.3f} {unit}", baseline_name, f"{baseline:.3f} {unit}",
                 f"{ratio:.2f}x"])


def run_bench(events: int = 1_000_000, *, runs: int = 3, cache: Path | None = None,
              corpus_sessions: int = 2000, skip: tuple[str, ...] = (),
              out: Callable[[str], None] = print) -> list[list[str]]:
    """Run the benchmark and return its rows (name, time, baseline, baseline time,
    baseline/time)."""
    import matplotlib

    matplotlib.use("Agg")
    import pandas as pd
    from matplotlib.figure import Figure

    from .agent.samples import generate_large
    from .notebook import Replay, events_df, plot_shadowing
    from .session import Session
    from .storage.read import read_log
    from .surface import fold_surface

    cache = cache or Path(".bench")
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"large-{events}.jsonl"
    if not path.exists():
        out(f"generating {path} ...")
        generate_large(path, events)
    rows: list[list[str]] = []
    size_mb = path.stat().st_size / 1e6

    if "read" not in skip:
        t_bytes = _median(lambda: path.read_bytes(), runs)
        t_read = _median(lambda: read_log(path, progress=None), runs)
        t_base = _median(lambda: _baseline_read(path), runs)
        _row(rows, "read_log (parse+validate+fold)", t_read, "stdlib json + plain fold",
             t_base)
        _row(rows, "read_log", t_read, "read the bytes (floor)", t_bytes)
    log = read_log(path)
    if "frames" not in skip:
        # From the path, like the baseline: reading and checking the log counts too.
        t_df = _median(lambda: events_df(path, progress=False), runs)
        t_pd = _median(lambda: pd.read_json(path, lines=True), max(1, runs - 1))
        _row(rows, "events_df(path) (typed schema)", t_df, "pd.read_json(lines=True)", t_pd)
    if "append" not in skip:
        session = Session("bench", clock=lambda: 0)
        chunk = {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0,
                                                 "text": "x "}}
        marks = {}
        start = time.perf_counter()
        total = max(events, 20_000)
        for i in range(total):
            if i in (10_000, total - 10_000):
                marks[i] = time.perf_counter()
            session.append("assistant/chunk", chunk)
        end = time.perf_counter()
        first = marks[10_000] - start
        last = end - marks[total - 10_000]
        _row(rows, f"last 10k of {total} appends", last, "first 10k appends", first)
        surface = session.surface
        t_nodes = _median(lambda: [surface.nodes for _ in range(100_000)], runs) / 100_000
        slot = _Slot(0)  # the read of a slot, as `nodes` reads the surface's own
        t_attr = _median(lambda: [slot.value for _ in range(100_000)], runs) / 100_000
        _row(rows, "surface.nodes, nothing new", t_nodes * 1e6, "an attribute read",
             t_attr * 1e6, "us")
    if "replay" not in skip:
        replay = Replay(log, progress=False)
        rng = random.Random(1)
        targets = [rng.randrange(len(log.events)) for _ in range(200)]
        t_seek = _median(lambda: [replay.seek(t) for t in targets], runs) / len(targets)
        t_fold = _median(lambda: fold_surface(log.events), runs)
        _row(rows, "Replay.seek (random)", t_seek, "fold_surface (full)", t_fold)
        rows += _widget_rows(log, runs)
    if "plot" not in skip:
        small_events = max(events // 10, 1000)
        small_path = cache / f"large-{small_events}.jsonl"
        if not small_path.exists():
            generate_large(small_path, small_events)
        small = read_log(small_path)
        artists = {}

        def draw(which: Any) -> None:
            figure = Figure()
            ax = figure.add_subplot()
            plot_shadowing(which, ax=ax)
            figure.savefig(os.devnull, format="png")
            artists[id(which)] = len(ax.get_children())

        t_small = _median(lambda: draw(small), max(1, runs - 1))
        t_large = _median(lambda: draw(log), max(1, runs - 1))
        _row(rows, f"plot_shadowing {len(log.events)} events", t_large,
             f"plot_shadowing {len(small.events)} events", t_small)
        rows.append(["  artists (large / small)", str(artists[id(log)]), "",
                     str(artists[id(small)]), ""])
    if "audit" not in skip:
        rows += _audit_rows(cache, path, events, runs)
    if "memory" not in skip:
        read_peak = _peak_ratio("log = surface_lab.read_log(path)", path)
        df_peak = _peak_ratio("import surface_lab.notebook as nb\n"
                              "df = nb.events_df(surface_lab.read_log(path), progress=False)",
                              path)
        rows.append(["peak memory of read_log", f"{read_peak:.1f}x file", "file size",
                     f"{size_mb:.0f} MB", ""])
        rows.append(["peak memory of read_log + events_df", f"{df_peak:.1f}x file",
                      "file size", f"{size_mb:.0f} MB", ""])
    if "corpus" not in skip and corpus_sessions:
        rows += _corpus_rows(cache, corpus_sessions, runs,
                             large=path if "memory" not in skip else None)
    return rows


def _widget_rows(log: Any, runs: int) -> list[list[str]]:
    """A `ReplayWidget` step as Play makes it (slider + 1: seek, the HTML view and the
    figure's PNG), beside re-rendering the whole figure per step (the widget's old way)
    and beside the 300 ms Play interval of the tour."""
    from .notebook import ReplayWidget
    from .notebook.plots import figure_png, plot_surface_size

    widget = ReplayWidget(log, start=len(log.events) // 2)
    steps = 20

    def play() -> None:
        widget.slider.value = len(log.events) // 2
        for _ in range(steps):
            widget.step_button.click()

    t_step = _median(play, runs) / (steps + 1)
    t_full = _median(lambda: figure_png(plot_surface_size, widget.replay.log,
                                        marker=widget.replay.seq, size=(10, 2.6), dpi=90),
                     max(1, runs - 1))
    rows: list[list[str]] = []
    _row(rows, f"ReplayWidget step ({len(log.events)} events)", t_step,
         "whole-figure PNG per step", t_full)
    _row(rows, "ReplayWidget step", t_step, "Play interval of the tour", 0.300)
    return rows


def _audit_rows(cache: Path, path: Path, events: int, runs: int) -> list[list[str]]:
    """The audit from the path beside `read_log` of the same path, and on logs of two
    sizes: its cost follows the replaces, so it grows with their number."""
    from .agent.samples import generate_large
    from .analysis.evidence import find_lost_evidence
    from .analysis.source import load_source
    from .notebook import compaction_audit, replacements_df, tokens_df
    from .storage.read import read_log

    small_path = cache / f"large-{max(events // 10, 1000)}.jsonl"
    if not small_path.exists():
        generate_large(small_path, max(events // 10, 1000))
    rows: list[list[str]] = []
    # Interleaved, one of each per round, so that a shared machine's drift hits the
    # measure and its baseline alike.
    times: dict[str, list[float]] = {"read": [], "frame": [], "audit": [], "small": [],
                                     "evidence": [], "tokens": []}
    log = load_source(path, progress=False)  # the evidence step alone, of a loaded log
    for _ in range(runs):
        for name, func in (("read", lambda: read_log(path, progress=None)),
                           ("frame", lambda: replacements_df(path, progress=False)),
                           ("audit", lambda: compaction_audit(path, progress=False)),
                           ("small", lambda: compaction_audit(small_path, progress=False)),
                           ("evidence", lambda: find_lost_evidence(log.events, log.plans)),
                           ("tokens", lambda: tokens_df(path, progress=False))):
            times[name].append(_median(func, 1))
    t_read, t_frame, t_audit, t_small, t_evidence, t_tokens = (
        statistics.median(times[n]) for n in times)
    _row(rows, "replacements_df(path)", t_frame, "read_log", t_read)
    _row(rows, "compaction_audit(path)", t_audit, "read_log", t_read)
    _row(rows, "find_lost_evidence(events, plans)", t_evidence, "read_log", t_read)
    _row(rows, "tokens_df(path) (one row per request)", t_tokens, "read_log", t_read)
    large_n = len(read_log(path).fold.replacements)
    small_n = len(read_log(small_path).fold.replacements)
    _row(rows, f"compaction_audit(path), {large_n} replaces", t_audit,
         f"compaction_audit(path), {small_n} replaces", t_small)
    return rows


def _build_peak(logs: Path, target: Path) -> int:
    """Peak RSS growth of a serial corpus build in a fresh process, in bytes, above the
    process once it has built one session (its imports, the price table): what the build
    holds, not the interpreter. The task size is fixed: memory follows the task."""
    script = ("import shutil, sys\n"
              "from pathlib import Path\n"
              "from surface_lab import corpus\n"
              "def hwm():\n"
              "    return next(int(l.split()[1]) * 1024 for l in open('/proc/self/status')\n"
              "                if l.startswith('VmHWM:'))\n"
              "from surface_lab.agent.samples import generate_corpus\n"
              "warm = Path(sys.argv[2] + '.warm')\n"
              "shutil.rmtree(sys.argv[2], ignore_errors=True)\n"
              "shutil.rmtree(warm, ignore_errors=True)\n"
              "generate_corpus(warm / 'logs', 1)\n"
              "corpus.to_parquet(warm / 'logs', warm / 'out', task_mb=16)\n"
              "shutil.rmtree(warm, ignore_errors=True)\n"
              "before = hwm()\n"
              "corpus.to_parquet(sys.argv[1], sys.argv[2], task_mb=16)\n"
              "print(hwm() - before)\n")
    done = subprocess.run([sys.executable, "-c", script, str(logs), str(target)],
                          capture_output=True, text=True, check=True)
    return int(done.stdout.strip())


def _largest(logs: Path) -> int:
    return max(p.stat().st_size for p in logs.glob("*.jsonl"))


def _corpus_rows(cache: Path, sessions: int, runs: int,
                 large: Path | None = None) -> list[list[str]]:
    import shutil

    from . import corpus
    from .agent.samples import generate_corpus
    from .storage.read import read_log

    logs = cache / f"corpus-{sessions}"
    if not logs.exists():
        generate_corpus(logs, sessions)
    files = sorted(logs.glob("*.jsonl"))
    rows: list[list[str]] = []
    t_loop = _median(lambda: [read_log(f, progress=None) for f in files], runs)
    import importlib

    distributed: Any = importlib.import_module("dask.distributed")
    # the Dask build runs on a standing cluster (as on a real one, started once and used
    # by many builds); its start-up is a row of its own. Engines take turns each run, so
    # the load of a shared machine falls on all of them alike; each row is the median.
    start = time.perf_counter()
    cluster = distributed.LocalCluster(n_workers=os.cpu_count() or 2, threads_per_worker=1,
                                       processes=True, dashboard_address=None)
    client = distributed.Client(cluster)
    t_start = time.perf_counter() - start
    times: dict[str, list[float]] = {"serial": [], "processes": [], "dask": []}
    try:
        for _ in range(runs):
            for engine in times:
                target = cache / f"corpus-out-{engine}"
                shutil.rmtree(target, ignore_errors=True)
                gc.collect()
                start = time.perf_counter()
                corpus.to_parquet(logs, target, engine=engine,
                                  client=client if engine == "dask" else None)
                times[engine].append(time.perf_counter() - start)
    finally:
        client.close()
        cluster.close()
    timings = {engine: statistics.median(t) for engine, t in times.items()}
    manifest = corpus.Manifest.load(cache / "corpus-out-serial")
    _row(rows, f"corpus build, serial ({sessions} sessions, {manifest.events} events)",
         timings["serial"], "read_log loop over the same files", t_loop)
    for engine in ("processes", "dask"):
        name = {"processes": f"processes ({os.cpu_count()} processes)",
                "dask": f"dask ({os.cpu_count()}-worker LocalCluster, started)"}[engine]
        _row(rows, f"corpus build, {name}, {manifest.tasks} tasks", timings[engine],
             "corpus build, serial", timings["serial"])
    _row(rows, "Dask LocalCluster start-up (once per cluster)", t_start,
         "corpus build, serial", timings["serial"])
    serial_out = cache / "corpus-out-serial"
    t_again = _median(lambda: corpus.to_parquet(logs, serial_out), runs)
    _row(rows, "corpus rebuild, nothing changed (incremental)", t_again,
         "corpus build, serial", timings["serial"])
    newest = files[-1]
    held = newest.read_bytes()

    def one_grew() -> None:  # an agent appended to one session: its task is rebuilt
        newest.write_bytes(held[: len(held) // 2])
        corpus.to_parquet(logs, serial_out)
        newest.write_bytes(held)
        start = time.perf_counter()
        corpus.to_parquet(logs, serial_out)
        grew.append(time.perf_counter() - start)

    grew: list[float] = []
    try:
        one_grew()
    finally:
        newest.write_bytes(held)
    _row(rows, "corpus rebuild, one session grew (incremental)", grew[0],
         "corpus build, serial", timings["serial"])
    for count in sorted({min(200, sessions), sessions}):
        subset = cache / f"corpus-{count}"
        if not subset.exists():
            generate_corpus(subset, count)
        peak = _build_peak(subset, cache / f"corpus-peak-{count}")
        largest = _largest(subset)
        rows.append([f"peak memory, serial build of {count} sessions, 16 MB tasks",
                     f"{peak / 1e6:.0f} MB", "largest session file",
                     f"{largest / 1e6:.1f} MB", f"{peak / largest:.1f}x file"])
    if large is not None:
        peak = _build_peak(large, cache / "corpus-peak-large")
        rows.append([f"peak memory, corpus build of {large.name}", f"{peak / 1e6:.0f} MB",
                     "its file", f"{large.stat().st_size / 1e6:.0f} MB",
                     f"{peak / large.stat().st_size:.1f}x file"])
    c = corpus.open_corpus(cache / "corpus-out-serial")
    t_query = _median(lambda: c.sql("select type, count(*) from events group by all"), runs)
    t_audit = _median(lambda: c.sql(
        "select r.kind, count(*), sum(r.n_at_risk) from replaces r join sessions s "
        "using (session_key) group by all"), runs)
    _row(rows, "corpus query: events by type (DuckDB)", t_query, "corpus build, serial",
         timings["serial"])
    _row(rows, "corpus query: audit join (DuckDB)", t_audit, "corpus build, serial",
         timings["serial"])
    c.close()
    return rows
