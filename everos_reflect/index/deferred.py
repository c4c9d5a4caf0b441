"""Run a third-party package's ``__init__`` on first use instead of at import.

``import lancedb`` imports ``lancedb.namespace``, which imports eight request/response models
from ``lance_namespace_urllib3_client.models``. Importing any submodule runs the package's
``__init__`` first, and that one imports the whole generated REST client: nine API classes
whose every method is wrapped by pydantic's ``validate_call``, the ``ApiClient`` and urllib3
(~14 MB of a ``serve`` process's own memory, docs/memory.md). LanceDB only uses that client for
remote namespaces; a daemon on a local root never does.

:func:`defer_package_init` makes such a package importable without running its ``__init__``:
the package module is created as usual (same ``__spec__``, ``__path__`` and ``__file__``), so
``import pkg.sub`` and ``from pkg.sub import X`` load just those submodules. The first look-up
of any other attribute (``pkg.X``, ``from pkg import X``, ``dir(pkg)``, ``import *``) runs the
real ``__init__`` in the module's namespace, once, under a lock, and answers from it: after
that the package is exactly what an eager import makes. Nothing of LanceDB is patched.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Sequence
from types import ModuleType

#: Packages whose ``__init__`` serving never needs: LanceDB's REST namespace client. Its
#: ``models`` subpackage (which ``lance_namespace`` and ``lancedb.namespace`` import) is loaded
#: eagerly as before; only the top-level ``__init__`` (APIs, ``ApiClient``, urllib3) waits.
DEFERRED_PACKAGES: tuple[str, ...] = ("lance_namespace_urllib3_client",)


class _DeferredInitLoader(importlib.abc.Loader):
    """Wraps a package's own loader: creates the module, defers running its code."""

    def __init__(self, real: importlib.abc.Loader) -> None:
        self._real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._real.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        real = self._real
        lock = threading.RLock()
        state = {"done": False, "running": False}

        def run_init() -> None:
            # RLock: the real __init__ may look up one of its own names before defining it
            # (a partly initialised module answers AttributeError, as an eager import would)
            with lock:
                if state["done"] or state["running"]:
                    return
                state["running"] = True
                try:
                    real.exec_module(module)
                    state["done"] = True
                finally:
                    state["running"] = False
                # from now on a missing name is a plain AttributeError
                if module.__dict__.get("__getattr__") is __getattr__:
                    del module.__dict__["__getattr__"]
                if module.__dict__.get("__dir__") is __dir__:
                    del module.__dict__["__dir__"]
                module.__dict__.pop("__deferred_init__", None)

        def __getattr__(name: str) -> object:
            run_init()
            try:
                return module.__dict__[name]
            except KeyError:
                raise AttributeError(
                    f"module {module.__name__!r} has no attribute {name!r}") from None

        def __dir__() -> list[str]:
            run_init()
            return sorted(module.__dict__)

        module.__getattr__ = __getattr__  # type: ignore[method-assign]
        module.__dir__ = __dir__  # type: ignore[method-assign]
        module.__deferred_init__ = run_init  # type: ignore[attr-defined]


class _DeferredInitFinder(importlib.abc.MetaPathFinder):
    """Finds the named top-level packages with the other finders, then defers their code."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = frozenset(names)

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names:
            return None
        for finder in sys.meta_path:
            if finder is self or isinstance(finder, _DeferredInitFinder):
                continue
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None
        # only an ordinary package (a directory with an __init__ to run) is deferred
        if spec.loader is None or spec.submodule_search_locations is None:
            return spec
        spec.loader = _DeferredInitLoader(spec.loader)
        return spec


_lock = threading.Lock()


def defer_package_init(names: Sequence[str] = DEFERRED_PACKAGES) -> list[str]:
    """Defer the ``__init__`` of each package in ``names`` not imported yet in this process.

    Call it before the package's first import (this project calls it when
    ``everos_reflect.index`` is imported, before anything imports LanceDB). Returns those of
    ``names`` not imported yet, whose first import will be deferred; a package already
    imported is left as it is. Idempotent.
    """
    with _lock:
        wanted = [name for name in names if name not in sys.modules]
        finder = next((f for f in sys.meta_path if isinstance(f, _DeferredInitFinder)), None)
        if finder is None:
            sys.meta_path.insert(0, _DeferredInitFinder(wanted))
        else:
            finder.names = finder.names | frozenset(wanted)
        return wanted


def is_deferred(name: str) -> bool:
    """True if package ``name`` is imported but its ``__init__`` has not run yet."""
    module = sys.modules.get(name)
    return module is not None and "__deferred_init__" in module.__dict__


__all__ = ["DEFERRED_PACKAGES", "defer_package_init", "is_deferred"]
