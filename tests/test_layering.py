"""The package's layering, checked from the source: what may import what, and where SQL lives.

Markdown is the truth, ``index/`` derives from it, strategies and the engine work on both, and
the edges (CLI, HTTP API) and the composition roots (``serve.py``, ``wiring.py``) sit on top.
A lower layer importing an upper one is how a one-strategy engine grew before (issue 12); these
tests keep it from coming back.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "everos_reflect"

#: Layer → packages/modules it must never import (directly or lazily inside a function).
FORBIDDEN = {
    "engine": ("everos_reflect.api", "everos_reflect.cli", "everos_reflect.serve"),
    "index": ("everos_reflect.api", "everos_reflect.cli", "everos_reflect.serve",
              "everos_reflect.engine", "everos_reflect.strategies", "everos_reflect.clustering"),
    "strategies": ("everos_reflect.api", "everos_reflect.cli", "everos_reflect.serve"),
    "markdown": ("everos_reflect.api", "everos_reflect.cli", "everos_reflect.serve",
                 "everos_reflect.engine", "everos_reflect.strategies", "everos_reflect.index"),
}


def modules(layer: str) -> list[Path]:
    return sorted((PACKAGE / layer).rglob("*.py"))


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_lower_layer_imports_no_upper_one(layer: str) -> None:
    found = []
    for path in modules(layer):
        for name in imported(path):
            if any(name == f or name.startswith(f + ".") for f in FORBIDDEN[layer]):
                found.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert not found, "\n".join(found)


def test_serve_is_composed_above_the_engine() -> None:
    assert "everos_reflect.api.app" in imported(PACKAGE / "serve.py")
    assert "everos_reflect.engine.engine" in imported(PACKAGE / "serve.py")


#: Modules that run SQL although they are outside ``index/``: the clustering service keeps its
#: own tables (``clusters``, ``cluster_members``) and their in-memory mirror, in one place.
SQL_OWNERS = {"clustering/service.py"}


def test_no_sql_outside_the_index() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("index/") or rel in SQL_OWNERS:
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in {"execute", "executemany", "executescript"}):
                found.append(f"{rel}:{node.lineno} calls .{node.func.attr}()")
    assert not found, "SQL belongs in index/ (reads.py and friends):\n" + "\n".join(found)
