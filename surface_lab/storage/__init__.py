"""Persistence: one narrow store interface with a JSONL and a SQLite backend (SPEC 7)."""

from ..problems import Problem
from ..reading.scan import Scan
from .base import Store
from .jsonl import JsonlStore
from .sqlite import SCHEMA_VERSION, SqliteStore

__all__ = ["SCHEMA_VERSION", "JsonlStore", "Problem", "Scan", "SqliteStore", "Store"]
