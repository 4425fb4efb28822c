"""The package's layers run one way: no module imports a higher layer, no import cycle, and
`import surface_lab` stays light (measured in fresh interpreters, by `sys.modules`)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "surface_lab"

# Lowest first. A module may import its own layer or any lower one, never a higher one.
LAYERS: tuple[tuple[str, ...], ...] = (
    # the ground floor: no project imports
    ("errors", "problems", "jsonvalue", "views", "gcpause", "glossary"),
    # the engine: events, the one planner, sessions
    ("schema", "events", "surface", "chunks", "header", "legacy", "messages", "repair",
     "session", "contract"),
    # other agents' formats in, engine events out
    ("importers",),
    # the codec, the load pipeline, the fast reader, the path resolver and expander
    ("reading",),
    # stores, and read_log over them
    ("storage",),
    # the pandas-free research core
    ("analysis",),
    # frames, plots, widgets and the report; the corpus tables
    ("notebook", "corpus", "corpus_questions"),
    # the scripted agent loop and the sample generator
    ("agent",),
    # the command, its benchmark, the public re-exports
    ("bench", "cli", "__init__", "__main__"),
)
LAYER_OF = {name: level for level, names in enumerate(LAYERS) for name in names}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_package(name: str) -> bool:
    return (ROOT / Path(*name.split(".")) / "__init__.py").is_file()


def _target(name: str) -> str:
    """`name` if it is a module or package of ours, else the nearest one above it."""
    while name.count(".") > 0 and not (_is_package(name)
                                       or (ROOT / (name.replace(".", "/") + ".py")).is_file()):
        name = name.rsplit(".", 1)[0]
    return name


def _imports(path: Path) -> set[str]:
    """Every project module `path` imports, at the top or inside a function."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {_target(a.name) for a in node.names if a.name.startswith("surface_lab")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                stem = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module and node.module.startswith("surface_lab"):
                stem = node.module
            else:
                continue
            for alias in node.names:  # `from . import corpus` imports a module
                found.add(_target(f"{stem}.{alias.name}"))
    return {name for name in found if name != module}


def _graph() -> dict[str, set[str]]:
    return {_module_name(p): _imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def _folders(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between top-level modules and folders (`surface_lab.reading`, ...)."""
    def top(name: str) -> str:
        return ".".join(name.split(".")[:2])

    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        out.setdefault(top(module), set()).update(
            top(t) for t in targets if top(t) != top(module) and t != "surface_lab")
    return out


def _layer(module: str) -> int:
    parts = module.split(".")
    key = parts[1] if len(parts) > 1 else "__init__"
    assert key in LAYER_OF, f"{module}: in no layer; add it to LAYERS in {Path(__file__).name}"
    return LAYER_OF[key]


class TestLayers:
    def test_every_module_is_in_a_layer(self) -> None:
        for module in _graph():
            _layer(module)

    def test_no_module_imports_a_higher_layer(self) -> None:
        upward = [f"{module} (layer {_layer(module)}) imports {target} (layer "
                  f"{_layer(target)})"
                  for module, targets in _graph().items() for target in sorted(targets)
                  if target.startswith("surface_lab.") and _layer(target) > _layer(module)]
        assert upward == []

    @pytest.mark.parametrize("grain", ["module", "folder"])
    def test_no_import_cycle(self, grain: str) -> None:
        graph = _graph() if grain == "module" else _folders(_graph())
        state: dict[str, int] = {}
        cycles: list[list[str]] = []

        def visit(module: str, trail: list[str]) -> None:
            state[module] = 1
            for target in sorted(graph.get(module, ())):
                if state.get(target) == 1:
                    cycles.append([*trail[trail.index(target):], target])
                elif target not in state:
                    visit(target, [*trail, target])
            state[module] = 2

        for module in sorted(graph):
            if module not in state:
                visit(module, [module])
        assert cycles == []

    def test_the_walk_sees_imports_inside_functions(self) -> None:
        assert "surface_lab.notebook.audit" in _graph()["surface_lab.cli"]


def _loaded_after(code: str, *, blocked: tuple[str, ...] = ()) -> dict[str, bool]:
    """Which heavy modules are in `sys.modules` after running `code` in a fresh
    interpreter (with `blocked` made unimportable)."""
    heavy = ["pandas", "matplotlib", "ipywidgets", "numpy", "surface_lab.agent",
             "surface_lab.agent.loop", "surface_lab.notebook"]
    script = (f"import sys\nfor name in {list(blocked)!r}:\n    sys.modules[name] = None\n"
              f"{code}\nimport json\n"
              f"print(json.dumps({{m: m in sys.modules and sys.modules[m] is not None "
              f"for m in {heavy!r}}}))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                         check=True)
    loaded: dict[str, bool] = json.loads(out.stdout.strip().splitlines()[-1])
    return loaded


class TestLightImport:
    def test_import_surface_lab_loads_no_frame_plot_widget_or_agent_loop(self) -> None:
        loaded = _loaded_after("import surface_lab\nimport surface_lab.analysis")
        assert [m for m, yes in loaded.items() if yes] == []

    def test_the_notebook_frames_load_no_widgets(self) -> None:
        loaded = _loaded_after("import surface_lab.notebook")
        assert loaded["pandas"] and not loaded["ipywidgets"]

    def test_frames_work_where_ipywidgets_is_missing(self) -> None:
        code = (f"from surface_lab.notebook import *\n"
                f"frame = events_df({str(ROOT / 'sample_logs' / 'pruned-tool-results.jsonl')!r})"
                f"\nassert len(frame) > 0\n"
                f"try:\n    ReplayWidget([])\nexcept ImportError as err:\n"
                f"    assert 'ipywidgets' in str(err)\nelse:\n    raise SystemExit(3)")
        loaded = _loaded_after(code, blocked=("ipywidgets",))
        assert loaded["pandas"] and not loaded["ipywidgets"]


@pytest.mark.parametrize("name", ["LogData", "load_source", "compaction_audit",
                                  "ReplayWidget", "events_df", "compare_policies"])
def test_the_notebook_star_import_gives_the_public_names(name: str) -> None:
    namespace: dict[str, object] = {}
    exec("from surface_lab.notebook import *", namespace)
    assert name in namespace
