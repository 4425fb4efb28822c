"""surface_lab: replayable surfaces of agent session logs.

The engine (events, the surface, sessions, repair, persistence) needs only the standard
library and small declared dependencies; `surface_lab.notebook` adds pandas, matplotlib and
ipywidgets.
"""

from .errors import (
    AdmissionError,
    CorruptLogError,
    StorageError,
    SurfaceLabError,
    UnsupportedFormatError,
)
from .events import KNOWN_TYPES, SESSION_FORMAT_VERSION, SURFACE_TYPES, Event
from .messages import DerivedMessages, derive_messages
from .reading.read import LogReading, read_log
from .repair import interrupted_turn_closers
from .session import Session
from .surface import FoldResult, Plan, Replacement, fold_surface, plan_event

__all__ = [
    "KNOWN_TYPES",
    "SESSION_FORMAT_VERSION",
    "SURFACE_TYPES",
    "AdmissionError",
    "CorruptLogError",
    "DerivedMessages",
    "Event",
    "FoldResult",
    "LogReading",
    "Plan",
    "Replacement",
    "Session",
    "StorageError",
    "SurfaceLabError",
    "UnsupportedFormatError",
    "derive_messages",
    "fold_surface",
    "interrupted_turn_closers",
    "plan_event",
    "read_log",
]
