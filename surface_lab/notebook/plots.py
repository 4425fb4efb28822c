"""Figures of a log: `plot_<thing>(source, *, ax=None, ...) -> Axes`. Colour-blind-safe
(Okabe-Ito, with hatching for shadowing), and built from a fixed number of collections so
that they stay fast, and their artist count flat, on logs of a million events."""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..analysis.brackets import Bracket, bracket_of, brackets
from ..analysis.source import LogData, load_source
from ..events import mapping_at, message_of
from ..messages import text_tokens

__all__ = ["OKABE_ITO", "figure_png", "plot_shadowing", "plot_surface_size",
           "plot_visibility"]

OKABE_ITO = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7",
             "#000000"]
GROUPS: list[tuple[str, str, tuple[str, ...]]] = [
    ("user", OKABE_ITO[4], ("user/message",)),
    ("context", OKABE_ITO[1], ("context/message",)),
    ("assistant", OKABE_ITO[2], ("assistant/message",)),
    ("tool result", OKABE_ITO[0], ("tool/result",)),
    ("tool call", OKABE_ITO[5], ("tool/call",)),
    ("compaction", OKABE_ITO[6], ("compaction/start", "compaction/summary", "compaction/end",
                                  "compaction/prune")),
    ("chunks", "#BBBBBB", ("assistant/chunk",)),
]
OTHER_COLOR = "#777777"
SHADOW_COLOR = "#555555"
RESTORED_COLOR = OKABE_ITO[1]
STATE_COLORS = ["#F2F2F2", OKABE_ITO[4], OKABE_ITO[6], "#9A9A9A"]


def _log(source: Any) -> LogData:
    return source if isinstance(source, LogData) else load_source(source)


def _axes(ax: Axes | None, size: tuple[float, float]) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    # constrained: legends outside the axes and the axis labels stay inside the figure
    return plt.figure(figsize=size, layout="constrained").add_subplot()


def _failed_seqs(log: LogData) -> list[int]:
    """The `compaction/end` events that carry an error: compactions that committed
    nothing."""
    return [seq for seq in log.seqs_of_type("compaction/end")
            if "error" in mapping_at(log.read(seq), "data")]


def _runs(seqs: Iterable[int]) -> list[tuple[float, float]]:
    """Contiguous runs of sorted seqs as (start, width)."""
    runs: list[tuple[float, float]] = []
    for s in sorted(seqs):
        if runs and runs[-1][0] + runs[-1][1] == s:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((s, 1))
    return runs


Rect = list[tuple[float, float]]


def _rects(runs: Sequence[tuple[float, float]], y: float, h: float) -> list[Rect]:
    return [[(x, y), (x + w, y), (x + w, y + h), (x, y + h)] for x, w in runs]


def _pack(spans: Sequence[tuple[int, int]], max_lanes: int) -> list[int]:
    """Lanes for spans (min, max) so that spans in one lane do not overlap."""
    ends: list[int] = []
    lanes = []
    for low, high in spans:
        lane = next((i for i, end in enumerate(ends) if end < low), None)
        if lane is None:
            lane = len(ends) if len(ends) < max_lanes else len(ends) - 1
            if lane == len(ends):
                ends.append(high)
        ends[lane] = max(ends[lane], high)
        lanes.append(lane)
    return lanes


def plot_shadowing(source: Any, *, ax: Axes | None = None, max_lanes: int = 40,
                   title: str | None = None) -> Axes:
    """The swimlane: lane 0 shows every event by type; below it each replace gets a lane
    (packed when they do not overlap) with its shadowed entries hatched over a grey span
    and an arrow to the replacing event.

    Args:
        source: anything `load_source` accepts.
        ax: the Axes to draw on (a new figure when None).
        max_lanes: at most this many replace lanes (later ones share the last lane).
        title: the title (default: session id and counts).

    Returns:
        The Axes drawn on.
    """
    log = _log(source)
    replaces = log.replaces
    traces = brackets(log)
    ax = _axes(ax, (11, 2.2 + 0.28 * min(len(replaces), max_lanes)))
    types = log.types
    known = {t for _, _, members in GROUPS for t in members}
    handles: list[Any] = []
    # Rare events stay visible on long logs: at least 1/600 of the axis wide.
    min_width = max(1.0, len(types) / 600)
    for label, color, members in [*GROUPS, ("other", OTHER_COLOR, ())]:
        member_set = set(members)
        seqs = [i for i, t in enumerate(types)
                if (t in member_set if members else t not in known)]
        if not seqs:
            continue
        runs = _runs(seqs)
        if label not in ("chunks", "other"):
            runs = [(x, max(w, min_width)) for x, w in runs]
        ax.add_collection(PolyCollection(_rects(runs, -0.4, 0.8), facecolors=color,
                                         edgecolors="none", label=label,
                                         zorder=1 if label in ("chunks", "other") else 2))
        handles.append(Patch(facecolor=color, label=label))
    failed = _failed_seqs(log)
    if failed:
        ax.scatter([s + 0.5 for s in failed], [0] * len(failed), marker="X", s=60,
                   color=OKABE_ITO[5], edgecolors="white", linewidths=0.6, zorder=5)
        handles.append(Line2D([], [], color=OKABE_ITO[5], marker="X", linestyle="none",
                              label=f"failed compaction ({len(failed)})"))
    # A lane per replace; past max_lanes, replaces share lanes where they do not overlap.
    spans = [(min(p.shadowed, default=p.seq), p.seq) for p in replaces]
    lanes = (list(range(len(replaces))) if len(replaces) <= max_lanes
        else _pack(spans, max_lanes))
    span_rects: list[Rect] = []
    removed_runs: list[Rect] = []  # runs of adjacent removed entries, one block each
    restored_runs: list[Rect] = []  # runs of entries the bracket copied back
    ticks: list[Rect] = []  # one line per removed entry, only where they stay apart
    restored_ticks: list[Rect] = []
    shafts: list[Rect] = []
    heads: list[tuple[float, float]] = []
    n_removed = n_restored = 0
    # an entry's own line only while lines stay further apart than about 3 pixels
    sparse_limit = max(len(types), 1) / 250
    for plan, lane, (low, _) in zip(replaces, lanes, spans, strict=True):
        y = lane + 1
        high = max(plan.shadowed, default=plan.seq - 1)
        bracket = bracket_of(traces, plan.seq)
        restored = bracket.restored if bracket is not None else frozenset()
        if plan.shadowed:
            span_rects += _rects([(low, high + 1 - low)], y - 0.3, 0.6)
        for is_restored, run in _entry_runs(plan.shadowed, restored):
            (restored_runs if is_restored else removed_runs).append(
                _rects([(run[0], run[-1] + 1 - run[0])], y - 0.22, 0.44)[0])
            gaps = np.diff(run) if len(run) > 1 else np.array([sparse_limit + 1])
            if gaps.min() > sparse_limit:
                (restored_ticks if is_restored else ticks).extend(
                    [(s + 0.5, y - 0.3), (s + 0.5, y + 0.3)] for s in run)
            if is_restored:
                n_restored += len(run)
            else:
                n_removed += len(run)
        shafts.append([(high + 1, y), (plan.seq + 0.5, y)])
        heads.append((plan.seq + 0.5, y))
    if replaces:
        ax.add_collection(PolyCollection(span_rects, facecolors="#F2F2F2",
                                         edgecolors=SHADOW_COLOR, hatch="////",
                                         linewidths=0.5, zorder=1))
        # a run of removed entries is one hatched block, so hundreds of them stay a
        # readable span (not a solid dark bar) and the hatching still says "shadowed"
        ax.add_collection(PolyCollection(removed_runs, facecolors="#BDBDBD",
                                         edgecolors=SHADOW_COLOR, hatch="xx",
                                         linewidths=0.6, zorder=2))
        ax.add_collection(LineCollection(ticks, colors=SHADOW_COLOR, linewidths=1.2,
                                         zorder=2))
        ax.add_collection(LineCollection(shafts, colors=OKABE_ITO[7], linewidths=0.9,
                                         zorder=3))
        xs, ys = zip(*heads, strict=True)
        ax.scatter(xs, ys, marker=">", s=28, color=OKABE_ITO[7], zorder=4)
        handles += [Patch(facecolor="#F2F2F2", edgecolor=SHADOW_COLOR, hatch="////",
                          label="shadowed run"),
                    Patch(facecolor="#BDBDBD", edgecolor=SHADOW_COLOR, hatch="xx",
                          label=f"removed entries ({n_removed})")]
        if restored_runs:
            ax.add_collection(PolyCollection(restored_runs, facecolors="#CFE8F7",
                                             edgecolors=RESTORED_COLOR, hatch="..",
                                             linewidths=0.6, zorder=2))
            ax.add_collection(LineCollection(restored_ticks, colors=RESTORED_COLOR,
                                             linewidths=1.2, zorder=2))
            handles.append(Patch(facecolor="#CFE8F7", edgecolor=RESTORED_COLOR, hatch="..",
                                 label=f"restored: copied back ({n_restored})"))
        handles.append(Line2D([], [], color=OKABE_ITO[7], marker=">", label="replaced by"))
    n_lanes = (max(lanes) + 1) if lanes else 0
    ax.set_xlim(-0.5, max(len(types), 1) + 0.5)
    ax.set_ylim(n_lanes + 0.7, -0.7)
    if n_lanes <= 25 and len(replaces) == n_lanes:
        ax.set_yticks(range(n_lanes + 1), ["events", *(
            f"seq {p.seq} {_replace_label(log, p.seq, traces)}" for p in replaces)],
            fontsize=8, parse_math=False)
    else:
        ax.set_yticks([0], ["events"])
        ax.set_ylabel(f"{len(replaces)} replaces in {n_lanes} lanes")
    ax.set_xlabel("seq (log order)")
    ax.set_title(title or f"{log.session_id}: {len(types)} events, {len(replaces)} "
                          f"replace{'s' if len(replaces) != 1 else ''}", parse_math=False)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8,
              frameon=False)
    return ax


def _entry_runs(shadowed: Sequence[int], restored: frozenset[int]
                ) -> list[tuple[bool, list[int]]]:
    """The shadowed entries (adjacent on the surface) cut into runs of removed and of
    restored ones: (restored?, seqs)."""
    runs: list[tuple[bool, list[int]]] = []
    for s in shadowed:
        flag = s in restored
        if runs and runs[-1][0] == flag:
            runs[-1][1].append(s)
        else:
            runs.append((flag, [s]))
    return runs


def _replace_label(log: LogData, seq: int, traces: Sequence[Bracket]) -> str:
    """A lane's name: the compaction id (for an imported log, the source's own id of the
    manipulation), else the plugin, else the type; a tool-result rewrite is a prune."""
    bracket = bracket_of(traces, seq)
    if bracket is not None:
        return str(bracket.compaction_id)
    event = log.read(seq)
    if event["type"] == "tool/result":
        return "prune"
    source = mapping_at(message_of(event), "source")
    return str(source.get("compactionId") or source.get("plugin") or event["type"])


def _visibility_matrix(log: LogData, max_steps: int, max_entries: int
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The state of each sampled (step, entry) pair, the steps, the entries' seqs and the
    entries' positions among all surface entries. Beyond `max_entries` the entries are
    sampled evenly, and every replacement is always kept (its column is what the plot
    is about)."""
    all_entries = np.array(log.entries, dtype="int64")
    steps = np.arange(len(log.events), dtype="int64")
    if len(steps) > max_steps:
        steps = np.unique(np.linspace(0, len(log.events) - 1, max_steps).astype("int64"))
    replaced = {p.seq for p in log.replaces}
    positions = np.arange(len(all_entries), dtype="int64")
    if len(all_entries) > max_entries:
        keep = np.linspace(0, len(all_entries) - 1, max_entries).astype("int64")
        forced = np.flatnonzero(np.isin(all_entries, np.array(sorted(replaced), dtype="int64")))
        positions = np.union1d(keep, forced)
    entries = all_entries[positions]
    gone = np.array([log.shadowed_by.get(int(s), np.iinfo("int64").max) for s in entries],
                    dtype="int64")
    is_replacement = np.array([int(s) in replaced for s in entries], dtype=bool)
    grid_steps = steps[:, None]
    state = np.where(grid_steps < entries[None, :], 0,
                     np.where(grid_steps >= gone[None, :], 3,
                              np.where(is_replacement[None, :], 2, 1)))
    return state, steps, entries, positions


def _edges(centres: np.ndarray, last: float) -> np.ndarray:
    """Cell edges for sampled positions: each cell runs from its position to the next
    one, so the axis stays in the unit of the positions."""
    return np.append(centres.astype("float64") - 0.5, last + 0.5)


def plot_visibility(source: Any, *, ax: Axes | None = None, highlight: int | None = None,
                    max_steps: int = 800, max_entries: int = 400) -> Axes:
    """The step x entry matrix: for each step (just after event k) whether each surface
    entry is not yet there, visible, a visible replacement, or shadowed. The x axis
    counts surface entries in seq order (0 = the first), the y axis events, both in
    their own units when sampled.

    Args:
        source: anything `load_source` accepts.
        ax: the Axes to draw on.
        highlight: a step (event seq) to mark with a line.
        max_steps, max_entries: sample evenly beyond these many rows and columns (the
            replacements' columns are always kept).

    Returns:
        The Axes drawn on.
    """
    log = _log(source)
    ax = _axes(ax, (8, 6))
    state, steps, entries, positions = _visibility_matrix(log, max_steps, max_entries)
    n_entries = len(log.entries)
    if state.size:
        ax.pcolormesh(_edges(positions, n_entries - 1), _edges(steps, len(log.events) - 1),
                      state, cmap=ListedColormap(STATE_COLORS), vmin=-0.5, vmax=3.5,
                      shading="flat")
        ax.set_xlim(-0.5, n_entries - 0.5)
        ax.set_ylim(len(log.events) - 0.5, -0.5)
        if len(entries) <= 30:
            ax.set_xticks(positions, [str(s) for s in entries], rotation=90, fontsize=7)
        if highlight is not None:
            ax.axhline(highlight, color=OKABE_ITO[5], linewidth=1.5)
    shown = "" if len(entries) == n_entries else f"; {len(entries)} of them drawn"
    ax.set_xlabel("surface entry (tick: its seq)" if 0 < len(entries) <= 30 else
                   f"surface entry (k-th in seq order, {n_entries} in all{shown})")
    ax.set_ylabel("step (just after event k)")
    ax.set_title(f"{log.session_id}: what the model sees, step by step", parse_math=False)
    ax.legend(handles=[Patch(facecolor=c, edgecolor="#999999", label=s) for c, s in
                       zip(STATE_COLORS, ("not yet", "visible", "replacement", "shadowed"),
                           strict=True)],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    return ax


def surface_size_series(log: LogData) -> tuple[np.ndarray, np.ndarray]:
    """Surface length and estimated tokens just after each event (cached on the log)."""
    if "sizes" in log.cache:
        cached: tuple[np.ndarray, np.ndarray] = log.cache["sizes"]
        return cached
    # Each entry adds one node and its tokens where it goes on; a replace takes off what
    # it hid. Only the entries are read.
    entries = log.entries
    texts = log.texts(entries)
    cost = {seq: text_tokens(texts[seq]) for seq in entries}
    grow = np.zeros(len(log.plans), dtype="int64")
    gain = np.zeros(len(log.plans), dtype="int64")
    grow[entries], gain[entries] = 1, [cost[seq] for seq in entries]
    for plan in log.replaces:
        grow[plan.seq] -= len(plan.shadowed)
        gain[plan.seq] -= sum(cost[s] for s in plan.shadowed)
    lengths, tokens = np.cumsum(grow), np.cumsum(gain)
    log.cache["sizes"] = (lengths, tokens)
    return lengths, tokens


def plot_surface_size(source: Any, *, ax: Axes | None = None, marker: int | None = None
                      ) -> Axes:
    """Surface length (left axis) and estimated tokens (right axis) over the log, with
    each replace marked by a dotted line.

    Args:
        source: anything `load_source` accepts.
        ax: the Axes to draw on (its twin carries the tokens).
        marker: a seq to mark with a vertical line (the replay position).
    """
    log = _log(source)
    ax = _axes(ax, (10, 3))
    lengths, tokens = surface_size_series(log)
    x = np.arange(len(lengths))
    ax.plot(x, lengths, color=OKABE_ITO[4], linewidth=1.2, label="surface entries")
    twin = ax.twinx()
    twin.plot(x, tokens, color=OKABE_ITO[0], linewidth=1.2, linestyle="--",
              label="estimated tokens")
    replaces = [p.seq for p in log.replaces]
    if replaces:
        ax.vlines(replaces, 0, 1, transform=ax.get_xaxis_transform(), colors=OKABE_ITO[6],
                  linewidth=0.7, linestyles=":", label="replace")
    failed = _failed_seqs(log)
    if failed:
        ax.vlines(failed, 0, 1, transform=ax.get_xaxis_transform(), colors=OKABE_ITO[5],
                  linewidth=1.4, linestyles="--", label=f"failed compaction ({len(failed)})")
    if marker is not None:
        ax.axvline(marker, color=OKABE_ITO[5], linewidth=1.5, label="replay position")
    ax.set_xlabel("seq (log order)")
    ax.set_ylabel("surface entries", color=OKABE_ITO[4])
    twin.set_ylabel("estimated tokens", color=OKABE_ITO[0])
    ax.set_xlim(0, max(len(lengths) - 1, 1))
    ax.set_ylim(bottom=0)
    twin.set_ylim(bottom=0)
    handles = ax.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.07, 1.0), fontsize=8,
              frameon=False)
    ax.set_title(f"{log.session_id}: surface size", parse_math=False)
    return ax


def figure_png(draw: Any, *args: Any, size: tuple[float, float] = (11, 4), dpi: int = 110,
               **kwargs: Any) -> bytes:
    """Render `draw(*args, ax=..., **kwargs)` on a fresh Figure (no pyplot) to PNG bytes."""
    figure = Figure(figsize=size, layout="constrained")
    draw(*args, ax=figure.add_subplot(), **kwargs)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()
