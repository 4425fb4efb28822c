"""Agents whose logs are not imported yet are named (issue 23 point 4): each is recognised
from a small file of its real shape and refused as "<agent> logs are not supported yet",
never taken for another format or for a broken surface log; JSON that is no agent log at
all says so. Every command that reads a path says the same, naming the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from surface_lab import read_log
from surface_lab.cli import main
from surface_lab.errors import SurfaceLabError
from surface_lab.importers import detect_format, import_any, unsupported_format

T = "2025-12-13T16:26:{:02d}.000Z"


def _jsonl(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


# name -> (relative path, file text): the shapes documented in docs/importers.md
SAMPLES: dict[str, list[tuple[str, str]]] = {
    "Qwen Code": [("qwen/projects/x/chats/s1.jsonl", _jsonl([
        {"uuid": "u1", "parentUuid": None, "sessionId": "s1", "timestamp": T.format(1),
         "type": "user", "cwd": "/w", "version": "0.0.14",
         "message": {"role": "user", "parts": [{"text": "hi"}]}},
        {"uuid": "u2", "parentUuid": "u1", "sessionId": "s1", "timestamp": T.format(2),
         "type": "assistant", "model": "qwen3-coder",
         "message": {"role": "model", "parts": [{"text": "hello"}]}}]))],
    "Gemini CLI": [
        ("gemini/tmp/abc/chats/session-2025-12-13T16-26-1a2b.json", json.dumps({
            "sessionId": "1a2b", "projectHash": "ab" * 32, "startTime": T.format(1),
            "lastUpdated": T.format(3), "messages": [
                {"id": "m1", "timestamp": T.format(1), "type": "user", "content": "hi"},
                {"id": "m2", "timestamp": T.format(2), "type": "gemini",
                 "content": "hello", "thoughts": [], "model": "gemini-2.5-pro",
                 "tokens": {"input": 10, "output": 2}}]}, indent=2)),
        ("gemini/tmp/abc/logs.json", json.dumps([
            {"sessionId": "1a2b", "messageId": 0, "type": "user", "message": "hi",
             "timestamp": T.format(1)}], indent=2))],
    "Copilot CLI": [("copilot/session-state/s1/events.jsonl", _jsonl([
        {"type": "session.start", "data": {"sessionId": "s1", "version": 1,
                                           "producer": "copilot-agent",
                                           "copilotVersion": "0.0.369",
                                           "startTime": T.format(1)},
         "id": "e1", "timestamp": T.format(1), "parentId": None},
        {"type": "user.message", "data": {"content": "hi", "attachments": []},
         "id": "e2", "timestamp": T.format(2), "parentId": "e1"},
        {"type": "session.truncation", "data": {"tokensRemoved": 100},
         "id": "e3", "timestamp": T.format(3), "parentId": "e2"}]))],
    "Kimi CLI": [("kimi/sessions/h/s1/context.jsonl", _jsonl([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "hello"}]},
        {"role": "_usage", "token_count": 1234},
        {"role": "_checkpoint", "id": 0}]))],
    "Cursor": [
        ("cursor/projects/p/agent-transcripts/c1/c1.jsonl", _jsonl([
            {"role": "user", "message": {"content": [
                {"type": "text", "text": "<user_query>\nhi\n</user_query>"}]}},
            {"role": "assistant", "message": {"content": [
                {"type": "text", "text": "hello"}]}}])),
        ("cursor/projects/p/agent-transcripts/c0.txt",
         "user:\n<user_query>\nhi\n</user_query>\n\nassistant:\nhello\n")],
    "Roo Code": [
        ("Code/User/globalStorage/rooveterinaryinc.roo-cline/tasks/t1/"
         "api_conversation_history.json", json.dumps([
             {"role": "user", "content": [{"type": "text", "text": "<task>hi</task>"}],
              "ts": 1}])),
        ("roo-export/api_conversation_history.json", json.dumps([
            {"role": "user", "content": [{"type": "text", "text": "SUMMARY"}],
             "isSummary": True, "ts": 2}]))],
    "Cline": [
        ("Code/User/globalStorage/saoudrizwan.claude-dev/tasks/t1/"
         "api_conversation_history.json", json.dumps([
             {"role": "user", "content": [{"type": "text", "text": "<task>hi</task>"}]},
             {"role": "assistant", "content": [
                 {"type": "text", "text": "reading"},
                 {"type": "tool_use", "id": "toolu_1", "name": "read_file",
                  "input": {"path": "a"}}]}])),
        ("cline/tasks/t1/ui_messages.json", json.dumps([
            {"ts": 1, "type": "say", "say": "text", "text": "hi"},
            {"ts": 2, "type": "ask", "ask": "tool", "text": "{}"}]))],
    "OpenCode": [
        ("opencode/storage/session/p1/ses_abc.json", json.dumps({
            "id": "ses_abc", "projectID": "p1", "directory": "/w", "title": "t",
            "version": "0.15.0", "time": {"created": 1, "updated": 2}})),
        ("opencode/storage/message/ses_abc/msg_1.json", json.dumps({
            "id": "msg_1", "sessionID": "ses_abc", "role": "user",
            "time": {"created": 1}}))],
    "Goose": [("goose/sessions/20250101_1.jsonl", _jsonl([
        {"working_dir": "/w", "description": "fix", "schedule_id": None,
         "message_count": 2, "total_tokens": 100},
        {"role": "user", "created": 1735689600, "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "created": 1735689601, "content": [
            {"type": "toolRequest", "id": "r1", "toolCall": {"status": "success"}}]}]))],
    "Aider": [
        ("repo/.aider.chat.history.md",
         "\n# aider chat started at 2024-05-01 10:00:00\n\n> Aider v0.50\n\n#### fix it\n\nok\n"),
        ("repo/.aider.input.history", "\n# 2024-05-01 10:00:01.123456\n+fix it\n")],
}
CASES = [(name, rel, text) for name, files in SAMPLES.items() for rel, text in files]


def _write(tmp_path: Path, rel: str, text: str) -> Path:
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_every_agent_of_the_issue_has_a_sample() -> None:
    assert set(SAMPLES) == {"Gemini CLI", "Copilot CLI", "Qwen Code", "Kimi CLI", "Cursor",
                            "Cline", "Roo Code", "OpenCode", "Goose", "Aider"}


@pytest.mark.parametrize(("name", "rel", "text"), CASES, ids=[c[1][-40:] for c in CASES])
def test_named_and_refused_everywhere(tmp_path: Path, name: str, rel: str, text: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, rel, text)
    assert detect_format(path) is None  # never taken for a format we import
    assert unsupported_format(path) == name
    message = f"{name} logs are not supported yet"
    with pytest.raises(SurfaceLabError) as info:
        import_any(path)
    assert info.value.code == "format-unsupported"
    assert message in str(info.value) and str(path) in str(info.value)
    with pytest.raises(SurfaceLabError) as read:
        read_log(path)
    assert read.value.code == "format-unsupported" and message in str(read.value)
    for command in (["validate", str(path)], ["info", str(path)],
                    ["convert", str(path), "-o", str(tmp_path / "out.jsonl")]):
        assert main(command) == 1
        out = capsys.readouterr()
        lines = [line for line in (out.out + out.err).splitlines() if line.strip()]
        assert any(line.startswith(f"{path}:") and message in line for line in lines), lines
        assert "Traceback" not in out.err
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("body", [
    json.dumps({"name": "x", "version": "1.0.0", "dependencies": {}}, indent=2),
    '{"a": 1}\n{"b": 2}\n',
    json.dumps([1, 2, 3]),
], ids=["config", "jsonl", "list"])
def test_json_that_is_no_agent_log_says_so(tmp_path: Path, body: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "config.json", body)
    assert detect_format(path) is None and unsupported_format(path) is None
    assert main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"{path}:1: format-unsupported: JSON that is no agent log")
    with pytest.raises(SurfaceLabError, match="JSON that is no agent log"):
        import_any(path)


@pytest.mark.parametrize("case", ["config", "Gemini CLI"])
def test_the_audit_names_them_too(tmp_path: Path, case: str,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pandas")
    if case == "config":
        path = _write(tmp_path, "config.json", json.dumps({"name": "x"}, indent=2))
        message = "JSON that is no agent log"
    else:
        path = _write(tmp_path, *SAMPLES[case][0])
        message = f"{case} logs are not supported yet"
    assert main(["audit", str(path), "--out", str(tmp_path / "report")]) == 1
    out = capsys.readouterr()
    assert f"{path}:1: format-unsupported: {message}" in out.out + out.err
    assert "Traceback" not in out.err and "header-invalid" not in out.out + out.err


def test_a_broken_surface_header_is_still_reported_as_such(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    path = _write(tmp_path, "s.jsonl", '{"version":0,"id":"s","createdAt":0}\n')
    assert main(["validate", str(path)]) == 1
    assert "header-invalid" in capsys.readouterr().out


def test_qwen_code_is_not_taken_for_claude_code(tmp_path: Path) -> None:
    [(rel, text)] = SAMPLES["Qwen Code"]
    path = _write(tmp_path, rel, text)
    assert detect_format(path) != "claude-code"
    with pytest.raises(SurfaceLabError, match="Qwen Code logs are not supported yet"):
        import_any(path, fmt=None)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.sampled_from(["", "user", "model", "gemini", "session.start", "_usage", "ses_x",
                       "msg_1", "toolRequest", "say", "history", "sessionId"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from([
        "role", "type", "content", "message", "parts", "sessionId", "uuid", "id", "data",
        "history", "messages", "projectHash", "working_dir", "created", "ts", "action",
        "observation", "trajectory_format", "trajectory", "schema_version", "info",
        "instance_id", "tool_calls", "query"]), inner, max_size=5),
    max_leaves=20)


@given(st.lists(JSON, min_size=1, max_size=3), st.booleans())
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_odd_json_never_raises_a_foreign_exception(tmp_path: Path, values: list[Any],
                                                   lines: bool) -> None:
    """Whatever JSON a file holds, looking at it names a format, an agent or nothing,
    and importing it is an import or a located refusal."""
    from surface_lab.importers import refusal_reason

    path = tmp_path / ("x.jsonl" if lines else "x.json")
    path.write_text("".join(json.dumps(v) + "\n" for v in values) if lines
                    else json.dumps(values[0], indent=1))
    fmt = detect_format(path)
    unsupported_format(path)
    refusal_reason(path)
    if fmt is not None:
        try:
            import_any(path)
        except SurfaceLabError as err:
            # a foreign exception caught by the guard: these three check every shape
            assert err.code != "importer-error" or fmt not in (
                "swe-agent", "mini-swe-agent", "openhands-v0"), err
