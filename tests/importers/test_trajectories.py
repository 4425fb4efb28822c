"""Benchmark trajectories (issue 23 point 3): SWE-agent `.traj`, mini-swe-agent
`.traj.json` and OpenHands V0, on the shared real files and on small hand-built files of
the forms the shared files lack. What each step sent the model is computed here from the
source itself, independently of the importers, and compared with the imported surface."""

from __future__ import annotations

import hashlib
import json
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from surface_lab import Session, derive_messages, read_log
from surface_lab.cli import main
from surface_lab.errors import SurfaceLabError
from surface_lab.importers import (
    ImportResult,
    detect_format,
    import_any,
    import_mini_swe_agent,
    import_openhands_v0,
    import_swe_agent,
)

from .helpers import SHARED, check_invariants

TRAJECTORIES = SHARED / "agent_logs" / "trajectories"
SHARED_FILES = sorted(TRAJECTORIES.glob("*.traj*")) if TRAJECTORIES.is_dir() else []
needs_shared = pytest.mark.skipif(not SHARED_FILES, reason=f"no trajectories in {TRAJECTORIES}")


def texts(messages: Any) -> list[str]:
    """Each message as one comparable string: its text, tool calls and tool results."""
    out = []
    for message in messages:
        parts = []
        for block in message["content"]:
            if block["type"] == "text":
                parts.append(block["text"])
            elif block["type"] == "tool-call":
                parts.append(f"<call {block['id']}>")
            elif block["type"] == "tool-result":
                parts.append(f"<result {block['toolCallId']}>" + "".join(
                    b.get("text", "") for b in block["content"]))
        out.append("".join(parts))
    return out


def views_before_responses(result: ImportResult) -> list[list[str]]:
    """The model view right before each assistant message that opens a step."""
    out = []
    for event in result.events:
        if event["type"] == "step/start":
            out.append(texts(derive_messages(result.events[: event["seq"]])))
    return out


def final_texts(result: ImportResult) -> list[str]:
    return texts(Session("v", seed=result.events).derive_messages())


def _source_text(message: dict[str, Any]) -> str:
    """A SWE-agent or mini-swe-agent chat message as `texts` renders its surface item."""
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if p.get("type") == "text")
    content = content or ""
    if message.get("role") == "tool":
        ids = message.get("tool_call_ids") or [message.get("tool_call_id")]
        if isinstance(ids, str):
            ids = [ids.strip("[]'\" ")]
        return f"<result {ids[0]}>{content}"
    calls = message.get("tool_calls") or []
    if isinstance(calls, str):
        import ast

        calls = ast.literal_eval(calls)
    return content + "".join(f"<call {c['id']}>" for c in calls)


def _digest(path: Path) -> list[str]:
    files = sorted(path.rglob("*")) if path.is_dir() else [path]
    return [hashlib.sha256(f.read_bytes()).hexdigest() for f in files if f.is_file()]


def _converts(path: Path, tmp_path: Path) -> ImportResult:
    before = _digest(path)
    out = tmp_path / "out.jsonl"
    assert main(["convert", str(path), "-o", str(out)]) == 0
    assert main(["validate", str(out)]) == 0
    assert _digest(path) == before  # the source is never written
    log = read_log(out)
    assert log.valid
    if find_spec("pandas") is not None:  # every bracket's trace equals what it replaced
        from surface_lab.notebook import replacements_df

        assert replacements_df(log)["recorded_matches"].fillna(True).all()
    result = import_any(path)
    check_invariants(result)
    assert result.problems == []
    return result


# -- the shared real files ------------------------------------------------------------------


@needs_shared
@pytest.mark.parametrize("path", SHARED_FILES, ids=lambda p: p.name[-40:])
def test_every_shared_trajectory_imports_validates_and_keeps_what_the_model_saw(
        path: Path, tmp_path: Path) -> None:
    expected_format = "mini-swe-agent" if path.name.endswith(".traj.json") else "swe-agent"
    assert detect_format(path) == expected_format
    result = _converts(path, tmp_path)
    document = json.loads(path.read_text())
    if expected_format == "mini-swe-agent":
        sent = [m for m in document["messages"] if m["role"] != "system"]
        assert final_texts(result) == [_source_text(m) for m in sent]
        assistants = [e for e in result.events if e["type"] == "assistant/message"]
        answers = [m for m in sent if m["role"] == "assistant"]
        assert len(assistants) == len(answers) == document["info"]["model_stats"]["api_calls"]
        for event, message in zip(assistants, answers, strict=True):
            usage = message["extra"]["response"]["usage"]
            data = event["data"]["usage"]
            assert data["inputTokens"] + data.get("cacheReadTokens", 0) == usage[
                "prompt_tokens"]
            assert data["outputTokens"] == usage["completion_tokens"]
        assert result.selection["model_stats"]["countedBy"] == "mini-swe-agent (local count)"
        return
    history = [h for h in document["history"] if h["role"] != "system"]
    assert final_texts(result) == [_source_text(h) for h in history]
    if "info" in document:
        assert result.selection["model_stats"]["countedBy"] == "swe-agent (local count)"
        assert "local-model-stats" in {n.code for n in result.notes}


@needs_shared
def test_function_calls_get_their_results() -> None:
    [path] = [p for p in SHARED_FILES if "function_calling" in p.name]
    result = import_swe_agent(path)
    calls = [e["data"]["callId"] for e in result.events if e["type"] == "tool/call"]
    answered = [e["data"]["message"]["source"]["callId"] for e in result.events
                if e["type"] == "tool/result"]
    assert calls and calls == answered
    assert all("sourceEventSeqs" in e for e in result.events if e["type"] == "tool/result")


# -- SWE-agent: hand-built query and messages forms --------------------------------------------

MASK = "Old environment output: (3 lines omitted)"


def _swe_history(function_calling: bool = True) -> list[dict[str, Any]]:
    def action(text: str, call: str, command: str) -> dict[str, Any]:
        entry = {"role": "assistant", "content": text, "thought": text, "action": command,
                 "agent": "main", "message_type": "action"}
        if function_calling:
            entry["tool_calls"] = [{"id": call, "type": "function", "function": {
                "name": "bash", "arguments": json.dumps({"command": command})}}]
        else:
            entry["content"] = f"{text}\n```\n{command}\n```"
        return entry

    def observation(text: str, call: str) -> dict[str, Any]:
        if function_calling:
            return {"role": "tool", "content": text, "agent": "main",
                    "message_type": "observation", "tool_call_ids": [call]}
        return {"role": "user", "content": text, "agent": "main",
                "message_type": "observation"}

    return [{"role": "system", "content": "SYSTEM", "agent": "main",
             "message_type": "system_prompt"},
            {"role": "user", "content": "DEMO", "agent": "main", "is_demo": True,
             "message_type": "demonstration"},
            {"role": "user", "content": "TASK", "agent": "main",
             "message_type": "observation"},
            action("list", "c1", "ls"), observation("a\nb\nc", "c1"),
            action("read", "c2", "cat a"), observation("x\ny", "c2"),
            action("submit", "c3", "submit"), observation("done", "c3")]


def _chat(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items()
            if k in ("role", "content", "tool_calls", "tool_call_ids", "message_type",
                     "is_demo", "agent")}


def _swe_views(history: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """What SWE-agent sent at each of the three steps, with LastNObservations(n=1):
    the first observation (c1's) is elided from the third request on."""
    chat = [_chat(h) for h in history]
    masked = dict(chat[4], content=MASK)
    return [chat[:3], chat[:5], [*chat[:4], masked, *chat[5:7]]]


def _write_swe(tmp_path: Path, form: str, *, function_calling: bool = True) -> Path:
    history = _swe_history(function_calling)
    views = _swe_views(history)
    steps = [{"action": a, "observation": o, "response": r, "thought": r, "state": "{}"}
             for a, o, r in (("ls", "a\nb\nc", "list"), ("cat a", "x\ny", "read"),
                             ("submit", "done", "submit"))]
    if form == "query":
        for step, view in zip(steps, views, strict=True):
            step["query"] = view
    else:  # before 1.1.0: the input of the next step, and the last one after it
        masked_end = [*views[2], _chat(history[7]), _chat(history[8])]
        for step, view in zip(steps, [*views[1:], masked_end], strict=True):
            step["messages"] = view
    path = tmp_path / f"{form}{'' if function_calling else '-text'}.traj"
    path.write_text(json.dumps({
        "trajectory": steps, "history": history, "info": {
            "exit_status": "submitted", "model_stats": {
                "instance_cost": 0.2, "tokens_sent": 300, "tokens_received": 30,
                "api_calls": 3}},
        "replay_config": json.dumps({"agent": {"model": {"name": "anthropic/claude-x"}}})}))
    return path


@pytest.mark.parametrize("form", ["query", "messages"])
@pytest.mark.parametrize("function_calling", [True, False], ids=["calls", "text"])
def test_each_step_sees_what_swe_agent_sent(tmp_path: Path, form: str,
                                            function_calling: bool) -> None:
    path = _write_swe(tmp_path, form, function_calling=function_calling)
    assert detect_format(path) == "swe-agent"
    result = _converts(path, tmp_path)
    views = _swe_views(_swe_history(function_calling))
    expected = [[_source_text(m) for m in view if m["role"] != "system"] for view in views]
    assert views_before_responses(result) == expected
    assert result.selection["form"] == form
    [assistant] = [e for e in result.events if e["type"] == "assistant/message"][:1]
    assert dict(assistant["data"]["message"]["source"])["model"] == "claude-x"


@pytest.mark.parametrize("form", ["query", "messages"])
def test_an_elided_observation_is_a_content_only_rewrite(tmp_path: Path, form: str) -> None:
    result = import_swe_agent(_write_swe(tmp_path, form))
    [prune] = [e for e in result.events if e["type"] == "compaction/prune"]
    assert prune["data"]["imported"]["kind"] == "observation-masking"
    rewrite = result.events[prune["seq"] + 1]
    assert rewrite["type"] == "tool/result"
    assert dict(rewrite["surfaceOp"]) == {"op": "replace", "start": prune["data"][
        "shadowedSeqs"][0], "end": prune["data"]["shadowedSeqs"][0]}
    assert rewrite["data"]["message"]["content"][0]["content"][0]["text"] == MASK
    # Written after the second response's observation, before the third request.
    second = [e for e in result.events if e["type"] == "assistant/message"][1]
    third = [e for e in result.events if e["type"] == "assistant/message"][2]
    assert second["seq"] < prune["seq"] < third["seq"]
    assert "observations-rewritten" in {n.code for n in result.notes}


def test_the_audit_sees_the_masking(tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    from surface_lab.analysis.source import load_source
    from surface_lab.notebook import replacements_df

    result = import_swe_agent(_write_swe(tmp_path, "query"))
    frame = replacements_df(load_source(list(result.events), progress=False))
    assert len(frame) == 1


def test_a_requeried_format_error_is_seen_then_dropped(tmp_path: Path) -> None:
    """SWE-agent keeps a failed step in the trajectory, requeries with the bad output and
    an error message appended, and keeps neither in the history."""
    path = _write_swe(tmp_path, "query")
    document = json.loads(path.read_text())
    steps = document["trajectory"]
    query = steps[1]["query"]
    bad = {"role": "assistant", "content": "no command here", "agent": "main",
           "message_type": "assistant"}
    error = {"role": "user", "content": "Your output was not formatted correctly",
             "agent": "main", "message_type": "user"}
    steps.insert(1, dict(steps[1], response="no command here", action="", query=query))
    steps[2]["query"] = [*query, bad, error]
    path.write_text(json.dumps(document))
    result = import_swe_agent(path)
    check_invariants(result)
    views = views_before_responses(result)
    assert views[2][-2:] == ["no command here", "Your output was not formatted correctly"]
    assert views[3] == [_source_text(m) for m in steps[3]["query"] if m["role"] != "system"]
    assert [c["kind"] for c in result.compactions] == ["rewrite"]


def test_a_response_kept_nowhere_is_accounted_for(tmp_path: Path) -> None:
    path = _write_swe(tmp_path, "query")
    document = json.loads(path.read_text())
    last = document["trajectory"][-1]
    document["trajectory"].append(dict(last, response="gave up", query=[
        *last["query"], *document["history"][7:]]))  # a last step the history lacks
    path.write_text(json.dumps(document))
    result = import_swe_agent(path)
    assert "format-error-steps" in {n.code for n in result.notes}
    assert [r["id"] for r in result.omitted if r["reason"] == "excluded-from-context"] == [
        "step-4"]
    check_invariants(result)


def test_a_request_that_drops_messages_is_a_rewrite_bracket(tmp_path: Path) -> None:
    path = _write_swe(tmp_path, "query")
    document = json.loads(path.read_text())
    query = document["trajectory"][2]["query"]
    del query[3:5]  # a history processor dropped the first action and its observation
    path.write_text(json.dumps(document))
    result = import_swe_agent(path)
    check_invariants(result)
    assert [c["kind"] for c in result.compactions] == ["rewrite"]
    third_view = views_before_responses(result)[2]
    assert third_view == [_source_text(m) for m in query if m["role"] != "system"]


# -- mini-swe-agent -------------------------------------------------------------------------


def _mini(tmp_path: Path, fmt: str = "mini-swe-agent-1.1") -> Path:
    def usage(prompt: int, cached: int, completion: int) -> dict[str, Any]:
        return {"prompt_tokens": prompt, "completion_tokens": completion,
                "prompt_tokens_details": {"cached_tokens": cached}}

    messages = [
        {"role": "system", "content": "SYSTEM"},
        {"role": "user", "content": "TASK"},
        {"role": "assistant", "content": "look", "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "bash", "arguments":
                                                          '{"command":"ls"}'}}],
         "extra": {"response": {"id": "r1", "model": "anthropic/claude-y", "usage": usage(
             100, 80, 10)}, "timestamp": 1763510640.5, "cost": 0.01}},
        {"role": "tool", "tool_call_id": "t1", "content": "a b",
         "extra": {"returncode": 0, "timestamp": 1763510641.0}},
        {"role": "assistant", "content": "fail", "tool_calls": [
            {"id": "t2", "type": "function", "function": {"name": "bash", "arguments":
                                                          '{"command":"false"}'}}],
         "extra": {"response": {"id": "r2", "model": "anthropic/claude-y", "usage": usage(
             130, 100, 5)}, "timestamp": 1763510642.0}},
        {"role": "tool", "tool_call_id": "t2", "content": "", "extra": {"returncode": 1}},
        {"role": "exit", "content": "PATCH", "extra": {"exit_status": "Submitted",
                                                       "submission": "PATCH"}},
    ]
    path = tmp_path / "x.traj.json"
    path.write_text(json.dumps({"info": {"exit_status": "Submitted", "submission": "PATCH",
                                         "model_stats": {"instance_cost": 0.02,
                                                         "api_calls": 2},
                                         "mini_version": "2.0.0"},
                                "messages": messages, "trajectory_format": fmt}))
    return path


def test_mini_swe_agent_tool_calls_usage_times_and_exit(tmp_path: Path) -> None:
    path = _mini(tmp_path)
    assert detect_format(path) == "mini-swe-agent"
    result = _converts(path, tmp_path)
    assistants = [e for e in result.events if e["type"] == "assistant/message"]
    assert [dict(e["data"]["usage"]) for e in assistants] == [
        {"inputTokens": 20, "cacheReadTokens": 80, "outputTokens": 10},
        {"inputTokens": 30, "cacheReadTokens": 100, "outputTokens": 5}]
    assert assistants[0]["time"] == 1763510640500
    assert assistants[0]["data"]["message"]["source"]["provider"] == "anthropic"
    results = [e for e in result.events if e["type"] == "tool/result"]
    assert [e["data"]["message"]["content"][0].get("isError", False) for e in results] == [
        False, True]
    assert final_texts(result)[-1] == "PATCH"
    assert result.events[-1]["type"] == "turn/end"  # the exit status closes the turn
    assert result.selection["exit_status"] == "Submitted"


def test_mini_swe_agent_newer_format_is_read_and_noted(tmp_path: Path) -> None:
    result = import_mini_swe_agent(_mini(tmp_path, "mini-swe-agent-1.2"))
    assert "format-version-unknown" in {n.code for n in result.notes}
    check_invariants(result)


# -- OpenHands V0 ---------------------------------------------------------------------------

T = "2026-01-05T10:00:{:02d}.000000"


def _v0_events(condensation: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    def run(eid: int, call: str, response: str) -> list[dict[str, Any]]:
        meta = {"function_name": "execute_bash", "tool_call_id": call,
                "model_response": {"id": response, "model": "gpt-4o", "choices": [
                    {"message": {"content": f"thinking {eid}", "tool_calls": [
                        {"id": call, "function": {"name": "execute_bash",
                                                  "arguments": json.dumps({"command":
                                                                          f"c{eid}"})}}]}}],
                                   "usage": {"prompt_tokens": 10 * eid,
                                             "completion_tokens": eid}},
                "total_calls_in_response": 1}
        return [{"id": eid, "timestamp": T.format(eid), "source": "agent",
                 "message": f"Running c{eid}", "action": "run",
                 "args": {"command": f"c{eid}", "thought": ""}, "tool_call_metadata": meta},
                {"id": eid + 1, "timestamp": T.format(eid + 1), "source": "agent",
                 "message": "Command finished", "observation": "run",
                 "content": f"out {eid}", "extras": {"exit_code": 0}, "cause": eid,
                 "tool_call_metadata": meta}]

    events = [{"id": 0, "timestamp": T.format(0), "source": "agent", "message": "SYSTEM",
               "action": "system", "args": {"content": "SYSTEM"}},
              {"id": 1, "timestamp": T.format(1), "source": "user", "message": "TASK",
               "action": "message", "args": {"content": "TASK"}},
              {"id": 2, "timestamp": T.format(2), "source": "environment",
               "message": "", "observation": "agent_state_changed", "content": "",
               "extras": {"agent_state": "running"}},
              *run(3, "k3", "resp3"), *run(5, "k5", "resp5"), *run(7, "k7", "resp7")]
    if condensation is not None:
        events.append({"id": 9, "timestamp": T.format(9), "source": "agent",
                       "message": "Summary", "action": "condensation",
                       "args": condensation})
        events += run(10, "k10", "resp10")
    events.append({"id": 20, "timestamp": T.format(20), "source": "agent",
                   "message": "All done", "action": "message",
                   "args": {"content": "All done"}})
    return events


@pytest.mark.parametrize("form", ["ids", "range"])
def test_openhands_v0_condensation_forgets_and_inserts_the_summary(tmp_path: Path,
                                                                   form: str) -> None:
    forget = {"forgotten_event_ids": [3, 4, 5, 6]} if form == "ids" else {
        "forgotten_events_start_id": 3, "forgotten_events_end_id": 6}
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(_v0_events({**forget, "summary": "SUMMARY",
                                           "summary_offset": 2})))
    assert detect_format(path) == "openhands-v0"
    result = _converts(path, tmp_path)
    [row] = result.compactions
    assert [result.origins[s]["id"] for s in row["shadowed_seqs"]] == ["3", "4", "5", "6"]
    end = next(e["seq"] for e in result.events if e["type"] == "compaction/end")
    after = texts(derive_messages(result.events[: end + 1]))
    assert after == ["TASK", "SUMMARY", "thinking 7<call k7>", "<result k7>out 7"]
    assert result.events[-1]["type"] == "turn/end"  # the agent's last message finished it
    assert result.header["createdAt"] == 1767607200000  # the first event's own time
    [user] = [e for e in result.events if e["type"] == "user/message"][:1]
    assert user["time"] == 1767607201000


def test_openhands_v0_output_jsonl_picks_an_instance(tmp_path: Path) -> None:
    path = tmp_path / "output.jsonl"
    lines = [{"instance_id": name, "instruction": "TASK", "metadata": {
        "llm_config": {"model": "openai/gpt-4o"}}, "history": _v0_events(),
        "metrics": {"accumulated_cost": 0.5}} for name in ("a__1", "b__2")]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert detect_format(path) == "openhands-v0"
    first = import_openhands_v0(path)
    assert first.header["id"] == "a__1"
    assert "instance-choice" in {n.code for n in first.notes}
    second = import_any(path, leaf="b__2")
    assert second.header["id"] == "b__2"
    assert [r["line"] for r in second.omitted if r["reason"] == "off-branch"] == [1]
    with pytest.raises(SurfaceLabError, match="no instance 'c'"):
        import_any(path, leaf="c")
    check_invariants(second)


def test_openhands_v0_masked_observations(tmp_path: Path) -> None:
    path = tmp_path / "output.jsonl"
    line = {"instance_id": "m", "metadata": {"condenser_config": {
        "type": "observation_masking", "attention_window": 3}}, "history": _v0_events()}
    path.write_text(json.dumps(line) + "\n")
    result = _converts(path, tmp_path)
    prunes = [e for e in result.events if e["type"] == "compaction/prune"]
    assert prunes and all(p["data"]["imported"]["kind"] == "observation-masking"
                          for p in prunes)
    final = final_texts(result)
    assert "<result k3><MASKED>" in final and "<result k7>out 7" in final


# -- odd input ---------------------------------------------------------------------------------


ODD_VALUES: list[Any] = [None, 1, "x", [], {}, [None], {"a": [1]}, True, 1.5]


def _mutations(document: Any, limit: int = 400) -> list[Any]:
    """Copies of `document` with one value replaced by an odd one, walking the tree."""
    out: list[Any] = []

    def walk(node: Any, path: list[Any]) -> None:
        if len(out) >= limit:
            return
        items = node.items() if isinstance(node, dict) else enumerate(node) \
            if isinstance(node, list) else []
        for key, child in list(items)[:12]:
            for odd in ODD_VALUES[: 3 if path else len(ODD_VALUES)]:
                copy = json.loads(json.dumps(document))
                target = copy
                for p in path:
                    target = target[p]
                target[key] = odd
                out.append(copy)
            walk(child, [*path, key])

    walk(document, [])
    return out


@pytest.mark.parametrize("maker", ["swe-query", "swe-messages", "mini", "v0"])
def test_odd_values_never_raise_a_foreign_exception(tmp_path: Path, maker: str) -> None:
    if maker.startswith("swe"):
        source = _write_swe(tmp_path, maker.split("-")[1])
    elif maker == "mini":
        source = _mini(tmp_path)
    else:
        source = tmp_path / "trajectory.json"
        source.write_text(json.dumps(_v0_events({"forgotten_event_ids": [3, 4],
                                                 "summary": "S", "summary_offset": 1})))
    document = json.loads(source.read_text())
    fmt = detect_format(source)
    for number, mutated in enumerate(_mutations(document)):
        path = tmp_path / f"m{number}{''.join(source.suffixes)}"
        path.write_text(json.dumps(mutated))
        detect_format(path)
        try:
            result = import_any(path, fmt=fmt)
        except SurfaceLabError as err:  # importer-error: a foreign exception, caught late
            assert err.code != "importer-error", (mutated, err)
            continue
        Session("odd", seed=result.events)


def test_deep_nesting_and_bad_bytes_are_located_problems(tmp_path: Path) -> None:
    deep = tmp_path / "deep.traj"
    deep.write_text('{"history": ' + "[" * 5000 + "]" * 5000 + "}")
    assert detect_format(deep) is None
    for fmt in ("swe-agent", "mini-swe-agent", "openhands-v0"):
        with pytest.raises(SurfaceLabError) as info:
            import_any(deep, fmt=fmt)
        assert str(deep) in str(info.value)
    binary = tmp_path / "bin.traj.json"
    binary.write_bytes(b"\xff\xfe{}")
    assert detect_format(binary) is None
    with pytest.raises(SurfaceLabError):
        import_any(binary, fmt="mini-swe-agent")


def _parallel() -> list[dict[str, Any]]:
    """Two calls in one model response, then an error observation (the shapes of V0's
    `event_to_dict`: `tool_call_metadata` with the model response, `forgotten_event_ids`
    null beside a range)."""
    calls = [{"id": f"p{n}", "type": "function", "function": {
        "name": "execute_bash", "arguments": json.dumps({"command": f"c{n}"})}} for n in (1, 2)]
    response = {"id": "resp-par", "model": "gpt-4o", "choices": [{"message": {
        "role": "assistant", "content": None, "tool_calls": calls,
        "reasoning_content": "both at once"}}], "usage": {
            "prompt_tokens": 100, "completion_tokens": 20,
            "prompt_tokens_details": {"cached_tokens": 80}}}

    def meta(call: str) -> dict[str, Any]:
        return {"function_name": "execute_bash", "tool_call_id": call,
                "model_response": response, "total_calls_in_response": 2}

    return [
        {"id": 0, "timestamp": "2026-01-02T03:04:00Z", "source": "user", "message": "go",
         "action": "message", "args": {"content": "TASK", "image_urls": [
             "data:image/png;base64,iVBORw0KGgo=", "https://example.com/a.png"]}},
        {"id": 1, "timestamp": "2026-01-02T03:04:01Z", "source": "agent", "message": "",
         "action": "run", "args": {"command": "c1", "thought": ""},
         "tool_call_metadata": meta("p1")},
        {"id": 2, "timestamp": "2026-01-02T03:04:02Z", "source": "agent", "message": "",
         "observation": "run", "content": "one", "cause": 1, "tool_call_metadata": meta("p1")},
        {"id": 3, "timestamp": "2026-01-02T03:04:03Z", "source": "agent", "message": "",
         "action": "run", "args": {"command": "c2", "thought": ""},
         "tool_call_metadata": meta("p2")},
        {"id": 4, "timestamp": "2026-01-02T03:04:04Z", "source": "agent", "message": "",
         "observation": "error", "content": "boom", "cause": 3, "extras": {"error_id": ""},
         "tool_call_metadata": meta("p2")},
        {"id": 5, "timestamp": "2026-01-02T03:04:05Z", "source": "agent",
         "message": "Summary", "action": "condensation", "tool_call_metadata": None,
         "args": {"forgotten_event_ids": None, "forgotten_events_start_id": 9,
                  "forgotten_events_end_id": 9, "summary": None, "summary_offset": None}},
    ]


def test_openhands_v0_one_response_with_two_calls_and_an_error(tmp_path: Path) -> None:
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(_parallel()))
    result = import_openhands_v0(path)
    check_invariants(result)
    assistants = [e for e in result.events if e["type"] == "assistant/message"]
    [assistant] = assistants
    blocks = assistant["data"]["message"]["content"]
    assert [b["type"] for b in blocks] == ["reasoning", "tool-call", "tool-call"]
    assert dict(assistant["data"]["usage"]) == {"inputTokens": 20, "cacheReadTokens": 80,
                                                "outputTokens": 20}
    assert final_texts(result) == ["TASK", "<call p1><call p2>", "<result p1>one",
                                   "<result p2>boom\n[Error occurred in processing last "
                                   "action]"]
    assert [r["id"] for r in result.omitted if r["reason"] == "in-response"] == ["3"]
    user = next(e for e in result.events if e["type"] == "user/message")
    image, link = user["data"]["content"][1:]
    assert image["type"] == "image" and image["attachment"]["attachmentId"].startswith(
        "sha256:") and image["attachment"]["bytes"] == 8
    assert dict(link) == {"type": "openhands-v0:image_url", "url": "https://example.com/a.png"}
    assert result.problems == []  # a range names the ids the log holds in it: none here
    assert [c["shadowed_seqs"] for c in result.compactions] == [[]]


def test_openhands_v0_session_folder(tmp_path: Path) -> None:
    folder = tmp_path / "sessions" / "sid1"
    (folder / "events").mkdir(parents=True)
    for event in _v0_events({"forgotten_event_ids": [3, 4], "summary": "S",
                             "summary_offset": 1}):
        (folder / "events" / f"{event['id']}.json").write_text(json.dumps(event))
    assert detect_format(folder) == "openhands-v0"
    result = _converts(folder, tmp_path)
    assert result.header["id"] == "sid1"
    assert len(result.sources) == len(list((folder / "events").iterdir()))
    assert [c["imported_summaryOffset"] for c in result.compactions] == [1]


def test_mini_swe_agent_responses_api_messages_and_an_unfinished_run(tmp_path: Path) -> None:
    """mini-swe-agent 2 with a Responses API model keeps each response whole (`object:
    response`, `output` items, Responses usage names); a run not over has exit_status
    ""."""
    path = tmp_path / "r.traj.json"
    path.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1.1", "info": {
        "exit_status": "", "model_stats": {"instance_cost": 0.03, "api_calls": 1},
        "config": {"model": {"model_name": "openai/gpt-5.5"}}}, "messages": [
        {"role": "system", "content": "system"}, {"role": "user", "content": "task"},
        {"object": "response", "id": "resp_1", "model": "gpt-5.5-2026-04-23",
         "created_at": 1000, "usage": {
             "input_tokens": 100, "input_tokens_details": {"cached_tokens": 25},
             "output_tokens": 40, "output_tokens_details": {"reasoning_tokens": 30}},
         "output": [
             {"type": "reasoning", "summary": [{"type": "summary_text", "text": "hm"}]},
             {"type": "message", "content": [{"type": "output_text", "text": "run it"}]},
             {"type": "function_call", "call_id": "fc1", "name": "bash",
              "arguments": '{"command":"ls"}'}], "extra": {"cost": 0.03}},
        {"type": "function_call_output", "call_id": "fc1", "output": "a b",
         "extra": {"returncode": 0}}]}))
    result = _converts(path, tmp_path)
    [assistant] = [e for e in result.events if e["type"] == "assistant/message"]
    assert [b["type"] for b in assistant["data"]["message"]["content"]] == [
        "reasoning", "text", "tool-call"]
    assert dict(assistant["data"]["usage"]) == {"inputTokens": 75, "cacheReadTokens": 25,
                                                "outputTokens": 40, "reasoningTokens": 30}
    assert assistant["time"] == 1_000_000
    assert final_texts(result) == ["task", "run it<call fc1>", "<result fc1>a b"]
    assert "final-turn-open" in {n.code for n in result.notes}


def test_each_format_is_detected_as_itself_and_nothing_else(tmp_path: Path) -> None:
    """Every sample of every format gets its own format and no unsupported agent's name;
    surface logs get neither."""
    from surface_lab.importers import unsupported_format

    from .helpers import OTHER, ROOT

    v0 = tmp_path / "v0" / "trajectory.json"
    v0.parent.mkdir()
    v0.write_text(json.dumps(_v0_events()))
    output = tmp_path / "v0" / "output.jsonl"
    output.write_text(json.dumps({"instance_id": "i", "history": _v0_events()}) + "\n")
    (tmp_path / "q").mkdir()
    (tmp_path / "m").mkdir()
    expected: dict[Path, str | None] = {
        _write_swe(tmp_path / "q", "query"): "swe-agent",
        _write_swe(tmp_path / "m", "messages", function_calling=False): "swe-agent",
        _mini(tmp_path): "mini-swe-agent", v0: "openhands-v0", output: "openhands-v0",
        **{p: "swe-agent" if p.suffix == ".traj" else "mini-swe-agent"
           for p in SHARED_FILES},
        **{p: None for p in sorted((ROOT / "sample_logs").glob("*.jsonl"))},
    }
    if OTHER.is_dir():
        expected |= {p: detect_format(p) for p in OTHER.iterdir()
                     if p.suffix in (".json", ".jsonl")}
        assert all(expected[p] is not None for p in OTHER.iterdir()
                   if p.suffix in (".json", ".jsonl"))
    for path, fmt in expected.items():
        assert detect_format(path) == fmt, path
        assert unsupported_format(path) is None, path


def _last_n_observations(steps: int, keep: int) -> dict[str, Any]:
    """A query-form trajectory whose requests elide all observations but the task and the
    last `keep`, as LastNObservations does."""
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "SYS", "agent": "main", "message_type": "system_prompt"},
        {"role": "user", "content": "TASK", "agent": "main", "message_type": "observation"}]
    trajectory = []
    for i in range(steps):
        query = [dict(m) for m in history]
        observations = [k for k, m in enumerate(query) if m["message_type"] == "observation"]
        for k in observations[1 : max(0, len(observations) - keep)]:
            lines = query[k]["content"].count("\n") + 1
            query[k] = dict(query[k], content=f"Old environment output: ({lines} lines omitted)")
        call = f"c{i}"
        history += [
            {"role": "assistant", "content": f"step {i}", "thought": f"step {i}",
             "action": "ls", "agent": "main", "message_type": "action", "tool_calls": [
                 {"id": call, "type": "function",
                  "function": {"name": "bash", "arguments": json.dumps({"command": "ls"})}}]},
            {"role": "tool", "content": f"line\nline\nout {i}", "agent": "main",
             "message_type": "observation", "tool_call_ids": [call]}]
        trajectory.append({"action": "ls", "observation": f"out {i}", "response": f"step {i}",
                           "thought": f"step {i}", "query": query})
    return {"trajectory": trajectory, "history": history, "info": {"exit_status": "submitted"}}


def test_last_n_observations_over_many_steps(tmp_path: Path) -> None:
    document = _last_n_observations(30, keep=3)
    path = tmp_path / "long.traj"
    path.write_text(json.dumps(document))
    result = import_swe_agent(path)
    check_invariants(result)
    assert views_before_responses(result) == [
        [_source_text(m) for m in step["query"] if m["role"] != "system"]
        for step in document["trajectory"]]
    prunes = [e for e in result.events if e["type"] == "compaction/prune"]
    assert len(prunes) == 30 - 3 - 1  # each observation once, when it leaves the window
    assert result.compactions == []  # elisions never need a bracket


def test_an_output_jsonl_line_longer_than_the_peek_is_detected(tmp_path: Path) -> None:
    events = _v0_events()
    events[3]["args"]["command"] = "x" * 300_000  # one line past detect_format's peek
    path = tmp_path / "output.jsonl"
    path.write_text(json.dumps({"instance_id": "big", "history": events}) + "\n")
    assert detect_format(path) == "openhands-v0"
    assert import_any(path).header["id"] == "big"
