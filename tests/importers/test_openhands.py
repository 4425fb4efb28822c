"""OpenHands V1 on synthetic event folders built from the SDK's documented event shapes:
a condensation that forgets two separate runs, and one that only inserts a summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from surface_lab.cli import main
from surface_lab.importers import detect_format, import_openhands
from surface_lab.notebook import surface_df

from .helpers import check_invariants, final_view, shadowed_ids, view_after

T0 = "2026-03-01T10:00:{:02d}.000000"  # naive local time, as OpenHands writes


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


def _events() -> list[dict[str, Any]]:
    def action(eid: str, call: str, response: str, thought: str) -> dict[str, Any]:
        return {"kind": "ActionEvent", "id": eid, "source": "agent", "thought": _text(thought),
                "tool_name": "execute_bash", "tool_call_id": call, "llm_response_id": response,
                "tool_call": {"id": call, "name": "execute_bash",
                              "arguments": json.dumps({"command": f"run {eid}"})},
                "action": {"kind": "ExecuteBashAction", "command": f"run {eid}"}}

    def observation(eid: str, call: str, text: str, error: bool = False) -> dict[str, Any]:
        return {"kind": "ObservationEvent", "id": eid, "source": "environment",
                "tool_name": "execute_bash", "tool_call_id": call, "action_id": "x",
                "observation": {"kind": "ExecuteBashObservation", "content": _text(text),
                                "is_error": error}}

    def message(eid: str, source: str, text: str) -> dict[str, Any]:
        role = "user" if source == "user" else "assistant"
        return {"kind": "MessageEvent", "id": eid, "source": source,
                "llm_message": {"role": role, "content": _text(text)}}

    events = [
        {"kind": "SystemPromptEvent", "id": "sys", "source": "agent",
         "system_prompt": {"type": "text", "text": "You are OpenHands."}, "tools": []},
        message("m1", "user", "Fix the bug in app.py"),
        action("a1", "c1", "r1", "Look at the file."),
        observation("o1", "c1", "def main(): ..."),
        action("a2", "c2", "r2", "Run the tests."),
        observation("o2", "c2", "2 failed", error=True),
        action("a3", "c3", "r3", "Patch it."),
        observation("o3", "c3", "patched"),
        message("m2", "agent", "Fixed."),
        {"kind": "Condensation", "id": "cond1", "source": "environment",
         "forgotten_event_ids": ["a1", "o1", "a3", "o3"], "summary": "Read app.py; patched it.",
         "summary_offset": 2, "llm_response_id": "r4"},
        message("m3", "user", "Now add tests"),
        action("a4", "c4", "r5", "Write tests."),
        observation("o4", "c4", "ok"),
        {"kind": "Condensation", "id": "cond2", "source": "environment",
         "forgotten_event_ids": [], "summary": "Earlier: the bug fix.", "summary_offset": 1},
        {"kind": "ConversationStateUpdateEvent", "id": "state", "source": "environment"},
        message("m4", "agent", "All done."),
    ]
    for i, event in enumerate(events):
        event["timestamp"] = T0.format(i)
    return events


def build(folder: Path, events: list[dict[str, Any]] | None = None) -> Path:
    (folder / "events").mkdir(parents=True)
    (folder / "base_state.json").write_text(json.dumps({"id": "oh-conv-1",
                                                        "leaf_event_id": None}))
    for i, event in enumerate(events or _events()):
        (folder / "events" / f"event-{i:05d}-{event['id']}.json").write_text(json.dumps(event))
    return folder


@pytest.mark.parametrize("tombstones", [False, True])
def test_condensations_give_the_views_openhands_builds(tmp_path: Path,
                                                       tombstones: bool) -> None:
    folder = build(tmp_path / "conv")
    assert detect_format(folder) == "openhands"
    result = import_openhands(folder, tombstones=tombstones)
    check_invariants(result)
    assert view_after(result, "cond1") == ["m1", "cond1-summary", "a2", "o2", "m2"]
    assert view_after(result, "cond2") == [
        "cond2-summary", "m1", "cond1-summary", "a2", "o2", "m2", "m3", "a4", "o4"]
    assert final_view(result)[-1] == "m4"
    assert result.events[-1]["data"]["reason"] == {"kind": "completed"}
    first = next(c for c in result.compactions if c["compaction_id"] == "cond1")
    removed = [s for s in first["shadowed_seqs"] if s not in first["restored_seqs"]]
    assert sorted(result.origins[s]["id"] for s in removed) == ["a1", "a3", "o1", "o3"]
    if tombstones:
        assert first["tombstones"] == 1 and first["copies"] == 0
    else:
        assert first["tombstones"] == 0 and first["copies"] == 1  # m2 re-appended
    second = next(c for c in result.compactions if c["compaction_id"] == "cond2")
    # An insertion hides nothing a tool wrote: only a tombstone it swallows goes for good.
    gone = set(second["shadowed_seqs"]) - set(second["restored_seqs"])
    assert all(result.events[s]["data"]["message"]["source"]["model"] == "tombstone"
               for s in gone)
    assert len(gone) == (1 if tombstones else 0)
    assert {n.code for n in result.notes} >= {"naive-timestamp", "leaf-choice",
                                              "system-prompt-not-on-surface"}
    surface = surface_df(result.session())
    assert not surface["message_id"].str.startswith("tombstone:").any()
    assert list(surface["message_id"]) == final_view(result)


def test_a_contiguous_condensation_is_one_replace(tmp_path: Path) -> None:
    events = [*_events()[:9], {"kind": "Condensation", "id": "c", "source": "environment",
                               "forgotten_event_ids": ["m1", "a1", "o1", "a2", "o2"],
                               "summary": "S", "summary_offset": 1,
                               "timestamp": T0.format(40)}]
    result = import_openhands(build(tmp_path / "conv", events))
    [row] = result.compactions
    assert (row["replaces"], row["copies"], row["tombstones"]) == (1, 0, 0)
    assert shadowed_ids(result, "c") == ["m1", "a1", "o1", "a2", "o2"]
    assert view_after(result, "c") == ["c-summary", "a3", "o3", "m2"]


def test_problems_are_reported_not_fatal(tmp_path: Path) -> None:
    events = [*_events()[:4], {"kind": "Condensation", "id": "c", "source": "environment",
                               "forgotten_event_ids": ["nope"], "summary": "S",
                               "summary_offset": 99, "timestamp": T0.format(5)}]
    folder = build(tmp_path / "conv", events)
    (folder / "events" / "event-00009-broken.json").write_text("{not json")
    result = import_openhands(folder)
    assert {p.code for p in result.problems} >= {"forgotten-id-unknown",
                                                 "summary-offset-past-end", "line-unparsable"}
    check_invariants(result)


def test_convert_and_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = build(tmp_path / "conv")
    out = tmp_path / "oh.jsonl"
    assert main(["convert", "--from", "openhands", str(folder), "-o", str(out)]) == 0
    assert main(["validate", str(out)]) == 0
    capsys.readouterr()
    assert main(["validate", str(folder)]) == 0  # imported on the fly, as the audit does
    err = capsys.readouterr().err
    assert f"{folder}: valid: 49 events" in err and "imported from openhands" in err
