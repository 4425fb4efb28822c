"""The JSONL backend (SPEC 7.1): dsh's on-disk layout, packed rows and durable appends;
reading a log's bytes is `reading.codec`'s."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..chunks import pack_records
from ..errors import StorageError
from ..events import Event
from ..header import HEADER_KEYS, check_header
from ..jsonvalue import dumps
from ..reading.codec import (
    MAX_DECOMPRESSED_BYTES,
    MAX_LINE_BYTES,
    BadLine,
    lock_path,
    parse_line,
    read_intent,
    read_log_bytes,
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
    """The inverse of `encode_id`."""
    units = bytearray()
    i = 0
    while i < len(name):
        if name[i] == "~" and i + 5 <= len(name):
            units += int(name[i + 1 : i + 5], 16).to_bytes(2, "big")
            i += 5
        else:
            units += name[i].encode("utf-16-be")
            i += 1
    return units.decode("utf-16-be", "surrogatepass")


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


class JsonlStore(Store):
    """Sessions as `<root>/<projectDir>/<encodedId>/session.jsonl` files.

    Args:
        root: the folder holding the project folders (created on the first append).
        pack: write runs of streamed chunks as packed rows (the default, like dsh).
    """

    def __init__(self, root: str | os.PathLike[str], *, pack: bool = True) -> None:
        self.root = Path(root)
        self.path = str(self.root)
        self.pack = pack
        self._file: Path | None = None
        self._created: dict[str, Mapping[str, Any]] = {}
        self._next: dict[Path, tuple[int, int]] = {}  # log -> (size, next seq) we last saw

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
                 for p in (project / name / LOG_NAME, project / name / ZSTD_NAME) if p.is_file()]
        if len(found) > 1:
            raise StorageError(f"session {session_id!r} is stored more than once: "
                               f"{', '.join(map(str, found))}", path=self.path)
        return found[0] if found else None

    def _require(self, session_id: str) -> Path:
        path = self._find(session_id)
        if path is None:
            raise StorageError(f"no stored session {session_id!r} under {self.root}",
                               path=self.path)
        return path

    def scan(self, session_id: str) -> Scan:
        return scan_file(self._require(session_id))

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
        ids = {decode_id(p.parent.name) for project in self.root.iterdir() if project.is_dir()
               for p in [*project.glob(f"*/{LOG_NAME}"), *project.glob(f"*/{ZSTD_NAME}")]}
        return sorted(ids)

    # writing

    def create(self, header: Mapping[str, Any]) -> None:
        checked = check_header(header)
        if self._find(checked["id"]) is not None:
            raise StorageError(f"session {checked['id']!r} already exists", path=self.path)
        self._created[checked["id"]] = checked

    @contextlib.contextmanager
    def _locked(self, log: Path) -> Iterator[int]:
        """Hold the exclusive lock of a log; first drop an append a dead writer left
        unfinished (under the lock no other writer can be in the middle of one)."""
        fd = os.open(lock_path(log), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            intent = read_intent(log)
            if intent is not None:
                # Only ever shorten: a log already at or below START has nothing to drop.
                if intent[0] < log.stat().st_size != intent[1]:
                    with open(log, "r+b") as f:
                        f.truncate(intent[0])
                        os.fsync(f.fileno())
                    self._next.pop(log, None)
                os.ftruncate(fd, 0)
            yield fd
        finally:
            os.close(fd)

    def _stored_next(self, log: Path) -> int:
        """The next seq of a log, refusing logs that cannot take an append."""
        size = log.stat().st_size
        cached = self._next.get(log)
        if cached is not None and cached[0] == size:
            return cached[1]
        if log.name.endswith(".zstd"):
            raise StorageError(f"{log}: compressed logs are read-only here; convert first",
                               path=str(log))
        scan = scan_file(log)
        if scan.form == "fixture":
            raise StorageError(f"{log}: snapshot-fixture logs are read-only; convert first",
                               code="fixture-read-only", path=str(log))
        if scan.needs_truncation:
            raise StorageError(f"{log}: the log has a torn or crash tail; load it to repair "
                               f"before appending", code="log-corrupt", path=str(log))
        self._next[log] = (size, len(scan.events))
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
                expected = self._stored_next(log)
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
        """Announce the byte range in the lock file, append and fsync, then clear the
        announcement. A failure truncates back; a crash leaves the announcement, so readers
        and the next writer drop the unfinished batch instead of taking part of it."""
        fd = os.open(log, os.O_WRONLY | os.O_APPEND)
        try:
            size = os.fstat(fd).st_size
            try:
                intent = f"pending {size} {size + len(payload)}\n".encode()
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
            self._next[log] = (size + len(payload), next_seq)
        finally:
            os.close(fd)

    def _create_file(self, session_id: str, batch: Sequence[Event]) -> None:
        header = self._created.get(session_id)
        if header is None:
            raise StorageError(f"no session {session_id!r} to append to; create it first",
                               path=self.path)
        if batch[0]["seq"] != 0:
            raise conflict(self.path, session_id, 0, batch[0]["seq"])
        if self._file is not None:
            folder, log = self._file.parent, self._file
        else:
            folder = self.root / project_dir(header.get("cwd")) / encode_id(session_id)
            log = folder / LOG_NAME
        folder.mkdir(parents=True, exist_ok=True)
        payload = dumps_header(header) + encode_events(batch, pack=self.pack)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".session.", suffix=".tmp")
        try:
            try:
                with os.fdopen(fd, "wb") as out:
                    os.fchmod(out.fileno(), 0o644)  # mkstemp makes 0600; logs are shared
                    out.write(payload)
                    out.flush()
                    os.fsync(out.fileno())
                os.link(tmp, log)
            except FileExistsError:
                raise conflict(str(log), session_id, -1, 0) from None
            except OSError as err:
                raise StorageError(f"session {session_id!r}: creating {log} failed: {err}",
                                   path=str(log), seq=0) from err
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        _fsync_dir(folder)
        if self._file is None:
            _fsync_dir(folder.parent)
        self._next[log] = (len(payload), len(batch))
        self._created.pop(session_id, None)

    def _repair(self, session_id: str, scan: Scan, closers: Sequence[Event]) -> None:
        log = self._require(session_id)
        if log.name.endswith(".zstd"):
            raise StorageError(f"{log}: compressed logs are read-only here; convert first",
                               path=str(log))
        with self._locked(log) as lock:
            now = scan_file(log)
            if len(now.events) != len(scan.events):
                raise conflict(str(log), session_id, len(now.events), len(scan.events))
            if now.truncate_at is not None:
                with open(log, "r+b") as f:
                    f.truncate(now.truncate_at)
                    f.flush()
                    os.fsync(f.fileno())
            self._next[log] = (log.stat().st_size, len(scan.events))
            if closers:
                self._write_at_end(log, lock, session_id, encode_events(closers, pack=False),
                                   closers[0]["seq"], len(scan.events) + len(closers))

    def close(self) -> None:
        self._next.clear()
