"""surface_lab: replayable surfaces of agent session logs.

The engine (events, the surface, sessions, repair, persistence) needs only the standard
library and small declared dependencies; `surface_lab.notebook` adds pandas, matplotlib and
ipywidgets.
"""

from .analysis.evidence import LostEvidence, find_lost_evidence
from .analysis.facts import DEFAULT_RULES, FactRules, Mention, facts_at_risk, find_mentions
from .analysis.policies import Compact, MaskObservations, PolicyView, Prune, Rewrite, replay_policy
from .analysis.tokens import count_tokens, hf_tokenizer, tiktoken_tokenizer
from .errors import (
    AdmissionError,
    CorruptLogError,
    StorageError,
    SurfaceLabError,
    UnsupportedFormatError,
)
from .events import KNOWN_TYPES, SESSION_FORMAT_VERSION, SURFACE_TYPES, Event
from .messages import DerivedMessages, derive_messages
from .reading.paths import Discovery, Found, discover
from .repair import interrupted_turn_closers
from .session import Session
from .storage.read import LogReading, read_log
from .surface import FoldResult, Plan, Replacement, fold_surface, plan_event

__all__ = [
    "DEFAULT_RULES",
    "KNOWN_TYPES",
    "SESSION_FORMAT_VERSION",
    "SURFACE_TYPES",
    "AdmissionError",
    "Compact",
    "CorruptLogError",
    "DerivedMessages",
    "Discovery",
    "Event",
    "FactRules",
    "FoldResult",
    "Found",
    "LogReading",
    "LostEvidence",
    "MaskObservations",
    "Mention",
    "Plan",
    "PolicyView",
    "Prune",
    "Replacement",
    "Rewrite",
    "Session",
    "StorageError",
    "SurfaceLabError",
    "UnsupportedFormatError",
    "count_tokens",
    "derive_messages",
    "discover",
    "facts_at_risk",
    "find_lost_evidence",
    "find_mentions",
    "fold_surface",
    "hf_tokenizer",
    "interrupted_turn_closers",
    "plan_event",
    "read_log",
    "replay_policy",
    "tiktoken_tokenizer",
]
