"""The JSONL backend: the contract suite plus layout, encoding, scanning and durability."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
import zstandard
from builders import ev, user
from hypothesis import given, settings
from hypothesis import strategies as st
from store_contract import HEADER, StoreContract, chat

from surface_lab import CorruptLogError, StorageError, read_log
from surface_lab.chunks import expand_row, pack_records
from surface_lab.storage import JsonlStore, Store, jsonl
from surface_lab.storage.jsonl import (
    decode_id,
    dumps_header,
    encode_events,
    encode_id,
    project_dir,
    scan_bytes,
)


class TestJsonlContract(StoreContract):
    @staticmethod
    def make_store_static(root: Path) -> Store:
        return JsonlStore(root / "store")

    def make_store(self, root: Path) -> Store:
        return self.make_store_static(root)


def _write(path: Path, *lines: bytes | str, header: dict[str, Any] | None = None) -> Path:
    body = [dumps_header(header or HEADER)] + [
        (line.encode() if isinstance(line, str) else line) for line in lines]
    path.write_bytes(b"".join(body))
    return path


def _log_bytes(events: list[dict[str, Any]]) -> bytes:
    return dumps_header(HEADER) + encode_events(events)


class TestLayout:
    @pytest.mark.parametrize(("sid", "encoded"), [
        ("abc-1.2_x", "abc-1.2_x"), (".", "~002E"), ("..", "~002E~002E"), ("a.b", "a.b"),
        ("a/b", "a~002Fb"), ("../x", "..~002Fx"), ("~", "~007E"), ("é", "~00E9"),
        ("😀", "~D83D~DE00"), ("a\nb\x00", "a~000Ab~0000"), ("C:\\x", "C~003A~005Cx"),
    ])
    def test_id_encoding(self, sid: str, encoded: str) -> None:
        assert encode_id(sid) == encoded
        assert decode_id(encoded) == sid

    def test_an_empty_id_is_refused(self) -> None:
        with pytest.raises(StorageError):
            encode_id("")

    @pytest.mark.parametrize(("cwd", "folder"), [
        (None, "_no-cwd"), ("/", "--root--"), ("/home/me/proj", "--home-me-proj--"),
        ("C:\\Users\\me", "--C-Users-me--"), ("/a//b:/c", "--a-b-c--"),
        ("/tmp/~x y", "--tmp-~007Ex~0020y--"), ("/..", "--..--"),
    ])
    def test_project_dir(self, cwd: str | None, folder: str) -> None:
        assert project_dir(cwd) == folder

    def test_long_cwds_are_cut(self) -> None:
        assert len(project_dir("/" + "a" * 400)) == 255

    @pytest.mark.parametrize("sid", ["/", "..", ".", "../../etc/passwd", "a/../../b",
                                     "\x00", "x\ny", "🙂/..", "C:\\Windows"])
    def test_no_id_leaves_the_root(self, tmp_path: Path, sid: str) -> None:
        root = tmp_path / "store"
        store = JsonlStore(root)
        store.create({**HEADER, "id": sid, "cwd": "/../.."})
        store.append(sid, [ev(0, "session/title", {})])
        [written] = [p for p in tmp_path.rglob("session.jsonl")]
        assert written.resolve().is_relative_to(root.resolve())
        assert written.parent.parent.parent == root
        assert store.list() == [sid]
        assert read_log(root, session_id=sid).session_id == sid


class TestEncoding:
    def test_header_line_is_exact(self) -> None:
        header = {"agentPreset": "p", "id": "s", "version": 0, "createdAt": 5, "x": 1}
        assert dumps_header(header) == (
            b'{"type":"session","version":0,"id":"s","createdAt":5,"delegationDepth":0,'
            b'"agentPreset":"p"}\n')

    def test_records_are_compact_utf8_in_key_order(self) -> None:
        event = {"surfaceOp": "append", "data": {"t": "é✓"}, "time": 1, "seq": 0,
                 "type": "user/message", "sourceEventSeqs": [1]}
        from surface_lab.events import freeze_event
        assert encode_events([freeze_event(event)]) == (
            '{"type":"user/message","seq":0,"time":1,"data":{"t":"é✓"},'
            '"sourceEventSeqs":[1],"surfaceOp":"append"}\n').encode()

    def test_runs_of_three_chunks_are_packed(self) -> None:
        log = chat(1)
        lines = encode_events(log).splitlines()
        rows = [line for line in lines if b'"text-chunks"' in line]
        assert len(rows) == 1
        assert rows[0].startswith(b'{"type":"text-chunks","seq0":3,"time0":1021,"data":')
        assert len(lines) == len(log) - 3
        assert len(encode_events(log, pack=False).splitlines()) == len(log)

    def test_big_integers_round_trip_exactly(self, tmp_path: Path) -> None:
        big = 123456789012345678901234567890
        path = _write(tmp_path / "s.jsonl", encode_events([ev(0, "session/title", {"n": big})]))
        assert read_log(path).events[0]["data"]["n"] == big


_text = st.text(max_size=5)


@st.composite
def chunk_logs(draw: Any) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["text-delta", "reasoning-delta", "tool-call-delta", "x"]))
        index = draw(st.integers(0, 1))
        if kind == "tool-call-delta":
            chunk: dict[str, Any] = {"type": kind, "index": index, "id": draw(st.sampled_from(
                ["a", "b"]))}
            if draw(st.booleans()):
                chunk["name"] = draw(st.sampled_from(["read", "x"]))
            chunk["argumentsDelta"] = draw(_text)
        elif kind == "x":
            chunk = {"type": "usage", "usage": {}}
        else:
            chunk = {"type": kind, "index": index, "text": draw(_text)}
        events.append({"type": "assistant/chunk", "seq": len(events),
                       "time": draw(st.integers(-10**6, 10**6)),
                       "data": {"turn": 1, "step": draw(st.integers(1, 2)), "chunk": chunk}})
    return events


class TestPackedRows:
    @settings(max_examples=200, deadline=None)
    @given(chunk_logs())
    def test_pack_then_expand_round_trips(self, events: list[dict[str, Any]]) -> None:
        expanded: list[dict[str, Any]] = []
        for record in pack_records(events):
            if record["type"] == "assistant/chunk":
                expanded.append(dict(record))
            else:
                assert len(record["data"].get("texts", record["data"].get("args", []))) >= 3
                expanded += [dict(e) for e in expand_row(record)]
        assert expanded == events
        assert [list(e["data"]["chunk"]) for e in expanded] == [
            list(e["data"]["chunk"]) for e in events]

    @settings(max_examples=100, deadline=None)
    @given(chunk_logs())
    def test_files_round_trip(self, events: list[dict[str, Any]]) -> None:
        scan = scan_bytes(_log_bytes(events), "mem")
        assert [dict(e) for e in scan.events] == events

    def test_rows_of_one_member_are_read(self, tmp_path: Path) -> None:
        row = '{"type":"text-chunks","seq0":0,"time0":5,"data":{"turn":1,"step":1,"index":0,' \
              '"dt":[],"texts":["x"]}}\n'
        [event] = read_log(_write(tmp_path / "s.jsonl", row)).events
        assert event["data"]["chunk"] == {"type": "text-delta", "index": 0, "text": "x"}
        assert event["time"] == 5

    @pytest.mark.parametrize("row", [
        '{"type":"text-chunks","seq0":0,"time0":5,"extra":1,"data":{"turn":1,"step":1,'
        '"index":0,"dt":[],"texts":["x"]}}',
        '{"type":"text-chunks","seq0":0,"time0":5,"data":{"turn":1,"step":1,"index":0,'
        '"dt":[1,2],"texts":["x","y"]}}',
        '{"type":"tool-call-chunks","seq0":0,"time0":5,"data":{"turn":1,"step":1,"index":0,'
        '"dt":[],"args":["x"]}}',
        '{"type":"text-chunks","seq0":0,"time0":5,"data":{"turn":1,"step":1,"index":0,'
        '"dt":[9007199254740991],"texts":["x","y"]}}',
    ])
    def test_malformed_rows_are_bad_lines(self, tmp_path: Path, row: str) -> None:
        log = read_log(_write(tmp_path / "s.jsonl", row + "\n"))
        [problem] = log.problems
        assert (problem.code, problem.line, problem.severity) == ("row-malformed", 2, "error")


class TestReading:
    def test_a_header_only_file_is_an_empty_session(self, tmp_path: Path) -> None:
        log = read_log(_write(tmp_path / "s.jsonl"))
        assert (log.events, log.problems, log.valid) == ([], [], True)

    @pytest.mark.parametrize("data", [b"", b'{"type":"session","version":0}'])
    def test_empty_or_header_less_is_corrupt(self, tmp_path: Path, data: bytes) -> None:
        (tmp_path / "s.jsonl").write_bytes(data)
        with pytest.raises(CorruptLogError, match="empty or header-less"):
            read_log(tmp_path / "s.jsonl")

    def test_a_torn_final_fragment_is_ignored_with_a_note(self, tmp_path: Path) -> None:
        path = _write(tmp_path / "s.jsonl", encode_events(chat(1)), b'{"type":"turn/st')
        log = read_log(path)
        assert len(log.events) == 12 and log.valid
        assert [(p.code, p.severity) for p in log.problems] == [("torn-tail", "note")]

    def test_a_bad_line_before_a_turn_end_is_corruption(self, tmp_path: Path) -> None:
        good = encode_events(chat(1)[:3]).splitlines(keepends=True)
        rest = encode_events(chat(1)[3:], pack=False).splitlines(keepends=True)
        path = _write(tmp_path / "s.jsonl", *good, b"{oops\n", *rest[1:])
        with pytest.raises(CorruptLogError, match="line 5") as info:
            read_log(path)
        assert (info.value.code, info.value.line) == ("line-unparsable", 5)

    def test_a_bad_final_stretch_is_a_crash_tail(self, tmp_path: Path) -> None:
        lines = encode_events(chat(1)[:3]).splitlines(keepends=True)
        path = _write(tmp_path / "s.jsonl", *lines, b"\xff\xfe\n",
                      encode_events([ev(4, "step/start", {})]))
        log = read_log(path)
        assert len(log.events) == 3 and not log.valid
        [crash] = [p for p in log.problems if p.severity == "error"]
        assert crash.line == 5
        assert "crash tail from line 5: 2 complete line(s) would be dropped" in crash.message

    @pytest.mark.parametrize(("line", "code"), [
        (b"\xef\xbb\xbf" + encode_events([ev(3, "step/start", {})]), "line-unparsable"),
        (b"\n", "line-unparsable"),
        (b'{"type":"step/start","seq":3,"time":0,"data":NaN}\n', "line-unparsable"),
        (encode_events([ev(4, "step/start", {})]), "seq-gap"),
        (b"[1,2]\n", "line-unparsable"),
    ])
    def test_what_makes_a_line_bad(self, tmp_path: Path, line: bytes, code: str) -> None:
        path = _write(tmp_path / "s.jsonl", encode_events(chat(1)[:3]), line)
        [problem] = [p for p in read_log(path).problems if p.severity == "error"]
        assert (problem.code, problem.line) == (code, 5)

    def test_crlf_line_ends_are_accepted(self, tmp_path: Path) -> None:
        data = _log_bytes(chat(1)).replace(b"\n", b"\r\n")
        (tmp_path / "s.jsonl").write_bytes(data)
        assert read_log(tmp_path / "s.jsonl").valid

    def test_zstd_logs_are_read_and_a_torn_frame_is_a_torn_tail(self, tmp_path: Path) -> None:
        cctx = zstandard.ZstdCompressor()
        events = encode_events(chat(1))
        frames = [cctx.compress(dumps_header(HEADER)), cctx.compress(events)]
        path = tmp_path / "session.jsonl.zstd"
        path.write_bytes(b"".join(frames))
        assert [dict(e) for e in read_log(path).events] == chat(1)
        path.write_bytes(b"".join(frames) + cctx.compress(b'{"a":1}\n')[:-3])
        log = read_log(path)
        assert len(log.events) == 12
        assert [p.code for p in log.problems] == ["torn-tail"]

    def test_fixture_form_is_read_with_a_note(self, tmp_path: Path) -> None:
        path = _write(tmp_path / "s.jsonl", '{"type":"turn/start","data":{"turn":1}}\n',
                      '{"type":"text-chunks","data":{"turn":1,"step":1,"index":0,"dt":[2,3],'
                      '"texts":["a","b","c"]}}\n',
                      '{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}\n',
                      header={**HEADER, "id": "{{sessionId}}", "cwd": "{{cwd}}"})
        log = read_log(path)
        assert log.form == "fixture"
        assert [(e["seq"], e["time"]) for e in log.events] == [(0, 0), (1, 0), (2, 2), (3, 5),
                                                                (4, 0)]
        assert [p.code for p in log.problems] == ["fixture-form"]
        with pytest.raises(StorageError) as info:
            JsonlStore.for_file(path).append("{{sessionId}}", [ev(5, "step/start", {})])
        assert info.value.code == "fixture-read-only"

    def test_mixed_forms_are_corrupt(self, tmp_path: Path) -> None:
        path = _write(tmp_path / "s.jsonl", '{"type":"turn/start","data":{"turn":1}}\n',
                      encode_events([ev(1, "step/start", {})]))
        with pytest.raises(CorruptLogError) as info:
            read_log(path)
        assert (info.value.code, info.value.line) == ("mixed-fixture-form", 3)

    def test_surface_violations_name_line_and_seq(self, tmp_path: Path) -> None:
        path = _write(tmp_path / "s.jsonl", encode_events(
            [user(0), {**user(1), "surfaceOp": {"op": "replace", "start": 7, "end": 7}}]))
        with pytest.raises(CorruptLogError) as info:
            read_log(path)
        err = info.value
        assert (err.code, err.line, err.seq, err.event_type) == (
            "replace-start-missing", 3, 1, "user/message")

    def test_read_log_never_writes(self, tmp_path: Path) -> None:
        lines = encode_events(chat(1)[:8])
        path = _write(tmp_path / "s.jsonl", lines, b"garbage\n", b"torn")
        before = hashlib.sha256(path.read_bytes()).hexdigest()
        log = read_log(path)
        assert [c["type"] for c in log.closers] == ["step/end", "turn/end"]
        assert hashlib.sha256(path.read_bytes()).hexdigest() == before
        assert sorted(os.listdir(tmp_path)) == ["s.jsonl"]


class TestDurability:
    def test_creation_goes_through_a_temporary_file_and_a_link(
            self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        linked: list[tuple[str, str]] = []
        real_link = os.link
        monkeypatch.setattr(os, "link", lambda a, b: (linked.append((a, b)), real_link(a, b)))
        store = JsonlStore(tmp_path)
        store.create(HEADER)
        store.append("s1", chat(1))
        [(tmp, final)] = linked
        assert Path(final).name == "session.jsonl" and ".tmp" in tmp
        assert not Path(tmp).exists()
        assert [p.name for p in Path(final).parent.iterdir()] == ["session.jsonl"]

    def test_every_append_is_fsynced(self, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
        store = JsonlStore(tmp_path)
        store.create(HEADER)
        store.append("s1", chat(1)[:2])
        synced: list[int] = []
        real_fsync = os.fsync
        monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
        store.append("s1", chat(1)[2:4])
        assert synced

    def test_a_failed_write_is_truncated_back(self, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
        store = JsonlStore(tmp_path)
        store.create(HEADER)
        store.append("s1", chat(1)[:2])
        [log] = list(tmp_path.rglob("session.jsonl"))
        before = log.read_bytes()
        real_write = os.write

        def half_then_fail(fd: int, data: Any) -> int:
            if len(data) > 10:
                return real_write(fd, bytes(data[:10]))
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(jsonl.os, "write", half_then_fail)
        with pytest.raises(StorageError, match=r"session 's1': appending from seq 2 failed") \
                as info:
            store.append("s1", chat(1)[2:4])
        assert info.value.seq == 2
        monkeypatch.undo()
        assert log.read_bytes() == before
        store.append("s1", chat(1)[2:4])
        assert len(store.read_suffix("s1", 0)) == 4

    def test_repair_truncates_a_crash_tail_then_appends_closers(self, tmp_path: Path) -> None:
        store = JsonlStore(tmp_path)
        store.create(HEADER)
        store.append("s1", chat(1)[:8])
        [log] = list(tmp_path.rglob("session.jsonl"))
        with open(log, "ab") as f:
            f.write(b'{"broken\n{"type":"step/start"}\n{"torn')
        with pytest.raises(StorageError, match="torn or crash tail"):
            store.append("s1", [ev(8, "step/end", {})])
        _, events = store.load("s1")
        assert [e["type"] for e in events[8:]] == ["step/end", "turn/end"]
        assert read_log(log).problems == []
        assert log.read_bytes().endswith(b'"reason":{"kind":"interrupted"}}}\n')
