"""The fast reader agrees with the full load pipeline on every log it accepts, and hands
every log it cannot vouch for to that pipeline (which then names the problem)."""

from __future__ import annotations

import random
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from builders import read_outcome

from surface_lab import read_log
from surface_lab.analysis.events import event_columns
from surface_lab.analysis.source import load_source
from surface_lab.errors import CorruptLogError
from surface_lab.events import message_of
from surface_lab.messages import called_tools, message_text
from surface_lab.notebook import events_df
from surface_lab.reading import fast, lines
from surface_lab.reading.sequences import LogEvents

SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"
GOOD = ["chat", "cancelled-turn", "crash-needs-repair", "empty-response-retry",
        "long-compaction", "max-tokens", "pruned-tool-results", "tools-parallel"]




def _agree(path: Path) -> bool:
    """Both readers give the same result; True when the fast reader kept the log."""
    fast, full = read_outcome(path, "fast"), read_outcome(path, "full")
    assert fast == full
    return fast[0] == "read" and isinstance(read_log(path).events, LogEvents)


@pytest.fixture(params=["stretches", "line by line", "counted depth"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The fast reader as it runs (a few MB at a time, nesting bounded by the recursion
    limit), one line per stretch, and with the depth found by counting brackets (as on
    an interpreter that counts C recursion apart, where the probe does not fail)."""
    if request.param == "line by line":
        monkeypatch.setattr(lines, "STRETCH_BYTES", 1)
    if request.param == "counted depth":
        monkeypatch.setattr(fast, "_TOO_DEEP", b"[]")
    return str(request.param)


@pytest.mark.parametrize("name", GOOD)
def test_every_valid_sample_is_read_fast_and_the_same(name: str, reader: str) -> None:
    assert _agree(SAMPLES / f"{name}.jsonl")


@pytest.mark.parametrize("name", GOOD)
def test_frames_of_the_fast_reader_equal_the_full_ones(name: str) -> None:
    fast, full = read_log(SAMPLES / f"{name}.jsonl"), read_log(SAMPLES / f"{name}.jsonl",
                                                                check="full")
    pd.testing.assert_frame_equal(events_df(fast, progress=False),
                                  events_df(full, progress=False))
    assert event_columns(load_source(fast)) == event_columns(load_source(full))
    assert load_source(fast).plans == load_source(full).plans


@pytest.mark.parametrize("old,new", [
    (b'"data":{"turn":', b'"data":{ "turn" :'),  # spacing: sizes are not the bytes
    (b'"text":"', b'"text":"\\u00e9\\/'),  # escapes orjson would not write
    (b'"data":{', b'"data":{"f":1.50,"g":1E2,'),  # numbers written another way
    (b'"texts":["', b'"texts":["\xc3\xa9\\"\\n'),  # a row's text escaped, not ASCII
    (b'"args":["', b'"args":["\\t'),
])
def test_frames_agree_whatever_the_spelling_of_the_data(
        tmp_path: Path, old: bytes, new: bytes, reader: str) -> None:
    """Data sizes are those of the compact encoding, also when the file spells the data
    otherwise; each stretch whose data does not encode back to its bytes is sized
    value by value."""
    for name in ("long-compaction", "tools-parallel"):
        lines = _lines(name)
        hits = [i for i, line in enumerate(lines) if i and old in line]
        assert hits
        changed = list(lines)
        for i in hits[:2] + hits[-1:]:
            changed[i] = lines[i].replace(old, new, 1)
        path = _write(tmp_path, changed)
        fast, full = read_log(path), read_log(path, check="full")
        assert isinstance(fast.events, LogEvents)
        pd.testing.assert_frame_equal(events_df(fast, progress=False),
                                      events_df(full, progress=False))


def test_the_samples_the_fast_reader_refuses_get_the_full_answer() -> None:
    for path in sorted(SAMPLES.glob("*.jsonl")):
        _agree(path)
    assert not _agree(SAMPLES / "legacy-linear.jsonl")  # the legacy reading applies
    assert not _agree(SAMPLES / "invalid-crash-tail.jsonl")


def _lines(name: str) -> list[bytes]:
    return (SAMPLES / f"{name}.jsonl").read_bytes().splitlines(keepends=True)


def _write(tmp_path: Path, lines: list[bytes], name: str = "s.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(b"".join(lines))
    return path


@pytest.mark.parametrize("old,new", [
    (b'"seq":3,', b'"seq":3.0,'),  # an integral float seq: read as 3 by both
    (b'"time":', b'"time":1e400,"x":'),  # not JSON for orjson
    (b'"data":{', b'"data":{"turn":1,"turn":2,'),  # a duplicate key: the last wins
    (b'"data":{', b'"data":{"deep":' + b"[" * 450 + b"]" * 450 + b","),
    (b'"data":{', b'"data":{"deep":' + b"[" * 350 + b"]" * 350 + b","),
    (b'"data":{', b'"data":{"text":"' + b"[" * 450 + b'",'),  # brackets in a string
    (b'"data":{', b'"data":{"x":"\xff",'),  # not UTF-8
    (b'"data":{', b'"data":{"x":"\\ud800",'),  # a lone surrogate
    (b'"data":{', b'"data":{"big":123456789012345678901234,'),  # rounded by orjson
    (b'"data":{', b'"data":null,"d":{'),  # an unknown top-level key
    (b'"role":"user"', b'"role":"assistant"'),
    (b'"surfaceOp":"append"', b'"surfaceOp":"prepend"'),
    (b'"surfaceOp":"append"', b'"surfaceOp":"append","sourceEventSeqs":[]'),
    (b'{"type":"turn/start"', b'{"ignorable":false,"type":"turn/start"'),
    (b'{"type":"turn/start"', b'{"ignorable":true,"type":"turn/start"'),
    (b'"texts":["', b'"texts":[1,"'),
    (b'"dt":[', b'"dt":[9007199254740993,'),
    (b'"dt":[', b'"dt":[-1,'),  # a negative gap: the full pipeline decides
    (b'"sourceEventSeqs":[', b'"sourceEventSeqs":[999999,'),  # not earlier
    (b'"sourceEventSeqs":[', b'"sourceEventSeqs":[0,'),  # cites seq 0 out of order
    (b'"sourceEventSeqs":[', b'"sourceEventSeqs":[0,0,'),  # and twice
    (b'"sourceEventSeqs":[', b'"sourceEventSeqs":[-1,'),
    (b'"sourceEventSeqs":[', b'"sourceEventSeqs":[1.0,'),
    (b'"toolCallId":"', b'"toolCallId":"x'),  # answers another call
    (b',"data":{', b',"data":\n{'),  # a record over two lines
    (b',"data":{', b'} {"data":{'),  # two values on one line
    (b'{"type":', b' {"type":'),
    (b'}\n', b'}\r\n'),
])
def test_a_change_to_any_line_gets_the_same_answer_from_both(
        tmp_path: Path, old: bytes, new: bytes, reader: str) -> None:
    for name in ("long-compaction", "pruned-tool-results", "tools-parallel"):
        lines = _lines(name)
        hits = [i for i, line in enumerate(lines) if i and old in line]
        for i in hits[:3] + hits[-2:]:
            changed = [*lines[:i], lines[i].replace(old, new, 1), *lines[i + 1 :]]
            _agree(_write(tmp_path, changed))


def test_random_byte_changes_never_make_the_readers_disagree(tmp_path: Path) -> None:
    rng = random.Random(7)
    lines = _lines("pruned-tool-results")
    data = b"".join(lines)
    header = len(lines[0])
    for _ in range(150):
        at = rng.randrange(header, len(data) - 1)
        changed = data[:at] + bytes([rng.choice(b'{}[]",:0123456789aeE-\\ ')]) + data[at + 1:]
        _agree(_write(tmp_path, [changed]))


def test_dropping_or_repeating_lines_gets_the_same_answer(tmp_path: Path) -> None:
    lines = _lines("long-compaction")
    for i in range(1, len(lines), 3):
        _agree(_write(tmp_path, [*lines[:i], *lines[i + 1 :]]))
        _agree(_write(tmp_path, [*lines[: i + 1], lines[i], *lines[i + 1 :]]))
    _agree(_write(tmp_path, [*lines, b"\n"]))  # an empty last line
    _agree(_write(tmp_path, [*lines[:-1], lines[-1].rstrip(b"\n")]))  # a torn tail
    _agree(_write(tmp_path, [*lines[:3], b"   \n", *lines[3:]]))


@pytest.mark.parametrize("kind,edits", [(case[0], case[1:]) for case in [
    ("turn/start", b'"data":{', b'"data":{"trigger":"user",'),
    ("turn/end", b'{"kind":"completed"}', b'{"kind":"disposed"}'),
    ("turn/end", b'{"kind":"completed"}', b'{"kind":"aborted"}'),
    ("turn/end", b'{"kind":"completed"}', b'{"kind":"error","failure":{"message":"x"}}'),
    ("turn/end", b'{"kind":"completed"}', b'{"kind":"error"}'),  # refused
    ("turn/end", b'{"kind":"completed"}', b'"done"'),  # not an object: current
    ("request/context", b'"type":"request/context","seq":',
     b'"type":"request/header","seq":'),
    ("request/context", b'"type":"request/context","seq":',  # retired
     b'"type":"request/header","seq":', b'"data":{', b'"data":{"reason":"fallback",'),
    ("request/context", b'"type":"request/context","seq":',
     b'"type":"request/header","seq":', b'"data":{', b'"data":{"reason":"other",'),
]])
def test_legacy_shapes_get_the_same_answer(
        tmp_path: Path, kind: str, edits: tuple[bytes, ...], reader: str) -> None:
    lines = _lines("long-compaction")
    hits = [i for i, line in enumerate(lines) if f'"type":"{kind}"'.encode() in line]
    for i in hits[:1] + hits[-1:]:
        line = lines[i]
        for old, new in zip(edits[::2], edits[1::2], strict=True):
            line = line.replace(old, new, 1)
        assert line != lines[i]
        _agree(_write(tmp_path, [*lines[:i], line, *lines[i + 1 :]]))


@pytest.mark.skipif(sys.version_info >= (3, 12),
                    reason="the recursion limit bounds msgspec's nesting on 3.11 only")
def test_the_recursion_limit_alone_keeps_a_deep_line_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fast, "_maybe_too_deep", lambda *_: False)  # no bracket count
    lines = _lines("chat")
    deep = b'"data":{"deep":' + b"[" * 450 + b"]" * 450 + b","
    lines[2] = lines[2].replace(b'"data":{', deep, 1)
    assert not _agree(_write(tmp_path, lines))  # the full pipeline refuses it too


def test_records_must_match_lines_one_to_one(tmp_path: Path, reader: str) -> None:
    """Two records joined on one line, and one record split over two lines (elsewhere,
    so the counts still agree): each line must hold exactly one record."""
    lines = _lines("long-compaction")
    joined = [*lines[:3], lines[3].rstrip(b"\n") + b" " + lines[4], *lines[5:]]
    assert not _agree(_write(tmp_path, joined))
    split = joined[9].replace(b',"data":{', b',"data":\n{', 1)
    assert split != joined[9]
    assert not _agree(_write(tmp_path, [*joined[:9], split, *joined[10:]]))
    assert not _agree(_write(tmp_path, [*lines[:9], split, *lines[10:]]))
    # split after a "}" inside the record, the next line going on with ","
    i = next(i for i, line in enumerate(joined) if i > 4 and b'},"' in line)
    split = joined[i].replace(b'},"', b'}\n,"', 1)
    assert not _agree(_write(tmp_path, [*joined[:i], split, *joined[i + 1 :]]))


def test_sources_that_do_not_rise_are_checked_one_list_at_a_time(
        tmp_path: Path, reader: str) -> None:
    lines = _lines("long-compaction")
    i = next(i for i, line in enumerate(lines) if b'"sourceEventSeqs":[4,5,6' in line)
    lines[i] = lines[i].replace(b"[4,5,6,", b"[6,5,4,", 1)  # distinct, before the event
    assert _agree(_write(tmp_path, lines))
    lines[i] = lines[i].replace(b"[6,5,4,", b"[6,5,6,", 1)
    assert not _agree(_write(tmp_path, lines))
    with pytest.raises(CorruptLogError) as err:
        read_log(_write(tmp_path, lines))
    assert err.value.line == i + 1


def test_packed_events_read_like_a_list(tmp_path: Path) -> None:
    log = read_log(SAMPLES / "long-compaction.jsonl")
    full = read_log(SAMPLES / "long-compaction.jsonl", check="full")
    assert isinstance(log.events, LogEvents)
    assert log.events == full.events and log.events[-3:] == list(full.events)[-3:]
    assert log.events[-1] == full.events[-1]
    assert log.events.types == [e["type"] for e in full.events]
    assert log.events.times == [e["time"] for e in full.events]
    with pytest.raises(IndexError):
        log.events[len(full.events)]
    assert log.lines[-1] == full.lines[-1] and list(log.lines) == list(full.lines)


@pytest.mark.parametrize("name", GOOD)
def test_message_texts_are_the_full_events_texts_and_sources(name: str) -> None:
    """The message pass decodes blocks typed (`messages.blocks_text`): every event's text
    and message source are those of the event parsed whole."""
    log = read_log(SAMPLES / f"{name}.jsonl")
    full = read_log(SAMPLES / f"{name}.jsonl", check="full").events
    seqs = list(range(len(full)))
    source = [m.get("source") if isinstance(m := message_of(e), Mapping) else None
              for e in full]
    assert log.events.message_texts(seqs) == list(zip(map(message_text, full), source,
                                                      strict=True))
    tools = [frozenset(called_tools(message_of(e).get("content")))
             if e["type"] == "assistant/message" else frozenset() for e in full]
    assert [called for *_, called in log.events.message_parts(seqs)] == tools


@pytest.mark.parametrize("name", GOOD)
def test_the_message_pass_tells_a_failed_tool_result_as_the_full_event_does(
        name: str) -> None:
    """`failed` of the message pass is `_is_error_result` of each tool result parsed
    whole (its data's `error`, a block's `isError`), the facts ledger's test."""
    from surface_lab.analysis.ledger import _is_error_result

    log = read_log(SAMPLES / f"{name}.jsonl")
    full = read_log(SAMPLES / f"{name}.jsonl", check="full").events
    failed: dict[int, bool] = {}
    log.events.message_parts(range(len(full)), failed=failed)
    assert failed == {s: _is_error_result(e) for s, e in enumerate(full)
                      if e["type"] == "tool/result"}


def test_a_failed_tool_result_is_told_by_its_error_or_a_block(tmp_path: Path) -> None:
    path = tmp_path / "failed.jsonl"
    lines = (SAMPLES / "tools-parallel.jsonl").read_text().splitlines()
    at = [i for i, line in enumerate(lines) if '"type":"tool/result"' in line]
    assert len(at) >= 2
    lines[at[0]] = lines[at[0]].replace('"type":"tool-result",',
                                        '"type":"tool-result","isError":true,', 1)
    lines[at[1]] = lines[at[1]].replace('"data":{', '"data":{"error":"boom",', 1)
    path.write_text("\n".join(lines) + "\n")
    log = read_log(path)
    assert isinstance(log.events, LogEvents)
    failed: dict[int, bool] = {}
    seqs = [s for s, kind in enumerate(log.events.types) if kind == "tool/result"]
    log.events.message_parts(seqs, failed=failed)
    from surface_lab.analysis.ledger import _is_error_result

    assert failed == {s: _is_error_result(log.events[s]) for s in seqs}
    assert sum(failed.values()) == 2


def test_message_texts_of_blocks_the_types_refuse(tmp_path: Path) -> None:
    """A block that is not an object, or a tool result's content that is not a list of
    them, is read by the full parse: the same text as message_text."""
    path = tmp_path / "odd.jsonl"
    lines = (SAMPLES / "chat.jsonl").read_text().splitlines()
    lines[2] = lines[2].replace('"content":[', '"content":["loose",', 1)
    path.write_text("\n".join(lines) + "\n")
    log = read_log(path)
    assert isinstance(log.events, LogEvents)
    assert log.events.message_texts([1]) == [(message_text(log.events[1]),
                                               {"kind": "user"})] == [("What is a surface?",
                                                                       {"kind": "user"})]


@pytest.mark.parametrize("name", ["long-compaction", "tools-parallel", "chat"])
@pytest.mark.parametrize("size", [1, 7, 10_000])
def test_event_arrays_of_slices_add_up_to_the_whole(name: str, size: int) -> None:
    """`event_arrays(log, seqs)` over `event_slices` gives the whole log's columns, for a
    fast-read log (slices of whole lines: a packed row is never split) and parsed events."""
    from surface_lab.analysis.events import event_arrays, event_slices

    fast = load_source(read_log(SAMPLES / f"{name}.jsonl"))
    parsed = load_source(list(fast.events))
    for log in (fast, parsed):
        slices = event_slices(log, size)
        assert [s.start for s in slices[1:]] == [s.stop for s in slices[:-1]]
        assert slices[0].start == 0 and slices[-1].stop == len(log.events)
        whole = {k: _values(v) for k, v in event_arrays(log).items()}
        parts = [event_arrays(log, s) for s in slices]
        assert whole == {k: [x for p in parts for x in _values(p[k])] for k in whole}


def _values(column: Any) -> list[Any]:
    from surface_lab.analysis.events import _as_list

    return [list(v) if isinstance(v, list) else v for v in _as_list(column)]
