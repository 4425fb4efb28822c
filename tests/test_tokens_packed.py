"""tokens_df's packed-log paths (surface_lab.analysis.tokens): reading a message's cited
seqs from the end of their bytes, searching the cited chunks' lines in place, measuring
an entry's text without building it, and the brackets read of their trace fields alone
give what the per-event rules give on the events in memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pandas as pd
import pytest

from surface_lab import read_log
from surface_lab.agent.samples import generate_large
from surface_lab.analysis.brackets import brackets
from surface_lab.analysis.source import load_source
from surface_lab.analysis.tokens import _cited_tail, _Reply, path_requests, recorded_usage
from surface_lab.messages import Block, blocks_chars, blocks_text
from surface_lab.notebook import tokens_df
from surface_lab.reading.sequences import LogEvents

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = 7


def _compact(record: dict[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False)


def _varied_log(tmp_path: Path) -> Path:
    """A generated log whose assistant messages cite their chunks in every way the
    rules allow, one way per message in turn: as written (the chunks right before the
    message), with spaces in the array, only the usage chunk, up to the usage chunk
    (not the finish after it), the usage chunk's type spelled with an escape, the
    message's own usage, and no cited seqs at all."""
    source = tmp_path / "generated.jsonl"
    generate_large(source, 3000)
    lines = source.read_text().splitlines()
    by_seq = {json.loads(line).get("seq"): k for k, line in enumerate(lines[1:], 1)}
    messages = 0
    for k, line in enumerate(lines):
        record = json.loads(line)
        if record.get("type") != "assistant/message" or "sourceEventSeqs" not in record:
            continue
        cited = record["sourceEventSeqs"]
        usage = [s for s in cited if s in by_seq and '"type":"usage"' in lines[by_seq[s]]]
        if not usage:
            continue
        way, messages = messages % VARIANTS, messages + 1
        if way == 1:
            lines[k] = line.replace(_compact(cited), json.dumps(cited))  # "[1, 2, 3]"
        elif way == 2:
            record["sourceEventSeqs"] = usage[-1:]
        elif way == 3:
            record["sourceEventSeqs"] = [s for s in cited if s <= usage[-1]]
        elif way == 4:  # the chunk's type and its usage's key: no "usage" in its bytes
            at = by_seq[usage[-1]]
            lines[at] = lines[at].replace('"usage"', '"\\u0075sage"')
        elif way == 5:
            record["data"]["usage"] = {"inputTokens": 7, "outputTokens": 3,
                                       "cacheReadTokens": 2}
        elif way == 6:
            del record["sourceEventSeqs"]
        if way in (2, 3, 5, 6):
            lines[k] = _compact(record)
    assert messages >= 3 * VARIANTS
    path = tmp_path / "varied.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_every_way_of_citing_finds_the_usage_the_events_record(tmp_path: Path) -> None:
    path = _varied_log(tmp_path)
    log = read_log(path)
    assert isinstance(log.events, LogEvents) and log.valid  # the packed paths are taken
    assert log.plans is not None
    events = list(log.events)
    requests = path_requests(log.events, log.plans)
    sources = {r.usage_source for r in requests}
    assert sources == {"chunk", "message", None}
    for r in requests:
        assert (r.recorded, r.usage_source) == recorded_usage(events, r.last_seq)
    from_chunks = [r for r in requests if r.usage_source == "chunk"]
    assert len(from_chunks) > len(requests) // 2


@pytest.mark.parametrize("tokenizer", [None, lambda text: len(text.split())])
def test_the_packed_log_and_its_events_give_one_frame(tmp_path: Path, tokenizer: Any
                                                      ) -> None:
    """The frame from the file's lines equals the one from the events in memory (the
    plans folded anew, every text built and counted)."""
    path = _varied_log(tmp_path)
    packed = tokens_df(path, tokenizer=tokenizer, progress=False)
    in_memory = tokens_df(list(read_log(path).events), tokenizer=tokenizer,
                          progress=False)
    assert len(packed) > 20
    pd.testing.assert_frame_equal(packed, in_memory)


def test_an_entry_measured_is_as_long_as_its_text() -> None:
    blocks = msgspec.json.decode(json.dumps([
        {"type": "text", "text": "héllo\nwörld"}, {"type": "reasoning", "text": "why"},
        {"type": "reasoning"}, {"type": "text", "text": 12.5},
        {"type": "tool-call", "id": "c", "name": "run", "arguments": {"cmd": "ls -l"}},
        {"type": "tool-call", "name": None, "arguments": "{\"a\": 1}"},
        {"type": "tool-result", "toolCallId": "c", "content": [
            {"type": "text", "text": "a\u2028b"}, {"type": "image", "data": "x"},
            {"type": "tool-result", "content": [{"type": "text", "text": "nested"}]}]},
        {"type": "tool-result", "content": None}, {"type": "tool-result", "content": []},
        {"type": "image"}, {"type": None}]), type=list[Block])
    for k in range(len(blocks) + 1):
        assert blocks_chars(blocks[:k]) == len(blocks_text(blocks[:k]))
    assert blocks_chars(None) == len(blocks_text(None)) == 0


def test_brackets_read_from_their_lines_equal_the_full_read(tmp_path: Path) -> None:
    path = tmp_path / "compacting.jsonl"
    generate_large(path, 20000)
    for log_path in (path, ROOT / "sample_logs" / "long-compaction.jsonl"):
        log = load_source(log_path, progress=False)
        assert isinstance(log.events, LogEvents)
        found = brackets(log)
        assert found and found == brackets(list(log.events))  # events: read whole


@pytest.mark.parametrize("cited", [
    "[]", "[7]", "[6,7]", "[5,6,7]", "[1,2,3,4]", "[1, 2, 3, 4]", "[0,0,0,0]",
    '["a,1,2,3",4]', '[1,2,"3,4,5"]', "[[1,2,3,4]]", '[{"a":[1,2,3]},5]', "[1,2.5,3,4]",
    "[1,-2,3,4]", "[1,true,3,4]", "[99999999999999999999999,1,2,3]", "null", '"1,2,3"',
    "[" + ",".join(str(n) for n in range(10**12, 10**12 + 40)) + "]"])
def test_the_cited_tail_read_from_the_bytes_is_the_array_s(cited: str) -> None:
    """What the end of the bytes says is what decoding the whole value says: the last
    three seqs, last first, and whether there are more."""
    raw = msgspec.json.decode(b'{"sourceEventSeqs":%b}' % cited.encode(), type=_Reply)
    value = json.loads(cited)
    whole = value[::-1][:3] if isinstance(value, list) else []
    assert _cited_tail(raw.sourceEventSeqs) == (whole, len(whole) == 3)
