"""The JSONL backend (SPEC 7.1): dsh's on-disk layout, packed rows and durable appends;
reading a log's bytes is `reading.codec`'s."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
import zlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..chunks import pack_records
from ..errors import CorruptLogError, StorageError
from ..events import Event
from ..header import HEADER_KEYS, check_header
from ..jsonvalue import dumps
from ..reading.codec import (
    MAX_DECOMPRESSED_BYTES,
    MAX_LINE_BYTES,
    BadLine,
    Intent,
    intent_outcome,
    lock_path,
    parse_line,
    read_intent,
    read_log_bytes,
    refusal,
    scan_bytes,
    scan_file,
)
from ..reading.scan import Scan
from .base import Store, checked_batch, conflict

__all__ = [
    "MAX_DECOMPRESSED_BYTES",
    "MAX_LINE_BYTES",
    "JsonlStore",
    "decode_id",
    "dumps_header",
    "dumps_record",
    "encode_id",
    "project_dir",
    "read_log_bytes",
    "scan_bytes",
    "scan_file",
]

LOG_NAME = "session.jsonl"
ZSTD_NAME = "session.jsonl.zstd"
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_ESCAPE = re.compile(r"~[0-9A-F]{4}")
# The next-seq cache also compares the log's last bytes, so that a log rewritten in place
# with the same size (and, within the clock's tick, the same mtime) is not taken for it.
_TAIL_BYTES = 4096


# -- layout ------------------------------------------------------------------------------


def _escape(text: str) -> str:
    out = []
    for ch in text:
        if ch in _SAFE:
            out.append(ch)
        else:
            units = ch.encode("utf-16-be", "surrogatepass")
            out.extend(f"~{int.from_bytes(units[i:i + 2], 'big'):04X}"
                       for i in range(0, len(units), 2))
    return "".join(out)


def encode_id(session_id: str) -> str:
    """The directory name of a session id: every UTF-16 code unit outside
    `[A-Za-z0-9._-]` becomes `~XXXX`; the whole ids `.` and `..` are escaped too."""
    if not isinstance(session_id, str) or not session_id:
        raise StorageError(f"a session id must be a non-empty string, got {session_id!r}",
                           code="header-invalid")
    if session_id in (".", ".."):
        return "~002E" * len(session_id)
    return _escape(session_id)


def decode_id(name: str) -> str:
    """The inverse of `encode_id`.

    Raises:
        StorageError: `store-layout` for a name `encode_id` never makes (a `~` without four
            upper-case hex digits, a character it escapes, a bare `.` or `..`).
    """
    units = bytearray()
    i = 0
    while i < len(name):
        if name[i] == "~" and _ESCAPE.fullmatch(name, i, i + 5):
            units += int(name[i + 1 : i + 5], 16).to_bytes(2, "big")
            i += 5
        else:
            units += name[i].encode("utf-16-be", "surrogatepass")
            i += 1
    decoded = units.decode("utf-16-be", "surrogatepass")
    if not decoded or encode_id(decoded) != name:
        raise StorageError(f"the folder name {name!r} is not an encoded session id",
                           code="store-layout")
    return decoded


def project_dir(cwd: str | None) -> str:
    """`_no-cwd`, or `--<slug>--` for a cwd (SPEC 7.1)."""
    if cwd is None:
        return "_no-cwd"
    slug = re.sub(r"[/\\:]+", "-", cwd).lstrip("-")
    slug = _escape(slug) or "root"
    return f"--{slug[:251]}--"


# -- encoding ----------------------------------------------------------------------------


def dumps_record(record: Mapping[str, Any]) -> bytes:
    """One compact JSON line (UTF-8, no `\\u` escapes for non-ASCII, with `\\n`)."""
    return dumps(record) + b"\n"


def dumps_header(header: Mapping[str, Any]) -> bytes:
    """The header line: `type: session` first, then the fields in their fixed order, with
    `delegationDepth` always written (0 at top level)."""
    line: dict[str, Any] = {"type": "session"}
    for key in HEADER_KEYS:
        if key in header:
            line[key] = header[key]
        elif key == "delegationDepth":
            line[key] = 0
    return dumps_record(line)


def encode_events(events: Sequence[Event], *, pack: bool = True) -> bytes:
    records: Iterator[Mapping[str, Any]] = pack_records(events) if pack else iter(events)
    return b"".join(dumps_record(r) for r in records)


# -- reading -----------------------------------------------------------------------------


# -- the store ---------------------------------------------------------------------------


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _open_log(log: Path, flags: int) -> int:
    """Open a log without following a symbolic link in its last component."""
    return os.open(log, flags | os.O_NOFOLLOW)


# (st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns), the last bytes, the next seq
_Seen = tuple[tuple[int, int, int, int, int], bytes, int]


def _identity(fd: int) -> tuple[tuple[int, int, int, int, int], bytes]:
    """What a remembered next seq is valid for: the file (device, inode), its size, its
    mtime and its ctime (which no one can set back: `utime` itself moves it), and its
    last bytes."""
    st = os.fstat(fd)
    tail = os.pread(fd, min(st.st_size, _TAIL_BYTES), max(0, st.st_size - _TAIL_BYTES))
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns), tail


class JsonlStore(Store):
    """Sessions as `<root>/<projectDir>/<encodedId>/session.jsonl` files.

    Args:
        root: the folder holding the project folders (created on the first append).
        pack: write runs of streamed chunks as packed rows (the default, like dsh).

    Nothing is written outside the root: a project folder, session folder, log or lock
    file that is a symbolic link is refused for writing (`store-layout`).
    """

    def __init__(self, root: str | os.PathLike[str], *, pack: bool = True) -> None:
        self.root = Path(root)
        self.path = str(self.root)
        self.pack = pack
        self._file: Path | None = None
        self._created: dict[str, Mapping[str, Any]] = {}
        self._next: dict[Path, _Seen] = {}  # what each log was when we last knew its next seq

    @classmethod
    def for_file(cls, path: str | os.PathLike[str], *, pack: bool = True) -> JsonlStore:
        """A store of the one session in a single `.jsonl` file outside any store layout
        (created on the first append if it does not exist)."""
        store = cls(Path(path).parent, pack=pack)
        store._file = Path(path)
        store.path = str(path)
        return store

    def _file_id(self) -> str | None:
        assert self._file is not None
        if not self._file.is_file():
            return None
        with open(self._file, "rb") as f:
            first = f.readline(MAX_LINE_BYTES)
        try:
            header = parse_line(first)
        except BadLine:
            return None
        return header.get("id") if isinstance(header.get("id"), str) else None

    # reading

    def _find(self, session_id: str) -> Path | None:
        if self._file is not None:
            if not self._file.is_file():
                return None
            stored = self._file_id()
            if stored != session_id:
                raise StorageError(f"{self._file} holds session {stored!r}, not "
                                   f"{session_id!r}", path=str(self._file))
            return self._file
        name = encode_id(session_id)
        if not self.root.is_dir():
            return None
        found = [p for project in sorted(self.root.iterdir()) if project.is_dir()
                 for p in (project / name / LOG_NAME, project / name / ZSTD_NAME)
                 if os.path.lexists(p)]
        if len(found) > 1:
            raise StorageError(f"session {session_id!r} is stored more than once: "
                               f"{', '.join(map(str, found))}", path=self.path)
        if found and not found[0].is_symlink() and refusal(found[0]) is not None:
            # a FIFO or a device in a log's place: neither read nor written (a symbolic
            # link is refused for writing as store-layout, and read as its target)
            raise StorageError(f"{found[0]}: {refusal(found[0])}", code="path-refused",
                               path=str(found[0]))
        return found[0] if found else None

    def _require(self, session_id: str) -> Path:
        path = self._find(session_id)
        if path is None:
            raise StorageError(f"no stored session {session_id!r} under {self.root}",
                               code="session-not-found",
                               path=self.path)
        return path

    def scan(self, session_id: str) -> Scan:
        return self._scan(self._require(session_id), session_id)

    def _scan(self, log: Path, session_id: str) -> Scan:
        """Scan a log, checking that its header names the session its folder does."""
        scan = scan_file(log)
        stored = scan.header.get("id") if isinstance(scan.header, dict) else None
        if self._file is None and isinstance(stored, str) and stored != session_id:
            raise CorruptLogError(f"{log}: the header names session {stored!r} but the "
                                  f"folder is that of session {session_id!r}", code="store-layout",
                                  path=str(log), line=1)
        return scan

    def read_suffix(self, session_id: str, seq: int) -> list[Event]:
        if self._find(session_id) is None and session_id in self._created:
            return []
        return self.scan(session_id).events[seq:]

    def list(self) -> list[str]:
        if self._file is not None:
            found = self._file_id()
            return [found] if found is not None else []
        if not self.root.is_dir():
            return []
        # a session whose log is a FIFO or a dangling link is listed: reading it refuses
        # with a problem, where a glob (which skips dangling links) would hide it
        ids = {decode_id(session.name) for project in self.root.iterdir() if project.is_dir()
               for session in project.iterdir() if session.is_dir()
               and any(os.path.lexists(session / n) for n in (LOG_NAME, ZSTD_NAME))}
        return sorted(ids)

    # writing

    def create(self, header: Mapping[str, Any]) -> None:
        checked = check_header(header)
        if self._find(checked["id"]) is not None:
            raise StorageError(f"session {checked['id']!r} already exists",
                               code="session-exists", path=self.path)
        self._created[checked["id"]] = checked

    def _refuse_links(self, *paths: Path) -> None:
        """Refuse to write through a symbolic link: it could lead outside the root, and a
        log reached by two names would have two lock files (two writers at once)."""
        for path in paths:
            if path.is_symlink():
                raise StorageError(f"{path} is a symbolic link; a store writes only to real "
                                   f"folders and files inside {self.root}",
                                   code="store-layout", path=str(path))

    def _writable(self, log: Path) -> None:
        below = [log, lock_path(log)]
        if self._file is None:
            below += [log.parent, log.parent.parent]
        self._refuse_links(*below)

    def _make_dirs(self, folder: Path) -> None:
        """Create `folder` and the missing folders above it, refusing symbolic links below
        the root, and fsync each new folder's parent so that its entry is durable."""
        missing: list[Path] = []
        here = folder
        while not os.path.lexists(here):
            missing.append(here)
            here = here.parent
        if self._file is None:
            self._refuse_links(*(p for p in (folder, folder.parent) if p not in missing))
        for new in reversed(missing):
            with contextlib.suppress(FileExistsError):  # a racing writer made it first
                os.mkdir(new)
            _fsync_dir(new.parent)

    @contextlib.contextmanager
    def _locked(self, log: Path) -> Iterator[int]:
        """Hold the exclusive lock of a log; first drop an append a dead writer left
        unfinished (under the lock no other writer can be in the middle of one)."""
        self._writable(log)
        lock = lock_path(log)
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            _fsync_dir(lock.parent)  # the announcements it will hold must not vanish
        except FileExistsError:
            fd = os.open(lock, os.O_RDWR | os.O_NOFOLLOW)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            intent = read_intent(log)
            if intent is not None:
                self._settle(log, intent)
                os.ftruncate(fd, 0)
            yield fd
        finally:
            os.close(fd)

    def _settle(self, log: Path, intent: Intent) -> None:
        """Drop what an unfinished append left, or refuse a log it does not explain."""
        fd = _open_log(log, os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            outcome = intent_outcome(intent, size,
                                     lambda: os.pread(fd, intent.end - intent.start,
                                                      intent.start))
            if outcome == "unexplained":
                raise StorageError(
                    f"{log}: an append announced bytes {intent.start}..{intent.end}, but the "
                    f"log holds other bytes there and goes on to byte {size}; nothing was "
                    f"changed: look into the log before writing to it",
                    code="log-corrupt", path=str(log))
            if outcome == "unfinished":
                os.ftruncate(fd, intent.start)
                os.fsync(fd)
                self._next.pop(log, None)
        finally:
            os.close(fd)

    def _remember(self, log: Path, fd: int, next_seq: int) -> None:
        self._next[log] = (*_identity(fd), next_seq)

    def _stored_next(self, log: Path, session_id: str) -> int:
        """The next seq of a log, refusing logs that cannot take an append. The cache is
        used only while the log is the same file, at the same size, mtime, ctime and last
        bytes."""
        fd = _open_log(log, os.O_RDONLY)
        try:
            seen = _identity(fd)
        finally:
            os.close(fd)
        cached = self._next.get(log)
        if cached is not None and cached[:2] == seen:
            return cached[2]
        if log.name.endswith(".zstd"):
            raise StorageError(f"{log}: compressed logs are read-only here; convert first",
                               path=str(log))
        scan = self._scan(log, session_id)
        if scan.form == "fixture":
            raise StorageError(f"{log}: snapshot-fixture logs are read-only; convert first",
                               code="fixture-read-only", path=str(log))
        if scan.needs_truncation:
            raise StorageError(f"{log}: the log has a torn or crash tail; load it to repair "
                               f"before appending", code="log-corrupt", path=str(log))
        self._next[log] = (*seen, len(scan.events))
        return len(scan.events)

    def append(self, session_id: str, events: Sequence[Mapping[str, Any]]) -> None:
        batch = checked_batch(events)
        if not batch:
            return
        try:
            log = self._find(session_id)
            if log is None:
                self._create_file(session_id, batch)
                return
            with self._locked(log) as lock:
                expected = self._stored_next(log, session_id)
                if batch[0]["seq"] != expected:
                    raise conflict(str(log), session_id, expected, batch[0]["seq"])
                self._write_at_end(log, lock, session_id, encode_events(batch, pack=self.pack),
                                   batch[0]["seq"], expected + len(batch))
        except OSError as err:  # locking, opening or reading failed: nothing was written
            raise StorageError(f"session {session_id!r}: appending from seq "
                               f"{batch[0]['seq']} failed: {err}", path=self.path,
                               seq=batch[0]["seq"]) from err

    def _write_at_end(self, log: Path, lock: int, session_id: str, payload: bytes, seq: int,
                      next_seq: int) -> None:
        """Announce the byte range and the batch's CRC-32 in the lock file, append and
        fsync, then clear the announcement. A failure truncates back; a crash leaves the
        announcement, so readers and the next writer drop the unfinished batch instead of
        taking part of it."""
        fd = _open_log(log, os.O_RDWR | os.O_APPEND)
        try:
            size = os.fstat(fd).st_size
            try:
                intent = (f"pending {size} {size + len(payload)} "
                          f"{zlib.crc32(payload):08x}\n").encode()
                os.ftruncate(lock, 0)
                os.pwrite(lock, intent, 0)
                os.fsync(lock)
                view = memoryview(payload)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            except OSError as err:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                    os.fsync(fd)
                    os.ftruncate(lock, 0)
                self._next.pop(log, None)
                raise StorageError(f"session {session_id!r}: appending from seq {seq} failed "
                                   f"and was rolled back: {err}", path=str(log),
                                   seq=seq) from err
            os.ftruncate(lock, 0)
            self._remember(log, fd, next_seq)
        finally:
            os.close(fd)

    def _create_file(self, session_id: str, batch: Sequence[Event]) -> None:
        header = self._created.get(session_id)
        if header is None:
            raise StorageError(f"no session {session_id!r} to append to; create it first",
                               code="session-not-found",
                               path=self.path)
        if batch[0]["seq"] != 0:
            raise conflict(self.path, session_id, 0, batch[0]["seq"])
        if self._file is not None:
            folder, log = self._file.parent, self._file
        else:
            folder = self.root / project_dir(header.get("cwd")) / encode_id(session_id)
            log = folder / LOG_NAME
        self._make_dirs(folder)
        payload = dumps_header(header) + encode_events(batch, pack=self.pack)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".session.", suffix=".tmp")
        try:
            try:
                with os.fdopen(fd, "wb") as out:
                    os.fchmod(out.fileno(), 0o644)  # mkstemp makes 0600; logs are shared
                    out.write(payload)
                    out.flush()
                    os.fsync(out.fileno())
                os.link(tmp, log)  # never through a link: an existing name is EEXIST
            except FileExistsError:
                raise conflict(str(log), session_id, -1, 0) from None
            except OSError as err:
                raise StorageError(f"session {session_id!r}: creating {log} failed: {err}",
                                   path=str(log), seq=0) from err
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        _fsync_dir(folder)
        fd = _open_log(log, os.O_RDONLY)
        try:
            self._remember(log, fd, len(batch))
        finally:
            os.close(fd)
        self._created.pop(session_id, None)

    def _repair(self, session_id: str, scan: Scan, closers: Sequence[Event]) -> None:
        log = self._require(session_id)
        if log.name.endswith(".zstd"):
            raise StorageError(f"{log}: compressed logs are read-only here; convert first",
                               path=str(log))
        with self._locked(log) as lock:
            # Re-checked under the lock: a cut must be the one the caller's read found,
            # never one a second read makes of other conditions (taking the lock may
            # already have settled an unfinished batch: then there is nothing to cut).
            now = self._scan(log, session_id)
            if len(now.events) != len(scan.events):
                raise conflict(str(log), session_id, len(now.events), len(scan.events))
            if now.truncate_at is not None and now.truncate_at != scan.truncate_at:
                raise StorageError(
                    f"{log}: a second read under the lock puts the end of the committed "
                    f"events at byte {now.truncate_at}, the first at {scan.truncate_at}; "
                    f"nothing repaired", code="log-corrupt", path=str(log))
            fd = _open_log(log, os.O_RDWR)
            try:
                if now.truncate_at is not None:
                    os.ftruncate(fd, now.truncate_at)
                    os.fsync(fd)
                self._remember(log, fd, len(scan.events))
            finally:
                os.close(fd)
            if closers:
                self._write_at_end(log, lock, session_id, encode_events(closers, pack=False),
                                   closers[0]["seq"], len(scan.events) + len(closers))

    def close(self) -> None:
        self._next.clear()
