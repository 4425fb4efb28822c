"""HTML views of log content. Log text is untrusted (model and tool output): every piece of
it goes through `esc` before it reaches HTML."""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from typing import Any

from ..events import mapping_at
from ..messages import message_text
from .replay import Replay

__all__ = ["FORMULA_STARTS", "STYLE", "esc", "formula_safe", "message_card", "step_html"]

MAX_CHARS = 1200
STYLE = """<style>
.sl-view{font-family:system-ui,sans-serif;font-size:13px;line-height:1.35;max-width:980px}
.sl-head{margin:4px 0 8px 0;font-weight:600}
.sl-card{border:1px solid #ccc;border-left:6px solid #999;border-radius:4px;margin:4px 0;
 padding:4px 8px;background:#fff}
.sl-card pre{white-space:pre-wrap;word-break:break-word;margin:2px 0 0 0;font-size:12px}
.sl-meta{color:#555;font-size:11px}
.sl-user{border-left-color:#0072B2}.sl-assistant{border-left-color:#009E73}
.sl-tool{border-left-color:#E69F00}.sl-context{border-left-color:#56B4E9}
.sl-plugin{border-left-color:#CC79A7}
.sl-new{outline:2px solid #D55E00}
.sl-gone{background:repeating-linear-gradient(45deg,#f4f4f4,#f4f4f4 6px,#e4e4e4 6px,
 #e4e4e4 12px);color:#444}
.sl-tag{display:inline-block;padding:0 5px;border-radius:3px;background:#eee;
 margin-right:4px;font-size:11px}
</style>"""


# Characters that reorder or hide text: the embeddings, overrides and isolates (U+202A-E,
# U+2066-9), the direction marks (U+200E/F, U+061C) and the zero-width ones (U+200B-D,
# U+2060, U+FEFF). A log's id or text holding one could reverse the report line around it
# ("374 -> 362 tokens" shown as "snekot 263 -> 473") or make two ids look the same.
_INVISIBLE = {code: f"\\u{code:04x}" for code in (
    *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C,
    0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF)}
# Right-to-left letters and digits (Hebrew, Arabic, Syriac, Thaana, NKo... and their
# presentation forms): a value holding one is isolated so it cannot reorder its neighbours.
_RIGHT_TO_LEFT = re.compile("[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefe"
                            "\U00010800-\U00010fff\U0001e800-\U0001efff]")
_ISOLATE, _POP_ISOLATE = "\u2068", "\u2069"  # FIRST STRONG ISOLATE ... POP DIRECTIONAL ISOLATE


# What a spreadsheet reads as a formula at the start of a cell (OWASP, "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def formula_safe(value: Any) -> Any:
    """A CSV cell a spreadsheet shows as text: a text cell that starts like a formula gets
    a leading `'` (OWASP's advice; log content is untrusted). Numbers, dates and missing
    values are left as they are, so a negative number stays a number."""
    return f"'{value}" if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value


def esc(text: Any) -> str:
    """HTML-escape anything (quotes included), so that it also cannot change the order or
    the look of the text around it: the characters that reorder or hide text are spelled
    as visible escapes (`\\u202e`), and a value holding right-to-left letters is wrapped
    in Unicode isolates (U+2068 ... U+2069), which work in attributes and titles too,
    where `<bdi>` cannot go. Each isolate is balanced: the value can hold no other."""
    value = str(text)
    if value.isascii():
        return html.escape(value, quote=True)
    value = html.escape(value.translate(_INVISIBLE), quote=True)
    if _RIGHT_TO_LEFT.search(value):
        return f"{_ISOLATE}{value}{_POP_ISOLATE}"
    return value


def _kind_class(event: Mapping[str, Any], message: Mapping[str, Any]) -> str:
    if mapping_at(message, "source").get("kind") == "plugin":
        return "sl-plugin"
    return {"assistant/message": "sl-assistant", "tool/result": "sl-tool",
            "context/message": "sl-context"}.get(str(event["type"]), "sl-user")


def message_card(event: Mapping[str, Any], *, tags: tuple[str, ...] = (),
                 extra_class: str = "", max_chars: int | None = MAX_CHARS) -> str:
    """One surface entry as an HTML card: type, seq, message id, role and its text (cut
    after `max_chars`; whole with None)."""
    message = (event.get("data") if event["type"] in ("user/message", "context/message")
        else (event.get("data") or {}).get("message"))
    message = message if isinstance(message, Mapping) else {}
    text = message_text(event)
    shown = text if max_chars is None or len(text) <= max_chars else (
        text[:max_chars] + f"\n… ({len(text) - max_chars} more characters)")
    tag_html = "".join(f'<span class="sl-tag">{esc(t)}</span>' for t in tags)
    return (f'<div class="sl-card {_kind_class(event, message)} {extra_class}">'
            f'<div class="sl-meta">{tag_html}seq {esc(event["seq"])} · {esc(event["type"])}'
            f' · {esc(message.get("role", ""))} · id {esc(message.get("id", ""))}</div>'
            f"<pre>{esc(shown)}</pre></div>")


def step_html(replay: Replay) -> str:
    """The model's view just after the replay's current event, with what the step did."""
    events = replay.log.events
    event = replay.event
    parts = [STYLE, '<div class="sl-view">']
    if event is None:
        parts.append(f'<div class="sl-head">before the first event (0 of {len(replay)})'
                     f"</div>")
    else:
        if replay.shadowed:
            did = (f"replaced {len(replay.shadowed)} entr"
                   f"{'y' if len(replay.shadowed) == 1 else 'ies'} with seq {event['seq']}")
        elif replay.appended is not None:
            did = f"appended seq {event['seq']} to the surface"
        else:
            did = "log only: the surface did not change"
        parts.append(f'<div class="sl-head">step {esc(event["seq"])} of {len(replay) - 1}: '
                     f'{esc(event["type"])} — {esc(did)}</div>')
    seen = replay.messages()
    parts.append(f'<div class="sl-meta">the model sees {len(seen)} message'
                 f'{"" if len(seen) == 1 else "s"}:</div>')
    current = replay.appended
    for seq, _ in seen:
        entry = events[seq]
        tags: tuple[str, ...] = ("new",) if seq == current else ()
        if isinstance(entry.get("surfaceOp"), Mapping):
            tags += ("replacement",)
        parts.append(message_card(entry, tags=tags,
                                  extra_class="sl-new" if seq == current else ""))
    if replay.shadowed:
        parts.append('<div class="sl-head">shadowed by this step (still in the log):</div>')
        parts += [message_card(events[s], tags=("shadowed",), extra_class="sl-gone")
                  for s in replay.shadowed]
    parts.append("</div>")
    return "".join(parts)
