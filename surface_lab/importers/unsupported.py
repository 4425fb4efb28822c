"""Other agents' logs that surface-lab does not import yet, recognised by their shapes so
that they are refused by name ("Gemini CLI logs are not supported yet") instead of being
taken for another format or for a broken surface log.

Each test looks at what `detect_format` already read: the first JSON object lines of the
file (`records`), the whole JSON document when the file is one small document
(`document`), the first bytes (`head`) and the path. The shapes come from the agents' own
code and public viewers (see docs/importers.md, "Not supported yet").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["AGENTS", "unsupported_agent"]

Records = list[dict[str, Any]]


def _map(value: Any, key: str) -> Mapping[str, Any]:
    found = value.get(key) if isinstance(value, Mapping) else None
    return found if isinstance(found, Mapping) else {}


def qwen_code(records: Records, document: Any, head: bytes, path: Path) -> bool:
    """Qwen Code chats (`~/.qwen/projects/<project>/chats/<session>.jsonl`): Claude-Code-
    like records (`uuid`, `parentUuid`, `sessionId`) whose `message` holds Gemini-style
    `parts` and the role `model`."""
    for record in records:
        message = _map(record, "message")
        if "sessionId" in record and "uuid" in record and (
                isinstance(message.get("parts"), list) or message.get("role") == "model"):
            return True
    return False


def gemini_cli(records: Records, document: Any, head: bytes, path: Path) -> bool:
    """Gemini CLI chats (`~/.gemini/tmp/<project hash>/chats/session-*.json`): one object
    `{sessionId, projectHash, startTime, lastUpdated, messages: [{type: user|gemini|info
    ...}]}`; newer versions stream the same as JSONL (a first record with sessionId and
    projectHash); `logs.json` lists `{sessionId, messageId, type, message}`."""
    if isinstance(document, Mapping) and "sessionId" in document and (
            "projectHash" in document or (isinstance(document.get("messages"), list) and any(
                isinstance(m, Mapping) and m.get("type") == "gemini"
                for m in document["messages"][:50]))):
        return True
    if isinstance(document, list) and document and all(
            isinstance(e, Mapping) and {"sessionId", "messageId", "type"} <= set(e)
            for e in document[:5]):
        return True
    return any("projectHash" in r and "sessionId" in r for r in records[:3]) or any(
        r.get("type") == "gemini" and "content" in r for r in records)


def copilot_cli(records: Records, document: Any, head: bytes, path: Path) -> bool:
    """GitHub Copilot CLI (`~/.copilot/session-state/<id>/events.jsonl`, or
    `<id>.jsonl`): envelopes `{type, data, id, timestamp, parentId}` with dotted types
    (`session.start`, `user.message`, `assistant.message`, `tool.execution_start`,
    `session.truncation`)."""
    dotted = [r for r in records if isinstance(r.get("type"), str) and "." in r["type"]
              and isinstance(r.get("data"), Mapping)]
    if any(r["type"].split(".")[0] in ("session", "user", "assistant", "tool")
           for r in dotted):
        return True
    return any(r.get("type") == "session" and ("copilotVersion" in r or r.get(
        "producer") == "copilot-agent" or "copilotVersion" in _map(r, "data"))
        for r in records[:1])


def kimi_cli(records: Records, document: Any, head: bytes, path: Path) -> bool:
    """Kimi CLI (`~/.kimi/sessions/<work dir hash>/<session>/context.jsonl`): chat
    messages `{role, content}` with bookkeeping records of roles `_checkpoint`,
    `_usage`, `_system_prompt`; its `wire.jsonl` holds `{timestamp, message: {type,
    payload}}`."""
    if any(isinstance(r.get("role"), str) and r["role"] in ("_checkpoint", "_usage",
                                                           "_system_prompt")
           for r in records):
        return True
    return path.name == "wire.jsonl" and any(
        "type" in _map(r, "message") and "timestamp" in r for r in records[:5])


def cursor(records: Records, document: Any, head: bytes, path: Path) -> bool:
    """Cursor agent transcripts (`~/.cursor/projects/<project>/agent-transcripts/`):
    JSONL `{role: user|assistant, message: {content: [{type: text, text}]}}`, user text
    wrapped in `<user_query>`; older ones are plain text `user:` / `assistant:` blocks."""
    if head.lstrip().startswith(b"user:") and b"<user_query>" in head:
        return True
    shaped = [r for r in records if r.get("role") in ("user", "assistant")
              and isinstance(_map(r, "message").get("content"), list)
              and "uuid" not in r and "sessionId" not in r]
    return bool(shaped) and len(shaped) == len(records) and (
        "agent-transcripts" in path.parts or any(
            "<user_query>" in str(_map(r, "message").get("content")) for r in shaped))


def _anthropic_history(document: Any) -> bool:
    return isinstance(document, list) and bool(document) and all(
        isinstance(m, Mapping) and m.get("role") in ("user", "assistant")
        and isinstance(m.get("content"), (list, str)) for m in document[:20])


def _ui_messages(document: Any) -> bool:
    return isinstance(document, list) and bool(document) and all(
        isinstance(m, Mapping) and "ts" in m and m.get("type") in ("say", "ask")
        for m in document[:20])


def _roo(document: Any, path: Path) -> bool:
    text = str(path).lower()
    if "roo-cline" in text or "roo-code" in text or "roocode" in text:
        return True
    return isinstance(document, list) and any(
        isinstance(m, Mapping) and ("isSummary" in m or "condenseId" in m
                                    or "condenseParent" in m) for m in document)


def roo_code(records: Records, document: Any, head: bytes, path: Path) -> bool:
    """Roo Code tasks (a Cline fork; `tasks/<id>/api_conversation_history.json`): the same
    files as Cline, with `ts`, `isSummary` or `condenseId` on condensed histories, under
    the `rooveterinaryinc.roo-cline` storage folder."""
    return (_anthropic_history(document) or _ui_messages(document)) and _roo(document, path)


def cline(records: Records, document: Any, head: bytes, path: Path) -> bool:
    """Cline tasks (`saoudrizwan.claude-dev/tasks/<id>/`): `api_conversation_history.json`
    is a JSON list of Anthropic messages `{role, content: [text | tool_use |
    tool_result ...]}`; `ui_messages.json` a list of `{ts, type: say|ask, ...}`."""
    if _ui_messages(document):
        return True
    return _anthropic_history(document) and (
        path.name == "api_conversation_history.json" or "claude-dev" in str(path) or any(
            isinstance(m, Mapping) and isinstance(m.get("content"), list) and any(
                isinstance(b, Mapping) and b.get("type") in ("tool_use", "tool_result")
                for b in m["content"]) for m in document[:50]))


def opencode(records: Records, document: Any, head: bytes, path: Path) -> bool:
    """OpenCode storage (`~/.local/share/opencode/storage/`): `session/<project>/ses_*.json`
    `{id, projectID, directory, title, time}`, `message/<session>/msg_*.json` `{id,
    sessionID, role, time}`, `part/<message>/prt_*.json` `{id, sessionID, messageID,
    type}`; exports hold `{info, messages: [{info, parts}]}`."""
    if not isinstance(document, Mapping):
        return False
    ident = str(document.get("id", ""))
    if ident.startswith("ses_") and ("projectID" in document or "time" in document):
        return True
    if ident.startswith(("msg_", "prt_")) and "sessionID" in document:
        return True
    info = _map(document, "info")
    return str(info.get("id", "")).startswith("ses_") and isinstance(
        document.get("messages"), list)


def goose(records: Records, document: Any, head: bytes, path: Path) -> bool:
    """Goose sessions (`~/.local/share/goose/sessions/<id>.jsonl`): a first line of
    session metadata `{working_dir, description, message_count, total_tokens ...}`, then
    messages `{role, created, content: [text | toolRequest | toolResponse ...]}`."""
    if records and "working_dir" in records[0] and (
            "description" in records[0] or "message_count" in records[0]):
        return True
    return any(isinstance(r.get("created"), int) and isinstance(r.get("content"), list) and any(
        isinstance(b, Mapping) and b.get("type") in ("toolRequest", "toolResponse")
        for b in r["content"]) for r in records)


AIDER_CHAT = re.compile(rb"\A\s*# aider chat started at \d{4}-\d\d-\d\d")
AIDER_INPUT = re.compile(rb"\A\s*# \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?\r?\n\+")


def aider(records: Records, document: Any, head: bytes, path: Path) -> bool:
    """Aider's `.aider.chat.history.md` (markdown opening `# aider chat started at
    <time>`, user lines as `#### ...`) and `.aider.input.history` (`# <time>` then
    `+<line>`)."""
    return bool(AIDER_CHAT.match(head) or AIDER_INPUT.match(head)) or path.name in (
        ".aider.chat.history.md", ".aider.input.history", ".aider.llm.history")


Test = Callable[[Records, Any, bytes, Path], bool]
# Order matters where shapes overlap: Qwen Code before anything Claude-like, Roo Code
# before Cline (a fork with the same files).
AGENTS: list[tuple[str, Test]] = [
    ("Qwen Code", qwen_code),
    ("Gemini CLI", gemini_cli),
    ("Copilot CLI", copilot_cli),
    ("Kimi CLI", kimi_cli),
    ("Cursor", cursor),
    ("Roo Code", roo_code),
    ("Cline", cline),
    ("OpenCode", opencode),
    ("Goose", goose),
    ("Aider", aider),
]


def unsupported_agent(records: Records, document: Any, head: bytes, path: Path
                      ) -> str | None:
    """The name of the agent whose log this is, among those not imported yet; None when
    it is none of them."""
    for name, test in AGENTS:
        if test(records, document, head, path):
            return name
    return None
