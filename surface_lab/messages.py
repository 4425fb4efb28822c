"""Message derivation (SPEC 5 and 10): what the model sees, projected from surface events."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol

import msgspec

from .events import SURFACE_TYPES, message_of
from .legacy import upgrade_events
from .surface import fold_surface

__all__ = [
    "Block",
    "DerivedMessages",
    "TextBlock",
    "blocks_called_tools",
    "blocks_chars",
    "blocks_text",
    "called_tools",
    "derive_messages",
    "estimate_tokens",
    "message_text",
    "project_message",
]


class DerivedMessages(tuple[Any, ...]):
    """The messages the model sees, in order. `mode` is `"surface"` when they come from the
    surface and `"linear"` when the legacy scan of an unmarked log produced them."""

    mode: Literal["surface", "linear"]

    def __new__(
        cls, messages: Iterable[Any], mode: Literal["surface", "linear"] = "surface"
    ) -> DerivedMessages:
        self = super().__new__(cls, messages)
        self.mode = mode
        return self

    def __repr__(self) -> str:
        return f"DerivedMessages(mode={self.mode!r}, {list(self)!r})"


def project_message(event: Mapping[str, Any]) -> Any:
    """The message one surface event gives the model, or None (an assistant message with
    empty content gives none)."""
    message = message_of(event)
    if event.get("type") == "assistant/message":
        content = message.get("content") if isinstance(message, Mapping) else None
        if not content:
            return None
    return message


def derive_messages(
    events: Sequence[Mapping[str, Any]], *, session_id: str = "unknown"
) -> DerivedMessages:
    """The model's messages for a raw event list (SPEC 10).

    Legacy shapes are upgraded in memory first. When no event carries `surfaceOp` but some
    surface-type event exists, every message event is projected in log order without
    surface checks (`mode == "linear"`); otherwise the surface is folded and its nodes are
    projected (`mode == "surface"`).

    Args:
        events: the log, seqs from 0.
        session_id: used only to mint ids for pre-identity legacy messages.

    Raises:
        AdmissionError: when the surface fold finds a violation.
    """
    upgraded = upgrade_events(events, session_id=session_id).events
    marked = any("surfaceOp" in e for e in upgraded)
    if not marked and any(e.get("type") in SURFACE_TYPES for e in upgraded):
        picked = (project_message(e) for e in upgraded if e.get("type") in SURFACE_TYPES)
        return DerivedMessages((m for m in picked if m is not None), "linear")
    nodes = fold_surface(upgraded).nodes
    picked = (project_message(upgraded[seq]) for seq in nodes)
    return DerivedMessages((m for m in picked if m is not None), "surface")


# dict first: most blocks are dicts, which answers without the Mapping ABC's check.
_MAPPINGS = (dict, Mapping)


def _block_text(block: Mapping[str, Any]) -> str:
    kind = block.get("type")
    if kind in ("text", "reasoning"):
        return str(block.get("text", ""))
    if kind == "tool-call":
        return f"{block.get('name')}({block.get('arguments')})"
    if kind == "tool-result":
        inner = block.get("content")
        if isinstance(inner, list):
            return "\n".join(_block_text(b) for b in inner if isinstance(b, _MAPPINGS))
    return ""


def message_text(event: Mapping[str, Any]) -> str:
    """The plain text a surface event shows the model (blocks joined by newlines)."""
    message = message_of(event)
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, list):
        return ""
    return "\n".join(_block_text(b) for b in content if isinstance(b, _MAPPINGS))


def called_tools(content: Any) -> list[str]:
    """The names of the tools an assistant message's `content` calls, in order."""
    if not isinstance(content, list):
        return []
    return [str(b.get("name")) for b in content
            if isinstance(b, _MAPPINGS) and b.get("type") == "tool-call"]


class Block(msgspec.Struct, gc=False):
    """A content block decoded with a type, for walks over many messages: the fields
    `message_text` and the evidence walk read (an absent `text` is UNSET, any other
    absent field None). A message whose blocks do not fit (one that is not an object,
    a tool result's content that is not a list of them) is decoded the ordinary way."""

    type: Any = None
    text: Any = msgspec.UNSET
    name: Any = None
    arguments: Any = None
    id: Any = None
    toolCallId: Any = None
    content: list[Block] | None = None  # a tool result's own blocks
    isError: Any = None  # a tool result's block: the call failed


class TextBlock(Protocol):
    """What `blocks_text` reads of a typed block: `Block`, or a leaner struct decoded
    for its text alone (the token estimate's)."""

    @property
    def type(self) -> Any: ...
    @property
    def text(self) -> Any: ...
    @property
    def name(self) -> Any: ...
    @property
    def arguments(self) -> Any: ...
    @property
    def content(self) -> Sequence[TextBlock] | None: ...


def _typed_block_text(block: TextBlock) -> str:
    kind = block.type
    if kind in ("text", "reasoning"):
        return "" if block.text is msgspec.UNSET else str(block.text)
    if kind == "tool-call":
        return f"{block.name}({block.arguments})"
    if kind == "tool-result" and block.content is not None:
        return "\n".join([_typed_block_text(b) for b in block.content])
    return ""


def blocks_text(blocks: Sequence[TextBlock] | None) -> str:
    """`message_text` of a message whose content decoded as `list[Block]` (None when it
    was absent or null): the same rule, over typed blocks."""
    return "" if blocks is None else "\n".join([_typed_block_text(b) for b in blocks])


def blocks_chars(blocks: Sequence[TextBlock] | None) -> int:
    """`len(blocks_text(blocks))`, counted without building the text (the estimate
    needs only its length): the same rule, each block's part measured where it is."""
    if not blocks:
        return 0
    n = len(blocks) - 1  # the newlines between the parts
    for block in blocks:
        kind = block.type
        if kind == "text" or kind == "reasoning":
            text = block.text
            n += (len(text) if type(text) is str
                  else 0 if text is msgspec.UNSET else len(str(text)))
        elif kind == "tool-call":
            n += len(f"{block.name}({block.arguments})")
        elif kind == "tool-result" and block.content is not None:
            n += blocks_chars(block.content)
    return n


def blocks_called_tools(blocks: list[Block] | None) -> list[str]:
    """`called_tools` of content decoded as `list[Block]`: the same rule, over typed
    blocks."""
    return [str(b.name) for b in blocks or () if b.type == "tool-call"]


def estimate_tokens(event: Mapping[str, Any]) -> int:
    """A rough token estimate: four characters a token, plus a small per-message cost."""
    return text_tokens(message_text(event))


def text_tokens(text: str) -> int:
    """`estimate_tokens` of a message whose text is `text`."""
    return 4 + math.ceil(len(text) / 4)
