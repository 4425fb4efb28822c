"""The JSONL codec of the reading side (SPEC 7.1): log bytes (zstd included, with a bomb
limit), one line parsed as the full pipeline parses it, the scan of a whole log into
its header, the logical events of the good prefix and the torn-tail, crash-tail and
fixture findings, and the append intent a writer announces in the lock file."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import stat
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Literal, NamedTuple

import orjson

from ..chunks import RowError, expand_row
from ..errors import AdmissionError, CorruptLogError, StorageError
from ..events import ROW_SET, freeze_event
from ..jsonvalue import loads
from ..problems import Problem
from ..surface import seq_is
from .scan import Scan

__all__ = [
    "MAX_DECOMPRESSED_BYTES",
    "MAX_LINE_BYTES",
    "PROGRESS_EVERY",
    "BadLine",
    "Committed",
    "Intent",
    "IntentOutcome",
    "Progress",
    "has_long_digits",
    "intent_outcome",
    "lock_path",
    "open_regular",
    "parse_line",
    "read_committed",
    "read_intent",
    "read_log_bytes",
    "refusal",
    "scan_bytes",
    "scan_committed",
    "scan_file",
]


# A line longer than this is refused as unparsable rather than loaded (bounded memory).
MAX_LINE_BYTES = 64 * 1024 * 1024
# A zstd log is refused past this much output: bounded memory, whatever a frame claims.
MAX_DECOMPRESSED_BYTES = 1024**3
# Compressed bytes fed at a time: a zstd block of 4 bytes can expand to 128 KiB, so a piece
# gives at most 8 MiB of output before the limit is checked again.
ZSTD_PIECE = 256
# Every digit becomes "0" and every other byte "x": a run of 19 digits is then a plain
# substring search, several times faster than a regular expression over a large log.
_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= b <= 0x39 else 0x78 for b in range(256))
_LONG_RUN = b"0" * 19


def has_long_digits(data: bytes) -> bool:
    """Whether `data` holds a run of 19 or more digits (a number orjson would round)."""
    return _LONG_RUN in data.translate(_DIGITS_AS_ZERO)



_SYSTEM_ROOTS = ("/proc", "/sys", "/dev")


def refusal(path: Path) -> str | None:
    """Why `path` is not a file or folder to read, found without opening it; None when
    it is one."""
    try:
        mode = path.stat().st_mode  # follows links; a loop raises ELOOP
    except FileNotFoundError:
        if os.path.islink(path):
            return f"is a dangling symbolic link (to {os.readlink(path)})"
        return "no such file or folder"
    except OSError as err:
        return f"cannot be looked at ({err.strerror or err})"
    real = os.path.realpath(path)
    if any(real == root or real.startswith(root + "/") for root in _SYSTEM_ROOTS):
        return f"is a system file ({real}), not a log; refused without opening it"
    if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
        return None
    what = ("a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a file")
    return f"is {what}, not a log file; refused without opening it"


def open_regular(path: Path) -> IO[bytes]:
    """`path` opened for reading, refusing (without blocking) anything that is not a
    regular file by the time it is open.

    Raises:
        StorageError: not a regular file (or it cannot be opened).
    """
    why = refusal(path)
    if why is None and path.is_dir():
        why = "is a folder"
    if why is not None:
        raise StorageError(f"{path}: {why}", code="path-refused", path=str(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        raise StorageError(f"{path}: {err.strerror or err}", path=str(path)) from err
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped for something else meanwhile
        os.close(fd)
        raise StorageError(f"{path}: is not a regular file; refused", path=str(path))
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_log_bytes(path: Path) -> tuple[bytes, bool]:
    """The decompressed bytes of a log file and whether a zstd frame was torn.

    A zstd log is refused (`log-corrupt`) as soon as its output would pass
    `MAX_DECOMPRESSED_BYTES`: before a frame is decompressed when its header declares a
    size that does not fit, and otherwise while decompressing, in pieces of `ZSTD_PIECE`
    compressed bytes (at most 8 MiB of output each), whatever the frames claim. The
    output is gathered in one buffer, so the peak is about twice the output.
    """
    with open_regular(path) as f:
        raw = f.read()
    if not path.name.endswith(".zstd"):
        return raw, False
    import zstandard

    def too_big(size: int) -> CorruptLogError:
        return CorruptLogError(
            f"the decompressed log would exceed the limit of {MAX_DECOMPRESSED_BYTES} bytes "
            f"({size} bytes or more)", code="log-corrupt", path=str(path))

    dctx = zstandard.ZstdDecompressor()
    out = bytearray()
    view = memoryview(raw)
    start = 0  # where the next frame starts in the file
    while start < len(raw):
        committed = len(out)  # the end of the last whole frame
        with contextlib.suppress(zstandard.ZstdError):
            declared = zstandard.get_frame_parameters(view[start : start + 18]).content_size
            if (declared != zstandard.CONTENTSIZE_UNKNOWN and
                    committed + declared > MAX_DECOMPRESSED_BYTES):
                raise too_big(committed + declared)
        dobj = dctx.decompressobj()
        fed = start
        try:
            while not dobj.eof and fed < len(raw):
                out += dobj.decompress(view[fed : fed + ZSTD_PIECE])
                fed = min(fed + ZSTD_PIECE, len(raw))
                if len(out) > MAX_DECOMPRESSED_BYTES:
                    raise too_big(len(out))
        except zstandard.ZstdError:
            del out[committed:]
            return bytes(out), True
        if not dobj.eof:  # the final frame was cut short: nothing in it counts
            del out[committed:]
            return bytes(out), True
        # The last piece may have held the start of the next frame.
        start = fed - len(dobj.unused_data)
    return bytes(out), False


class BadLine(Exception):
    def __init__(self, code: str, message: str, record: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.record = record


def parse_line(line: bytes, *, long_digits: bool = True) -> Any:
    if len(line) > MAX_LINE_BYTES:
        raise BadLine("line-unparsable", f"line is longer than {MAX_LINE_BYTES} bytes")
    if not line.strip():
        raise BadLine("line-unparsable", "empty line")
    try:
        value = loads(line)
    except orjson.JSONDecodeError as err:
        raise BadLine("line-unparsable", f"not JSON: {err}") from None
    if long_digits and has_long_digits(line):  # orjson makes big integers floats
        try:
            value = json.loads(line.decode(), parse_constant=_refuse_constant)
        except (ValueError, RecursionError) as err:
            raise BadLine("line-unparsable", f"not JSON: {err}") from None
    if not isinstance(value, dict):
        raise BadLine("line-unparsable", f"a record must be a JSON object, got "
                                          f"{type(value).__name__}")
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


Progress = Callable[[int, int], None]
PROGRESS_EVERY = 50_000


def scan_bytes(data: bytes, path: str, *, torn_frame: bool = False,
               progress: Progress | None = None) -> Scan:
    """Scan a JSONL log into its header, the logical events of the good prefix and the
    findings of SPEC 7.1 (torn tail, crash tail, fixture form).

    Raises:
        CorruptLogError: an empty or header-less file, an unparsable header, a bad line
            followed by a `turn/end`, or mixed fixture and stored lines.
    """
    if not data or b"\n" not in data:
        raise CorruptLogError("empty or header-less log", code="log-corrupt", path=path,
                              line=1)
    # Lines are found one at a time (no list of every line: a log of 64M newlines would
    # make one), and a crash tail is searched in C, not line by line.
    complete = data.count(b"\n")
    fragment = data[data.rfind(b"\n") + 1 :]
    offset = data.find(b"\n") + 1
    try:
        header = parse_line(data[: offset - 1])
    except BadLine as bad:
        raise CorruptLogError(f"header line: {bad.message}", code=bad.code, path=path,
                              line=1) from None
    scan = Scan(path=path, header=header)
    # One search of the whole file tells whether any line needs the exact-integer parse.
    long_digits = has_long_digits(data)
    good_end = offset
    fixture: bool | None = None
    first_bad: tuple[int, BadLine] | None = None
    for index in range(1, complete):
        if progress is not None and index % PROGRESS_EVERY == 0:
            progress(index, complete)
        line_no = index + 1
        end = data.find(b"\n", offset)
        line = data[offset:end]
        offset = end + 1
        try:
            record = parse_line(line, long_digits=long_digits)
            kind = record.get("type")
            is_row = isinstance(kind, str) and kind in ROW_SET
            stored_form = ("seq0" in record or "time0" in record) if is_row else (
                "seq" in record or "time" in record)
            if fixture is None:
                fixture = not stored_form
                scan.form = "fixture" if fixture else "stored"
            elif fixture == stored_form:
                raise CorruptLogError(
                    f"line {line_no} is in the {'stored' if stored_form else 'fixture'} form "
                    f"but the first event line is in the {scan.form} form",
                    code="mixed-fixture-form", path=path, line=line_no)
            expected = len(scan.events)
            if is_row:
                if not fixture and not seq_is(record.get("seq0"), expected):
                    raise BadLine("seq-gap", f"packed row starts at seq {record.get('seq0')!r}"
                                              f", expected {expected}", record)
                try:
                    members: list[Any] = expand_row(record, fixture=fixture, seq0=expected)
                except RowError as err:
                    raise BadLine("row-malformed", str(err), record) from None
            else:
                if fixture:
                    record = {**record, "seq": expected, "time": 0}
                elif not seq_is(record.get("seq"), expected):  # SPEC 4.1 step 1
                    raise BadLine("seq-gap", f"seq is {record.get('seq', '<missing>')!r}, "
                                              f"expected {expected}", record)
                try:
                    members = [freeze_event(record)]
                except AdmissionError as err:
                    raise CorruptLogError(str(err), code=err.code, path=path, line=line_no,
                                          seq=expected, event_type=err.event_type) from None
        except BadLine as bad:
            first_bad = (line_no, bad)
            if isinstance(bad.record, dict) and bad.record.get("type") == "turn/end":
                _corrupt_after_bad(path, first_bad, line_no)
            _check_crash_tail(data, offset, line_no, path, first_bad)
            break
        scan.events.extend(members)
        scan.lines.extend([line_no] * len(members))
        good_end = offset
    if first_bad is not None:
        bad_line, bad_record = first_bad
        scan.problems.append(Problem(
            "error", bad_record.code,
            f"crash tail from line {bad_line}: {complete - bad_line + 1} complete line(s) "
            f"would be dropped "
            f"({bad_record.message}); run surface-lab repair",
            path, bad_line))
        scan.truncate_at = good_end
    if fragment or torn_frame:
        scan.problems.append(Problem(
            "note", "torn-tail",
            f"a torn final fragment ({len(fragment)} bytes without a newline) is ignored",
            path, complete + 1))
        scan.truncate_at = good_end
    return scan


# The shortest line that can record a turn/end: `{"type":"turn/end"}`.
_MAYBE_TURN_END = re.compile(rb"[^\n]{19,}\n")


def _check_crash_tail(data: bytes, start: int, bad_line: int, path: str,
                      first_bad: tuple[int, BadLine]) -> None:
    """Refuse a crash tail (the complete lines from byte `start` on, after the bad line
    `bad_line`) in which a line records a turn/end. Only lines long enough to hold one are
    parsed, found by a regular expression, so the cost is bounded by the bytes."""
    line_no, counted = bad_line + 1, start
    # Up to the last line break: a torn final fragment is no line (and no backtracking).
    for match in _MAYBE_TURN_END.finditer(data, start, data.rfind(b"\n") + 1):
        line_no += data.count(b"\n", counted, match.start())
        counted = match.start()
        if match.end() - match.start() - 1 > MAX_LINE_BYTES:
            continue  # refused unparsed, as parse_line would
        with contextlib.suppress(BadLine):
            if parse_line(data[match.start() : match.end() - 1]).get("type") == "turn/end":
                _corrupt_after_bad(path, first_bad, line_no)


def _corrupt_after_bad(path: str, first_bad: tuple[int, BadLine], line_no: int) -> None:
    bad_line, bad = first_bad
    where = "it" if line_no == bad_line else f"line {line_no}"
    raise CorruptLogError(
        f"bad line {bad_line} ({bad.message}) in committed data: {where} records a turn/end, "
        f"so this is not a crash tail", code=bad.code, path=path, line=bad_line)


_INTENT = re.compile(rb"pending (\d+) (\d+)(?: ([0-9a-f]{8}))?\n")


class Intent(NamedTuple):
    """An append's announcement: bytes `[start, end)` of the log, with the CRC-32 of the
    batch (None in the announcements of older versions, which had none)."""

    start: int
    end: int
    crc: int | None


IntentOutcome = Literal["done", "unfinished", "unexplained"]


def intent_outcome(intent: Intent, size: int, announced: Callable[[], bytes]) -> IntentOutcome:
    """What an announced append left in a log of `size` bytes; `announced` gives the log's
    bytes `[start, end)` when they are needed.

    * `done`: the log holds exactly the announced bytes at `[start, end)` (the writer died
      after its fsync, before clearing the announcement; what follows is later appends),
      or it is no longer than `start` (nothing of the batch is there).
    * `unfinished`: the log ends inside the range, or at `end` with other bytes than the
      announced ones (a write the fsync never covered): the batch is dropped.
    * `unexplained`: the log goes on past `end` but `[start, end)` is not the announced
      batch (or an older announcement without a CRC cannot tell): something else wrote
      there, so nothing is dropped and the log is refused rather than guessed at.
    """
    start, end, crc = intent
    if size <= start:
        return "done"
    if size < end:
        return "unfinished"
    if crc is None:
        return "done" if size == end else "unexplained"
    if zlib.crc32(announced()) == crc:
        return "done"
    return "unfinished" if size == end else "unexplained"


def lock_path(log: Path) -> Path:
    return log.with_name(log.name + ".lock")


def read_intent(log: Path) -> Intent | None:
    """The byte range `[start, end)` an append announced in the lock file and has not
    finished, if any. Appends write it (and fsync it) before the data and clear it after
    the data is fsynced, so a batch cut short by a crash is never taken as committed."""
    try:
        match = _INTENT.fullmatch(lock_path(log).read_bytes())
    except OSError:
        return None
    if match is None:
        return None
    crc = match.group(3)
    return Intent(int(match.group(1)), int(match.group(2)),
                  int(crc, 16) if crc is not None else None)


class Committed(NamedTuple):
    """A log's bytes as of a moment when no append was half-done (SPEC 7.1)."""

    data: bytes
    torn_frame: bool  # a zstd frame was cut short
    unfinished: Intent | None  # an append still announced


_SNAPSHOT_TRIES = 5


def read_committed(path: Path) -> Committed:
    """The bytes of a log with no batch in part: a writer announces each append in the
    lock file before writing it and clears the announcement once the data is synced, so
    the bytes are taken when the announcement read after them is the one (or the lack
    of one) read before them and, with none, the file is still as long as what was read;
    else they are read again. An announcement still there gives the start the unfinished
    append is cut at. After a few tries (appends keep landing) the bytes are read under
    the writers' lock, shared."""
    if path.name.endswith(".zstd"):
        return Committed(*read_log_bytes(path), None)
    for _ in range(_SNAPSHOT_TRIES):
        before = read_intent(path)
        data, torn = read_log_bytes(path)
        after = read_intent(path)
        if after is not None and after == before and len(data) >= after[0]:
            return Committed(data, torn, after)
        if after is None and before is None and path.stat().st_size == len(data):
            return Committed(data, torn, None)
    try:
        fd = os.open(lock_path(path), os.O_RDONLY)
    except OSError:  # no writer ever took the lock
        return Committed(*read_log_bytes(path), read_intent(path))
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        return Committed(*read_log_bytes(path), read_intent(path))
    finally:
        os.close(fd)


def scan_committed(log: Committed, path: str, progress: Progress | None = None) -> Scan:
    """`scan_bytes` of committed bytes: an unfinished append dropped with a note, one
    that cannot be explained refused (`intent_outcome`)."""
    data, torn, intent = log
    outcome = None if intent is None else intent_outcome(
        intent, len(data), lambda: data[intent.start:intent.end])
    if intent is None or outcome == "done":
        return scan_bytes(data, path, torn_frame=torn, progress=progress)
    start, end, _ = intent
    scan = scan_bytes(data[:start], path, progress=progress)
    if outcome == "unexplained":
        scan.problems.append(Problem(
            "error", "log-corrupt",
            f"an append announced bytes {start}..{end}, but the log holds other bytes "
            f"there and goes on to byte {len(data)}: read up to {start} only; nothing is "
            f"dropped or written until this is looked into", path))
        return scan
    scan.problems.append(Problem(
        "note", "unfinished-batch",
        f"an append of bytes {start}..{end} did not finish ({len(data) - start} written): "
        f"it was never committed and repair drops it", path))
    scan.truncate_at = start if scan.truncate_at is None else scan.truncate_at
    return scan


def scan_file(path: Path, progress: Progress | None = None) -> Scan:
    return scan_committed(read_committed(path), str(path), progress)
