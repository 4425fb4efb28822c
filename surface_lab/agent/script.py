"""The scripted provider: model replies written in advance, streamed as dsh-style chunks."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Call", "Reply", "ScriptedProvider", "StreamFailure", "Turn"]

Finish = Literal["stop", "tool-calls", "max-tokens"]


@dataclass(frozen=True)
class Call:
    """A tool call the model makes: a tool name and its JSON arguments."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    """One model response.

    Args:
        text: the answer text (streamed word by word).
        reasoning: reasoning text, streamed before the answer.
        calls: tool calls, answered in this order.
        finish: `"max-tokens"` ends the turn and drops an unfinished tool-call block;
            otherwise it is `"tool-calls"` when there are calls and `"stop"` when not.
        fail_after: the stream breaks after this many chunks; the loop retries with the
            next reply and the broken attempt's chunks are never cited.
        empty: the response has no content (usage and finish only); the loop retries.
        silent: the stream has no chunks at all; the message is committed empty, citing [].
        cancel_after: the user cancels after this many chunks; what arrived is committed
            with `interrupted: true` and the turn ends aborted.
    """

    text: str = ""
    reasoning: str = ""
    calls: tuple[Call, ...] = ()
    finish: Finish | None = None
    fail_after: int | None = None
    empty: bool = False
    silent: bool = False
    cancel_after: int | None = None


@dataclass(frozen=True)
class Turn:
    """One user turn: the user's text, the replies the model gives in it (one per request,
    retries included), and optional workspace context injected before the user message."""

    user: str
    replies: tuple[Reply, ...]
    context: str | None = None


class StreamFailure(Exception):
    """The provider's stream broke (a retryable failure)."""


def _words(text: str) -> list[str]:
    words = text.split(" ")
    return [w + " " for w in words[:-1]] + [words[-1]] if text else []


class ScriptedProvider:
    """Serves replies in order, one per request, and streams each as chunks."""

    provider = "scripted"
    model = "script-1"

    def __init__(self, replies: Sequence[Reply] = ()) -> None:
        self._replies = list(replies)
        self._next = 0
        self._calls = 0

    def queue(self, replies: Sequence[Reply]) -> None:
        self._replies.extend(replies)

    def next_reply(self) -> Reply:
        if self._next >= len(self._replies):
            raise RuntimeError("the script has no reply left for this request")
        reply = self._replies[self._next]
        self._next += 1
        return reply

    def call_id(self) -> str:
        self._calls += 1
        return f"call_{self._calls:04d}"

    def stream(self, reply: Reply) -> Iterator[dict[str, Any]]:
        """The chunks of a reply; raises `StreamFailure` where it is scripted to break."""
        chunks = list(self._chunks(reply))
        for n, chunk in enumerate(chunks):
            if reply.fail_after is not None and n == reply.fail_after:
                raise StreamFailure(f"stream broke after {n} chunks")
            yield chunk
        if reply.fail_after is not None:
            raise StreamFailure(f"stream broke after {len(chunks)} chunks")

    def _chunks(self, reply: Reply) -> Iterator[dict[str, Any]]:
        if reply.silent:
            return
        index = 0
        out = 0
        if not reply.empty:
            for kind, text in (("reasoning", reply.reasoning), ("text", reply.text)):
                if not text:
                    continue
                yield {"type": "block-start", "index": index, "blockType": kind}
                for word in _words(text):
                    yield {"type": f"{kind}-delta", "index": index, "text": word}
                    out += 1
                yield {"type": "block-end", "index": index, "block": {"type": kind,
                                                                       "text": text}}
                index += 1
            for call in reply.calls:
                call_id = self.call_id()
                arguments = _dumps(call.arguments)
                yield {"type": "block-start", "index": index, "blockType": "tool-call"}
                for part in _split(arguments):
                    yield {"type": "tool-call-delta", "index": index, "id": call_id,
                           "name": call.name, "argumentsDelta": part}
                    out += 1
                if reply.finish != "max-tokens":  # a cut-off call never finishes
                    yield {"type": "block-end", "index": index, "block": {
                        "type": "tool-call", "id": call_id, "name": call.name,
                        "arguments": arguments}}
                index += 1
        finish = reply.finish or ("tool-calls" if reply.calls else "stop")
        yield {"type": "usage", "usage": {"inputTokens": 100 + 10 * index,
                                          "outputTokens": out}}
        yield {"type": "finish", "reason": {"kind": finish}}


def _dumps(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _split(text: str, size: int = 8) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]
