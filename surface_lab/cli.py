"""The `surface-lab` command (SPEC 13). Exit codes: 0 success or valid, 1 invalid, refused
or failed, 2 usage error. Bad input never prints a traceback."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from .errors import StorageError, SurfaceLabError
from .glossary import plural
from .problems import Problem
from .reading.paths import (
    LOG_SUFFIXES,
    SQLITE_SUFFIXES,
    Discovery,
    discover,
    expand,
    is_sqlite,
    log_format,
    resolve,
)
from .storage.base import Store
from .storage.jsonl import JsonlStore
from .storage.read import LogReading, read_path
from .storage.sqlite import SqliteStore

__all__ = ["json_safe", "main", "terminal_safe"]

_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def terminal_safe(text: str) -> str:
    """`text` with every character a terminal could act on spelled as an escape (`\\x1b`,
    `\\n`, `\\u202e`, a lone surrogate as `\\udc80`): control and format characters,
    line and paragraph separators, so log content can neither move the cursor, retitle
    the window, nor start a line of its own."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    if ch in _NAMED_ESCAPES:
        return _NAMED_ESCAPES[ch]
    code = ord(ch)
    return (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000
        else f"\\U{code:08x}")


def json_safe(value: Any) -> str:
    """One JSON document on one line in which every character `terminal_safe` escapes is a
    JSON `\\u` escape, so `json.loads` gives back the exact value."""
    text = json.dumps(value, ensure_ascii=False)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _json_escape(ch) for ch in text)


def _json_escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # outside the BMP: a surrogate pair, as JSON spells it
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _out(text: object = "", stream: TextIO | None = None) -> None:
    """Print one line. With `_out_json`, the only way the commands write: anything from a
    log (types, ids, messages, paths) may hold control characters, so it is escaped."""
    print(terminal_safe(str(text)), file=stream or sys.stdout)


def _out_json(value: Any) -> None:
    """Print one JSON document on one line (`json_safe`)."""
    print(json_safe(value))


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
    """Validate every log `name` holds (`reading.paths.expand`: each log of a folder or
    glob on its own, another agent's imported), one line per problem on stdout and a
    verdict per log on stderr; count the verdicts."""
    try:
        targets = [(path, sid) for path, sid, _ in _sessions(expand([name]))]
    except SurfaceLabError as err:
        _out(str(_problem(err, str(name))))
        counts["INVALID"] += 1
        return
    if not targets:
        _out(f"{name}: source-empty: holds no log or session to validate")
        counts["INVALID"] += 1
    for path, session_id in targets:
        try:  # the full pipeline: every problem named up front
            log = read_path(path, session_id=session_id, check="full", option="--session ID")
        except SurfaceLabError as err:
            _out(str(_problem(err, _label(path, session_id))))
            counts["INVALID"] += 1
            continue
        unanswered = _unanswered(log)
        for problem in [*log.problems, *unanswered]:
            _out(str(problem))
        verdict = "valid" if log.valid and not unanswered else "INVALID"
        counts[verdict] += 1
        form = f"{log.form} form" if log.source_format == "surface" else (
            f"imported from {log.source_format}")
        _out(f"{_label(path, session_id)}: {verdict}: {len(log.events)} events, "
             f"{len(log.fold.nodes)} surface entries, {form}", sys.stderr)


def _unanswered(log: LogReading) -> list[Problem]:
    """Tool calls still unanswered when the model is asked again (the closers a crash
    needs count as answers)."""
    from .contract import unanswered_tool_call_problems

    return unanswered_tool_call_problems([*log.events, *log.closers], path=log.path,
                                         lines=log.lines,
                                         replacements=log.fold.replacements)


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
        _out_json({
            "nodes": log.fold.nodes,
            "replacements": [r.to_json() for r in log.fold.replacements],
            "replace_generation": log.fold.replace_generation,
            "form": log.form,
            "notes": notes,
        })
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
    if is_sqlite(path) or (create and path.suffix in SQLITE_SUFFIXES):
        return SqliteStore(path)
    if path.is_dir() or (create and not path.suffix):
        return JsonlStore(path)
    return JsonlStore.for_file(path)


def cmd_repair(args: argparse.Namespace) -> int:
    path = Path(args.path)
    log = _read(args)
    if log.source_format != "surface":
        raise StorageError(f"{args.path}: a {log.source_format} log, not a surface log: "
                           f"repair writes to the log it repairs, never to another tool's "
                           f"file; convert it (surface-lab convert {args.path} -o OUT.jsonl) "
                           f"and repair the copy; nothing written", code="repair-foreign",
                           path=str(args.path))
    # a crash tail (the only error a readable log can carry) or a torn fragment
    dropped = [p for p in log.problems if p.severity == "error" or p.code == "torn-tail"]
    for problem in dropped:  # "run surface-lab repair" is what the user is doing already
        _out(_REPAIR_HINT.sub("", str(problem)), sys.stderr)
    if not log.closers and not dropped:
        _out(f"{args.path}: nothing to repair")
        return 0
    for closer in log.closers:
        _out_json(closer)
    if not args.write:
        _out(f"{args.path}: {len(dropped)} tail problem(s) to drop, {len(log.closers)} "
             f"closer(s) to append; nothing written (add --write to commit the repair)",
             sys.stderr)
        return 0
    with _store_for(path) as store:
        store.load(log.session_id)
    _out(f"{args.path}: repaired: {len(dropped)} tail problem(s) dropped, "
         f"{len(log.closers)} closer(s) appended durably", sys.stderr)
    return 0


# a scan problem's advice to run the repair this command is running
_REPAIR_HINT = re.compile(r"; run surface-lab repair$")


# -- convert -----------------------------------------------------------------------------


_STDOUT_NAMES = ("-", "/dev/stdout")


def _is_stdout(target: str) -> bool:
    """`-` and `/dev/stdout` name the standard output."""
    return target in _STDOUT_NAMES


def _write_stdout(header: Any, events: Sequence[Any]) -> None:
    """One session as a `.jsonl` log on stdout: checked and encoded whole before the
    first byte is written (a refused event writes nothing)."""
    from .header import check_header
    from .storage.base import checked_batch
    from .storage.jsonl import dumps_header, encode_events

    data = dumps_header(check_header(header)) + encode_events(checked_batch(events))
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def cmd_import(args: argparse.Namespace, src: Path, dst: Path) -> int:
    from .importers import import_any

    result = import_any(src, fmt=args.fmt, leaf=args.leaf, tombstones=args.tombstones,
                        strict=args.strict)
    for finding in [*result.notes, *result.problems]:
        _out(str(finding), sys.stderr)
    if result.is_empty:  # the empty-import problem above says why
        _out(f"{src}: not converted: nothing the model saw; {dst} not written", sys.stderr)
        return 1
    if _is_stdout(str(dst)):
        _write_stdout(result.header, result.events)
    else:
        if dst.exists():
            raise StorageError(f"{dst}: already exists; nothing written", code="target-exists",
                               path=str(dst))
        store = JsonlStore.for_file(dst)
        store.create(result.header)
        store.append(str(result.header["id"]), result.events)
    replaced = sum(len(c["shadowed_seqs"]) for c in result.compactions)
    _out(f"{src} -> {'stdout' if _is_stdout(str(dst)) else dst}: {result.format}, "
         f"{len(result.events)} events, "
         f"{len(result.compactions)} compaction(s) shadowing {replaced} entries, "
         f"{len(result.omitted)} source record(s) left out (see the notes), "
         f"{len(result.problems)} problem(s)", sys.stderr)
    return 1 if args.strict and result.problems else 0


def cmd_convert(args: argparse.Namespace) -> int:
    if args.dst and args.output and args.dst != args.output:
        raise _usage("give the destination once (DST or -o OUT)")
    target = args.output or args.dst
    if not target:
        raise _usage("convert needs a destination: DST or -o OUT")
    src, dst = Path(args.src), Path(target)
    if (args.fmt is not None or ((not src.is_dir() or not (src / "session.jsonl").exists())
            and _foreign(src))):
        if args.session is not None:
            raise _usage("--session picks a session of a store or database; an imported "
                         "log is one session (--leaf picks its branch)")
        return cmd_import(args, src, dst)
    if args.session is not None:
        readings = [read_path(src, session_id=args.session, option="--session ID")]
    else:
        readings = [read_path(path, session_id=s, option="--session ID")
                    for path, s in _targets(src)]
    bad = [r for r in readings if not r.valid]
    for r in bad:
        for p in r.problems:
            _out(str(p), sys.stderr)
    unanswered = [p for r in readings if r.valid for p in _unanswered(r)]
    for p in unanswered:  # converted as they are, but said
        _out(str(p), sys.stderr)
    if bad:
        _out(f"{args.src}: not converted: {len(bad)} invalid log(s); run surface-lab repair "
             f"--write first", sys.stderr)
        return 1
    if _is_stdout(target):
        if len(readings) != 1:
            raise StorageError(f"{target}: the standard output takes one session as a "
                               f".jsonl log; {src} holds {len(readings)} (pick one with "
                               f"--session ID)", path=target)
        [one] = readings
        _write_stdout({**one.header, "delegationDepth": one.header.get("delegationDepth", 0)},
                      list(one.events))
        _out(f"{args.src} -> stdout: 1 session(s), {len(one.events)} events", sys.stderr)
        return 0
    if dst.suffix == ".jsonl" and len(readings) != 1:
        raise StorageError(f"{dst}: a .jsonl file holds one session; {src} holds "
                           f"{len(readings)} (give a folder or a .db, or pick one with "
                           f"--session ID)", path=str(dst))
    if dst.exists() and not (dst.is_dir() or is_sqlite(dst)):
        raise StorageError(f"{dst}: already exists; nothing written", code="target-exists",
                           path=str(dst))
    with _store_for(dst, create=True) as store:
        for r in readings:
            header = {**r.header, "delegationDepth": r.header.get("delegationDepth", 0)}
            store.create(header)
            store.append(r.session_id, r.events)
    total = sum(len(r.events) for r in readings)
    said = f", {len(unanswered)} problem(s)" if unanswered else ""
    _out(f"{args.src} -> {target}: {len(readings)} session(s), {total} events{said}",
         sys.stderr)
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
        "time_first_utc": _iso(min(times)) if times else None,
        "time_last": max(times) if times else None,
        "time_last_utc": _iso(max(times)) if times else None,
        "time_span_ms": (max(times) - min(times)) if times else 0,
        "types": dict(sorted(types.items())),
        "problems": [str(p) for p in log.problems],
    }


def _iso(millis: Any) -> str | None:
    """Epoch milliseconds as ISO 8601 UTC (`2026-01-01T00:00:00.000Z`); None for a time
    no calendar holds."""
    try:
        moment = datetime.fromtimestamp(millis / 1000, UTC)
    except (OverflowError, OSError, ValueError, TypeError):
        return None
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def cmd_info(args: argparse.Namespace) -> int:
    log = _read(args)
    info = _info(log)
    if args.json:
        _out_json(info)
        return 0
    for key, value in info.items():
        if key == "types":
            _out("types:")
            for kind, n in value.items():
                _out(f"  {kind:<32} {n}")
        elif key == "problems":
            for p in value:
                _out(p, sys.stderr)
        elif not key.endswith("_utc"):
            utc = info.get(f"{key}_utc")
            _out(f"{key + ':':<18}{value}" + (f" ({utc})" if utc else ""))
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


@dataclass(frozen=True)
class AuditInput:
    """One session to audit: where it is, which of a store's sessions, and the stem of
    its report files (after the input's name, unique within the run)."""

    path: Path
    session_id: str | None
    stem: str


def _log_stem(path: Path) -> str:
    name = path.name
    for suffix in (".jsonl.zstd", ".traj.json", *LOG_SUFFIXES, *SQLITE_SUFFIXES):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def _sessions(found: Discovery) -> list[tuple[Path, str | None, str]]:
    """(path, session, report stem) of every session the found logs hold: one per session
    of a store or database, one per other log."""
    out: list[tuple[Path, str | None, str]] = []
    for item in found:
        if item.format == "store":
            out += [(item.path, sid, f"{item.path.name}-{sid}")
                    for sid in JsonlStore(item.path).list()]
        elif item.format == "sqlite":
            with SqliteStore(item.path, read_only=True) as db:
                out += [(item.path, sid, f"{_log_stem(item.path)}-{sid}") for sid in db.list()]
        else:
            out.append((item.path, None, _log_stem(item.path)))
    return out


def expand_audit_paths(names: Sequence[str], *, found: Discovery | None = None
                       ) -> list[AuditInput]:
    """Every session the arguments name (`reading.paths.expand`: log files, globs,
    folders walked for every agent's logs, JSONL stores, SQLite databases), each with a
    report stem unique within the run.

    Raises:
        StorageError: for a name that matches nothing.
    """
    out: list[AuditInput] = []
    seen: set[str] = set()
    inputs: set[tuple[int, int, str | None]] = set()
    for path, session_id, stem in _sessions(expand(names) if found is None else found):
        try:  # one file named twice (relative and absolute, or through a link): once
            st = path.stat()
            key = (st.st_dev, st.st_ino, session_id)
        except OSError:
            key = None
        if key is not None:
            if key in inputs:
                continue
            inputs.add(key)
        unique, n = stem, 1  # two sessions never share a report
        while unique in seen:
            n += 1
            unique = f"{stem}-{n}"
        seen.add(unique)
        out.append(AuditInput(path, session_id, unique))
    return out


def _one_session_dir(path: Path) -> bool:
    """A folder that is one log: a store's session folder or another agent's log."""
    return log_format(path) not in (None, "store")


def _audit_source(item: AuditInput) -> tuple[Any, list[Any], str | None]:
    """The log to audit (another agent's imported), what reading or importing it noted,
    and the importer's format (None for a log of our own)."""
    reading = read_path(item.path, session_id=item.session_id, option="--session ID")
    fmt = reading.source_format
    return reading, list(reading.problems), None if fmt == "surface" else fmt


def _audited_folder(items: Sequence[AuditInput]) -> Path:
    """The folder the report shows paths relative to: the deepest one holding every
    input."""
    folders = [os.path.abspath(item.path if item.path.is_dir() and item.session_id is None
                               and not _one_session_dir(item.path) else item.path.parent)
               for item in items]
    return Path(os.path.commonpath(folders)) if folders else Path.cwd()


def _progress(args: argparse.Namespace) -> bool:
    """Progress bars are for a person: only when stderr is a terminal, decided as the
    Python API decides (`analysis.source.shows_progress`: SURFACE_LAB_PROGRESS=1 forces
    them)."""
    from .analysis.source import shows_progress

    return shows_progress(not args.no_progress)


def cmd_audit(args: argparse.Namespace) -> int:
    try:
        from .notebook.audit import audit_report
    except ImportError as err:
        if not isinstance(err, ModuleNotFoundError) and "failed to map segment" in str(err):
            # the extension is there, the address space to load it is not (ulimit -v)
            raise MemoryError(str(err)) from None
        raise SurfaceLabError(f"the audit needs the notebook extras ({err.name} is missing):"
                              f" python -m pip install -e '.[notebook]'") from None
    progress = _progress(args)
    if args.paths:
        found = expand(args.paths)
        if len(found) and any(Path(name).is_dir() for name in args.paths):  # what the walk found
            _out(f"found {found.summary()}", sys.stderr)
        items = [item for item in expand_audit_paths(args.paths, found=found)
                 if args.session is None or item.session_id == args.session]
        if not items:
            raise StorageError("no log to audit" + (
                f" with session {args.session!r}" if args.session is not None else
                " (a folder's own log files are audited; for a tree of them give a glob: "
                "'DIR/**/*.jsonl')"), path=", ".join(args.paths))
    else:
        source = _default_audit_source()
        _out(f"auditing {source if isinstance(source, Path) else 'the long-compaction sample'}"
             f" (give a PATH to audit another log)", sys.stderr)
        if not isinstance(source, Path):  # the sample, built in memory
            result = audit_report(source, args.out, name="long-compaction", progress=progress)
            return _report_audit(args, [("the long-compaction sample", result)], True)
        items = [AuditInput(source, None, "long-compaction")]
    base = _audited_folder(items)
    done: list[tuple[str, Any]] = []
    refused: list[tuple[str, str]] = []
    for item in items:
        label = _label(item.path, item.session_id)
        try:
            source, notes, fmt = _audit_source(item)
            for note in notes:
                _out(str(note), sys.stderr)
            from .notebook.audit import shown_path

            shown = shown_path(item.path, base) + (
                f"#{item.session_id}" if item.session_id is not None else "")
            done.append((shown, audit_report(source, args.out, name=item.stem, notes=notes,
                                             progress=progress, base=base, fmt=fmt)))
        except SurfaceLabError as err:
            problem = _problem(err, label)
        except _AUDIT_FAILURES as err:  # one log of an unforeseen shape stops no other
            problem = Problem("error", "audit-failed", f"the audit of this log failed "
                              f"({type(err).__name__}: {err})", label)
        else:
            continue
        _out(str(problem), sys.stderr)
        refused.append((label, f"{problem.code}: {problem.message}"))
    bad = _report_audit(args, done, len(items) == 1, refused)
    return 1 if bad or refused else 0


# What an unforeseen value deep in one log raises; MemoryError is not one (it says
# nothing about the log, and the command ends on it).
_AUDIT_FAILURES = (TypeError, KeyError, AttributeError, IndexError, ValueError,
                   OverflowError, RecursionError, ZeroDivisionError)


def _report_audit(args: argparse.Namespace, done: list[tuple[str, Any]], alone: bool,
                  refused: Sequence[tuple[str, str]] = ()) -> int:
    """Print what each audit found (the table of a single session, a line per session;
    with --json one JSON document instead), write the index (with a row for each log that
    could not be audited); 1 if a recorded decision does not replay."""
    from .notebook.audit import audit_index, audit_table, counts_line, session_counts

    bad = 0
    sessions = []
    for label, result in done:
        counts = session_counts(result)
        bad += counts["not replaying"]
        if args.json:
            table = audit_table(result["audit"])
            sessions.append({
                "input": label, "session": result["log"].session_id,
                "format": result["format"], "model": result["model"],
                "events": len(result["log"].events), "totals": counts,
                "html": str(result["html"]), "png": str(result["png"]),
                "csv": str(result["csv"]),
                "parquet": None if result["parquet"] is None else str(result["parquet"]),
                "failed_compactions": result["failed"], "replay_differences": result["replay"],
                "replaces": json.loads(table.to_json(orient="records", default_handler=str))})
            continue
        if alone:
            for row in result["summary_rows"]:
                _out(row)
            for failed in result["failed"]:
                _out(f"failed compaction {failed['compaction_id']} at seq {failed['seq']}: "
                     f"{failed['error']}")
        for diff in result["replay"]:
            _out(f"{label}: seq {diff['seq']}: recorded-mismatch: recorded "
                 f"{diff['recorded']}, the fold computed {diff['computed']}")
        _out(f"{label}: {counts_line(counts)}; "
             + (f"{counts['not replaying']} recorded decision(s) do NOT replay"
                if counts["not replaying"] else "recorded decisions replay")
             + f" -> {result['html']}")
    missing = next((r["parquet_missing"] for _, r in done if r["parquet_missing"]), None)
    if missing:
        _out(f"note: audit tables written as CSV only: {missing}", sys.stderr)
    index = (audit_index(args.out, done, refused) if done or (refused and not alone)
             else None)
    if args.json:
        _out_json({"sessions": sessions, "index": None if index is None else str(index),
                   "not_replaying": bad,
                   "not_audited": [{"input": label, "error": why} for label, why in refused]})
    elif index is not None:
        _out(f"wrote {index}")
    return 1 if bad else 0


# -- corpus ------------------------------------------------------------------------------


def cmd_corpus_build(args: argparse.Namespace) -> int:
    from . import corpus

    progress = _progress(args)  # a bar is for a person
    for source in args.sources:  # what the walk of each folder found, by format
        if Path(source).is_dir():
            with contextlib.suppress(SurfaceLabError):  # the build reports it as a row
                found = discover(source)
                if len(found):  # none: the build's own error says so
                    _out(f"{source}: found {found.summary()}", sys.stderr)
    manifest = corpus.to_parquet(args.sources, args.out, engine=args.engine,
                                 client=args.scheduler, workers=args.workers,
                                 task_mb=args.task_mb, progress=progress)
    for problem in manifest.problems:
        _out(problem["problem"], sys.stderr)
    for copies in manifest.duplicates:
        dropped = (f"; dropped {', '.join(copies['dropped'])}" if copies["dropped"]
                   else " (in different tasks: join on session_key)")
        _out(f"warning: session {copies['session_id']!r} is in "
             f"{len(copies['kept']) + len(copies['dropped'])} sources: kept "
             f"{', '.join(copies['kept'])}{dropped}", sys.stderr)
    _out(f"{args.out}: {plural(manifest.sessions, 'session')}, {manifest.events} events in "
         f"{manifest.tasks} tasks ({manifest.engine}); {len(manifest.problems)} session(s) "
         f"with problems, {len(manifest.duplicates)} session id(s) in several sources",
         sys.stderr)
    if (manifest.reused or manifest.added or manifest.vanished or manifest.grown
            or manifest.changed):  # a rebuild: what it kept, and what moved
        _out(f"{args.out}: reused {manifest.reused} of {manifest.tasks} tasks; "
             f"{len(manifest.added)} sources added, {len(manifest.grown)} grown, "
             f"{len(manifest.changed)} changed, {len(manifest.vanished)} vanished",
             sys.stderr)
        for path in manifest.vanished:
            _out(f"vanished: {path}", sys.stderr)
    return 0


def cmd_corpus_sql(args: argparse.Namespace) -> int:
    import duckdb

    from . import corpus

    c = corpus.open_corpus(args.out, allow_external=args.allow_external)
    try:
        frame = c.sql(args.query)
    except duckdb.Error as err:
        # DuckDB's message spans lines (the error, then LINE n: and a caret under the
        # spot): each is printed as a line of its own, escaped on its own
        first, *rest = str(err).split("\n")
        _out(str(Problem.from_error(SurfaceLabError(f"query failed: {first}",
                                                    code="query-invalid"), path=args.out)),
             sys.stderr)
        for line in rest:
            _out(line, sys.stderr)
        return 1
    finally:
        c.close()
    # cells come from logs: escape them first, so every line printed below is one row
    frame = frame.map(lambda v: terminal_safe(v) if isinstance(v, str) else v)
    if args.csv:  # and a spreadsheet opening the CSV shows them as text, never formulas
        from .notebook.render import formula_safe

        frame = frame.map(formula_safe).rename(columns=formula_safe)
    text = frame.to_csv(index=False).rstrip("\n") if args.csv else frame.to_string(index=False)
    for line in text.split("\n"):
        _out(line)
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
    if args.events is not None:  # at least 1: argparse checks it (a usage error)
        target = Path(args.out) / f"large-{args.events}.jsonl"
        if target.exists() and not args.force:
            raise StorageError(f"{target}: already exists; nothing written (--force "
                               f"replaces it)", code="target-exists", path=str(target))
        path, written = generate_large(target, args.events)
        size = path.stat().st_size
        _out(f"{path}: {written} events, {size / 1e6:.1f} MB in "
             f"{time.perf_counter() - started:.1f} s")
        return 0
    for path in generate_samples(args.out, overwrite=args.force):
        _out(path)
    return 0


# -- entry point -------------------------------------------------------------------------


def _count(text: str) -> int:
    """An argparse type: a whole number of at least 1 (a usage error otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _command(sub: Any, name: str, summary: str, description: str,
             run: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
    """A subcommand with its one-line summary (in `surface-lab -h`) and its description
    (in `surface-lab NAME -h`); it keeps its parser so a command can report usage."""
    p: argparse.ArgumentParser = sub.add_parser(name, help=summary, description=description)
    p.set_defaults(run=run, parser=p)
    return p


_SESSION_HELP = "the session of a store or database that holds several"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="surface-lab", description="Inspect, check and repair surface session logs.")
    parser.add_argument("--debug", action="store_true",
                        help="show a traceback for unexpected internal errors")
    parser.add_argument("--version", action="version", version=f"surface-lab {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = _command(sub, "validate", "check logs; one line per problem",
                 "Check every log (every session of a store or database) with the full "
                 "pipeline and print one line per problem, PATH:LINE: seq N TYPE: CODE: "
                 "message. Exits 1 when any log is invalid; notes never change it.",
                 cmd_validate)
    p.add_argument("paths", nargs="+", metavar="PATH")

    p = _command(sub, "surface", "the surface nodes and the replacement history",
                 "Print the surface of a log (the seqs whose events reach the model) and "
                 "every replacement that shaped it.", cmd_surface)
    p.add_argument("path", metavar="PATH")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.add_argument("--session", metavar="ID", help=_SESSION_HELP)

    p = _command(sub, "repair", "show (or --write) the closers of a crashed turn",
                 "Show the events that would close a crashed turn and the damaged tail "
                 "that would be dropped; --write commits them durably.", cmd_repair)
    p.add_argument("path", metavar="PATH")
    p.add_argument("--write", action="store_true", help="commit the repair durably")
    p.add_argument("--session", metavar="ID", help=_SESSION_HELP)

    p = _command(sub, "convert", "copy logs between JSONL and SQLite, or import another "
                                 "agent's log",
                 "Copy valid logs between a .jsonl file, a JSONL store folder and a SQLite "
                 "database, or import another agent's log (Claude Code, Codex, pi, ATIF, "
                 "OpenHands). An existing destination file is never overwritten.",
                 cmd_convert)
    p.add_argument("src", metavar="SRC")
    p.add_argument("dst", metavar="DST", nargs="?",
                   help="a .jsonl file, a .db/.sqlite database, a JSONL store folder, or - "
                        "(or /dev/stdout) for one session as JSONL on stdout")
    p.add_argument("-o", "--output", metavar="OUT", help="the destination (same as DST)")
    p.add_argument("--session", metavar="ID",
                   help="copy only this session of a store or database")
    p.add_argument("--from", dest="fmt", choices=["claude-code", "codex", "pi", "atif",
                                                  "openhands", "openhands-v0", "swe-agent",
                                                  "mini-swe-agent"],
                   help="import another tool's log (detected when left out)")
    p.add_argument("--leaf", help="the branch to import (a record or entry id)")
    p.add_argument("--tombstones", action="store_true",
                   help="stand tombstones in for deleted runs instead of re-appending")
    p.add_argument("--strict", action="store_true", help="exit 1 when the import finds a "
                                                         "problem")

    p = _command(sub, "audit", "audit the compactions of logs: tables, PNGs, HTML reports",
                 "Audit every compaction of the logs given: what it hid (removed apart from "
                 "restored copies), the tokens before and after, the facts it put at risk, "
                 "the evidence of loss and whether the recorded decision replays; writes a "
                 "swimlane PNG and an HTML report per session, named after its input, and "
                 "an index.html. Exit 1 if a recorded decision does not replay.", cmd_audit)
    p.add_argument("paths", metavar="PATH", nargs="*",
                   help="logs, globs, folders of logs, stores, databases or other agents' "
                        "logs (default: the long compaction sample)")
    p.add_argument("--out", default="surface-lab-audit", metavar="DIR",
                   help="where the reports go (default: ./surface-lab-audit)")
    p.add_argument("--session", metavar="ID",
                   help="only this session of the stores or databases")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bars (they are shown only when stderr is a terminal)")
    p.add_argument("--json", action="store_true",
                   help="one JSON document on stdout: every session's totals, replaces "
                        "and the files written")

    p = sub.add_parser("corpus", help="build and query a Parquet dataset of many sessions",
                       description="Turn many logs into one date-partitioned Parquet "
                                   "dataset, and query it with SQL.")
    corpus_sub = p.add_subparsers(dest="corpus_command", required=True, metavar="ACTION")
    q = _command(corpus_sub, "build", "logs -> date-partitioned Parquet + manifest",
                 "Read every session of the sources and write the sessions, events, "
                 "replaces, replace_members and mentions tables as Parquet, then the "
                 "manifest. A damaged session is a row with its problem; a source that "
                 "holds no session is an error.", cmd_corpus_build)
    q.add_argument("sources", nargs="+", metavar="SRC",
                   help="files, folders, globs or SQLite databases")
    q.add_argument("out", metavar="OUT")
    q.add_argument("--engine", choices=["serial", "processes", "dask"], default="processes")
    q.add_argument("--scheduler", metavar="ADDRESS",
                   help="a dask.distributed scheduler, e.g. tcp://10.0.0.5:8786 (default "
                        "with --engine dask: a LocalCluster sized to this machine)")
    q.add_argument("--workers", type=_count,
                   help="processes for --engine processes, or workers of the local Dask "
                        "cluster")
    q.add_argument("--task-mb", type=float, default=None,
                   help="input per task in MB (default: from the corpus size, 1 to 64, "
                        "so that there are at least 64 tasks)")
    q.add_argument("--no-progress", action="store_true",
                   help="no progress bar (it is shown only when stderr is a terminal)")
    q = _command(corpus_sub, "sql", "run SQL over a built dataset (DuckDB)",
                 "Run one SQL query over the tables of a built dataset with DuckDB and "
                 "print the result as a table or CSV.", cmd_corpus_sql)
    q.add_argument("out", metavar="OUT")
    q.add_argument("query", metavar="QUERY")
    q.add_argument("--csv", action="store_true", help="CSV instead of a table")
    q.add_argument("--allow-external", action="store_true",
                   help="let the query read files outside the corpus folder (read_csv, "
                        "read_parquet...); queries stay read-only")

    p = _command(sub, "bench", "timings beside same-run baselines, as ratios",
                 "Time reading, frames, appends, replay, plots, memory and the corpus build "
                 "on generated logs, each beside a baseline measured in the same run.",
                 cmd_bench)
    p.add_argument("--events", type=_count, default=1_000_000, metavar="N")
    p.add_argument("--runs", type=_count, default=3, help="runs per measure (median)")
    p.add_argument("--cache", default=".bench", help="where generated logs are kept")
    p.add_argument("--corpus-sessions", type=int, default=2000, metavar="N",
                   help="sessions in the corpus benchmark (0 skips it)")
    p.add_argument("--skip", nargs="*", choices=["read", "frames", "append", "replay",
                                                 "plot", "audit", "memory", "corpus"])

    p = _command(sub, "generate", "write the sample logs (or one large session)",
                 "Write the sample logs, the sample database, the deliberately invalid "
                 "logs and their README into OUT_DIR, or one large synthetic session. "
                 "Files already there are left alone unless --force.", cmd_generate)
    p.add_argument("out", metavar="OUT_DIR")
    p.add_argument("--events", type=_count, metavar="N",
                   help="write one synthetic session of about N events instead")
    p.add_argument("--force", action="store_true",
                   help="replace files of the same names in OUT_DIR")

    p = _command(sub, "info", "counts by type, turns, steps, replacements, time span",
                 "Summarise a log: events by type, turns, steps, the surface and its "
                 "replacements, pending closers, and the first and last event times "
                 "(epoch milliseconds and ISO 8601 UTC).", cmd_info)
    p.add_argument("path", metavar="PATH")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.add_argument("--session", metavar="ID", help=_SESSION_HELP)
    return parser


def _version() -> str:
    """The installed distribution's version (this checkout's pyproject when run from
    a source tree that is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("surface-lab")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _usage(message: str) -> SurfaceLabError:
    """A usage error raised by a command: exit 2 with the command's usage line."""
    return SurfaceLabError(message, code="usage")


# The command-line spelling of the Python arguments errors may name (`argument`).
_OPTIONS = {"session_id": "--session ID", "overwrite": "--force"}


def _in_cli_terms(err: SurfaceLabError) -> SurfaceLabError:
    """The error with the Python argument it names spelled as this command's option."""
    option = _OPTIONS.get(err.argument) if err.argument is not None else None
    if err.argument is not None and option is not None:
        # the name, with the value a Python caller would give (`overwrite=True`)
        err.message = re.sub(rf"\b{re.escape(err.argument)}\b(=\w+)?", option,
                             err.message, count=1)
    return err


def _problem(err: SurfaceLabError, path: str | None) -> Problem:
    return Problem.from_error(_in_cli_terms(err), path=path)


def _quiet_stdout() -> None:
    """After a closed pipe (`surface-lab ... | head`): point stdout at /dev/null so the
    interpreter's final flush cannot fail again (the recipe of Python's `signal` docs)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # a stdout without a file descriptor (tests)
        pass


def _run_command(args: argparse.Namespace) -> int:
    run: Callable[[argparse.Namespace], int] = args.run
    parser: argparse.ArgumentParser = args.parser
    try:
        code = run(args)
    except SurfaceLabError as err:
        if err.code == "usage":
            parser.print_usage(sys.stderr)
            _out(f"{parser.prog}: error: {_in_cli_terms(err).message}", sys.stderr)
            return 2
        _out(str(_problem(err, getattr(args, "path", None))), sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        raise
    except MemoryError:
        pass  # reported below, once the frames holding the data have been released
    except Exception as err:  # the one place that turns any failure into one line
        if not _from_memory_error(err):
            if args.debug:
                traceback.print_exc()
            _out(f"surface-lab: internal error: {type(err).__name__}: {err} "
                 f"(rerun with --debug for a traceback)", sys.stderr)
            return 1
    else:
        return code
    with contextlib.suppress(MemoryError):  # a fixed text: writing it allocates little
        sys.stderr.write(_OUT_OF_MEMORY)
    return 1


def _from_memory_error(err: BaseException) -> bool:
    """Whether `err` comes of an exhausted memory (a C extension such as orjson may turn
    a MemoryError into a SystemError whose cause it is)."""
    seen: set[int] = set()
    cause: BaseException | None = err
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, MemoryError):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


_OUT_OF_MEMORY = ("surface-lab: out of memory: the input needs more memory than this process "
                  "may use (the limits that bound it are in RELIABILITY.md)\n")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        code = _run_command(args)
        sys.stdout.flush()  # a reader that went away shows here, not at interpreter exit
    except BrokenPipeError:  # `surface-lab ... | head`: the reader has all it wants
        _quiet_stdout()
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
