"""Security: no id escapes the store root, SQL is parameterised, log text is escaped in
every HTML view, zstd input is bounded, and nothing unpickles or evaluates log content."""

from __future__ import annotations

import io
import re
import sqlite3
from pathlib import Path

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from surface_lab import CorruptLogError, Session, read_log
from surface_lab.notebook import ReplayWidget
from surface_lab.notebook.audit import audit_report
from surface_lab.reading import codec
from surface_lab.storage import JsonlStore, SqliteStore

from .common import HEADER

pytestmark = pytest.mark.reliability
PACKAGE = Path(__file__).resolve().parents[2] / "surface_lab"
NASTY = ["'; DROP TABLE events; --", '" OR 1=1 --', "x'); DELETE FROM sessions; --",
         "../../../etc/passwd", "..", ".", "/", "\\..\\..\\", "~", "%2e%2e", "\x00", "é/😀",
         "a\nb", "C:\\Windows\\System32"]


@settings(max_examples=150, deadline=None)
@given(session_id=st.text(min_size=1, max_size=40) | st.sampled_from(NASTY),
       cwd=st.text(max_size=40).map(lambda t: "/" + t) | st.sampled_from(
           ["/..", "/../../..", "/a/../../b", "/" + "x" * 600]))
def test_no_id_or_cwd_places_a_file_outside_the_root(tmp_path_factory: pytest.TempPathFactory,
                                                      session_id: str, cwd: str) -> None:
    base = tmp_path_factory.mktemp("sec")
    root = base / "root"
    store = JsonlStore(root)
    store.create({**HEADER, "id": session_id, "cwd": cwd})
    store.append(session_id, [{"type": "session/title", "seq": 0, "time": 0, "data": {}}])
    written = [p for p in base.rglob("*") if p.is_file()]
    assert written and all(p.resolve().is_relative_to(root.resolve()) for p in written)
    assert all(len(p.name.encode()) <= 255 for p in written)
    assert store.list() == [session_id]
    assert read_log(root, session_id=session_id).session_id == session_id


@pytest.mark.parametrize("nasty", NASTY)
def test_sql_is_parameterised(tmp_path: Path, nasty: str) -> None:
    with SqliteStore(tmp_path / "s.db") as store:
        store.create({**HEADER, "id": nasty, "agentPreset": nasty})
        store.append(nasty, [{"type": nasty, "seq": 0, "time": 0, "data": {"q": nasty},
                              "ignorable": True}])
        assert store.list() == [nasty]
        [event] = store.read_suffix(nasty, 0)
        assert event["type"] == nasty and event["data"] == {"q": nasty}
    db = sqlite3.connect(tmp_path / "s.db")
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_schema WHERE type='table'")}
    db.close()
    assert tables == {"sessions", "events"}


def test_sql_text_is_never_formatted_from_values() -> None:
    source = (PACKAGE / "storage" / "sqlite.py").read_text()
    for statement in re.findall(r'execute(?:many)?\(\s*f"([^"]*)"', source):
        # Only fixed column lists, placeholders and constants may be interpolated.
        assert re.fullmatch(r"[^{}]*(\{(columns|', '\.join\(values\)|', '\.join\('\?' \* "
                            r"len\(values\)\)|BUSY_TIMEOUT_MS)\}[^{}]*)*", statement), statement


HOSTILE = ['<script>alert(1)</script>', '<img src=x onerror="alert(2)">',
           '"><svg onload=alert(3)>', "javascript:alert(4)", "</pre><b>bold</b>"]


def test_every_html_view_escapes_log_text(tmp_path: Path) -> None:
    session = Session("<script>id</script>")
    for text in HOSTILE:
        session.append("user/message", {"id": text, "role": "user", "source": {
            "kind": "user"}, "content": [{"type": "text", "text": text}]}, surface_op="append")
    session.append("user/message", {"id": "s", "role": "user", "source": {
        "kind": "plugin", "plugin": HOSTILE[1], "compactionId": HOSTILE[0]},
        "content": [{"type": "text", "text": HOSTILE[2]}]},
        surface_op={"op": "replace", "start": 0, "end": 4}, source_event_seqs=[0, 1, 2, 3, 4])
    widget = ReplayWidget(session, figure=False)
    views = [widget.html.value]
    for seq in range(len(session.events)):
        widget.slider.value = seq
        views.append(widget.html.value)
    views.append(audit_report(session, tmp_path)["html"].read_text())
    for view in views:
        for payload in ("<script>", "<img src=x", "<svg", "<b>bold</b>", "</pre><b>"):
            assert payload not in view


def test_zstd_output_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = io.BytesIO()
    with zstandard.ZstdCompressor().stream_writer(buffer, closefd=False) as writer:
        writer.write(b'{"type":"session","version":0,"id":"x","createdAt":0}\n')
        writer.write(b"0" * 50_000_000)  # a frame that does not say its size
    path = tmp_path / "bomb.jsonl.zstd"
    path.write_bytes(buffer.getvalue())
    assert path.stat().st_size < 100_000
    monkeypatch.setattr(codec, "MAX_DECOMPRESSED_BYTES", 1_000_000)
    with pytest.raises(CorruptLogError, match="would exceed the limit of 1000000 bytes"):
        read_log(path)


def test_nothing_unpickles_or_evaluates() -> None:
    forbidden = re.compile(r"\b(pickle|marshal|shelve|eval|exec|compile|__import__)\s*[.(]|"
                           r"yaml\.load\(|subprocess|os\.system")
    # bench.py starts fresh interpreters on its own fixed scripts (argv: file paths) to
    # measure peak memory; no log content is ever part of a command.
    allowed = {("bench.py", "subprocess")}
    offenders = [f"{p.relative_to(PACKAGE)}:{i}" for p in PACKAGE.rglob("*.py")
                 for i, line in enumerate(p.read_text().splitlines(), 1)
                 if (match := forbidden.search(line)) and "re.compile" not in line
                 and (p.name, match.group(0).split(".")[0].split("(")[0].strip())
                 not in allowed]
    assert offenders == []
