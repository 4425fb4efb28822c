"""The pandas-free research core: a loaded log (`LogData`, and `load_source` turning any
source into one), compaction brackets and what each replace did, the audit's core, facts
at risk, evidence of loss, and what-if policies with the agents' presets (`WindowCompact`,
`CodexAutoCompact`, `ClaudeCodeAutoCompact`, `PiCompaction`, `OpenHandsSummarizing`, ...).
`surface_lab.notebook` builds frames, plots and widgets over it; the corpus builds tables
over it."""

from .audit import audit_columns, facts_at_risk_by_replace, failed_compactions
from .brackets import Bracket, brackets, replacement_columns
from .evidence import LostEvidence, find_lost_evidence
from .facts import DEFAULT_RULES, FactRules, Mention, facts_at_risk, find_mentions
from .policies import (
    ClaudeCodeAutoCompact,
    ClearToolUses,
    CodexAutoCompact,
    Compact,
    LastNObservations,
    MaskObservations,
    OpenHandsSummarizing,
    PiCompaction,
    Policy,
    PolicyView,
    Prune,
    Rewrite,
    SummarizeEvery,
    WindowCompact,
    replay_policy,
)
from .source import LogData, load_source

__all__ = [
    "DEFAULT_RULES",
    "Bracket",
    "ClaudeCodeAutoCompact",
    "ClearToolUses",
    "CodexAutoCompact",
    "Compact",
    "FactRules",
    "LastNObservations",
    "LogData",
    "LostEvidence",
    "MaskObservations",
    "Mention",
    "OpenHandsSummarizing",
    "PiCompaction",
    "Policy",
    "PolicyView",
    "Prune",
    "Rewrite",
    "SummarizeEvery",
    "WindowCompact",
    "audit_columns",
    "brackets",
    "facts_at_risk",
    "facts_at_risk_by_replace",
    "failed_compactions",
    "find_lost_evidence",
    "find_mentions",
    "load_source",
    "replacement_columns",
    "replay_policy",
]
