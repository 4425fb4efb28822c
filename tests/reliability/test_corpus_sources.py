"""Hostile corpus sources: one bad source is one row of problems, never an aborted or hung
build; a damaged manifest is a package error."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from surface_lab import SurfaceLabError, corpus
from surface_lab.agent.samples import sample_session
from surface_lab.storage.sqlite import APPLICATION_ID, SCHEMA_VERSION, SqliteStore

pytestmark = pytest.mark.reliability
ROOT = Path(__file__).resolve().parents[2]


def _database(path: Path, data: str | bytes) -> Path:
    """The chat sample in a database, one event's stored JSON replaced by `data`."""
    chat = sample_session("chat")
    with SqliteStore(path) as db:
        db.create(chat.header)
        db.append(chat.id, chat.events)
    con = sqlite3.connect(path)
    if isinstance(data, bytes):  # TEXT that is not UTF-8
        con.execute("UPDATE events SET data = CAST(? AS TEXT) WHERE seq = 3", (data,))
    else:
        con.execute("UPDATE events SET data = ? WHERE seq = 3", (data,))
    con.commit()
    con.close()
    return path


def _hostile(folder: Path) -> dict[str, Path]:
    folder.mkdir()
    sources = {
        "int": folder / "int.jsonl",
        "dangling": folder / "dangling.jsonl",
        "utf8": _database(folder / "utf8.db", b'{"a":"\x80\xff"}'),
        "deep": _database(folder / "deep.db", "[" * 500 + "]" * 500),
        "recursive": folder / "recursive.db",
        "good": folder / "good.jsonl",
    }
    sources["int"].write_bytes(b"123\n")
    os.symlink(folder / "gone.jsonl", sources["dangling"])
    con = sqlite3.connect(sources["recursive"])
    con.executescript(
        "CREATE TABLE events (session_id TEXT, seq INTEGER, type TEXT, time INTEGER, "
        "data TEXT); CREATE VIEW sessions AS WITH RECURSIVE r(id, created_at) AS "
        "(SELECT 'a', 0 UNION ALL SELECT 'a', created_at + 1 FROM r) SELECT * FROM r; "
        f"PRAGMA user_version = {SCHEMA_VERSION}; PRAGMA application_id = {APPLICATION_ID};")
    con.close()
    sources["good"].write_bytes((ROOT / "sample_logs" / "max-tokens.jsonl").read_bytes())
    # an ATIF trajectory whose text holds a lone surrogate (a JSON escape)
    sources["surrogate"] = folder / "surrogate.trajectory.json"
    sources["surrogate"].write_text(
        '{"schema_version": "ATIF-v1.7", "session_id": "lone", "steps": [{"step_id": 1, '
        '"source": "user", "message": "half a pair: \\ud800"}]}')
    return sources


def test_each_bad_source_is_a_row_and_the_build_finishes(tmp_path: Path) -> None:
    sources = _hostile(tmp_path / "logs")
    out = tmp_path / "out"
    # a subprocess: a regression that hangs (the recursive view) fails on the timeout,
    # and the command must print no traceback
    result = subprocess.run(
        [sys.executable, "-m", "surface_lab.cli", "corpus", "build",
         str(tmp_path / "logs" / "*"), str(out), "--engine", "serial"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    c = corpus.open_corpus(out)
    rows = c.sql("select source, coalesce(problem_code, 'none') as problem_code, events "
                 "from sessions order by source")
    codes = dict(zip(rows["source"], rows["problem_code"], strict=True))
    c.close()
    assert codes[str(sources["int"])] == "line-unparsable"
    assert codes[str(sources["dangling"])] == "path-refused"  # no such file
    assert codes[str(sources["recursive"])] == "schema-unsupported"
    assert codes[str(sources["good"])] == "none"
    assert rows[rows["source"] == str(sources["good"])]["events"].iloc[0] == 53
    # the two damaged databases hold the same session id: one row, the other dropped
    kept = [s for s in (sources["utf8"], sources["deep"]) if str(s) in codes]
    assert len(kept) == 1 and codes[str(kept[0])] != "none"
    assert codes[str(sources["surrogate"])] != "none"
    assert len(rows) == 6


@pytest.mark.parametrize("text", [
    b"", b"{", b"\xff\xfe", b"[1, 2]", b"null", b"[" * 100_000,
    json.dumps({"schema_version": corpus.SCHEMA_VERSION}).encode(),
    json.dumps({"schema_version": corpus.SCHEMA_VERSION, "tables": {"events": [
        {"path": "../../etc/passwd", "rows": 1}]}, "sessions": 0, "events": 0}).encode(),
    json.dumps({"schema_version": corpus.SCHEMA_VERSION, "tables": [], "sessions": 0,
                "events": 0}).encode(),
    json.dumps({"schema_version": corpus.SCHEMA_VERSION, "tables": {}, "sessions": "x",
                "events": 0, "extra": 1}).encode(),
])
def test_a_damaged_manifest_is_a_package_error(tmp_path: Path, text: bytes) -> None:
    (tmp_path / corpus.MANIFEST).write_bytes(text)
    with pytest.raises(SurfaceLabError) as info:
        corpus.open_corpus(tmp_path)
    assert info.value.code in ("corpus-damaged", "schema-unsupported")
    assert str(tmp_path) in str(info.value)
