"""Hostile and damaged input: mutated logs only ever give a result or one of the package's
own errors with a location; never another exception, never a hang, bounded memory."""

from __future__ import annotations

import contextlib
import io
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from surface_lab import SurfaceLabError, read_log
from surface_lab.cli import main
from surface_lab.notebook import events_df, replacements_df
from surface_lab.reading import codec

from .common import record

pytestmark = pytest.mark.reliability

ROOT = Path(__file__).resolve().parents[2]
BASES = [
    (ROOT / "sample_logs" / "chat.jsonl").read_bytes(),
    (ROOT / "sample_logs" / "tools-parallel.jsonl").read_bytes(),
    (ROOT / "sample_logs" / "pruned-tool-results.jsonl").read_bytes(),
    b"".join((ROOT / "sample_logs" / "long-compaction.jsonl").read_bytes()
             .splitlines(keepends=True)[:300]),
    (ROOT / "sample_logs" / "crash-needs-repair.jsonl").read_bytes(),
]
LINE_LIMIT = 64 * 1024
STATS = {"inputs": 0, "accepted": 0, "refused_with_location": 0}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                  max_size=3),
    max_leaves=6)


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _set_path(value: Any, path: list[Any], new: Any) -> Any:
    if not path:
        return new
    if isinstance(value, dict) and value:
        key = list(value)[path[0] % len(value)] if isinstance(path[0], int) else path[0]
        return {**value, key: _set_path(value.get(key), path[1:], new)}
    if isinstance(value, list) and value:
        i = path[0] % len(value) if isinstance(path[0], int) else 0
        return [*value[:i], _set_path(value[i], path[1:], new), *value[i + 1 :]]
    return new


@st.composite
def mutated(draw: Any) -> bytes:
    data = draw(st.sampled_from(BASES))
    for _ in range(draw(st.integers(1, 3))):
        lines = _lines(data)
        i = draw(st.integers(0, max(len(lines) - 1, 0)))
        kind = draw(st.sampled_from([
            "flip", "truncate", "drop", "swap", "duplicate", "retype", "huge", "deep",
            "long", "utf8", "bom", "crlf"]))
        if kind == "flip" and data:
            at = draw(st.integers(0, len(data) - 1))
            data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
        elif kind == "truncate":
            data = data[: draw(st.integers(0, len(data)))]
        elif kind == "drop":
            data = b"\n".join(lines[:i] + lines[i + 1 :])
        elif kind == "swap":
            j = draw(st.integers(0, max(len(lines) - 1, 0)))
            lines[i], lines[j] = lines[j], lines[i]
            data = b"\n".join(lines)
        elif kind == "duplicate":
            data = b"\n".join(lines[: i + 1] + lines[i:])
        elif kind in ("retype", "huge", "deep"):
            try:
                record = json.loads(lines[i])
            except ValueError:
                continue
            path = draw(st.lists(st.integers(0, 6) | st.sampled_from(
                ["type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "version",
                 "id", "createdAt", "message", "content"]), max_size=4))
            new = (draw(json_values) if kind == "retype" else
                   draw(st.sampled_from([10**400, -(2**63), 2**64, 1e308, -1e308, 2**53]))
                   if kind == "huge" else _deep(draw(st.integers(300, 3000))))
            try:
                lines[i] = json.dumps(_set_path(record, path, new)).encode()
            except (ValueError, RecursionError):
                continue
            data = b"\n".join(lines)
        elif kind == "long":
            lines.insert(i, b'{"type":"x","seq":1,"time":0,"data":"' + b"a" * (LINE_LIMIT + 10)
                         + b'"}')
            data = b"\n".join(lines)
        elif kind == "utf8":
            lines[i] = lines[i][: len(lines[i]) // 2] + b"\xff\xfe\xc3" + lines[i][
                len(lines[i]) // 2 :]
            data = b"\n".join(lines)
        elif kind == "bom":
            lines[i] = b"\xef\xbb\xbf" + lines[i]
            data = b"\n".join(lines)
        elif kind == "crlf":
            data = data.replace(b"\n", b"\r\n")
    return data


def _deep(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


@contextlib.contextmanager
def _watchdog(seconds: int) -> Iterator[None]:
    """Fail instead of hanging: every input must finish in bounded time."""
    def expire(*_: Any) -> None:
        raise TimeoutError(f"an input took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _own_error_or_result(call: Any, path: Path) -> None:
    try:
        call()
        STATS["accepted"] += 1
    except SurfaceLabError as err:
        assert err.path is not None, f"{type(err).__name__} without a location: {err}"
        assert str(err)
        STATS["refused_with_location"] += 1


@pytest.fixture(scope="module", autouse=True)
def _figures() -> Iterator[None]:
    yield
    record("fuzz", **STATS)


FUZZ = settings(max_examples=250, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])


@pytest.fixture(autouse=True)
def _small_line_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codec, "MAX_LINE_BYTES", LINE_LIMIT)


@FUZZ
@given(mutated())
def test_read_log_and_frames_on_mutated_logs(tmp_path_factory: Any, data: bytes) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "log.jsonl"
    path.write_bytes(data)
    STATS["inputs"] += 1
    with _watchdog(20):
        _own_error_or_result(lambda: read_log(path), path)
        _own_error_or_result(lambda: events_df(path, strict=True, progress=False), path)
        frame, problems = events_df(path, strict=False, progress=False)
        assert len(frame) >= 0 and isinstance(problems, list)
        replacements_df(path, strict=False, progress=False)


@FUZZ
@given(mutated())
def test_validate_on_mutated_logs(tmp_path_factory: Any, data: bytes) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "log.jsonl"
    path.write_bytes(data)
    STATS["inputs"] += 1
    out = io.StringIO()
    with _watchdog(20), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(io.StringIO()) as err:
        code = main(["validate", str(path)])
    assert code in (0, 1)
    assert "internal error" not in err.getvalue(), err.getvalue()
    for line in out.getvalue().splitlines():
        assert line.startswith(str(path)), line


def test_a_line_past_the_limit_is_refused_not_parsed(tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    path.write_bytes(BASES[0] + b'{"type":"x","data":"' + b"a" * (LINE_LIMIT * 2) + b'"}\n')
    log = read_log(path)
    [problem] = [p for p in log.problems if p.severity == "error"]
    assert problem.code == "line-unparsable"
    assert f"longer than {LINE_LIMIT} bytes" in problem.message
