"""The surface (SPEC 4): one planner for every admission rule, full replay and the
incremental view.

`plan_event` checks a candidate and returns a frozen `Plan` without touching any state;
`apply_plan` is the only code that changes a node list. Live append, seeding, loading,
`fold_surface` and the replay stepper all go through these two functions. Steps 1 and 5
are also written for a run of events (`first_misplaced`, the table `SOURCE_RULES`), which
`plan_event` applies to one event and the fast reader to a stretch of appends.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from itertools import chain, islice
from typing import Any, Literal, NamedTuple, cast

from msgspec import Struct

from .errors import AdmissionError
from .events import (
    SURFACE_SET,
    Event,
    check_envelope,
    check_message_shape,
    fail,
    freeze_event,
    normalise_op,
)
from .jsonvalue import MAX_SAFE_INTEGER, as_int, json_equal
from .schema import SEQ, convert
from .views import ReadOnlySequence

__all__ = [
    "APPEND",
    "LOG_ONLY",
    "REPLACE",
    "SOURCE_RULES",
    "Citing",
    "FoldResult",
    "IncrementalSurface",
    "NodesView",
    "Plan",
    "PlanKind",
    "PlanList",
    "ReplaceOp",
    "Replacement",
    "SourceRule",
    "apply_plan",
    "check_sources",
    "check_sources_run",
    "first_misplaced",
    "fold_surface",
    "plan_event",
    "seq_is",
]

class PlanKind(IntEnum):
    """What a plan does with its event: nothing on the surface (`LOG_ONLY`), put it at the
    end (`APPEND`), or put it in the place of a run (`REPLACE`). A plan list keeps one
    byte a plan, these values."""

    LOG_ONLY = 0
    APPEND = 1
    REPLACE = 2


LOG_ONLY, APPEND, REPLACE = PlanKind.LOG_ONLY, PlanKind.APPEND, PlanKind.REPLACE

Lookup = Callable[[int], "Mapping[str, Any] | None"]


class ReplaceOp(Struct, forbid_unknown_fields=True, gc=False):
    """A replace's `surfaceOp` (SPEC 4.1 step 3): exactly these keys, both ends seqs.
    `plan_event` converts through it (integral floats as ints); the fast reader decodes
    every surface event's `surfaceOp` as `"append"` or this."""

    op: Literal["replace"]
    start: SEQ
    end: SEQ


class Plan(NamedTuple):
    """What admitting one event would do. `start_pos`/`end_pos` index the node list the
    plan was made against; `shadowed` are the seqs a replace removes, in surface order."""

    seq: int
    kind: int  # a PlanKind (a plain int where read back from a plan list's bytes)
    start_pos: int = -1
    end_pos: int = -1
    shadowed: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Replacement:
    """One committed replace: event `seq` took the place of `shadowed_seqs` (surface order),
    the run named by `start` .. `end`."""

    seq: int
    start: int
    end: int
    shadowed_seqs: list[int]

    @classmethod
    def of(cls, plan: Plan) -> Replacement:
        """The replacement a REPLACE plan commits."""
        shadowed = list(plan.shadowed)
        return cls(plan.seq, shadowed[0], shadowed[-1], shadowed)

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "start": self.start,
            "end": self.end,
            "shadowed_seqs": list(self.shadowed_seqs),
        }


@dataclass(slots=True)
class FoldResult:
    """The surface after replaying a log: fresh `nodes` and every replace in log order."""

    nodes: list[int] = field(default_factory=list)
    replacements: list[Replacement] = field(default_factory=list)

    @property
    def replace_generation(self) -> int:
        return len(self.replacements)


def _content_only(data: Any) -> Any:
    """The tool-result rewrite normalisation of SPEC 4.1 step 7 (None if `data` is not an
    object holding an object `message`)."""
    if not isinstance(data, Mapping) or not isinstance(data.get("message"), Mapping):
        return None
    message = data["message"]
    content = message.get("content")
    first = content[0] if isinstance(content, list) and content else {}
    if isinstance(first, Mapping):
        first = {**first, "content": None}
    return {**data, "message": {**message, "content": [first]}}


def _seqs(values: list[Any]) -> list[int] | None:
    """The values as seqs (safe integers >= 0, integral floats converted), or None if one
    is not. Plain integers, the usual case, are checked in bulk."""
    if set(map(type, values)) <= {int}:
        safe = not values or (min(values) >= 0 and max(values) <= MAX_SAFE_INTEGER)
        return list(values) if safe else None
    cited = [as_int(v) for v in values]
    return None if any(n is None or n < 0 for n in cited) else cast(list[int], cited)


def seq_is(value: Any, seq: int) -> bool:
    """SPEC 4.1 step 1: whether `value` is the integer `seq` (an integral float counts)."""
    return as_int(value) == seq


def first_misplaced(values: Sequence[Any], seqs: Sequence[int], *,
                    typed: bool = False) -> int | None:
    """Step 1 for a run of events: the index of the first of `values` that is not the
    seq beside it in `seqs` (`seq_is`), or None. `typed`: every value is known to be an
    int (a decoder typed them), so equal lists need no further look."""
    if values == seqs and (typed or set(map(type, values)) <= {int}):
        return None  # equal ints are the same seqs
    return next((i for i, (value, seq) in enumerate(zip(values, seqs, strict=True))
                 if not seq_is(value, seq)), None)


class Citing:
    """A run of surface events that carry `sourceEventSeqs`, in log order, for the rules
    of SPEC 4.1 step 5: their types, seqs and lists (`sources`).

    `above`: the seqs cited before the run rose to it (None if unknown or they fell).
    `typed`: every list is known to hold only seqs (a decoder typed them).
    """

    def __init__(self, kinds: Sequence[str], seqs: Sequence[int], sources: Sequence[Any], *,
                 above: int | None = None, typed: bool = False) -> None:
        self.kinds, self.seqs, self.sources = kinds, seqs, sources
        self.above, self.typed = above, typed
        self._cited: list[list[int] | None] | None = None
        self._flat: list[int] = []
        self._rising: bool | None = None

    @property
    def cited(self) -> list[list[int] | None]:
        """Each list as seqs (integral floats converted), None where one is not a seq."""
        if self._cited is None:
            self._cited = list(self.sources) if self.typed else [_seqs(s) for s in self.sources]
        return self._cited

    @property
    def rising(self) -> bool:
        """Whether the seqs cited rise through the run from above `above`: then each list
        holds distinct seqs and ends with its highest (the usual case, proved in one pass)."""
        if self._rising is None:
            self._rising = False
            if self.above is not None:
                flat = [self.above, *chain.from_iterable(cast(list[list[int]], self.cited))]
                self._flat, self._rising = flat, all(map(operator.lt, flat, islice(flat, 1, None)))
        return self._rising

    def last(self) -> int | None:
        """The highest seq cited so far, if `rising` (the next run's `above`)."""
        return self._flat[-1] if self.rising else None


@dataclass(frozen=True)
class SourceRule:
    """A rule of SPEC 4.1 step 5: `holds(run)` says every event of a `Citing` run keeps
    it, given that the rules before it hold for all; an event that does not gets `code`
    with `describe(kind, seq, sources)`."""

    code: str
    holds: Callable[[Citing], bool]
    describe: Callable[[str, int, Any], str]


def _first_invalid(kind: str, seq: int, sources: Any) -> str:
    i, value = next((i, v) for i, v in enumerate(sources) if (n := as_int(v)) is None or n < 0)
    return f"sourceEventSeqs[{i}] must be an integer seq >= 0, got {value!r}"


def _distinct(run: Citing) -> bool:
    return run.rising or all(len(set(c)) == len(c) for c in cast(list[list[int]], run.cited))


def _first_duplicate(kind: str, seq: int, sources: Any) -> str:
    cited = cast(list[int], _seqs(sources))
    dup = next(n for i, n in enumerate(cited) if n in cited[:i])
    return f"sourceEventSeqs cites {dup} more than once"


def _earlier(run: Citing) -> bool:
    cited = cast(list[list[int]], run.cited)
    if run.rising:  # each list ends with its highest
        return all(map(operator.lt, [c[-1] for c in cited if c],
                       [seq for seq, c in zip(run.seqs, cited, strict=True) if c]))
    return all(max(c) < seq for seq, c in zip(run.seqs, cited, strict=True) if c)


def _first_later(kind: str, seq: int, sources: Any) -> str:
    later = next(n for n in cast(list[int], _seqs(sources)) if n >= seq)
    return f"sourceEventSeqs cites {later}, not earlier than this event ({seq})"


# SPEC 4.1 step 5, in its order: the one definition, which `plan_event` applies to its
# event and the fast reader to a stretch of appends (`check_sources_run`).
SOURCE_RULES: tuple[SourceRule, ...] = (
    SourceRule("sources-not-array",
               lambda run: run.typed or all(isinstance(s, list) for s in run.sources),
               lambda kind, seq, sources:
               f"sourceEventSeqs must be an array of seqs, got {sources!r}"),
    SourceRule("sources-empty",
               lambda run: all(run.sources) or all(
                   kind == "assistant/message"
                   for kind, s in zip(run.kinds, run.sources, strict=True) if not s),
               lambda kind, seq, sources:
               "sourceEventSeqs is [] (only assistant/message may cite an empty stream); "
               "leave it out if the sources were not recorded"),
    SourceRule("sources-invalid-seq",
               lambda run: run.typed or all(c is not None for c in run.cited), _first_invalid),
    SourceRule("sources-duplicate", _distinct, _first_duplicate),
    SourceRule("sources-not-earlier", _earlier, _first_later),
)


def check_sources(kind: str, seq: int, sources: Any) -> list[int]:
    """SPEC 4.1 step 5 (`SOURCE_RULES`) for a surface event of type `kind` at `seq`
    whose `sourceEventSeqs` is `sources`: the seqs it cites.

    Raises:
        AdmissionError: `sources-not-array`, `sources-empty`, `sources-invalid-seq`,
            `sources-duplicate` or `sources-not-earlier`, the first that applies.
    """
    run = Citing([kind], [seq], [sources])
    for rule in SOURCE_RULES:
        if not rule.holds(run):
            fail(rule.code, {"type": kind, "seq": seq}, rule.describe(kind, seq, sources))
    return cast(list[int], run.cited[0])


def check_sources_run(kinds: Sequence[str], seqs: Sequence[int], sources: Sequence[Any],
                      *, above: int | None = -1, typed: bool = False) -> int | None:
    """Step 5 for a run of surface events in log order that carry `sourceEventSeqs`
    (see `Citing`): every rule of `SOURCE_RULES` over the whole run, else each event on
    its own (`check_sources`).

    Returns:
        The highest seq cited, to pass as `above` for the next run, or None (pass None)
        once the seqs cited stop rising.

    Raises:
        AdmissionError: for the first event that breaks a rule of step 5.
    """
    run = Citing(kinds, seqs, sources, above=above, typed=typed)
    if all(rule.holds(run) for rule in SOURCE_RULES):
        return run.last()
    for kind, seq, cited in zip(kinds, seqs, sources, strict=True):
        check_sources(kind, seq, cited)
    return None


def plan_event(
    nodes: Sequence[int],
    event: Mapping[str, Any],
    *,
    seq: int,
    lookup: Lookup,
    full: bool = True,
) -> Plan:
    """Check `event` as the one to get `seq` on top of `nodes`; change nothing.

    With `full`, the envelope (SPEC 1) and message shape (SPEC 5.1) are checked first;
    then the surface rules of SPEC 4.1 in their order, the first failure winning.
    `fold_surface` passes `full=False`: it checks only SPEC 4.

    Args:
        nodes: the current surface.
        event: the candidate; a mapping with on-disk keys.
        seq: the seq the event must carry.
        lookup: earlier event by seq (for the tool-result rewrite rule), None if unknown.
        full: also check the envelope and the message shape.

    Raises:
        AdmissionError: with the code of the first rule broken.
    """
    if full:
        check_envelope(event)
        check_message_shape(event)
    # 1. seq
    if not seq_is(event.get("seq"), seq):
        fail("seq-not-contiguous", event,
              f"seq must be {seq} (the next position in the log), got "
              f"{event.get('seq', '<missing>')!r}")
    # 2. log-only types
    kind = event.get("type")
    if not (isinstance(kind, str) and kind in SURFACE_SET):
        if "surfaceOp" in event:
            fail("surface-op-forbidden", event,
                  f"surfaceOp is only allowed on surface types, got {event['surfaceOp']!r}")
        if "sourceEventSeqs" in event:
            fail("sources-forbidden", event, "sourceEventSeqs is only allowed on surface types")
        return Plan(seq, LOG_ONLY)
    # 3. the surface marker
    if "surfaceOp" not in event:
        fail("surface-op-missing", event,
              'a surface event needs surfaceOp "append" or {op: "replace", start, end}')
    op = event["surfaceOp"]
    if op == "append" and isinstance(op, str):
        plan = Plan(seq, APPEND)
    elif isinstance(op, Mapping):
        if not convert(normalise_op(op), ReplaceOp):
            fail("replace-op-invalid", event,
                  f'surfaceOp must be exactly {{op: "replace", start, end}} with integer '
                  f"ends >= 0, got {dict(op)!r}")
        start, end = as_int(op["start"]), as_int(op["end"])
        # 4. endpoints, found by position in the current nodes
        try:
            start_pos = nodes.index(start)
        except ValueError:
            fail("replace-start-missing", event,
                  f"replace start {start} is not on the surface ({len(nodes)} entries)")
        try:
            end_pos = nodes.index(end)
        except ValueError:
            fail("replace-end-missing", event,
                  f"replace end {end} is not on the surface ({len(nodes)} entries)")
        if start_pos > end_pos:
            fail("replace-range-reversed", event,
                  f"replace start {start} is at surface position {start_pos}, after end {end} "
                  f"at position {end_pos}")
        plan = Plan(seq, REPLACE, start_pos, end_pos, tuple(nodes[start_pos : end_pos + 1]))
    else:
        fail("surface-op-invalid", event,
              f'surfaceOp must be "append" or a replace object, got {op!r}')
    # 5. provenance
    cited = check_sources(kind, seq, event["sourceEventSeqs"]) if "sourceEventSeqs" in event else []
    if plan.kind == APPEND:
        return plan
    # 6. a replace cites everything it shadows
    cited_set = set(cited)
    missing = [n for n in plan.shadowed if n not in cited_set]
    if missing:
        fail("replace-sources-incomplete", event,
              f"sourceEventSeqs must cite every shadowed seq; missing {missing}")
    # 7. a tool/result replace rewrites one tool/result's content only
    if kind == "tool/result":
        if len(plan.shadowed) != 1:
            fail("tool-result-rewrite-count", event,
                  f"a tool/result replace must shadow exactly one entry, not "
                  f"{len(plan.shadowed)} ({list(plan.shadowed)})")
        target = lookup(plan.shadowed[0])
        target_type = target.get("type") if target is not None else None
        if target is None or target_type != "tool/result":
            fail("tool-result-rewrite-target", event,
                  f"a tool/result replace must shadow a tool/result, but seq "
                  f"{plan.shadowed[0]} is {target_type or 'unknown'}")
        mine, theirs = _content_only(event.get("data")), _content_only(target.get("data"))
        if mine is None or theirs is None or not json_equal(mine, theirs):
            fail("tool-result-rewrite-fields", event,
                  f"a tool/result replace may change only the tool-result content; it differs "
                  f"from seq {plan.shadowed[0]} elsewhere (turn, step, error, meta, id, role, "
                  f"source, toolCallId or isError)")
    return plan


def apply_plan(nodes: list[int], plan: Plan) -> list[int]:
    """Apply a successful plan. An append extends `nodes` in place; a replace returns a
    new list, so views handed out earlier keep the surface they were taken from."""
    if plan.kind == APPEND:
        nodes.append(plan.seq)
        return nodes
    if plan.kind == REPLACE:
        return [*nodes[: plan.start_pos], plan.seq, *nodes[plan.end_pos + 1 :]]
    return nodes


class PlanList(ReadOnlySequence[Plan]):
    """The plan each event committed, made on demand from a kind per event (a byte) and
    the replaces whole: what every reader returns (`LogReading.plans`)."""

    _what = "plan"

    def __init__(self, kinds: bytearray, replaces: dict[int, Plan]) -> None:
        self.kinds = kinds
        self.replaces = replaces

    def __len__(self) -> int:
        return len(self.kinds)

    def add(self, plan: Plan) -> None:
        """Keep the plan of the next event."""
        self.kinds.append(plan.kind)
        if plan.kind == REPLACE:
            self.replaces[plan.seq] = plan

    def _item(self, seq: int) -> Plan:
        kind = self.kinds[seq]
        return self.replaces[seq] if kind == REPLACE else Plan(seq, kind)

    def fold(self) -> FoldResult:
        """The surface these plans build, applied in order (nothing is checked again)."""
        nodes: list[int] = []
        replacements: list[Replacement] = []
        for seq, kind in enumerate(self.kinds):
            if kind == APPEND:
                nodes.append(seq)
            elif kind == REPLACE:
                plan = self.replaces[seq]
                replacements.append(Replacement.of(plan))
                nodes = apply_plan(nodes, plan)
        return FoldResult(nodes, replacements)

    def prefix(self, n: int) -> PlanList:
        """The plans of the first `n` events."""
        return PlanList(self.kinds[:n], {s: p for s, p in self.replaces.items() if s < n})

    @classmethod
    def of(cls, plans: Sequence[Plan]) -> PlanList:
        return cls(bytearray(p.kind for p in plans),
                   {p.seq: p for p in plans if p.kind == REPLACE})


def _window_lookup(events: Sequence[Mapping[str, Any]], base: int) -> Lookup:
    def lookup(seq: int) -> Mapping[str, Any] | None:
        k = seq - base
        return events[k] if 0 <= k < len(events) else None

    return lookup


def fold_surface(events: Sequence[Mapping[str, Any]], *, base: int = 0,
                 plans: PlanList | None = None) -> FoldResult:
    """Replay a log (or a window of one starting at seq `base`) and return its surface.

    Only the surface rules of SPEC 4 are checked; the first violation raises. With
    `plans`, the plan of each event folded is added to it as it commits (so after a
    failure it holds those of the events before it).

    Raises:
        AdmissionError: with the code of the first rule broken.
    """
    if not isinstance(events, Sequence):
        events = list(events)
    lookup = _window_lookup(events, base)
    nodes: list[int] = []
    replacements: list[Replacement] = []
    for k, event in enumerate(events):
        if not isinstance(event, Mapping):
            raise AdmissionError(f"seq {base + k}: an event must be a JSON object",
                                 code="envelope-invalid", seq=base + k)
        plan = plan_event(nodes, event, seq=base + k, lookup=lookup, full=False)
        if plan.kind == REPLACE:
            replacements.append(Replacement.of(plan))
        nodes = apply_plan(nodes, plan)
        if plans is not None:
            plans.add(plan)
    return FoldResult(nodes, replacements)


class NodesView(ReadOnlySequence[int]):
    """A read-only snapshot of the surface nodes, made in O(1).

    It shares the manager's list: appends only extend that list past this view's length,
    and replaces build a new list, so the snapshot never changes.
    """

    __slots__ = ("_len", "_list")
    _what = "surface node"

    def __init__(self, nodes: list[int], length: int) -> None:
        self._list = nodes
        self._len = length

    def __len__(self) -> int:
        return self._len

    def _item(self, index: int) -> int:
        return self._list[index]

    def __iter__(self) -> Iterator[int]:
        return islice(self._list, self._len)

    def __repr__(self) -> str:
        return f"NodesView({list(self)})"


class IncrementalSurface:
    """The session's surface: one ordered `list[int]` of seqs and a replace generation.

    `check` plans a candidate without applying it; the owner commits that same plan with
    `_commit` after it has appended the event to the log, so nothing is checked twice.
    Reading `nodes` costs O(1); committing k events costs O(k) plus the splice of each
    replace.
    """

    __slots__ = ("_base", "_generation", "_log", "_nodes", "_plans", "_replacements", "_view")

    def __init__(self, log: Sequence[Event], *, base: int = 0) -> None:
        self._log = log
        self._base = base
        self._nodes: list[int] = []
        self._generation = 0
        self._replacements: list[Replacement] = []
        self._view: NodesView | None = None
        self._plans = PlanList(bytearray(), {})

    @property
    def plans(self) -> PlanList:
        """The plan each event of the log committed (a byte per event; the replaces
        whole), in log order. Read-only by contract."""
        return self._plans

    @property
    def nodes(self) -> NodesView:
        """The seqs the model sees, in order (a read-only snapshot)."""
        if self._view is None:
            self._view = NodesView(self._nodes, len(self._nodes))
        return self._view

    @property
    def replace_generation(self) -> int:
        """How many replaces have been committed."""
        return self._generation

    @property
    def replacements(self) -> tuple[Replacement, ...]:
        """Every committed replace in log order, as `fold_surface` reports them."""
        return tuple(self._replacements)

    def _lookup(self, seq: int) -> Event | None:
        k = seq - self._base
        return self._log[k] if 0 <= k < len(self._log) else None

    def check(self, event: Mapping[str, Any]) -> Plan:
        """Plan `event` as the next one of the log, with every rule; change nothing.

        Raises:
            AdmissionError: with the code of the first rule broken.
        """
        return plan_event(
            self._nodes,
            freeze_event(event),
            seq=self._base + len(self._log),
            lookup=self._lookup,
        )

    def _commit(self, plan: Plan) -> None:
        """Apply a plan from `check`, once its event is the last one of the log."""
        if plan.seq != self._base + len(self._log) - 1:
            raise RuntimeError(f"plan for seq {plan.seq} is stale; the log ends at "
                               f"{self._base + len(self._log) - 1}")
        self._plans.add(plan)
        if plan.kind == LOG_ONLY:
            return
        self._nodes = apply_plan(self._nodes, plan)
        self._view = None
        if plan.kind == REPLACE:
            self._generation += 1
            self._replacements.append(Replacement.of(plan))
