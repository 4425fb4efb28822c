"""Notebook helpers: frames, the replay stepper and widget, plots and the compaction
audit, over the pandas-free `surface_lab.analysis`. This is the only part of surface_lab
that imports pandas, matplotlib and ipywidgets; ipywidgets loads only when `ReplayWidget`
is first used, and the frames work where it is not installed."""

from typing import Any

from ..analysis.source import LogData, load_source
from .audit import audit_report, compaction_audit, extract_facts, failed_compactions
from .columns import SCHEMAS, schema_table
from .facts import facts_df, redos_df
from .frames import (
    events_df,
    messages_df,
    replacements_df,
    surface_df,
    visibility_df,
)
from .plots import plot_shadowing, plot_surface_size, plot_visibility
from .replay import Replay
from .research import (
    PolicyComparison,
    SessionsComparison,
    compare_policies,
    compare_sessions,
    lost_evidence_df,
    plot_intervals,
    plot_policies,
    requests_df,
    tokens_df,
)

__all__ = [
    "SCHEMAS",
    "LogData",
    "PolicyComparison",
    "Replay",
    "ReplayWidget",
    "SessionsComparison",
    "audit_report",
    "compaction_audit",
    "compare_policies",
    "compare_sessions",
    "events_df",
    "extract_facts",
    "facts_df",
    "failed_compactions",
    "load_source",
    "lost_evidence_df",
    "messages_df",
    "plot_intervals",
    "plot_policies",
    "plot_shadowing",
    "plot_surface_size",
    "plot_visibility",
    "redos_df",
    "replacements_df",
    "requests_df",
    "schema_table",
    "surface_df",
    "tokens_df",
    "visibility_df",
]


def __getattr__(name: str) -> Any:
    """`ReplayWidget`, imported on first use (ipywidgets takes seconds to import)."""
    if name == "ReplayWidget":
        from .widgets import ReplayWidget

        return ReplayWidget
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
