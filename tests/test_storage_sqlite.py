"""The SQLite backend: the contract suite plus schema versioning and refusal."""

from __future__ import annotations

from pathlib import Path

from store_contract import StoreContract

from surface_lab.storage import SqliteStore, Store


class TestSqliteContract(StoreContract):
    @staticmethod
    def make_store_static(root: Path) -> Store:
        return SqliteStore(root / "sessions.db")

    def make_store(self, root: Path) -> Store:
        return self.make_store_static(root)
