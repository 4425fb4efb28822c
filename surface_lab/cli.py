"""The `surface-lab` command (SPEC 13). Exit codes: 0 success or valid, 1 invalid, refused
or failed, 2 usage error. Bad input never prints a traceback."""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from .errors import StorageError, SurfaceLabError
from .problems import Problem
from .reading.paths import is_sqlite, resolve
from .reading.read import LogReading, read_path
from .storage.base import Store
from .storage.jsonl import JsonlStore
from .storage.sqlite import SqliteStore

__all__ = ["main"]

_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def _out(text: str = "", stream: TextIO | None = None) -> None:
    print(text, file=stream or sys.stdout)


def _targets(name: str | Path) -> list[tuple[Path, str | None]]:
    """Every (log, session) a path holds (`reading.paths.resolve`): one (file, None) for
    a log file, one per session of a store or database, those of each log of a folder or
    glob of plain logs."""
    found = resolve(name)
    if found.kind == "logs":
        return [target for member in found.members for target in _targets(member)]
    if found.kind == "sqlite":
        with SqliteStore(found.path, read_only=True) as db:
            return [(found.path, s) for s in db.list()]
    if found.kind == "store":
        if _foreign(found.path):
            return [(found.path, None)]  # read_path names the importer to use
        return [(found.path, s) for s in JsonlStore(found.path).list()]
    assert found.file is not None
    return [(found.path, None)]


def _read(args: argparse.Namespace) -> LogReading:
    """The log a command's PATH and --session name."""
    return read_path(args.path, session_id=args.session, option="--session ID")


def _foreign(path: Path) -> bool:
    from .importers import detect_format

    return detect_format(path) is not None


def _label(path: Path, session_id: str | None) -> str:
    return str(path) if session_id is None else f"{path}#{session_id}"


# -- validate ----------------------------------------------------------------------------


def _validate(name: str | Path, counts: dict[str, int]) -> None:
    """Validate every log `name` holds (each log of a folder or glob on its own), one
    line per problem on stdout and a verdict per log on stderr; count the verdicts."""
    try:
        found = resolve(name)
        targets = [] if found.kind == "logs" else _targets(found.path)
    except SurfaceLabError as err:
        _out(str(Problem.from_error(err, path=str(name))))
        counts["INVALID"] += 1
        return
    if found.kind == "logs":
        for member in found.members:
            _validate(member, counts)
        return
    if not targets:
        _out(f"{name}: error: holds no log or session to validate")
        counts["INVALID"] += 1
    for path, session_id in targets:
        try:  # the full pipeline: every problem named up front
            log = read_path(path, session_id=session_id, check="full", option="--session ID")
        except SurfaceLabError as err:
            _out(str(Problem.from_error(err, path=_label(path, session_id))))
            counts["INVALID"] += 1
            continue
        for problem in log.problems:
            _out(str(problem))
        verdict = "valid" if log.valid else "INVALID"
        counts[verdict] += 1
        _out(f"{_label(path, session_id)}: {verdict}: {len(log.events)} events, "
             f"{len(log.fold.nodes)} surface entries, {log.form} form", sys.stderr)


def cmd_validate(args: argparse.Namespace) -> int:
    counts = {"valid": 0, "INVALID": 0}
    for name in args.paths:
        _validate(name, counts)
    if sum(counts.values()) > 1:
        _out(f"validated {sum(counts.values())} logs: {counts['valid']} valid, "
             f"{counts['INVALID']} invalid", sys.stderr)
    return 1 if counts["INVALID"] else 0


# -- surface -----------------------------------------------------------------------------


def cmd_surface(args: argparse.Namespace) -> int:
    log = _read(args)
    notes = [str(p) for p in log.problems]
    if log.mode == "linear":
        notes.append(f"{args.path}: note: linear-fallback: nodes are the legacy linear scan")
    if args.json:
        _out(json.dumps({
            "nodes": log.fold.nodes,
            "replacements": [r.to_json() for r in log.fold.replacements],
            "replace_generation": log.fold.replace_generation,
            "form": log.form,
            "notes": notes,
        }, ensure_ascii=False))
    else:
        for note in notes:
            _out(note, sys.stderr)
        _out(f"nodes ({len(log.fold.nodes)}): {log.fold.nodes}")
        _out(f"replace generation: {log.fold.replace_generation}")
        for r in log.fold.replacements:
            kind = log.events[r.seq]["type"]
            _out(f"  seq {r.seq} {kind} replaced {r.start}..{r.end}: shadowed {r.shadowed_seqs}")
    return 0 if log.valid else 1


# -- repair ------------------------------------------------------------------------------


def _store_for(path: Path, *, create: bool = False) -> Store:
    if is_sqlite(path) or (create and path.suffix in _SQLITE_SUFFIXES):
        return SqliteStore(path)
    if path.is_dir() or (create and not path.suffix):
        return JsonlStore(path)
    return JsonlStore.for_file(path)


def cmd_repair(args: argparse.Namespace) -> int:
    path = Path(args.path)
    log = _read(args)
    # a crash tail (the only error a readable log can carry) or a torn fragment
    dropped = [p for p in log.problems if p.severity == "error" or p.code == "torn-tail"]
    for problem in dropped:
        _out(str(problem), sys.stderr)
    if not log.closers and not dropped:
        _out(f"{args.path}: nothing to repair")
        return 0
    for closer in log.closers:
        _out(json.dumps(closer, ensure_ascii=False))
    if not args.write:
        _out(f"{args.path}: {len(log.closers)} closer(s) shown, nothing written "
             f"(use --write to commit them)", sys.stderr)
        return 0
    with _store_for(path) as store:
        store.load(log.session_id)
    _out(f"{args.path}: repaired: {len(dropped)} tail problem(s) dropped, "
         f"{len(log.closers)} closer(s) appended durably", sys.stderr)
    return 0


# -- convert -----------------------------------------------------------------------------


def cmd_import(args: argparse.Namespace, src: Path, dst: Path) -> int:
    from .importers import import_any

    result = import_any(src, fmt=args.fmt, leaf=args.leaf, tombstones=args.tombstones,
                        strict=args.strict)
    for finding in [*result.notes, *result.problems]:
        _out(str(finding))
    if result.is_empty:  # the empty-import problem above says why
        _out(f"{src}: not converted: nothing the model saw; {dst} not written", sys.stderr)
        return 1
    if dst.exists():
        raise StorageError(f"{dst}: already exists; nothing written", path=str(dst))
    store = JsonlStore.for_file(dst)
    store.create(result.header)
    store.append(str(result.header["id"]), result.events)
    replaced = sum(len(c["shadowed_seqs"]) for c in result.compactions)
    _out(f"{src} -> {dst}: {result.format}, {len(result.events)} events, "
         f"{len(result.compactions)} compaction(s) shadowing {replaced} entries, "
         f"{len(result.omitted)} source record(s) left out (see the notes), "
         f"{len(result.problems)} problem(s)", sys.stderr)
    return 1 if args.strict and result.problems else 0


def cmd_convert(args: argparse.Namespace) -> int:
    if args.dst and args.output and args.dst != args.output:
        raise StorageError("give the destination once (DST or -o)")
    target = args.output or args.dst
    if not target:
        raise StorageError("convert needs a destination: DST or -o OUT.jsonl")
    src, dst = Path(args.src), Path(target)
    if args.fmt is not None or ((not src.is_dir() or not (src / "session.jsonl").exists()) \
            and _foreign(src)):
        return cmd_import(args, src, dst)
    readings = [read_path(path, session_id=s, option="--session ID")
                for path, s in _targets(src)]
    bad = [r for r in readings if not r.valid]
    for r in bad:
        for p in r.problems:
            _out(str(p))
    if bad:
        _out(f"{args.src}: not converted: {len(bad)} invalid log(s); run surface-lab repair "
             f"--write first", sys.stderr)
        return 1
    if dst.suffix == ".jsonl" and len(readings) != 1:
        raise StorageError(f"{dst}: a .jsonl file holds one session; {src} holds "
                           f"{len(readings)} (give a folder or a .db instead)", path=str(dst))
    if dst.exists() and not (dst.is_dir() or is_sqlite(dst)):
        raise StorageError(f"{dst}: already exists; nothing written", path=str(dst))
    with _store_for(dst, create=True) as store:
        for r in readings:
            header = {**r.header, "delegationDepth": r.header.get("delegationDepth", 0)}
            store.create(header)
            store.append(r.session_id, r.events)
    total = sum(len(r.events) for r in readings)
    _out(f"{args.src} -> {args.dst}: {len(readings)} session(s), {total} events", sys.stderr)
    return 0


# -- info --------------------------------------------------------------------------------


def _info(log: LogReading) -> dict[str, Any]:
    types = Counter(e["type"] for e in log.events)
    times = [e["time"] for e in log.events]
    steps = {(e["data"].get("turn"), e["data"].get("step")) for e in log.events
             if e["type"] == "step/start" and isinstance(e["data"], dict)}
    return {
        "session": log.session_id,
        "form": log.form,
        "mode": log.mode,
        "events": len(log.events),
        "turns": types.get("turn/start", 0),
        "steps": len(steps),
        "surface_entries": len(log.fold.nodes),
        "replacements": len(log.fold.replacements),
        "shadowed": sum(len(r.shadowed_seqs) for r in log.fold.replacements),
        "closers_pending": len(log.closers),
        "time_first": min(times) if times else None,
        "time_last": max(times) if times else None,
        "time_span_ms": (max(times) - min(times)) if times else 0,
        "types": dict(sorted(types.items())),
        "problems": [str(p) for p in log.problems],
    }


def cmd_info(args: argparse.Namespace) -> int:
    log = _read(args)
    info = _info(log)
    if args.json:
        _out(json.dumps(info, ensure_ascii=False))
        return 0
    for key, value in info.items():
        if key == "types":
            _out("types:")
            for kind, n in value.items():
                _out(f"  {kind:<32} {n}")
        elif key == "problems":
            for p in value:
                _out(p, sys.stderr)
        else:
            _out(f"{key + ':':<18}{value}")
    return 0


# -- audit -------------------------------------------------------------------------------

DEFAULT_SAMPLE = Path("sample_logs") / "long-compaction.jsonl"


def _default_audit_source() -> Any:
    """The long compaction sample: from ./sample_logs, beside the package, or built."""
    for base in (Path.cwd(), Path(__file__).resolve().parents[1]):
        if (base / DEFAULT_SAMPLE).is_file():
            return base / DEFAULT_SAMPLE
    from .agent.samples import long_compaction

    return long_compaction()


def cmd_audit(args: argparse.Namespace) -> int:
    try:
        from .notebook.audit import audit_report
    except ImportError as err:
        raise SurfaceLabError(f"the audit needs the notebook extras ({err.name} is missing):"
                              f" python -m pip install -e '.[notebook]'") from None
    if args.path is not None:
        source: Any = _read(args)
        for problem in source.problems:
            _out(str(problem), sys.stderr)
    else:
        source = _default_audit_source()
        _out(f"auditing {source if isinstance(source, Path) else 'the long-compaction sample'}"
             f" (give a PATH to audit another log)", sys.stderr)
    result = audit_report(source, args.out)
    _out(result["summary"])
    for failed in result["failed"]:
        _out(f"failed compaction {failed['compaction_id']} at seq {failed['seq']}: "
             f"{failed['error']}")
    _out(f"wrote {result['png']}\nwrote {result['html']}")
    bad = result["audit"]["recorded_matches"].fillna(True).eq(False).sum()
    return 1 if bad else 0


# -- corpus ------------------------------------------------------------------------------


def cmd_corpus_build(args: argparse.Namespace) -> int:
    from . import corpus

    client: Any = args.scheduler
    if args.engine == "dask" and client is None:
        raise SurfaceLabError("--engine dask needs --scheduler ADDRESS (a running "
                              "dask.distributed scheduler)", code="usage")
    manifest = corpus.to_parquet(args.sources, args.out, engine=args.engine, client=client,
                                 workers=args.workers, task_mb=args.task_mb,
                                 progress=not args.no_progress)
    for problem in manifest.problems:
        _out(problem["problem"])
    _out(f"{args.out}: {manifest.sessions} sessions, {manifest.events} events in "
         f"{manifest.tasks} tasks ({manifest.engine}); {len(manifest.problems)} session(s) "
         f"with problems", sys.stderr)
    return 0


def cmd_corpus_sql(args: argparse.Namespace) -> int:
    import duckdb

    from . import corpus

    c = corpus.open(args.out)
    try:
        frame = c.sql(args.query)
    except duckdb.Error as err:
        raise SurfaceLabError(f"query failed: {err}", code="query-invalid") from None
    finally:
        c.close()
    _out(frame.to_csv(index=False).rstrip("\n") if args.csv else frame.to_string(index=False))
    return 0


# -- bench -------------------------------------------------------------------------------


def cmd_bench(args: argparse.Namespace) -> int:
    import platform

    from .bench import run_bench

    rows = run_bench(args.events, runs=args.runs, cache=Path(args.cache),
                     corpus_sessions=args.corpus_sessions, skip=tuple(args.skip or ()),
                     out=lambda text: _out(text, sys.stderr))
    header = ["measure", "time", "baseline (same run)", "baseline time", "baseline/time"]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(5)]
    _out(f"surface-lab bench --events {args.events} (medians of {args.runs} runs; "
         f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()})")
    for row in [header, ["-" * w for w in widths], *rows]:
        _out(" | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
    return 0


# -- generate ----------------------------------------------------------------------------


def cmd_generate(args: argparse.Namespace) -> int:
    import time

    from .agent.samples import generate_large, generate_samples

    started = time.perf_counter()
    if args.events is not None:
        if args.events < 1:
            raise StorageError(f"--events must be at least 1, got {args.events}")
        path, written = generate_large(Path(args.out) / f"large-{args.events}.jsonl",
                                       args.events)
        size = path.stat().st_size
        _out(f"{path}: {written} events, {size / 1e6:.1f} MB in "
             f"{time.perf_counter() - started:.1f} s")
        return 0
    for path in generate_samples(args.out):
        _out(str(path))
    return 0


# -- entry point -------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="surface-lab", description="Inspect, check and repair surface session logs.")
    parser.add_argument("--debug", action="store_true",
                        help="show a traceback for unexpected internal errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("validate", help="check logs; one line per problem")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.set_defaults(run=cmd_validate)

    p = sub.add_parser("surface", help="the surface nodes and the replacement history")
    p.add_argument("path", metavar="PATH")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.add_argument("--session", help="the session of a store or database")
    p.set_defaults(run=cmd_surface)

    p = sub.add_parser("repair", help="show (or --write) the closers of a crashed turn")
    p.add_argument("path", metavar="PATH")
    p.add_argument("--write", action="store_true", help="commit the repair durably")
    p.add_argument("--session", help="the session of a store or database")
    p.set_defaults(run=cmd_repair)

    p = sub.add_parser("convert", help="copy logs between JSONL and SQLite, or import "
                                       "another agent's log")
    p.add_argument("src", metavar="SRC")
    p.add_argument("dst", metavar="DST", nargs="?",
                   help="a .jsonl file, a .db/.sqlite database, or a JSONL store folder")
    p.add_argument("-o", "--output", metavar="OUT", help="the destination (same as DST)")
    p.add_argument("--from", dest="fmt", choices=["claude-code", "codex", "pi", "atif",
                                                  "openhands"],
                   help="import another tool's log (detected when left out)")
    p.add_argument("--leaf", help="the branch to import (a record or entry id)")
    p.add_argument("--tombstones", action="store_true",
                   help="stand tombstones in for deleted runs instead of re-appending")
    p.add_argument("--strict", action="store_true", help="exit 1 when the import finds a "
                                                         "problem")
    p.set_defaults(run=cmd_convert)

    p = sub.add_parser("audit", help="audit the compactions of a log: table, PNG, HTML")
    p.add_argument("path", metavar="PATH", nargs="?",
                   help="the log (default: the long compaction sample)")
    p.add_argument("--out", default="surface-lab-audit", metavar="DIR",
                   help="where the PNG and HTML go (default: ./surface-lab-audit)")
    p.add_argument("--session", help="the session of a store or database")
    p.set_defaults(run=cmd_audit)

    p = sub.add_parser("corpus", help="build and query a Parquet dataset of many sessions")
    corpus_sub = p.add_subparsers(dest="corpus_command", required=True, metavar="ACTION")
    q = corpus_sub.add_parser("build", help="logs -> date-partitioned Parquet + manifest")
    q.add_argument("sources", nargs="+", metavar="SRC",
                   help="files, folders, globs or SQLite databases")
    q.add_argument("out", metavar="OUT")
    q.add_argument("--engine", choices=["serial", "processes", "dask"], default="processes")
    q.add_argument("--scheduler", metavar="ADDRESS",
                   help="a dask.distributed scheduler, e.g. tcp://10.0.0.5:8786")
    q.add_argument("--workers", type=int, help="processes for --engine processes")
    q.add_argument("--task-mb", type=float, default=64, help="input per task (default 64)")
    q.add_argument("--no-progress", action="store_true", help="no progress bar")
    q.set_defaults(run=cmd_corpus_build)
    q = corpus_sub.add_parser("sql", help="run SQL over a built dataset (DuckDB)")
    q.add_argument("out", metavar="OUT")
    q.add_argument("query", metavar="QUERY")
    q.add_argument("--csv", action="store_true", help="CSV instead of a table")
    q.set_defaults(run=cmd_corpus_sql)

    p = sub.add_parser("bench", help="timings beside same-run baselines, as ratios")
    p.add_argument("--events", type=int, default=1_000_000, metavar="N")
    p.add_argument("--runs", type=int, default=3, help="runs per measure (median)")
    p.add_argument("--cache", default=".bench", help="where generated logs are kept")
    p.add_argument("--corpus-sessions", type=int, default=2000, metavar="N",
                   help="sessions in the corpus benchmark (0 skips it)")
    p.add_argument("--skip", nargs="*", choices=["read", "frames", "append", "replay",
                                                 "plot", "memory", "corpus"])
    p.set_defaults(run=cmd_bench)

    p = sub.add_parser("generate", help="write the sample logs (or one large session)")
    p.add_argument("out", metavar="OUT_DIR")
    p.add_argument("--events", type=int, metavar="N",
                   help="write one synthetic session of about N events instead")
    p.set_defaults(run=cmd_generate)

    p = sub.add_parser("info", help="counts by type, turns, steps, replacements, time span")
    p.add_argument("path", metavar="PATH")
    p.add_argument("--json", action="store_true")
    p.add_argument("--session", help="the session of a store or database")
    p.set_defaults(run=cmd_info)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except SurfaceLabError as err:
        _out(str(Problem.from_error(err, path=getattr(args, "path", None))))
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # the one place that turns any failure into one line
        if args.debug:
            traceback.print_exc()
        _out(f"surface-lab: internal error: {type(err).__name__}: {err} "
             f"(rerun with --debug for a traceback)", sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
