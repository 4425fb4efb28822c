"""The facts-eval scripts under `tests/data/facts_eval/` (agreement, evaluate,
build_packet) loaded as modules for the tests that call their functions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

EVAL = Path(__file__).resolve().parents[1] / "tests" / "data" / "facts_eval"


def script(name: str) -> ModuleType:
    """`tests/data/facts_eval/<name>.py` as the module `facts_eval_<name>`."""
    spec = importlib.util.spec_from_file_location(f"facts_eval_{name}", EVAL / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while building
    spec.loader.exec_module(module)
    return module
