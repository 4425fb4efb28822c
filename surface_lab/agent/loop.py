"""A deterministic agent loop that follows the agent-loop contract of SPEC 8."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..analysis.compaction import Compactor, ToolResultPruner
from ..session import Session
from .script import Reply, ScriptedProvider, StreamFailure, Turn
from .tools import Workspace, run_tool

__all__ = ["AgentLoop", "CrashPoint", "SimulatedCrash"]

CrashPoint = Literal["mid-stream", "before-tool-call", "after-tool-call"]
MAX_ATTEMPTS = 3


class SimulatedCrash(Exception):
    """The process 'died' here: the log is left exactly as it was at this point."""


@dataclass
class _Block:
    kind: str
    text: list[str] = field(default_factory=list)
    call: dict[str, Any] | None = None
    done: bool = False


@dataclass
class _Attempt:
    reply: Reply
    cited: list[int] = field(default_factory=list)
    blocks: dict[int, _Block] = field(default_factory=dict)
    finish: str | None = None
    cancelled: bool = False

    def feed(self, chunk: dict[str, Any]) -> None:
        kind, index = chunk["type"], chunk.get("index", -1)
        if kind == "block-start":
            self.blocks[index] = _Block(chunk["blockType"])
        elif kind in ("text-delta", "reasoning-delta"):
            self.blocks[index].text.append(chunk["text"])
        elif kind == "tool-call-delta":
            block = self.blocks[index]
            block.call = block.call or {"id": chunk["id"], "name": chunk["name"]}
            block.text.append(chunk["argumentsDelta"])
        elif kind == "block-end":
            self.blocks[index].done = True
        elif kind == "finish":
            self.finish = chunk["reason"]["kind"]

    def content(self) -> list[dict[str, Any]]:
        """The committed blocks: text as it arrived; tool calls only when finished."""
        out: list[dict[str, Any]] = []
        for _, block in sorted(self.blocks.items()):
            if block.kind in ("text", "reasoning") and block.text:
                out.append({"type": block.kind, "text": "".join(block.text)})
            elif block.kind == "tool-call" and block.done and block.call is not None:
                out.append({"type": "tool-call", **block.call, "arguments": "".join(block.text)})
        return out


class AgentLoop:
    """Drives a `Session` with a scripted provider and fake tools.

    Every surface event is appended with `surface_op="append"`; each assistant message
    cites all chunks of the attempt that produced it (`[]` for an empty stream) and never
    a failed attempt's; each tool result cites its `tool/call`; calls are answered in the
    order the model issued them. History manipulation (prune, then compact) runs at the
    start of each step, before the request.
    """

    def __init__(self, session: Session, provider: ScriptedProvider | None = None,
                 workspace: Workspace | None = None, *, pruner: ToolResultPruner | None = None,
                 compactor: Compactor | None = None) -> None:
        self.session = session
        self.provider = provider or ScriptedProvider()
        self.workspace = workspace or Workspace()
        self.pruner = pruner
        self.compactor = compactor
        self.turn = 0

    def _message_id(self) -> str:
        return f"msg-{self.session.seq:06d}"

    def run(self, turns: Sequence[Turn]) -> list[str]:
        """Run several turns; returns each turn's end reason."""
        return [self.run_turn(turn) for turn in turns]

    def run_turn(self, turn: Turn, *, crash_at: CrashPoint | None = None) -> str:
        """Run one user turn to its end; returns the `turn/end` reason kind.

        Raises:
            SimulatedCrash: at `crash_at`, leaving the turn open for repair.
        """
        s = self.session
        self.provider.queue(turn.replies)
        self.turn += 1
        t = self.turn
        s.append("turn/start", {"turn": t})
        if turn.context is not None:
            s.append("context/message", {
                "id": self._message_id(), "role": "user",
                "source": {"kind": "plugin", "plugin": "workspace-context"},
                "content": [{"type": "text", "text": turn.context}]}, surface_op="append")
        s.append("user/message", {"id": self._message_id(), "role": "user",
                                  "source": {"kind": "user"},
                                  "content": [{"type": "text", "text": turn.user}]},
                 surface_op="append")
        step = 0
        while True:
            step += 1
            s.append("step/start", {"turn": t, "step": step})
            if self.pruner is not None:
                self.pruner.prune(s)
            if self.compactor is not None:
                self.compactor.maybe_compact(s, t)
            s.append("request/context", {"turn": t, "step": step,
                                         "provider": self.provider.provider,
                                         "model": self.provider.model,
                                         "surfaceLength": len(s.surface.nodes)})
            attempt = self._request(t, step, crash_at)
            if attempt is None:
                s.append("step/end", {"turn": t, "step": step})
                return self._end(t, {"kind": "error", "error": {
                    "message": f"no usable response after {MAX_ATTEMPTS} attempts",
                    "code": "RETRIES_EXHAUSTED"}})
            calls = [b for b in attempt.content() if b["type"] == "tool-call"]
            if attempt.cancelled:
                s.append("step/end", {"turn": t, "step": step})
                return self._end(t, {"kind": "aborted", "reason": {"kind": "user"}})
            if calls:
                self._answer(t, step, calls, crash_at)
            s.append("step/end", {"turn": t, "step": step})
            if attempt.finish == "max-tokens":
                return self._end(t, {"kind": "max-tokens"})
            if not calls:
                return self._end(t, {"kind": "completed"})

    def _end(self, turn: int, reason: dict[str, Any]) -> str:
        self.session.append("turn/end", {"turn": turn, "reason": reason})
        return str(reason["kind"])

    def _request(self, turn: int, step: int, crash_at: CrashPoint | None) -> _Attempt | None:
        s = self.session
        for number in range(1, MAX_ATTEMPTS + 1):
            attempt = _Attempt(self.provider.next_reply())
            reply = attempt.reply
            try:
                for n, chunk in enumerate(self.provider.stream(reply)):
                    if reply.cancel_after is not None and n == reply.cancel_after:
                        attempt.cancelled = True
                        break
                    event = s.append("assistant/chunk", {"turn": turn, "step": step,
                                                         "chunk": chunk})
                    attempt.cited.append(event["seq"])
                    attempt.feed(chunk)
                    if crash_at == "mid-stream" and n == 2:
                        raise SimulatedCrash(f"crashed mid-stream at seq {event['seq']}")
            except StreamFailure as err:
                self._retry(turn, step, number, str(err))
                continue
            if reply.empty:
                self._retry(turn, step, number, "the model returned an empty response")
                continue
            data: dict[str, Any] = {
                "turn": turn, "step": step,
                "message": {"id": self._message_id(), "role": "assistant",
                            "content": attempt.content(),
                            "source": {"kind": "model", "provider": self.provider.provider,
                                       "model": self.provider.model}}}
            if attempt.cancelled:
                data["interrupted"] = True
            s.append("assistant/message", data, surface_op="append",
                     source_event_seqs=attempt.cited)
            return attempt
        return None

    def _retry(self, turn: int, step: int, number: int, error: str) -> None:
        self.session.append("llm/retry", {"turn": turn, "step": step, "attempt": number,
                                          "error": {"message": error}})
        if number < MAX_ATTEMPTS:
            self.session.append("llm/retry-started", {"turn": turn, "step": step,
                                                      "attempt": number + 1})

    def _answer(self, turn: int, step: int, calls: list[dict[str, Any]],
                crash_at: CrashPoint | None) -> None:
        s = self.session
        if crash_at == "before-tool-call":
            raise SimulatedCrash("crashed before the first tool/call")
        logged = []
        for call in calls:
            event = s.append("tool/call", {"turn": turn, "step": step, "callId": call["id"],
                                           "name": call["name"],
                                           "arguments": call["arguments"]})
            logged.append(event["seq"])
        if crash_at == "after-tool-call":
            raise SimulatedCrash(f"crashed after tool/call {logged[-1]}")
        for call, call_seq in zip(calls, logged, strict=True):
            try:
                arguments = json.loads(call["arguments"])
            except ValueError:
                arguments = None
            outcome = (run_tool(self.workspace, call["name"], arguments)
                if isinstance(arguments, dict) else None)
            text = outcome.text if outcome else "the arguments are not a JSON object"
            is_error = outcome.is_error if outcome else True
            block = {"type": "tool-result", "toolCallId": call["id"],
                     "content": [{"type": "text", "text": text}], "isError": is_error}
            data: dict[str, Any] = {
                "turn": turn, "step": step,
                "message": {"id": self._message_id(), "role": "user",
                            "source": {"kind": "tool", "callId": call["id"]},
                            "content": [block]}}
            if is_error:
                data["error"] = {"name": "ToolError",
                                 "code": (outcome.code if outcome else None) or "TOOL_ERROR"}
            s.append("tool/result", data, surface_op="append", source_event_seqs=[call_seq])
