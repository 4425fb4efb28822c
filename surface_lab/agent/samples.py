"""The sample logs of `sample_logs/`, each written by the agent loop through `Session` and
the stores, and the large synthetic session for benchmarks (`surface-lab generate`)."""

from __future__ import annotations

import contextlib
import random
import sqlite3
from collections.abc import Callable, Iterator
from itertools import count
from pathlib import Path
from typing import Any

from ..analysis.compaction import (
    CompactionPolicy,
    Compactor,
    ExtractiveSummarizer,
    ToolResultPruner,
)
from ..errors import StorageError
from ..events import Event
from ..session import Session
from ..storage.jsonl import JsonlStore, dumps_header, dumps_record, encode_events
from ..storage.sqlite import SqliteStore
from .loop import AgentLoop, SimulatedCrash
from .script import Call, Reply, Turn
from .tools import Workspace

__all__ = ["SAMPLES", "generate_corpus", "generate_large", "generate_samples",
           "sample_session"]

EPOCH_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
FILES = {
    "README.md": "# tour\nA tiny project used by the sample sessions.\n",
    "a.txt": "alpha\n",
    "b.txt": "bravo\n",
    "src/app.py": "".join(f"def handler_{i}(request):\n    return {i}\n" for i in range(40)),
    "logs/build.log": "".join(f"[{i:05d}] step {i}: compiled module_{i}.o in {i % 97} ms\n"
                              for i in range(700)),
}


def _ticks() -> Callable[[], int]:
    ticks: Iterator[int] = count(EPOCH_MS, 23)
    return lambda: next(ticks)


def new_session(session_id: str) -> Session:
    header = {"version": 0, "id": session_id, "createdAt": EPOCH_MS,
              "cwd": f"/work/{session_id}", "delegationDepth": 0}
    return Session(session_id, header=header, clock=_ticks())


def _loop(session_id: str, **options: Any) -> AgentLoop:
    return AgentLoop(new_session(session_id), workspace=Workspace(FILES), **options)


def _say(text: str, reasoning: str = "") -> Reply:
    return Reply(text=text, reasoning=reasoning)


def chat() -> Session:
    loop = _loop("chat")
    loop.run([
        Turn("What is a surface?", (_say(
            "The surface is the ordered list of events the model sees as messages.",
            "The user asks a definition question. Answer in one sentence."),)),
        Turn("And what is shadowed?", (_say(
            "An entry removed from the surface by a replace; it stays in the log."),)),
    ])
    return loop.session


def tools_parallel() -> Session:
    loop = _loop("tools-parallel")
    loop.run([
        Turn("Read a.txt and b.txt, then tell me both words.", (
            Reply(reasoning="Read both files at once.",
                  calls=(Call("read", {"path": "a.txt"}), Call("read", {"path": "b.txt"}))),
            _say("The files say alpha and bravo."))),
        Turn("Now run `cat missing.txt`.", (
            Reply(calls=(Call("run", {"command": "cat missing.txt"}),)),
            _say("That file does not exist: the command failed with exit code 1."))),
    ])
    return loop.session


def _question(i: int) -> Turn:
    path = ["src/app.py", "a.txt", "README.md", "b.txt"][i % 4]
    return Turn(
        f"Question {i}: what is in {path}? Quote the first line and count the lines.",
        (Reply(text=f"Let me read {path} for question {i}.",
               calls=(Call("read", {"path": path}), Call("run", {"command": f"wc -l {path}"}))),
         _say(f"Answer {i}: {path} starts as quoted above; the line count is in the tool "
              f"output. Anything else on question {i}?")),
        context=f"<workspace>cwd=/work/long-compaction files={len(FILES)} turn={i}"
                f"</workspace>" if i % 3 == 0 else None)


def long_compaction() -> Session:
    compactor = Compactor(CompactionPolicy(budget_tokens=900, keep_tail_tokens=300),
                          ExtractiveSummarizer(fail_calls=frozenset({3})))
    loop = _loop("long-compaction", compactor=compactor)
    loop.run([_question(i) for i in range(1, 15)])
    return loop.session


def pruned_tool_results() -> Session:
    loop = _loop("pruned-tool-results", pruner=ToolResultPruner())
    loop.run([
        Turn("Show me the build log.", (
            Reply(calls=(Call("read", {"path": "logs/build.log"}),)),
            _say("The build compiled 700 modules."))),
        Turn("Grep it for module_42.", (
            Reply(calls=(Call("run", {"command": "grep module_42 logs/build.log"}),)),
            _say("module_42 compiled in 42 ms."))),
    ])
    return loop.session


def crash_needs_repair() -> Session:
    loop = _loop("crash-needs-repair")
    loop.run_turn(Turn("Say hi.", (_say("Hi."),)))
    with contextlib.suppress(SimulatedCrash):  # the crash is the point of this sample
        loop.run_turn(Turn("Write done.txt.", (
            Reply(calls=(Call("write", {"path": "done.txt", "content": "done"}),)),)),
            crash_at="after-tool-call")
    return loop.session


def cancelled_turn() -> Session:
    loop = _loop("cancelled-turn")
    loop.run([
        Turn("Tell me a long story.", (Reply(
            text="Once upon a time there was a log that never forgot anything at all.",
            cancel_after=6),)),
        Turn("Never mind. Just say ok.", (_say("OK."),)),
    ])
    return loop.session


def max_tokens() -> Session:
    loop = _loop("max-tokens")
    loop.run([
        Turn("Explain compaction, then read a.txt.", (Reply(
            text="Compaction replaces a balanced run of the surface with a summary.",
            calls=(Call("read", {"path": "a.txt"}),), finish="max-tokens"),)),
        Turn("Continue.", (Reply(calls=(Call("read", {"path": "a.txt"}),)),
                           _say("a.txt says alpha."))),
    ])
    return loop.session


def empty_response_retry() -> Session:
    loop = _loop("empty-response-retry")
    loop.run([
        Turn("Say hello.", (Reply(empty=True), Reply(text="Hel", fail_after=3),
                            _say("Hello."))),
    ])
    return loop.session


def legacy_linear() -> list[Event]:
    """The chat sample as a pre-surface writer would have logged it: no markers."""
    return [{k: v for k, v in e.items() if k not in ("surfaceOp", "sourceEventSeqs")}
            for e in chat().events]


SAMPLES: dict[str, tuple[Callable[[], Session], str]] = {
    "chat": (chat, "a plain two-turn chat with reasoning: every message is appended"),
    "tools-parallel": (tools_parallel, "two parallel tool calls answered in model order, "
                       "each result citing its tool/call; then a failing command"),
    "long-compaction": (long_compaction, "fourteen tool-using turns with seven compactions "
                        "of the oldest balanced run, each later summary shadowing the one "
                        "before; one summary fails (start, then end with an error)"),
    "pruned-tool-results": (pruned_tool_results, "a 30 KB tool result rewritten to head + "
                            "marker + tail by a content-only tool/result replace"),
    "crash-needs-repair": (crash_needs_repair, "the process died after a tool/call: an open "
                           "turn that `surface-lab repair` closes (outcome unknown)"),
    "cancelled-turn": (cancelled_turn, "the user cancelled mid-stream: the partial message "
                       "is committed with interrupted: true and the turn ends aborted"),
    "max-tokens": (max_tokens, "a step hit max-tokens: the unfinished tool call is dropped, "
                   "the turn ends max-tokens and the next turn continues"),
    "empty-response-retry": (empty_response_retry, "an empty response and a broken stream "
                             "are retried; their chunks are never cited"),
}

INVALID = {
    "invalid-surface.jsonl": ("replace-sources-incomplete", "the compaction replacement no "
                              "longer cites one entry it shadows (CorruptLogError)"),
    "invalid-message.jsonl": ("tool-call-id-mismatch", "a tool result answers a call id "
                              "other than its source's (CorruptLogError)"),
    "invalid-corrupt-line.jsonl": ("line-unparsable", "a damaged line followed by a "
                                   "turn/end: corruption, not a crash tail (CorruptLogError)"),
    "invalid-crash-tail.jsonl": ("seq-gap", "a line with a skipped seq at the end: a crash "
                                 "tail that repair would drop"),
    "invalid-format-version.jsonl": ("format-unsupported", "a header written by a newer "
                                     "format version (UnsupportedFormatError)"),
    "invalid-schema.db": ("schema-unsupported", "a SQLite database at schema version 3 "
                          "(UnsupportedFormatError)"),
}


def _write_jsonl(path: Path, session_id: str, header: Any, events: Any) -> None:
    store = JsonlStore.for_file(path)
    store.create(header)
    store.append(session_id, events)


def _damaged(events: list[Event], damage: Callable[[list[dict[str, Any]]], None]) -> bytes:
    plain = [dict(e) for e in events]
    damage(plain)
    return encode_events(plain)


def _drop_a_shadowed_source(events: list[dict[str, Any]]) -> None:
    i = next(i for i, e in enumerate(events) if isinstance(e.get("surfaceOp"), dict))
    events[i] = {**events[i], "sourceEventSeqs": events[i]["sourceEventSeqs"][:-1]}


def _mismatch_call_id(events: list[dict[str, Any]]) -> None:
    i = next(i for i, e in enumerate(events) if e["type"] == "tool/result")
    data = events[i]["data"]
    block = {**data["message"]["content"][0], "toolCallId": "call_9999"}
    events[i] = {**events[i], "data": {**data, "message": {**data["message"],
                                                           "content": [block]}}}


def sample_file_names() -> list[str]:
    """The names `generate_samples` writes, in the order it writes them."""
    return [*(f"{name}.jsonl" for name in SAMPLES), "legacy-linear.jsonl", "sessions.db",
            *INVALID, "README.md"]


def generate_samples(out: str | Path, *, overwrite: bool = True) -> list[Path]:
    """Write every sample log, the SQLite database, the invalid logs and the README into
    `out` (created if needed).

    Args:
        out: the folder.
        overwrite: replace existing files of the same names; when False, refuse before
            writing anything if one exists.

    Raises:
        StorageError: `overwrite` is False and `out` already holds one of the names.
    """
    out = Path(out)
    if not overwrite:
        taken = [name for name in sample_file_names() if (out / name).exists()
                 or (out / name).is_symlink()]
        if taken:
            listed = ", ".join(taken[:3]) + (f" and {len(taken) - 3} more" if len(taken) > 3
                                             else "")
            raise StorageError(f"{out}: already holds {listed}; nothing written "
                               f"(overwrite=True replaces them)", code="target-exists",
                               path=str(out),
                               argument="overwrite")
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    sessions = {name: build() for name, (build, _) in SAMPLES.items()}

    def target(name: str) -> Path:
        path = out / name
        path.unlink(missing_ok=True)
        written.append(path)
        return path

    for name, session in sessions.items():
        _write_jsonl(target(f"{name}.jsonl"), session.id, session.header, session.events)
    legacy = new_session("legacy-linear")
    legacy_path = target("legacy-linear.jsonl")
    legacy_path.write_bytes(dumps_header(legacy.header) + encode_events(legacy_linear()))
    db_path = target("sessions.db")
    with SqliteStore(db_path) as db:
        for name in ("chat", "tools-parallel", "max-tokens"):
            db.create(sessions[name].header)
            db.append(name, sessions[name].events)
    # One deliberately invalid log per main error class, each damaged on purpose.
    long_log, tools_log = sessions["long-compaction"], sessions["tools-parallel"]
    header = dumps_header(long_log.header)
    target("invalid-surface.jsonl").write_bytes(
        header + _damaged(list(long_log.events), _drop_a_shadowed_source))
    target("invalid-message.jsonl").write_bytes(
        dumps_header(tools_log.header) + _damaged(list(tools_log.events), _mismatch_call_id))
    chat_lines = encode_events(sessions["chat"].events).splitlines(keepends=True)
    target("invalid-corrupt-line.jsonl").write_bytes(
        dumps_header(sessions["chat"].header) + b"".join(chat_lines[:3])
        + chat_lines[3][: len(chat_lines[3]) // 2] + b"\n" + b"".join(chat_lines[4:]))
    target("invalid-crash-tail.jsonl").write_bytes(
        dumps_header(sessions["chat"].header) + b"".join(chat_lines)
        + dumps_record({"type": "turn/start", "seq": len(sessions["chat"].events) + 1,
                        "time": EPOCH_MS, "data": {"turn": 3}}))
    target("invalid-format-version.jsonl").write_bytes(
        dumps_record({"type": "session", "version": 1, "id": "from-the-future",
                      "createdAt": EPOCH_MS, "delegationDepth": 0}))
    schema_db = sqlite3.connect(target("invalid-schema.db"))
    schema_db.executescript("CREATE TABLE sessions (id TEXT PRIMARY KEY) STRICT;"
                            "PRAGMA user_version = 3;")
    schema_db.execute("PRAGMA application_id = 1397506370")
    schema_db.commit()
    schema_db.close()
    readme = target("README.md")
    readme.write_text(_readme())
    return written


def _readme() -> str:
    lines = ["# Sample logs", "",
             "Written by `surface-lab generate sample_logs` (the agent loop through `Session`",
             "and the stores); a test checks that regenerating reproduces them.", ""]
    lines += [f"- `{name}.jsonl`: {text}." for name, (_, text) in SAMPLES.items()]
    lines += ["- `legacy-linear.jsonl`: the chat without surface markers, as a pre-surface "
              "writer logged it: read with the linear fallback (a note, not an error).",
              "- `sessions.db`: one SQLite database holding the chat, tools-parallel and "
              "max-tokens sessions (pick one with `--session`).", "",
              "Deliberately invalid, each failing `surface-lab validate` with the code named:",
              ""]
    lines += [f"- `{name}`: fails with `{code}`: {text}." for name, (code, text)
              in INVALID.items()]
    return "\n".join(lines) + "\n"


def sample_session(name: str) -> Session:
    """A sample session, built in memory."""
    return SAMPLES[name][0]()


# -- the large synthetic session ---------------------------------------------------------


def _large_turn(rng: random.Random, i: int) -> Turn:
    words = ("the", "surface", "model", "sees", "only", "what", "the", "log", "replays",
             "exactly", "as", "recorded")

    def sentence(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n)).capitalize() + "."

    replies: list[Reply] = []
    for _ in range(rng.randint(0, 3)):
        calls = tuple(
            rng.choice([Call("read", {"path": rng.choice(list(FILES))}),
                        Call("run", {"command": f"grep module_{rng.randint(0, 699)} "
                                                f"logs/build.log"}),
                        Call("run", {"command": "ls"})])
            for _ in range(rng.randint(1, 3)))
        replies.append(Reply(text=sentence(rng.randint(5, 20)),
                             reasoning=sentence(rng.randint(10, 40)), calls=calls))
    replies.append(Reply(text=sentence(rng.randint(20, 90)),
                         reasoning=sentence(rng.randint(10, 60))))
    return Turn(f"Task {i}: {sentence(rng.randint(5, 25))}", tuple(replies))


def generate_large(path: str | Path, events: int, *, seed: int = 7) -> tuple[Path, int]:
    """Write one synthetic session of about `events` events: many chunks per message,
    tool calls, big tool results pruned, and periodic compactions. Returns the path and
    the number of events written."""
    path = Path(path)
    path.unlink(missing_ok=True)
    rng = random.Random(seed)
    loop = AgentLoop(new_session(f"large-{events}"), workspace=Workspace(FILES),
                     pruner=ToolResultPruner(threshold=8192),
                     compactor=Compactor(CompactionPolicy(budget_tokens=12000,
                                                          keep_tail_tokens=3000)))
    i = 0
    while loop.session.seq < events:
        i += 1
        loop.run_turn(_large_turn(rng, i))
    _write_jsonl(path, loop.session.id, loop.session.header, loop.session.events)
    return path, len(loop.session.events)


def generate_corpus(out: str | Path, sessions: int, *, seed: int = 11,
                    days: int = 3) -> list[Path]:
    """Write `sessions` small sessions (about 500 events each, compactions and prunes
    included) spread over `days` UTC dates, as one JSONL file each, for corpus tests and
    the corpus benchmark."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    written = []
    for n in range(sessions):
        session_id = f"corpus-{n:05d}"
        created = EPOCH_MS + (n % days) * 86_400_000 + n * 1000
        ticks: Iterator[int] = count(created, 23)
        header = {"version": 0, "id": session_id, "createdAt": created,
                  "cwd": f"/work/{session_id}", "delegationDepth": 0}
        loop = AgentLoop(Session(session_id, header=header,
                                 clock=lambda t=ticks: next(t)),  # type: ignore[misc]
                         workspace=Workspace(FILES), pruner=ToolResultPruner(),
                         compactor=Compactor(CompactionPolicy(budget_tokens=3000,
                                                              keep_tail_tokens=800)))
        for i in range(rng.randint(2, 5)):
            loop.run_turn(_large_turn(rng, i + 1))
        path = out / f"{session_id}.jsonl"
        path.unlink(missing_ok=True)
        _write_jsonl(path, session_id, loop.session.header, loop.session.events)
        written.append(path)
    return written
