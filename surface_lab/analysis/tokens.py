"""Token counts with their source: the usage a log recorded for each model request (dsh
`usage` chunks and message usage, the usage importers carry over from Claude Code, Codex,
pi and ATIF logs), a caller's tokenizer, or the 4-characters estimate.

A tokenizer is any callable from text to a token count. The adapters wrap an encoder the
caller has already built (`tiktoken.get_encoding(...)`, `tokenizers.Tokenizer.from_file`):
nothing here downloads a vocabulary."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..events import Event, mapping_at
from ..jsonvalue import as_int
from ..messages import message_text, text_tokens

__all__ = [
    "RequestTokens",
    "Tokenizer",
    "count_tokens",
    "hf_tokenizer",
    "recorded_usage",
    "request_tokens",
    "tiktoken_tokenizer",
]

Tokenizer = Callable[[str], int]
# per-message overhead the estimate adds (role and framing), kept for the tokenizer too
_MESSAGE_OVERHEAD = 4


def tiktoken_tokenizer(encoding: Any) -> Tokenizer:
    """A tokenizer from a `tiktoken.Encoding` (special tokens are counted as text)."""
    return lambda text: len(encoding.encode(text, disallowed_special=()))


def hf_tokenizer(tokenizer: Any) -> Tokenizer:
    """A tokenizer from a Hugging Face `tokenizers.Tokenizer` (no special tokens added)."""
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


def count_tokens(event: Mapping[str, Any], tokenizer: Tokenizer | None = None
                 ) -> tuple[int, str]:
    """`(tokens, source)` of one surface event's text: `"tokenizer"` with one (plus the
    estimate's per-message overhead), else `"estimate"` (4 characters a token)."""
    text = message_text(event)
    if tokenizer is None:
        return text_tokens(text), "estimate"
    return _MESSAGE_OVERHEAD + int(tokenizer(text)), "tokenizer"


_USAGE_KEYS = (("inputTokens", "input"), ("outputTokens", "output"),
               ("cacheReadTokens", "cache_read"), ("cacheWriteTokens", "cache_write"))


def recorded_usage(events: Sequence[Event], seq: int) -> tuple[dict[str, int], str | None]:
    """The usage recorded for the model response `events[seq]` (an assistant message):
    its own `usage` field (`"message"`), else the last `usage` chunk it cites
    (`"chunk"`); `({}, None)` when the log has none."""
    event = events[seq]
    usage = mapping_at(event, "data").get("usage")
    source: str | None = "message" if isinstance(usage, Mapping) else None
    if source is None:
        cited = event.get("sourceEventSeqs")
        for s in reversed(cited if isinstance(cited, list) else []):
            if isinstance(s, int) and 0 <= s < seq:
                chunk = mapping_at(events[s].get("data"), "chunk")
                if events[s]["type"] == "assistant/chunk" and chunk.get("type") == "usage":
                    usage, source = chunk.get("usage"), "chunk"
                    break
    if not isinstance(usage, Mapping):
        return {}, None
    out = {name: n for key, name in _USAGE_KEYS if (n := as_int(usage.get(key))) is not None}
    return out, source if out else None


@dataclass(frozen=True)
class RequestTokens:
    """The tokens of one model request, as far as the log tells.

    Attributes:
        seq: the assistant message the request produced.
        surface_entries: entries on the surface when it was sent.
        estimated: the surface's tokens by the 4-characters estimate.
        counted: the surface's tokens by the tokenizer (None without one).
        recorded: the usage recorded (`input`, `output`, `cache_read`, `cache_write`).
        usage_source: where `recorded` came from (`message`, `chunk`) or None.
        input_tokens: the best figure for the request's input.
        input_source: `usage` (recorded input plus cache reads and writes, which add up
            to the prompt as Anthropic reports them; a provider whose input already
            includes cached tokens reports none separately), `tokenizer` or `estimate`.
    """

    seq: int
    surface_entries: int
    estimated: int
    counted: int | None
    recorded: dict[str, int]
    usage_source: str | None
    input_tokens: int
    input_source: str


def request_tokens(events: Sequence[Event], nodes_before: Sequence[int], seq: int,
                   tokenizer: Tokenizer | None = None,
                   cache: dict[int, tuple[int, int | None]] | None = None) -> RequestTokens:
    """The `RequestTokens` of the response `events[seq]`, sent with the surface
    `nodes_before` (what was on it just before the response was committed).

    Args:
        cache: per-seq `(estimate, tokenizer count)`, reused across calls.
    """
    cache = {} if cache is None else cache
    estimated = counted = 0
    for n in nodes_before:
        if n not in cache:
            text_est = count_tokens(events[n])[0]
            cache[n] = (text_est, count_tokens(events[n], tokenizer)[0]
                        if tokenizer is not None else None)
        est, cnt = cache[n]
        estimated += est
        counted += cnt or 0
    recorded, source = recorded_usage(events, seq)
    if "input" in recorded:
        best = recorded["input"] + recorded.get("cache_read", 0) + recorded.get(
            "cache_write", 0)
        best_source = "usage"
    elif tokenizer is not None:
        best, best_source = counted, "tokenizer"
    else:
        best, best_source = estimated, "estimate"
    return RequestTokens(seq, len(nodes_before), estimated,
                         counted if tokenizer is not None else None, recorded, source, best,
                         best_source)
