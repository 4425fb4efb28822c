"""A deterministic agent loop with compaction and tool-result pruning on the surface
(SPEC 8 and 9), and the sample logs it writes."""

from ..analysis.compaction import (
    CompactionPolicy,
    Compactor,
    ExtractiveSummarizer,
    SummaryError,
    ToolResultPruner,
    balanced_cuts,
    estimate_tokens,
)
from .loop import AgentLoop, SimulatedCrash
from .script import Call, Reply, ScriptedProvider, Turn
from .tools import Workspace

__all__ = [
    "AgentLoop",
    "Call",
    "CompactionPolicy",
    "Compactor",
    "ExtractiveSummarizer",
    "Reply",
    "ScriptedProvider",
    "SimulatedCrash",
    "SummaryError",
    "ToolResultPruner",
    "Turn",
    "Workspace",
    "balanced_cuts",
    "estimate_tokens",
]
