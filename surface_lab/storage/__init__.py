"""Persistence: one narrow store interface with a JSONL and a SQLite backend (SPEC 7)."""

from .base import Problem, Scan, Store
from .jsonl import JsonlStore
from .sqlite import SCHEMA_VERSION, SqliteStore

__all__ = ["SCHEMA_VERSION", "JsonlStore", "Problem", "Scan", "SqliteStore", "Store"]
