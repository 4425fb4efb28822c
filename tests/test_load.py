"""SPEC 7.3: the load pipeline's refusals, notes and the line of light imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from builders import ev, user
from store_contract import HEADER, chat

from surface_lab import CorruptLogError, StorageError, UnsupportedFormatError, read_log
from surface_lab.storage import JsonlStore
from surface_lab.storage.jsonl import dumps_header, dumps_record, encode_events


def _file(tmp_path: Path, header: dict[str, object], body: bytes = b"") -> Path:
    path = tmp_path / "s.jsonl"
    path.write_bytes(dumps_record({"type": "session", **header}) + body)
    return path


@pytest.mark.parametrize(("version", "words"), [(1, "written by a newer version"),
                                                (-1, "no upgrade path")])
def test_other_format_versions_are_unsupported_not_corrupt(tmp_path: Path, version: int,
                                                           words: str) -> None:
    path = _file(tmp_path, {**HEADER, "version": version})
    with pytest.raises(UnsupportedFormatError, match=words) as info:
        read_log(path)
    assert not isinstance(info.value, CorruptLogError)
    assert (info.value.code, info.value.line, info.value.path) == (
        "format-unsupported", 1, str(path))


def test_a_header_without_delegation_depth_is_read_but_not_resumed(tmp_path: Path) -> None:
    header = {k: v for k, v in HEADER.items() if k != "delegationDepth"}
    path = _file(tmp_path, header, encode_events([ev(0, "session/title", {})]))
    log = read_log(path)
    assert [p.code for p in log.problems] == ["header-legacy"]
    with pytest.raises(UnsupportedFormatError, match="delegationDepth"):
        JsonlStore.for_file(path).resume("s1")


def test_fixture_logs_are_not_resumed(tmp_path: Path) -> None:
    path = _file(tmp_path, HEADER, b'{"type":"turn/start","data":{"turn":1}}\n')
    with pytest.raises(StorageError) as info:
        JsonlStore.for_file(path).resume("s1")
    assert info.value.code == "fixture-read-only"


def test_retired_types_are_refused_even_when_ignorable(tmp_path: Path) -> None:
    path = _file(tmp_path, HEADER, dumps_record(
        {"type": "mode/set", "seq": 0, "time": 0, "data": {}, "ignorable": True}))
    with pytest.raises(CorruptLogError) as info:
        read_log(path)
    assert (info.value.code, info.value.seq, info.value.line) == ("legacy-unsupported", 0, 2)


def test_unmarked_logs_are_read_linearly_with_a_note(tmp_path: Path) -> None:
    path = _file(tmp_path, HEADER, encode_events([user(0, op=None), user(1, op=None)]))
    log = read_log(path)
    assert log.mode == "linear" and log.fold.nodes == [0, 1]
    assert [p.code for p in log.problems] == ["linear-fallback"]


def test_the_log_reading_offers_a_session(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(dumps_header(HEADER) + encode_events(chat(1)[:8]))
    log = read_log(path)
    session = log.session()
    assert [e["type"] for e in session.events[8:]] == ["step/end", "turn/end",
                                                       "session/end-seed"]
    assert session.header["cwd"] == "/work/project"


def test_importing_the_package_stays_light() -> None:
    code = ("import sys, surface_lab, surface_lab.storage, surface_lab.cli; "
            "heavy = {'pandas', 'matplotlib', 'ipywidgets', 'numpy'} & set(sys.modules); "
            "print(sorted(heavy))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "[]"
