"""Build the labelling packet for facts at risk and evidence of loss (issue 26, point 3a).

Reads the shared real logs (recorded compactions first, then policy replays of `Compact`,
`Prune` and `MaskObservations` over their real content) and writes, deterministically:

    packet/INDEX.md          the replaces in reading order, with their sizes
    packet/<replace-id>.md   one page per replace: hidden items, the surface after, the
                             actions after
    packet/items.jsonl       every replace, hidden item, kept entry and action, with ids

It never runs the fact or evidence rules: the packet is labelled by annotators who see only
this material and GUIDELINES.md.

    python tests/data/facts_eval/build_packet.py            # (re)write packet/
    python tests/data/facts_eval/build_packet.py --check    # exit 1 if packet/ differs
    python tests/data/facts_eval/build_packet.py --set v3 [--check]   # packet_v3/, held out

Packet v2 (`packet/`) is the development set the rules are tuned on; packet v3
(`packet_v3/`) is held out: built from logs nobody tuned on (shared files not in v2 and
real logs fetched into `tests/data/heldout/`), with its INDEX.md split into two halves.

The shared folder is `$SURFACE_LAB_SHARED`, else `../shared` beside the repository.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))

from surface_lab.analysis.policies import (  # noqa: E402
    Compact,
    MaskObservations,
    Prune,
    history_removed,
    replay_policy,
)
from surface_lab.analysis.tokens import count_tokens  # noqa: E402
from surface_lab.importers import import_any  # noqa: E402
from surface_lab.messages import message_text  # noqa: E402
from surface_lab.session import Session  # noqa: E402
from surface_lab.storage.read import read_log  # noqa: E402

SHARED = Path(os.environ.get("SURFACE_LAB_SHARED", ROOT.parent / "shared"))
PACKET = HERE / "packet"

# A hidden item's text, head and tail around a marker: (most items in the replace, chars
# each), so that the few replaces hiding hundreds of entries stay readable in one sitting.
ITEM_CHARS = ((40, 1500), (120, 700), (10**9, 500))
EARLIER_SUMMARY_CHARS = 3000  # a hidden earlier summary carries many facts at once
PRUNED_ITEM_CHARS = 6000  # a pruned result: its middle is what was lost, so show more of it
MIN_HIDDEN_CHARS = 200   # a replay's rewrite of one result hiding less is not chosen
SUMMARY_CHARS = 16000    # the replacement itself: the "kept" judgement needs all of it
CALL_CHARS = 240         # the call named above a tool result
KEPT_CHARS = 400         # each other entry still on the surface
KEPT_SHOWN = 10          # kept entries shown on each side of the replacement
ACTION_CHARS = 700
RESULT_CHARS = 300       # the outcome shown under a tool-call action
ACTIONS = 15             # tool calls and user messages after the replace
ACTIONS_ALL = 22         # ... with assistant texts, at most this many actions in all
# A recorded compaction of a real session: the agent really lost the hidden entries, so its
# re-dos are real evidence and may come later; show more of what follows.
ACTIONS_RECORDED, ACTIONS_RECORDED_ALL = 40, 55

Event = Mapping[str, Any]


# ---------------------------------------------------------------------------- sources


@dataclass(frozen=True)
class Source:
    """One shared log: a short name used in ids, its path under the shared folder, its
    format, and whether its text is real or synthetic (per its SOURCES.md)."""

    name: str
    path: str
    fmt: str
    provenance: str
    root: str = "shared"  # "shared": under the shared folder; "repo": under the repository


CC = "agent_logs/claude_code/marot__spotter__test_fixtures_transcripts_"
OTHER = "real_logs/other/"
TRAJ = "agent_logs/trajectories/"
SOURCES = [
    Source("cc258", CC + "258c7280-ae70-4798-800f-63464d01a85d.jsonl", "claude-code", "real"),
    Source("cc846", CC + "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl", "claude-code", "real"),
    Source("cc846sub", CC + "8463c716-a2ea-4c14-9efa-87158ebd9f20_subagents_agent-a7be2f0.jsonl",
           "claude-code", "real"),
    Source("ccrewind", OTHER + "daaain__claude-code-log__test_test_data_dag_compact_after_"
           "rewind_preserved.jsonl", "claude-code", "synthetic text, real shapes"),
    Source("ccscout", OTHER + "meridianlabs-ai__inspect_scout__tests_sources_claude_code_source_"
           "fixtures_compaction_session.jsonl", "claude-code", "synthetic"),
    Source("codex", OTHER + "jazzyalex__agent-sessions__Resources_Fixtures_stage0_agents_codex_"
           "small.jsonl", "codex", "real, redacted ([trimmed for fixture])"),
    Source("pi", OTHER + "jazzyalex__agent-sessions__Resources_Fixtures_stage0_agents_pi_"
           "small.jsonl", "pi", "real tool output, toy content"),
    Source("atif", OTHER + "meridianlabs-ai__inspect_scout__tests_sources_atif_source_fixtures_"
           "terminus_2_hello-world-context-summarization-linear-history.trajectory.json",
           "atif", "harbor golden test output"),
    Source("atifcont", OTHER + "meridianlabs-ai__inspect_scout__tests_sources_atif_source_"
           "fixtures_terminus_2_hello-world-context-summarization-linear-history.trajectory."
           "cont-1.json", "atif", "harbor golden test output"),
    Source("swe1458", TRAJ + "SWE-agent__SWE-agent__pydicom__pydicom-1458.traj", "swe-agent",
           "real"),
    Source("mini13033", TRAJ + "gruckion__mini-swe-agent__astropy__astropy-13033.traj.json",
           "mini-swe-agent", "real"),
    Source("mini13236", TRAJ + "gruckion__mini-swe-agent__astropy__astropy-13236.traj.json",
           "mini-swe-agent", "real"),
    Source("mini13398", TRAJ + "gruckion__mini-swe-agent__astropy__astropy-13398.traj.json",
           "mini-swe-agent", "real"),
]

PolicyFactory = Callable[[], Any]
# (tag, description, policy factory, replaces kept of this replay)
REPLAYS: dict[str, list[tuple[str, str, PolicyFactory, int]]] = {
    "cc258": [
        ("compact60k", "Compact(budget_tokens=60000, keep_tail_tokens=15000)",
         lambda: Compact(60000, 15000), 2),
        ("compact15k", "Compact(budget_tokens=15000, keep_tail_tokens=4000)",
         lambda: Compact(15000, 4000), 2),
        ("prune8k", "Prune(threshold=8192, head=4096, tail=1024)", lambda: Prune(), 2),
        ("mask3", "MaskObservations(keep_last=3)", lambda: MaskObservations(3), 3),
    ],
    "cc846": [
        ("compact40k", "Compact(budget_tokens=40000, keep_tail_tokens=10000)",
         lambda: Compact(40000, 10000), 2),
        ("compact8k", "Compact(budget_tokens=8000, keep_tail_tokens=2000)",
         lambda: Compact(8000, 2000), 2),
        ("prune2k", "Prune(threshold=2048, head=1024, tail=256)",
         lambda: Prune(2048, 1024, 256), 2),
        ("mask10", "MaskObservations(keep_last=10)", lambda: MaskObservations(10), 3),
    ],
    "cc846sub": [
        ("compact6k", "Compact(budget_tokens=6000, keep_tail_tokens=2000)",
         lambda: Compact(6000, 2000), 1),
        ("mask3", "MaskObservations(keep_last=3)", lambda: MaskObservations(3), 1),
    ],
    "codex": [
        ("compact100", "Compact(budget_tokens=100, keep_tail_tokens=30)",
         lambda: Compact(100, 30), 2),
        ("mask3", "MaskObservations(keep_last=3)", lambda: MaskObservations(3), 1),
    ],
    # pi: no replay; its four messages (60 estimated tokens) are smaller than any summary,
    # so every compaction of them fails ("the summary is not smaller than the history").
    "atif": [
        ("compact300", "Compact(budget_tokens=300, keep_tail_tokens=100)",
         lambda: Compact(300, 100), 2),
    ],
    "atifcont": [
        ("compact300", "Compact(budget_tokens=300, keep_tail_tokens=100)",
         lambda: Compact(300, 100), 2),
    ],
    "swe1458": [
        ("compact4k", "Compact(budget_tokens=4000, keep_tail_tokens=1500)",
         lambda: Compact(4000, 1500), 2),
        ("mask3", "MaskObservations(keep_last=3)", lambda: MaskObservations(3), 2),
    ],
    "mini13033": [
        ("compact20k", "Compact(budget_tokens=20000, keep_tail_tokens=5000)",
         lambda: Compact(20000, 5000), 1),
        ("mask5", "MaskObservations(keep_last=5)", lambda: MaskObservations(5), 2),
    ],
    "mini13236": [
        ("compact8k", "Compact(budget_tokens=8000, keep_tail_tokens=3000)",
         lambda: Compact(8000, 3000), 2),
        ("prune2k", "Prune(threshold=2048, head=1024, tail=256)",
         lambda: Prune(2048, 1024, 256), 1),
    ],
    "mini13398": [
        ("compact30k", "Compact(budget_tokens=30000, keep_tail_tokens=8000)",
         lambda: Compact(30000, 8000), 1),
        ("mask3", "MaskObservations(keep_last=3)", lambda: MaskObservations(3), 2),
    ],
}




@dataclass(frozen=True)
class FitCompact:
    """`Compact` with budgets that fit the log: `budget` and `tail` are shares of the
    estimated tokens of every entry the log appends to its surface, rounded to 100 (so a
    held-out log gets budgets of its own size without anyone reading it first)."""

    budget: float
    tail: float

    def make(self, events: Sequence[Event]) -> tuple[str, Compact]:
        total = sum(count_tokens(e)[0] for e in events if e.get("surfaceOp") == "append")
        budget = max(100, round(total * self.budget / 100) * 100)
        tail = max(100, round(total * self.tail / 100) * 100)
        return (f"Compact(budget_tokens={budget}, keep_tail_tokens={tail}), fitted: "
                f"{self.budget:.0%} and {self.tail:.0%} of the log's {total} estimated "
                f"tokens", Compact(budget, tail))


# Packet v3: held out. Logs nobody tuned the rules on: shared files not in v2, and real
# logs fetched into tests/data/heldout/ (each with its row in that folder's SOURCES.md).
# Compactions get budgets fitted to each log (FitCompact), chosen before any was read.
HELDOUT = "tests/data/heldout/"
SOURCES_V3 = [
    Source("dsh", "real_logs/dsh/deepseek-ai__deepseek-harness__examples_headless-agent_tests_"
           "snapshots_compaction-recovery_session.jsonl", "deepseek-harness",
           "real runtime output (the reference harness's test snapshot), toy task"),
    Source("cc881", CC + "258c7280-ae70-4798-800f-63464d01a85d_subagents_agent-a881341.jsonl",
           "claude-code", "real"),
    Source("swefc", TRAJ + "SWE-agent__SWE-agent__function_calling_simple.traj", "swe-agent",
           "real (a SWE-agent demonstration)"),
    Source("minidj", HELDOUT + "mini-django-11099.traj.json", "mini-swe-agent", "real",
           root="repo"),
    Source("minipy", HELDOUT + "mini-pytest-dev__pytest-7521.traj.json", "mini-swe-agent",
           "real", root="repo"),
    Source("cc4d5", HELDOUT + "cc-4d5611e5-agent-a2898e3.prefix.jsonl", "claude-code",
           "real (a prefix: the first lines of the file)", root="repo"),
]
ReplaySpec = tuple[str, str, Any, int]  # (tag, description, factory or FitCompact, kept)
MINI_REPLAYS_V3: list[ReplaySpec] = [  # both mini-swe-agent trajectories alike
    ("compact50", "", FitCompact(0.5, 0.15), 2),
    ("compact25", "", FitCompact(0.25, 0.08), 2),
    ("prune2k", "Prune(threshold=2048, head=1024, tail=256)",
     lambda: Prune(2048, 1024, 256), 1),
    ("mask5", "MaskObservations(keep_last=5)", lambda: MaskObservations(5), 2),
]
REPLAYS_V3: dict[str, list[ReplaySpec]] = {
    "cc881": [
        ("compact50", "", FitCompact(0.5, 0.15), 1),
        ("prune8k", "Prune(threshold=8192, head=4096, tail=1024)", lambda: Prune(), 2),
        ("mask1", "MaskObservations(keep_last=1)", lambda: MaskObservations(1), 1),
    ],
    "swefc": [
        ("compact50", "", FitCompact(0.5, 0.15), 1),
        ("mask2", "MaskObservations(keep_last=2)", lambda: MaskObservations(2), 2),
    ],
    "minidj": MINI_REPLAYS_V3,
    "minipy": MINI_REPLAYS_V3,
    "cc4d5": [
        ("compact50", "", FitCompact(0.5, 0.15), 1),
        ("compact25", "", FitCompact(0.25, 0.08), 2),
        ("prune8k", "Prune(threshold=8192, head=4096, tail=1024)", lambda: Prune(), 1),
        ("mask5", "MaskObservations(keep_last=5)", lambda: MaskObservations(5), 2),
    ],
}


# Packet v3r: held out too, the recorded compactions of a real Claude Code session fetched
# into tests/data/heldout/ (the recorded agent really lost what they hid, so re-dos can
# happen: v3's replays cannot have them). Recorded replaces only, no replays.
SOURCES_V3R = [
    Source("cc4d5m", HELDOUT + "cc-4d5611e5.jsonl", "claude-code", "real", root="repo"),
]


# Packet v4: held out, to bring the held-out set past 40 replaces (issue 26 point 3a). Replays
# over the whole real session of v3r (its recorded compaction is v3r's; these replays cut it
# elsewhere, with budgets fitted to it) and over two more fetched mini-swe-agent
# trajectories. Chosen, like v3's, before any rule was run on these logs.
SOURCES_V4 = [
    Source("cc4d5w", HELDOUT + "cc-4d5611e5.jsonl", "claude-code", "real", root="repo"),
    Source("minisy", HELDOUT + "mini-sympy__sympy-13480.traj.json", "mini-swe-agent", "real",
           root="repo"),
    Source("minisk", HELDOUT + "mini-scikit-learn__scikit-learn-10844.traj.json",
           "mini-swe-agent", "real", root="repo"),
]
REPLAYS_V4: dict[str, list[ReplaySpec]] = {
    # 142k estimated tokens: small fitted budgets give replaces of a size one can label
    "cc4d5w": [
        ("compact5", "", FitCompact(0.05, 0.02), 3),
        ("compact10", "", FitCompact(0.10, 0.03), 2),
        ("prune8k", "Prune(threshold=8192, head=4096, tail=1024)", lambda: Prune(), 2),
        ("mask5", "MaskObservations(keep_last=5)", lambda: MaskObservations(5), 3),
    ],
    "minisy": MINI_REPLAYS_V3,
    "minisk": MINI_REPLAYS_V3,
}

@dataclass(frozen=True)
class PacketSet:
    """One packet: its sources and replays, where it is written, how many actions a page
    shows after a replace, whether INDEX.md splits it into two halves, whether it is held
    out (its labels then carry `key`), and whether its logs' recorded replaces are in it."""

    name: str
    sources: Sequence[Source]
    replays: Mapping[str, Sequence[Any]]
    out: Path
    actions: tuple[int, int, int, int] = (ACTIONS, ACTIONS_ALL, ACTIONS_RECORDED,
                                          ACTIONS_RECORDED_ALL)
    halves: bool = False
    held_out: bool = False  # its fact labels carry `key`; INDEX.md says it is held out
    recorded: bool = True  # its logs' recorded replaces are taken (v4: they are v3r's)


SETS = {
    "v2": PacketSet("v2", SOURCES, REPLAYS, PACKET),
    # v3 must be labelled twice in 35 minutes an annotator: fewer actions a replay page
    "v3": PacketSet("v3", SOURCES_V3, REPLAYS_V3, HERE / "packet_v3",
                    actions=(10, 14, 40, 55), halves=True, held_out=True),
    "v3r": PacketSet("v3r", SOURCES_V3R, {}, HERE / "packet_v3r", actions=(10, 14, 40, 55),
                     held_out=True),
    "v4": PacketSet("v4", SOURCES_V4, REPLAYS_V4, HERE / "packet_v4",
                    actions=(10, 14, 40, 55), halves=True, held_out=True, recorded=False),
}


class PacketError(Exception):
    """A source log that is missing or cannot be read: the packet is not written."""


# ------------------------------------------------------------------- loading the logs


@dataclass
class Loaded:
    """A log as events, with where each seq came from in the source file."""

    events: list[Event]
    where: dict[int, str] = field(default_factory=dict)


def source_path(source: Source) -> Path:
    """Where a source's file is: under the shared folder, or under the repository (the
    held-out logs fetched into `tests/data/heldout/`)."""
    return (ROOT if source.root == "repo" else SHARED) / source.path


def load(source: Source) -> Loaded:
    path = source_path(source)
    if not path.is_file():
        raise PacketError(f"{source.path}: the source log of {source.name!r} is missing "
                          f"(looked for {path})")
    if source.fmt in ("swe-agent", "mini-swe-agent"):
        return load_trajectory(path, source.fmt)
    if source.fmt == "deepseek-harness":  # the reference runtime's own JSONL: no importer
        reading = read_log(path)
        if not reading.valid:
            raise PacketError(f"{source.path}: not a valid log: "
                              + "; ".join(str(p.message) for p in reading.problems[:3]))
        events: list[Event] = [dict(e) for e in reading.events]
        lines = list(reading.lines)
        return Loaded(events, {i: f"line {lines[i]}" for i in range(min(len(lines),
                                                                         len(events)))})
    result = import_any(path)
    where = {}
    for seq, origin in result.origins.items():
        if "line" in origin:
            where[seq] = f"line {origin['line']}"
        elif origin:
            where[seq] = ", ".join(f"{k} {v}" for k, v in sorted(origin.items())
                                   if k not in ("file",))
    return Loaded(list(result.events), where)


BASH_BLOCK = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)  # mini-swe-agent's own


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # OpenAI-style content parts
        return "\n".join(str(p.get("text", "")) if isinstance(p, dict) else str(p)
                         for p in value)
    return "" if value is None else str(value)


def load_trajectory(path: Path, fmt: str) -> Loaded:
    """A SWE-agent `.traj` or mini-swe-agent `.traj.json` as surface events. No importer
    exists for these here: the system prompt and demonstrations become context messages,
    the first task message a user message, each assistant command a `bash` tool call
    and the observation after it its tool result; harness feedback after a reply without
    a command is a context message."""
    data = json.loads(path.read_bytes())
    messages = data["history"] if fmt == "swe-agent" else data["messages"]
    key = "history" if fmt == "swe-agent" else "messages"
    session = Session(path.stem, header={"version": 0, "id": path.stem, "createdAt": 0},
                      clock=lambda: 0)
    where: dict[int, str] = {}
    seen_task = False
    pending: str | None = None  # the call id waiting for its observation
    step = 0
    session.append("turn/start", {"turn": 1})
    for i, m in enumerate(messages):
        role, text = m.get("role"), _text(m.get("content"))
        mid = f"{key}[{i}]"
        if role == "assistant":
            if fmt == "swe-agent":
                command = str(m.get("action") or "").strip()
            else:
                found = BASH_BLOCK.findall(text)
                command = found[0].strip() if len(found) == 1 else ""
            step += 1
            session.append("step/start", {"turn": 1, "step": step})
            content: list[dict[str, Any]] = [{"type": "text", "text": text}]
            call_id = f"call-{i}"
            arguments = json.dumps({"command": command})
            if command:
                content.append({"type": "tool-call", "id": call_id, "name": "bash",
                                "arguments": arguments})
            e = session.append("assistant/message", {
                "turn": 1, "step": step,
                "message": {"id": mid, "role": "assistant", "content": content,
                            "source": {"kind": "model", "provider": fmt, "model": "recorded"}}},
                surface_op="append")
            where[e["seq"]] = mid
            if command:
                session.append("tool/call", {"turn": 1, "step": step, "callId": call_id,
                                             "name": "bash", "arguments": arguments})
                pending = call_id
            else:
                session.append("step/end", {"turn": 1, "step": step})
            continue
        if pending is not None and role in ("user", "tool"):
            e = session.append("tool/result", {
                "turn": 1, "step": step,
                "message": {"id": mid, "role": "user",
                            "content": [{"type": "tool-result", "toolCallId": pending,
                                         "content": [{"type": "text", "text": text}]}],
                            "source": {"kind": "tool", "callId": pending}}},
                surface_op="append")
            session.append("step/end", {"turn": 1, "step": step})
            pending = None
        elif role == "user" and not seen_task and not m.get("is_demo"):
            seen_task = True
            e = session.append("user/message", {
                "id": mid, "role": "user", "content": [{"type": "text", "text": text}],
                "source": {"kind": "user"}}, surface_op="append")
        else:
            what = "demonstration" if m.get("is_demo") else (
                "system prompt" if role == "system" else "harness message")
            e = session.append("context/message", {
                "id": mid, "role": "user", "content": [{"type": "text", "text": text}],
                "source": {"kind": "plugin", "plugin": what}}, surface_op="append")
        where[e["seq"]] = mid
    if pending is not None:
        session.append("step/end", {"turn": 1, "step": step})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    return Loaded(list(session.events), where)


def without_lost_results(events: Sequence[Event]) -> tuple[list[Event], dict[int, int], int]:
    """The events without tool calls whose results the log does not hold (their
    assistant blocks and `tool/call` events), so that `Compact` finds balanced cuts:
    one unanswered call leaves every later cut unbalanced. Seqs are renumbered.

    Returns:
        (events, new seq -> old seq, tool calls dropped)."""
    answered = {e["data"]["message"]["source"].get("callId")
                for e in events if e["type"] == "tool/result"}
    out: list[dict[str, Any]] = []
    old_of: dict[int, int] = {}
    dropped = 0
    for e in events:
        data = e.get("data")
        if e["type"] == "tool/call" and data["callId"] not in answered:
            continue
        row = dict(e)
        if e["type"] == "assistant/message":
            blocks = list(data["message"]["content"])
            kept = [b for b in blocks if b.get("type") != "tool-call" or b["id"] in answered]
            if len(kept) != len(blocks):
                dropped += len(blocks) - len(kept)
                if not kept:
                    continue
                row["data"] = {**data, "message": {**data["message"], "content": kept}}
        old_of[len(out)] = e["seq"]
        row["seq"] = len(out)
        out.append(row)
    new_of = {old: new for new, old in old_of.items()}
    for row in out:
        cited = row.get("sourceEventSeqs")
        if cited is not None:
            row["sourceEventSeqs"] = [new_of[s] for s in cited if s in new_of]
    return out, old_of, dropped


# -------------------------------------------------------------------------- replaces


@dataclass
class Replace:
    rid: str
    source: Source
    origin: str          # "recorded" or "replay"
    policy: str
    events: list[Event]
    seq: int             # the replacement event
    run: list[int]       # the shadowed seqs, in surface order
    after: list[int]     # the surface just after the replace
    where: dict[int, str]
    note: str = ""


def brackets(events: Sequence[Event]) -> list[tuple[int, int]]:
    """(compaction/start seq, compaction/end seq) of every closed compaction bracket."""
    open_at: dict[Any, int] = {}
    out = []
    for e in events:
        if e["type"] in ("compaction/start", "compaction/end"):
            cid = (e.get("data") or {}).get("compactionId")
            if e["type"] == "compaction/start":
                open_at[cid] = e["seq"]
            elif cid in open_at:
                out.append((open_at.pop(cid), e["seq"]))
    return out


def fold_replaces(events: Sequence[Event]) -> list[tuple[int, list[int], list[int]]]:
    """(replacement seq, shadowed run, surface after) of every replace, in log order. A
    replace inside a compaction bracket is followed by the entries the compaction
    re-appends (kept history, a hand-off exchange): the surface after is the one at the
    bracket's end."""
    ends = {s: e for s, e in brackets(events)}
    end_of = {seq: end for start, end in ends.items() for seq in range(start, end + 1)}
    nodes: list[int] = []
    found: list[tuple[int, list[int]]] = []
    at_end: dict[int, list[int]] = {}
    after_of: dict[int, list[int]] = {}
    for e in events:
        op = e.get("surfaceOp")
        if op == "append":
            nodes.append(e["seq"])
        elif isinstance(op, Mapping):
            i, j = nodes.index(op["start"]), nodes.index(op["end"])
            found.append((e["seq"], nodes[i : j + 1]))
            nodes[i : j + 1] = [e["seq"]]
            after_of[e["seq"]] = list(nodes)
        if e["seq"] in ends.values():
            at_end[e["seq"]] = list(nodes)
    out = []
    for seq, run in found:
        after = at_end.get(end_of.get(seq, -1))
        if after is None or seq not in after:  # no closed bracket: just after the replace
            after = after_of[seq]
        out.append((seq, run, after))
    return out


def in_brackets(events: Sequence[Event]) -> set[int]:
    """Seqs inside compaction brackets (trace, replacement, re-appended entries)."""
    return {seq for start, end in brackets(events) for seq in range(start, end + 1)}


def spread(n: int, k: int) -> list[int]:
    """k indices spread evenly over range(n): the middles of k equal parts (so the last
    replace of a log, with no actions after it, is rarely chosen)."""
    if n <= k:
        return list(range(n))
    return sorted({int((i + 0.5) * n / k) for i in range(k)})


def replay_where(original: Sequence[Event], where: Mapping[int, str],
                 replayed: Sequence[Event]) -> dict[int, str]:
    """Where each replayed event came from: the kept original events are copied in order;
    the replay adds compaction traces and replacements only."""
    kept = iter(history_removed(original))
    out = {}
    for e in replayed:
        if e["type"].startswith("compaction/") or isinstance(e.get("surfaceOp"), Mapping):
            continue
        src = next(kept)
        if src["seq"] in where:
            out[e["seq"]] = where[src["seq"]]
    return out


def collect(packet: PacketSet | None = None) -> list[Replace]:
    """Every replace of `packet` (v2 by default), in reading order."""
    packet = packet or SETS["v2"]
    out: list[Replace] = []
    for source in packet.sources:
        loaded = load(source)
        for seq, run, after in fold_replaces(loaded.events) if packet.recorded else ():
            out.append(Replace(f"{source.name}-rec-s{seq}", source, "recorded",
                               "recorded compaction", loaded.events, seq, run, after,
                               loaded.where))
        base, old_of, dropped = without_lost_results(loaded.events)
        base_where = {n: loaded.where[o] for n, o in old_of.items() if o in loaded.where}
        note = (f"{dropped} tool call(s) without a result in the imported log were left out "
                f"of the replay input, so that the compactor finds balanced cuts"
                if dropped else "")
        for tag, description, make, keep in packet.replays.get(source.name, []):
            if isinstance(make, FitCompact):
                description, policy = make.make(base)
            else:
                policy = make()
            session = replay_policy(base, policy)
            replayed = list(session.events)
            where = replay_where(base, base_where, replayed)
            found = fold_replaces(replayed)
            worth = [i for i, (_, run, _) in enumerate(found)
                     if len(run) > 1
                     or sum(len(item_text(replayed[s])) for s in run) >= MIN_HIDDEN_CHARS]
            for index in (worth[i] for i in spread(len(worth), keep)):
                seq, run, after = found[index]
                out.append(Replace(f"{source.name}-{tag}-s{seq}", source, "replay",
                                   f"{description} (replace {index + 1} of {len(found)})",
                                   replayed, seq, run, after, where, note))
    return out


# ------------------------------------------------------------------------- rendering


def shorten(text: str, limit: int) -> str:
    """Head and tail of `text` around a marker naming how much was left out."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters left out ...]\n{text[-tail:]}"


def fenced(text: str) -> str:
    """`text` in a code fence longer than any run of backticks inside it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def calls_of(events: Sequence[Event]) -> dict[str, Mapping[str, Any]]:
    """callId -> the tool/call data."""
    return {str(e["data"]["callId"]): e["data"] for e in events if e["type"] == "tool/call"}


def result_of(events: Sequence[Event]) -> dict[str, Event]:
    """callId -> its first tool/result event."""
    out: dict[str, Event] = {}
    for e in events:
        if e["type"] == "tool/result":
            out.setdefault(str(e["data"]["message"]["source"].get("callId")), e)
    return out


def is_error(event: Event) -> bool:
    data = event["data"]
    if data.get("error"):
        return True
    return any(b.get("isError") for b in data["message"]["content"]
               if b.get("type") == "tool-result")


def role_of(event: Event, replaces: set[int]) -> str:
    kind = event["type"]
    if kind == "tool/result":
        return "tool result"
    if kind == "assistant/message":
        return "assistant message"
    source = event["data"].get("source") or {}
    if event["seq"] in replaces or source.get("plugin") == "compact":
        return "earlier replacement (summary)"
    if kind == "context/message":
        return f"context message ({source.get('plugin', source.get('kind', '?'))})"
    return "user message"


def render_blocks(event: Event) -> str:
    """An assistant message, block by block: text, reasoning, tool calls with arguments."""
    parts = []
    for b in event["data"]["message"]["content"]:
        kind = b.get("type")
        if kind == "text":
            parts.append(str(b.get("text", "")))
        elif kind == "reasoning":
            parts.append(f"[reasoning] {b.get('text', '')}")
        elif kind == "tool-call":
            parts.append(f"[tool call {b.get('name')}] {b.get('arguments')}")
        else:
            parts.append(f"[{kind} block]")
    return "\n".join(parts)


def item_text(event: Event) -> str:
    if event["type"] == "assistant/message":
        return render_blocks(event)
    return message_text(event)


def tool_line(call: Mapping[str, Any] | None) -> str:
    if call is None:
        return "call: (not in the log)"
    return f"call: {call.get('name')} {call.get('arguments')}"


def describe(r: Replace, seq: int, limit: int, calls: Mapping[str, Mapping[str, Any]],
             replaces: set[int]) -> dict[str, Any]:
    event = r.events[seq]
    role = role_of(event, replaces)
    text = item_text(event)
    row: dict[str, Any] = {"seq": seq, "role": role, "chars": len(text),
                           "sha256": hashlib.sha256(text.encode()).hexdigest()[:16],
                           "where": r.where.get(seq, "")}
    head = ""
    if event["type"] == "tool/result":
        call_id = str(event["data"]["message"]["source"].get("callId"))
        call = calls.get(call_id)
        row["status"] = "error" if is_error(event) else "ok"
        row["tool"] = None if call is None else call.get("name")
        head = f"status: {row['status']}; {shorten(tool_line(call), CALL_CHARS)}\n"
    if event["type"] == "assistant/message":
        row["tool_calls"] = [b.get("name") for b in event["data"]["message"]["content"]
                             if b.get("type") == "tool-call"]
    row["shown"] = head + shorten(text, limit)
    return row


def actions_after(r: Replace, calls: Mapping[str, Mapping[str, Any]],
                  results: Mapping[str, Event],
                  limits: tuple[int, int, int, int] = (ACTIONS, ACTIONS_ALL, ACTIONS_RECORDED,
                                                       ACTIONS_RECORDED_ALL)
                  ) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    counted = 0
    most, most_all = limits[2:] if r.origin == "recorded" else limits[:2]
    asked_in = {str(b.get("id")): e["seq"] for e in r.events
                if e["type"] == "assistant/message"
                for b in e["data"]["message"]["content"] if b.get("type") == "tool-call"}
    inside = in_brackets(r.events)
    for e in r.events[r.seq + 1 :]:
        if counted >= most or len(out) >= most_all:
            break
        if e["seq"] in inside:  # the compaction's own re-appended entries, not actions
            continue
        kind = e["type"]
        where = r.where.get(e["seq"], "")
        if kind == "tool/call":  # a log-only event: where its assistant message came from
            where = r.where.get(asked_in.get(str(e["data"]["callId"]), -1), "")
        row: dict[str, Any] = {"id": f"{r.rid}:a{e['seq']}", "seq": e["seq"],
                               "where": where}
        if kind == "tool/call":
            data = e["data"]
            result = results.get(str(data["callId"]))
            outcome = "no result in the log" if result is None else (
                f"{'error' if is_error(result) else 'ok'} (seq {result['seq']}): "
                + shorten(message_text(result), RESULT_CHARS))
            arguments = shorten(str(data.get("arguments")), ACTION_CHARS)
            row |= {"kind": "tool call", "tool": data.get("name"),
                    "shown": f"{data.get('name')} {arguments}\n-> {outcome}"}
            counted += 1
        elif kind == "user/message" and e.get("surfaceOp") == "append" and \
                (e["data"].get("source") or {}).get("kind") == "user":
            row |= {"kind": "user message",
                    "shown": shorten(message_text(e), ACTION_CHARS)}
            counted += 1
        elif kind == "assistant/message" and e.get("surfaceOp") == "append":
            texts = [str(b.get("text", "")) for b in e["data"]["message"]["content"]
                     if b.get("type") == "text" and str(b.get("text", "")).strip()]
            if not texts:
                continue
            row |= {"kind": "assistant text", "shown": shorten("\n".join(texts), ACTION_CHARS)}
        else:
            continue
        out.append(row)
    return out


def kept_entries(r: Replace, calls: Mapping[str, Mapping[str, Any]],
                 replaces: set[int]) -> tuple[list[dict[str, Any]], int]:
    """The other entries on the surface just after the replace: all of them when few,
    else the KEPT_SHOWN nearest on each side of the replacement. Returns (rows, left out)."""
    at = r.after.index(r.seq)
    others = [(i, s) for i, s in enumerate(r.after) if s != r.seq]
    if len(others) > 2 * KEPT_SHOWN:
        others = [(i, s) for i, s in others if abs(i - at) <= KEPT_SHOWN]
    rows = []
    for i, s in others:
        row = describe(r, s, KEPT_CHARS, calls, replaces)
        row["position"] = "before" if i < at else "after"
        rows.append(row)
    return rows, len(r.after) - 1 - len(rows)


def halves(sizes: Sequence[int]) -> int:
    """Where to cut a list of page sizes into two contiguous halves of the most similar
    total: the index of the first page of the second half (ties: the earlier cut)."""
    total = sum(sizes)
    best, cut, first = total + 1, 0, 0
    for i in range(1, len(sizes)):
        first += sizes[i - 1]
        gap = abs(total - 2 * first)
        if gap < best:
            best, cut = gap, i
    return cut


def build(replaces: list[Replace], packet: PacketSet | None = None) -> dict[str, str]:
    """File name -> content of the whole packet."""
    packet = packet or SETS["v2"]
    files: dict[str, str] = {}
    lines: list[str] = []
    index_rows = []
    total_items = total_actions = 0
    shown = []
    for r in replaces:
        calls, results = calls_of(r.events), result_of(r.events)
        replace_seqs = {s for s, _, _ in fold_replaces(r.events)}
        limit = next(chars for most, chars in ITEM_CHARS if len(r.run) <= most)
        if r.policy.startswith("Prune("):
            limit = PRUNED_ITEM_CHARS
        hidden = [describe(r, s, EARLIER_SUMMARY_CHARS if s in replace_seqs else limit,
                           calls, replace_seqs) for s in r.run]
        summary = describe(r, r.seq, SUMMARY_CHARS, calls, replace_seqs)
        summary["role"] = "rewritten tool result" if r.events[r.seq]["type"] == "tool/result" \
            else "summary"
        kept, left_out = kept_entries(r, calls, replace_seqs)
        actions = actions_after(r, calls, results, packet.actions)
        shown.append((r, hidden, summary, kept, left_out, actions))
    # the labelling work of a page: one judgement per hidden item and per action
    cut = halves([len(h) + len(a) for _, h, _, _, _, a in shown]) if packet.halves else 0
    for number, (r, hidden, summary, kept, left_out, actions) in enumerate(shown):
        total_items += len(hidden)
        total_actions += len(actions)
        head = {"record": "replace", "replace": r.rid, "source": r.source.path,
                "format": r.source.fmt, "provenance": r.source.provenance,
                "origin": r.origin, "policy": r.policy, "replacement_seq": r.seq,
                "hidden": len(hidden), "kept": len(kept), "kept_left_out": left_out,
                "actions": len(actions), "note": r.note}
        if packet.held_out:  # its fact labels carry `key` (agreement.py asks)
            head |= {"packet": packet.name}
        if packet.halves:
            head |= {"half": 1 if number < cut else 2}
        lines.append(json.dumps(head, sort_keys=True))
        for h in hidden:
            lines.append(json.dumps({"record": "item", "id": f"{r.rid}:{h['seq']}",
                                     "replace": r.rid} |
                                    {k: v for k, v in h.items() if k != "shown"},
                                    sort_keys=True))
        lines.append(json.dumps({"record": "replacement", "replace": r.rid} |
                                {k: v for k, v in summary.items() if k != "shown"},
                                sort_keys=True))
        for k in kept:
            lines.append(json.dumps({"record": "kept", "replace": r.rid} |
                                    {x: v for x, v in k.items() if x != "shown"},
                                    sort_keys=True))
        for a in actions:
            lines.append(json.dumps({"record": "action", "replace": r.rid} |
                                    {k: v for k, v in a.items() if k != "shown"},
                                    sort_keys=True))
        files[f"{r.rid}.md"] = page(r, hidden, summary, kept, left_out, actions)
        half = (f"{1 if number < cut else 2} | ") if packet.halves else ""
        index_rows.append(f"| {half}[{r.rid}]({r.rid}.md) | {r.source.fmt} | {r.origin} | "
                          f"{r.policy} | {len(hidden)} | {len(actions)} |")
    files["items.jsonl"] = "\n".join(lines) + "\n"
    formats: dict[str, int] = {}
    for r in replaces:
        formats[r.source.fmt] = formats.get(r.source.fmt, 0) + 1
    totals = (f"{len(replaces)} replaces, {total_items} hidden items, {total_actions} actions; "
              "replaces per format: " + ", ".join(f"{k} {v}" for k, v in sorted(formats.items()))
              + ".")
    if not packet.held_out:
        files["INDEX.md"] = "\n".join([
            "# Labelling packet: facts at risk and evidence of loss",
            "",
            "Built by `tests/data/facts_eval/build_packet.py` from the shared logs; label it "
            "with `tests/data/facts_eval/GUIDELINES.md`. Read the pages in this order.",
            "",
            totals,
            "",
            "| replace | format | origin | policy | hidden items | actions |",
            "|---|---|---|---|---|---|",
            *index_rows,
            "",
        ])
        return files
    parts = [shown[:cut], shown[cut:]]
    sums = [f"half {n + 1}: {len(part)} replaces, {sum(len(x[1]) for x in part)} hidden "
            f"items, {sum(len(x[5]) for x in part)} actions" for n, part in enumerate(parts)]
    split = ["Two halves of similar size (hidden items plus actions), so that the labelling "
             "can be done in two sessions: " + "; ".join(sums) + ".", ""] if packet.halves else []
    files["INDEX.md"] = "\n".join([
        f"# Labelling packet {packet.name} (held out): facts at risk and evidence of loss",
        "",
        f"Built by `tests/data/facts_eval/build_packet.py --set {packet.name}` from logs "
        "the rules were never tuned on; label it with `tests/data/facts_eval/GUIDELINES.md` "
        f"(with the {packet.name} field `key`). Read the pages in this order.",
        "",
        totals,
        "",
        *split,
        "| half | replace | format | origin | policy | hidden items | actions |"
        if packet.halves else "| replace | format | origin | policy | hidden items | actions |",
        "|---|---|---|---|---|---|---|" if packet.halves else "|---|---|---|---|---|---|",
        *index_rows,
        "",
    ])
    return files


def page(r: Replace, hidden: Iterable[dict[str, Any]], summary: dict[str, Any],
         kept: list[dict[str, Any]], left_out: int, actions: list[dict[str, Any]]) -> str:
    out = [f"# Replace {r.rid}", "",
           f"- source: `{r.source.path}` (format {r.source.fmt}; {r.source.provenance})",
           f"- origin: {r.origin}; {r.policy}",
           f"- the replacement is seq {r.seq}; it hid {len(r.run)} surface entries"]
    if r.note:
        out.append(f"- replay input: {r.note}")
    out += ["", "## Hidden items", "",
            "Label every one (GUIDELINES.md, part A).", ""]
    for h in hidden:
        where = f", {h['where']}" if h["where"] else ""
        out += [f"### `{r.rid}:{h['seq']}` · {h['role']}{where} · {h['chars']} chars", "",
                fenced(h["shown"]), ""]
    out += ["## The surface after the replace", "",
            f"### the replacement, seq {r.seq} ({summary['role']}, {summary['chars']} chars)",
            "", fenced(summary["shown"]), ""]
    if kept:
        out += [f"### other entries still on the surface ({len(kept)} shown"
                + (f", {left_out} further from the replacement not shown" if left_out else "")
                + ")", ""]
        for k in kept:
            out += [f"- seq {k['seq']} · {k['role']} · {k['position']} the replacement", "",
                    fenced(k["shown"]), ""]
    else:
        out += ["Nothing else is on the surface.", ""]
    out += ["## Actions after the replace", "",
            "Label every one (GUIDELINES.md, part B).", ""]
    if not actions:
        out += ["The log ends here: no actions.", ""]
    for a in actions:
        where = f", {a['where']}" if a["where"] else ""
        out += [f"### `{a['id']}` · {a['kind']}{where}", "",
                fenced(a["shown"]), ""]
    return "\n".join(out)


def write(files: Mapping[str, str], target: Path) -> None:
    """Write the packet whole beside `target`, then swap it into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=".packet-", dir=target.parent))
    try:
        for name, text in files.items():
            (fresh / name).write_bytes(text.encode())  # bytes: log texts hold \r
        old = target.with_name(".packet-old")
        if old.exists():
            shutil.rmtree(old)
        if target.exists():
            target.rename(old)
        fresh.rename(target)
        if old.exists():
            shutil.rmtree(old)
    finally:
        if fresh.exists():
            shutil.rmtree(fresh)


def differences(files: Mapping[str, str], target: Path) -> list[str]:
    have = {p.name for p in target.glob("*")} if target.exists() else set()
    out = [f"missing {n}" for n in sorted(set(files) - have)]
    out += [f"extra {n}" for n in sorted(have - set(files))]
    out += [f"differs {n}" for n in sorted(set(files) & have)
            if (target / n).read_bytes() != files[n].encode()]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=sorted(SETS), default="v2",
                        help="which packet: v2 (the development set, default), or v3, "
                        "v3r, v4 (held out)")
    parser.add_argument("--check", action="store_true",
                        help="compare with the committed packet instead of writing it")
    parser.add_argument("--out", type=Path, help="where to write (default: the set's folder)")
    args = parser.parse_args(argv)
    packet = SETS[args.set]
    out = args.out or packet.out
    if not SHARED.is_dir():
        print(f"build_packet: the shared folder {SHARED} is missing (set SURFACE_LAB_SHARED)",
              file=sys.stderr)
        return 2
    try:
        files = build(collect(packet), packet)
    except PacketError as e:
        print(f"build_packet: {e}", file=sys.stderr)
        return 2
    if args.check:
        diff = differences(files, out)
        for line in diff:
            print(line)
        return 1 if diff else 0
    write(files, out)
    size = sum(len(t.encode()) for n, t in files.items() if n.endswith(".md"))
    print(f"wrote {len(files)} files to {out}: pages {size} bytes, "
          f"items.jsonl {len(files['items.jsonl'].encode())} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
