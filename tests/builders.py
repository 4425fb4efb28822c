"""Small builders for events and messages used across the tests."""

from __future__ import annotations

from typing import Any


def user_msg(mid: str = "u1", text: str = "hi") -> dict[str, Any]:
    return {"id": mid, "role": "user", "content": [{"type": "text", "text": text}],
            "source": {"kind": "user"}}


def assistant_data(mid: str = "a1", *, text: str = "ok", calls: tuple[str, ...] = (),
                   turn: int = 1, step: int = 1) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool-call", "id": c, "name": "read", "arguments": "{}"} for c in calls]
    return {"turn": turn, "step": step,
            "message": {"id": mid, "role": "assistant", "content": content,
                        "source": {"kind": "model", "provider": "p", "model": "m"}}}


def tool_data(call_id: str = "c1", text: str = "out", *, mid: str = "t1",
              turn: int = 1, step: int = 1) -> dict[str, Any]:
    return {"turn": turn, "step": step,
            "message": {"id": mid, "role": "user", "source": {"kind": "tool", "callId": call_id},
                        "content": [{"type": "tool-result", "toolCallId": call_id,
                                     "content": [{"type": "text", "text": text}]}]}}


def ev(seq: int, type: str, data: Any = None, *, op: Any = None, sources: Any = None,
       time: int = 0, **extra: Any) -> dict[str, Any]:
    """An event dict; `op="append"` or `op=(start, end)` for a replace."""
    event: dict[str, Any] = {"type": type, "seq": seq, "time": time,
                             "data": {} if data is None else data}
    if sources is not None:
        event["sourceEventSeqs"] = sources
    if op is not None:
        event["surfaceOp"] = (op if not isinstance(op, tuple)
                              else {"op": "replace", "start": op[0], "end": op[1]})
    event.update(extra)
    return event


def user(seq: int, mid: str | None = None, *, op: Any = "append", sources: Any = None,
         text: str = "hi") -> dict[str, Any]:
    return ev(seq, "user/message", user_msg(mid or f"u{seq}", text), op=op, sources=sources)


def replace(seq: int, start: int, end: int, sources: list[int],
            kind: str = "user/message") -> dict[str, Any]:
    data = user_msg(f"r{seq}", "summary") if kind == "user/message" else tool_data()
    return ev(seq, kind, data, op=(start, end), sources=sources)


def read_outcome(path: Any, check: str) -> tuple[str, Any]:
    """What `read_log(path, check=...)` gives, comparable across the two readers: the
    error's class, code, line and seq, or everything the reading holds (plans included)."""
    from surface_lab import read_log
    from surface_lab.errors import SurfaceLabError

    try:
        log = read_log(path, check=check)  # type: ignore[arg-type]
    except SurfaceLabError as err:
        return "error", (type(err).__name__, err.code, err.line, err.seq)
    return "read", (log.header, list(log.events), log.fold, log.closers, log.problems,
                    list(log.lines), log.form, log.mode, log.valid, list(log.plans or []))
