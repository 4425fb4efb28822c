"""Deterministic fake tools over an in-memory workspace: read, write and run."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ToolOutcome", "Workspace", "run_tool"]


@dataclass(frozen=True)
class ToolOutcome:
    text: str
    is_error: bool = False
    code: str | None = None


class Workspace:
    """Files in memory, keyed by relative path."""

    def __init__(self, files: Mapping[str, str] | None = None, cwd: str = "/work") -> None:
        self.files = dict(files or {})
        self.cwd = cwd

    def read(self, path: str) -> ToolOutcome:
        if path not in self.files:
            return ToolOutcome(f"{path}: no such file", True, "ENOENT")
        lines = self.files[path].splitlines()
        body = "\n".join(f"{i}: {line}" for i, line in enumerate(lines, 1))
        return ToolOutcome(f"<path>{self.cwd}/{path}</path>\n<content>\n{body}\n</content>")

    def write(self, path: str, content: str) -> ToolOutcome:
        self.files[path] = content
        return ToolOutcome(f"wrote {len(content)} characters to {path}")

    def run(self, command: str) -> ToolOutcome:
        try:
            argv = shlex.split(command)
        except ValueError as err:
            return ToolOutcome(f"sh: {err}", True, "EXIT_2")
        if not argv:
            return ToolOutcome("", False)
        name, args = argv[0], argv[1:]
        if name == "ls":
            return ToolOutcome("\n".join(sorted(self.files)))
        if name == "echo":
            return ToolOutcome(" ".join(args))
        if name in ("cat", "wc", "grep") and args:
            path = args[-1]
            if path not in self.files:
                return ToolOutcome(f"{name}: {path}: No such file or directory", True, "EXIT_1")
            text = self.files[path]
            if name == "cat":
                return ToolOutcome(text)
            if name == "wc":
                return ToolOutcome(f"{len(text.splitlines())} {path}")
            hits = [line for line in text.splitlines() if args[0] in line]
            return ToolOutcome("\n".join(hits), not hits, None if hits else "EXIT_1")
        return ToolOutcome(f"sh: {name}: command not found", True, "EXIT_127")


def run_tool(workspace: Workspace, name: str, arguments: Mapping[str, Any]) -> ToolOutcome:
    """Dispatch one call; unknown tools and bad arguments are tool errors, not crashes."""
    tools: dict[str, Callable[..., ToolOutcome]] = {
        "read": workspace.read, "write": workspace.write, "run": workspace.run}
    tool = tools.get(name)
    if tool is None:
        return ToolOutcome(f"unknown tool {name!r}", True, "UNKNOWN_TOOL")
    try:
        return tool(**arguments)
    except TypeError as err:
        return ToolOutcome(f"bad arguments for {name}: {err}", True, "BAD_ARGUMENTS")
