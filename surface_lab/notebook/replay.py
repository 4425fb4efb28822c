"""`Replay`: a pure stepper over a log, one event per step, testable without a kernel."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..analysis.source import LogData, load_source
from ..events import Event
from ..messages import project_message
from ..surface import APPEND, REPLACE, Plan, apply_plan

__all__ = ["Replay"]

CHECKPOINT_EVERY = 1024


class Replay:
    """Steps through a log. `seq` is the last applied event (-1 before the first); the
    surface and messages are those the model would see just after it.

    Each event's plan is computed once; stepping applies or undoes one plan, and a long
    seek restores the nearest checkpoint (every 1024 events) instead of refolding from
    the start.

    Args:
        source: anything `load_source` accepts (a path, a `read_log` result, a Session,
            a list of events, ...).
        strict: raise on a damaged log; otherwise replay the prefix that folds.
        progress: show a progress bar while a large file loads.
    """

    def __init__(self, source: Any, *, strict: bool = True, progress: bool = True) -> None:
        self.log: LogData = load_source(source, strict=strict, progress=progress)
        self._plans: Sequence[Plan] = self.log.plans
        self._nodes: list[int] = []
        self._seq = -1
        self._checkpoints: dict[int, list[int]] = {-1: []}
        nodes: list[int] = []
        for plan in self._plans:
            nodes = apply_plan(nodes, plan)
            if plan.seq % CHECKPOINT_EVERY == CHECKPOINT_EVERY - 1:
                self._checkpoints[plan.seq] = list(nodes)

    def __len__(self) -> int:
        return len(self._plans)

    @property
    def seq(self) -> int:
        """The last applied event's seq (-1 when nothing is applied)."""
        return self._seq

    @property
    def nodes(self) -> tuple[int, ...]:
        """The surface just after `seq`."""
        return tuple(self._nodes)

    @property
    def event(self) -> Event | None:
        return self.log.events[self._seq] if self._seq >= 0 else None

    @property
    def appended(self) -> int | None:
        """The seq this step put on the surface (itself, for appends and replaces)."""
        if self._seq < 0:
            return None
        return self._seq if self._plans[self._seq].kind in (APPEND, REPLACE) else None

    @property
    def shadowed(self) -> tuple[int, ...]:
        """The seqs this step's replace shadowed (empty for other steps)."""
        return self._plans[self._seq].shadowed if self._seq >= 0 else ()

    def messages(self) -> list[tuple[int, Any]]:
        """`(seq, message)` for each surface entry the model sees now."""
        out = []
        for seq in self._nodes:
            message = project_message(self.log.events[seq])
            if message is not None:
                out.append((seq, message))
        return out

    def _apply(self) -> None:
        self._seq += 1
        self._nodes = apply_plan(self._nodes, self._plans[self._seq])

    def _undo(self) -> None:
        plan = self._plans[self._seq]
        if plan.kind == APPEND:
            self._nodes = self._nodes[:-1]
        elif plan.kind == REPLACE:
            self._nodes = [*self._nodes[: plan.start_pos], *plan.shadowed,
                           *self._nodes[plan.start_pos + 1 :]]
        self._seq -= 1

    def seek(self, seq: int) -> Replay:
        """Go to just after event `seq` (-1: before the first event)."""
        if not -1 <= seq < len(self._plans):
            raise IndexError(f"seq {seq} is outside the log (-1..{len(self._plans) - 1})")
        distance = seq - self._seq
        if abs(distance) > CHECKPOINT_EVERY:
            base = max(k for k in self._checkpoints if k <= seq)
            self._seq, self._nodes = base, list(self._checkpoints[base])
        while self._seq < seq:
            self._apply()
        while self._seq > seq:
            self._undo()
        return self

    def step(self) -> Replay:
        """One event forward (stays at the end)."""
        return self.seek(min(self._seq + 1, len(self._plans) - 1))

    def back(self) -> Replay:
        """One event back (stays before the first)."""
        return self.seek(max(self._seq - 1, -1))

    def __repr__(self) -> str:
        return f"Replay(seq={self._seq} of {len(self._plans)}, nodes={len(self._nodes)})"
