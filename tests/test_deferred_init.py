"""A package whose ``__init__`` is deferred behaves like an eagerly imported one once used.

:mod:`everos_reflect.index.deferred` keeps LanceDB's REST namespace client from loading in
``serve``; these tests pin down the contract on a throwaway package: submodules import without
the ``__init__``, the first other look-up runs it exactly once (also under concurrent first
use), and afterwards names, ``dir()``, ``import *`` and missing names behave as usual.
"""

from __future__ import annotations

import importlib
import sys
import threading
import uuid
from pathlib import Path

import pytest

from everos_reflect.index.deferred import defer_package_init, is_deferred


@pytest.fixture
def package(tmp_path: Path) -> str:
    """A fresh package ``pkg_<hex>`` whose ``__init__`` counts its runs in ``counter.RUNS``."""
    name = f"pkg_{uuid.uuid4().hex}"
    folder = tmp_path / name
    folder.mkdir()
    (folder / "counter.py").write_text("RUNS = []\n")
    (folder / "leaf.py").write_text("VALUE = 42\n")
    (folder / "__init__.py").write_text(
        "import time\n"
        f"from {name} import counter\n"
        "time.sleep(0.05)  # a slow init, so concurrent first uses overlap\n"
        "counter.RUNS.append(1)\n"
        f"from {name}.leaf import VALUE\n"
        "GREETING = 'hello'\n")
    sys.path.insert(0, str(tmp_path))
    yield name
    sys.path.remove(str(tmp_path))
    for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[module]


def runs(name: str) -> int:
    return len(sys.modules[f"{name}.counter"].RUNS)


def test_a_submodule_imports_without_running_the_package_init(package: str) -> None:
    assert defer_package_init([package]) == [package]
    leaf = importlib.import_module(f"{package}.leaf")
    assert leaf.VALUE == 42
    assert is_deferred(package)
    assert f"{package}.counter" not in sys.modules  # the __init__ imports it: not run


def test_the_first_lookup_runs_the_init_once(package: str) -> None:
    defer_package_init([package])
    module = importlib.import_module(package)
    assert module.GREETING == "hello"
    assert module.VALUE == 42
    assert not is_deferred(package)
    _ = module.GREETING
    assert runs(package) == 1
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        _ = module.missing
    assert runs(package) == 1


def test_from_import_dir_and_star_see_the_whole_package(package: str) -> None:
    defer_package_init([package])
    namespace: dict[str, object] = {}
    exec(f"from {package} import *", namespace)
    assert namespace["GREETING"] == "hello"
    assert {"GREETING", "VALUE", "counter", "leaf"} <= set(dir(sys.modules[package]))
    exec(f"from {package} import GREETING as g", namespace)
    assert namespace["g"] == "hello"
    assert runs(package) == 1


def test_concurrent_first_uses_run_the_init_once_and_all_see_it(package: str) -> None:
    defer_package_init([package])
    module = importlib.import_module(package)
    seen: list[object] = []
    threads = [threading.Thread(target=lambda: seen.append(module.GREETING)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == ["hello"] * 8
    assert runs(package) == 1


def test_a_package_imported_already_is_left_alone(package: str) -> None:
    module = importlib.import_module(package)  # eager: not deferred yet
    assert runs(package) == 1
    assert defer_package_init([package]) == []
    assert not is_deferred(package)
    assert module.GREETING == "hello"
