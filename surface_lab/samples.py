"""The bundled tour log: a small session written through `Session` and the JSONL store that
shows appends, streamed chunks, a tool call, a tool-result prune and a compaction.

Regenerate it with `python -m surface_lab.samples sample_logs/tour.jsonl`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

from .session import Session
from .storage.jsonl import JsonlStore

__all__ = ["write_tour"]

TOUR_ID = "tour-0001"
_MODEL = {"kind": "model", "provider": "scripted", "model": "tour-model"}


def _clock() -> Iterator[int]:
    return count(1_767_225_600_000, 37)  # 2026-01-01T00:00:00Z, 37 ms per event


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


def _assistant(session: Session, turn: int, step: int, mid: str, text: str,
               call: tuple[str, str, str] | None = None) -> int:
    """Stream one assistant message as chunks and commit it citing them."""
    first = session.seq
    base = {"turn": turn, "step": step}
    session.append("assistant/chunk", {**base, "chunk": {"type": "block-start", "index": 0,
                                                         "blockType": "text"}})
    for piece in text.split(" "):
        session.append("assistant/chunk", {**base, "chunk": {"type": "text-delta", "index": 0,
                                                             "text": piece + " "}})
    content = _text(text)
    if call is not None:
        call_id, name, arguments = call
        session.append("assistant/chunk", {**base, "chunk": {
            "type": "tool-call-delta", "index": 1, "id": call_id, "name": name,
            "argumentsDelta": arguments}})
        content.append({"type": "tool-call", "id": call_id, "name": name,
                        "arguments": arguments})
    session.append("assistant/chunk", {**base, "chunk": {"type": "finish", "reason": {
        "kind": "tool-calls" if call else "stop"}}})
    event = session.append(
        "assistant/message",
        {**base, "message": {"id": mid, "role": "assistant", "content": content,
                             "source": _MODEL}},
        surface_op="append", source_event_seqs=list(range(first, session.seq)))
    return int(event["seq"])


def _tool_result(turn: int, step: int, call_id: str, mid: str, text: str) -> dict[str, Any]:
    return {"turn": turn, "step": step, "message": {
        "id": mid, "role": "user", "source": {"kind": "tool", "callId": call_id},
        "content": [{"type": "tool-result", "toolCallId": call_id, "content": _text(text)}]}}


def build_tour() -> Session:
    """The tour session, in memory."""
    ticks = _clock()
    session = Session(TOUR_ID, header={"version": 0, "id": TOUR_ID,
                                       "createdAt": 1_767_225_600_000, "cwd": "/work/tour",
                                       "delegationDepth": 0},
                      clock=lambda: next(ticks))
    # Turn 1: context, a question, a tool call and its (long) result.
    session.append("turn/start", {"turn": 1})
    session.append("context/message", {"id": "ctx-1", "role": "user", "source": {
        "kind": "plugin", "plugin": "workspace"}, "content": _text(
            "<workspace>/work/tour: notes.txt, plan.md</workspace>")}, surface_op="append")
    user1 = session.append("user/message", {"id": "u-1", "role": "user", "source": {
        "kind": "user"}, "content": _text("What does notes.txt say?")}, surface_op="append")
    session.append("step/start", {"turn": 1, "step": 1})
    asked = _assistant(session, 1, 1, "a-1", "Let me read it.",
                       ("call-1", "read", '{"path": "notes.txt"}'))
    call = session.append("tool/call", {"turn": 1, "step": 1, "callId": "call-1",
                                        "name": "read", "arguments": '{"path": "notes.txt"}'})
    long_text = "".join(f"line {i}: the surface is what the model sees.\n" for i in range(300))
    result = session.append("tool/result", _tool_result(1, 1, "call-1", "t-1", long_text),
                            surface_op="append", source_event_seqs=[call["seq"]])
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("step/start", {"turn": 1, "step": 2})
    answer = _assistant(session, 1, 2, "a-2", "It repeats one line 300 times.")
    session.append("step/end", {"turn": 1, "step": 2})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    # The pruner rewrites the long tool result: head + marker + tail, content only.
    s = result["seq"]
    pruned = long_text[:200] + "\n[... middle pruned ...]\n" + long_text[-100:]
    session.append("compaction/prune", {"shadowedRange": {"start": s, "end": s},
                                        "shadowedSeqs": [s], "shadowedTokenCount": 3900})
    session.append("tool/result", _tool_result(1, 1, "call-1", "t-1", pruned),
                   surface_op={"op": "replace", "start": s, "end": s}, source_event_seqs=[s])
    # Turn 2: a compaction summarises turn 1, then the model answers.
    session.append("turn/start", {"turn": 2})
    start = session.append("compaction/start", {"compactionId": "cmp-1", "turn": 2})
    nodes = list(session.surface.nodes)  # by position: the pruned result sits in the run
    shadowed = nodes[nodes.index(user1["seq"]) : nodes.index(answer) + 1]
    summary = _text("The user asked about notes.txt; it repeats one line 300 times.")
    summary_event = session.append("compaction/summary", {
        "compactionId": "cmp-1", "summary": summary,
        "shadowedRange": {"start": shadowed[0], "end": shadowed[-1]},
        "shadowedSeqs": shadowed, "shadowedTokenCount": 1200,
        "provider": "offline", "model": "extractive"})
    framed = [*_text("This is an automatically generated checkpoint of earlier history."
                     "\n\n<compacted-summary>"), *summary, *_text("</compacted-summary>")]
    session.append("user/message", {"id": "cmp-1-summary", "role": "user", "source": {
        "kind": "plugin", "plugin": "compact", "compactionId": "cmp-1"}, "content": framed},
        surface_op={"op": "replace", "start": shadowed[0], "end": shadowed[-1]},
        source_event_seqs=[start["seq"], summary_event["seq"], *shadowed])
    session.append("compaction/end", {"compactionId": "cmp-1", "turn": 2})
    session.append("user/message", {"id": "u-2", "role": "user", "source": {"kind": "user"},
                                    "content": _text("Thanks. Anything else?")},
                   surface_op="append")
    session.append("step/start", {"turn": 2, "step": 1})
    _assistant(session, 2, 1, "a-3", "No, that is all it says.")
    session.append("step/end", {"turn": 2, "step": 1})
    session.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    assert asked < answer
    return session


def write_tour(path: str | Path) -> Path:
    """Write the tour log to a new `.jsonl` file through the JSONL store."""
    path = Path(path)
    session = build_tour()
    store = JsonlStore.for_file(path)
    store.create(session.header)
    store.append(TOUR_ID, session.events)
    return path


if __name__ == "__main__":
    print(write_tour(sys.argv[1] if len(sys.argv) > 1 else "sample_logs/tour.jsonl"))
