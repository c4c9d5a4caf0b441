"""``fleet.toml``: which memory roots make up a fleet, and where their Ray cluster is.

Parsing is pure (text in, :class:`FleetConfig` out, every problem reported at once naming the
file, the key and the reason); expanding the root patterns into folders is the only I/O and
lives in :func:`resolve_roots`. Example::

    roots = ["/data/shard-*", "/data/extra"]   # paths or globs; relative to this file
    ray_address = "auto"                       # "auto" | "ray://host:port" | "" = local Ray

    [strategies.reflect_episodes]              # defaults for every root; a root's own
    enabled = true                             # ome.toml wins, key by key
    cron = "0 2 * * 1"
"""

from __future__ import annotations

import errno
import glob
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from everos_reflect.errors import ConfigError, EverosError
from everos_reflect.fileio import expand_user, os_reason, read_config_bytes
from everos_reflect.model import quoted_value, shown_path
from everos_reflect.problem_words import unknown
from everos_reflect.runtime import is_memory_root, not_a_root_reason, resolve_root
from everos_reflect.settings import (
    TOML_ERRORS,
    config_text,
    loads_toml,
    shown_value,
    toml_got,
    toml_syntax_problem,
    toml_value,
)

Problem = tuple[str, str, str]

#: Bounds on what a fleet file may hold: it is read by a long-lived scheduler.
MAX_FILE_BYTES = 1 << 20
MAX_PATTERNS = 10_000
#: Roots one worker may run at once: each holds its own LLM threads, connections and run
#: state, and past a few the waits they fill are already filled.
MAX_ROOTS_PER_WORKER = 16

#: CPUs of a local Ray: it runs on this one machine. Ray itself refuses more than 1e14, with
#: an error naming no key.
MAX_NUM_CPUS = 100_000
#: CPUs one root's task may reserve: no more than a local Ray may have. 1e300 was accepted and
#: left to Ray, which no node could ever satisfy.
MAX_TASK_CPUS = MAX_NUM_CPUS
#: The longest ``ray_address``: a host name (253 characters at most) and a port.
MAX_RAY_ADDRESS_CHARS = 300
#: The longest path or glob of ``roots``: what the file system takes in one path (PATH_MAX).
MAX_ROOT_CHARS = 4_096
#: Ray's finest fraction of a CPU: a smaller ``task_cpus`` made Ray raise a ValueError out of
#: ``fleet run`` (a traceback) when it created the first worker.
MIN_TASK_CPUS = 0.0001
#: Re-runs of a root whose worker died: Ray takes a 32-bit count, and 2**31 raised an
#: OverflowError out of ``fleet run`` (a traceback) at the first root; a root that kills its
#: worker a hundred times will do so again.
MAX_TASK_RETRIES = 100

#: ``fleet serve`` re-reads every root's ``ome.toml`` each ``poll_seconds``: at 1e-300 that
#: was a busy loop over the roots, at 1e300 the wait raised OverflowError, and at 1e9 no run
#: was ever submitted.
MIN_POLL_SECONDS = 0.1
MAX_POLL_SECONDS = 3600.0

_RAY_URL = re.compile(r"^ray://[A-Za-z0-9._\-\[\]:]+:\d{1,5}$")
_GLOB_CHARS = set("*?[")


@dataclass(frozen=True)
class FleetConfig:
    """A validated ``fleet.toml`` (root patterns not yet expanded)."""

    file: str
    roots: tuple[str, ...]
    ray_address: str = ""
    #: CPUs of a local Ray (``ray_address = ""``); ``None``: every CPU of this machine.
    num_cpus: int | None = None
    #: CPUs Ray reserves for one root's task: 1 = one root per core; less overlaps roots
    #: whose runs mostly wait on the LLM.
    task_cpus: float = 1.0
    #: Roots one worker process runs at once, each on threads of its own. While one root
    #: waits for its LLM, another's local work (embedding, commits) uses the worker's CPU;
    #: the worker's model calls still take turns (``fleet.work.GatedEmbedder``), so a
    #: worker never embeds on more threads than its ``task_cpus``. 1: one root per worker.
    roots_per_worker: int = 2
    #: How often Ray re-runs a root's task whose worker process died (the journal makes the
    #: re-run finish or cleanly abandon the interrupted merge).
    max_retries: int = 3
    #: Skip roots with nothing to do instead of sending them a task.
    probe_work: bool = True
    #: ``fleet serve``: how often every root's ``ome.toml`` is re-read (hot reload).
    poll_seconds: float = 2.0
    #: Strategy defaults for every root, raw ``[strategies.<name>]`` tables.
    strategies: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def base_dir(self) -> Path:
        return Path(self.file).expanduser().resolve().parent


_KEYS: dict[str, str] = {
    "roots": "an array of paths or globs",
    "ray_address": 'a string: "auto", "ray://host:port" or "" (a local Ray)',
    "num_cpus": "an integer",
    "task_cpus": "a number",
    "roots_per_worker": "an integer",
    "max_retries": "an integer",
    "probe_work": "true or false",
    "poll_seconds": "a number",
    "strategies": "a table of [strategies.<name>] tables",
}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and \
        math.isfinite(value)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_roots(value: Any, file: str, problems: list[Problem]) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        got = "" if value == [] else f", got {toml_got(value)}"
        problems.append((file, "roots", f"must be a non-empty array of paths or globs{got}"))
        return ()
    if len(value) > MAX_PATTERNS:
        problems.append((file, "roots", f"at most {MAX_PATTERNS} entries, got {len(value)}"))
        return ()
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            got = toml_value(item) if isinstance(item, str) else toml_got(item)
            problems.append((file, f"roots[{i}]", f"must be a non-empty path, got {got}"))
        elif "\x00" in item:
            problems.append((file, f"roots[{i}]", "must not contain a NUL character"))
        elif len(item) > MAX_ROOT_CHARS:
            problems.append((file, f"roots[{i}]", f"must be a path of at most "
                             f"{MAX_ROOT_CHARS:,} characters, got {quoted_value(item)}"))
        else:
            out.append(item.strip())
    return tuple(out)


def _check_strategies(value: Any, file: str, problems: list[Problem]) -> dict[str, Any]:
    from everos_reflect.engine.registry import validate_strategy_settings
    from everos_reflect.errors import UnknownStrategy

    if not isinstance(value, dict):
        problems.append((file, "strategies", "must be a table of [strategies.<name>] tables, "
                         f"got {toml_got(value)}"))
        return {}
    out: dict[str, Any] = {}
    for name, table in value.items():
        if not isinstance(table, dict):
            problems.append((file, f"strategies.{name}", "must be a table "
                             f"[strategies.<name>], got {toml_got(table)}"))
            continue
        try:
            validate_strategy_settings(name, table, file)
        except UnknownStrategy as exc:
            problems.append((file, f"strategies.{name}", str(exc)))
            continue
        except ConfigError as exc:
            problems.extend(exc.problems)
            continue
        out[name] = dict(table)
    return out


def parse_fleet(text: str, file: str = "fleet.toml") -> FleetConfig:
    """Validate a ``fleet.toml`` text. Raises :class:`ConfigError` listing every problem."""
    problems: list[Problem] = []
    if len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        raise ConfigError([(file, "(file)", f"larger than {MAX_FILE_BYTES // 1024} KiB")])
    try:
        data = loads_toml(text)
    except TOML_ERRORS as exc:
        raise ConfigError([toml_syntax_problem(file, exc, text)]) from None
    for key in data:
        if key not in _KEYS:
            problems.append((file, key, unknown("key", key, _KEYS, list_few=True)))
    if "roots" not in data:
        problems.append((file, "roots", "missing: list the memory roots (paths or globs)"))
    roots = _check_roots(data["roots"], file, problems) if "roots" in data else ()

    values: dict[str, Any] = {}
    address = data.get("ray_address", "")
    if not isinstance(address, str):
        problems.append((file, "ray_address",
                         f"must be {_KEYS['ray_address']}, got {toml_got(address)}"))
    elif len(address) > MAX_RAY_ADDRESS_CHARS:
        problems.append((file, "ray_address",
                         f"must be at most {MAX_RAY_ADDRESS_CHARS} characters, got "
                         f"{quoted_value(address)}"))
    elif address not in {"", "auto"} and not _RAY_URL.match(address):
        problems.append((file, "ray_address",
                         f'must be "auto", "ray://host:port" or "" (a local Ray), got '
                         f"{quoted_value(address)}"))
    else:
        values["ray_address"] = address

    def number(key: str, *, integer: bool, low: float, strict: bool = False,
               high: float | None = None) -> None:
        if key not in data:
            return
        value = data[key]
        if not (_integer(value) if integer else _number(value)):
            problems.append((file, key, f"must be {_KEYS[key]}, got {toml_got(value)}"))
        elif high is not None and not low <= value <= high:
            problems.append((file, key, f"must be {low:,g} to {high:,g}, got "
                                        f"{shown_value(value)}"))
        elif value < low or (strict and value == low):
            bound = "greater than" if strict else "at least"
            problems.append((file, key, f"must be {bound} {low:g}, got {shown_value(value)}"))
        else:
            values[key] = float(value) if not integer else value

    number("num_cpus", integer=True, low=1, high=MAX_NUM_CPUS)
    number("task_cpus", integer=False, low=MIN_TASK_CPUS, high=MAX_TASK_CPUS)
    number("max_retries", integer=True, low=0, high=MAX_TASK_RETRIES)
    number("roots_per_worker", integer=True, low=1)
    if values.get("roots_per_worker", 1) > MAX_ROOTS_PER_WORKER:
        shown = quoted_value(values.pop("roots_per_worker"))
        problems.append((file, "roots_per_worker",
                         f"must be at most {MAX_ROOTS_PER_WORKER}, got {shown}"))
    number("poll_seconds", integer=False, low=0, strict=True)
    if not MIN_POLL_SECONDS <= values.get("poll_seconds", 2.0) <= MAX_POLL_SECONDS:
        shown = quoted_value(values.pop("poll_seconds"))
        problems.append((file, "poll_seconds", f"must be {MIN_POLL_SECONDS:g} to "
                         f"{MAX_POLL_SECONDS:g} (an hour), got {shown}"))
    if "probe_work" in data:
        if isinstance(data["probe_work"], bool):
            values["probe_work"] = data["probe_work"]
        else:
            problems.append((file, "probe_work",
                             f"must be true or false, got {toml_got(data['probe_work'])}"))
    if values.get("task_cpus", 1.0) > values.get("num_cpus", math.inf):
        problems.append((file, "task_cpus",
                         f"must be at most num_cpus ({values['num_cpus']}), got "
                         f"{quoted_value(data['task_cpus'])}: a worker needs that many CPUs "
                         "and none could start"))
    if "num_cpus" in values and values.get("ray_address", "") != "":
        problems.append((file, "num_cpus", "only applies to a local Ray (ray_address = \"\"); "
                                           "a cluster's CPUs are its own"))
    if "strategies" in data:
        values["strategies"] = _check_strategies(data["strategies"], file, problems)
    if problems:
        raise ConfigError(problems)
    return FleetConfig(file=file, roots=roots, **values)


def _is_glob(pattern: str) -> bool:
    return any(c in _GLOB_CHARS for c in pattern)


def resolve_roots(config: FleetConfig, *,
                  skipped: list[Problem] | None = None) -> list[Path]:
    """Expand ``roots`` into existing memory roots, in order, each once.

    A relative pattern is relative to the ``fleet.toml``'s folder. A pattern that matches no
    folder is a problem (a typo would otherwise silently drop shards), and so is a folder that
    is not a memory root (:func:`~everos_reflect.runtime.is_memory_root`): nothing is created
    in it. All are reported at once.

    ``skipped``: a folder a glob matches that is not a memory root is listed there instead,
    and the other roots are returned (``fleet serve``'s rescan: a shard folder made before
    ``init`` ran in it stopped every new shard joining until it was a root)."""
    problems: list[Problem] = []
    found: dict[Path, int] = {}  # root -> the pattern that first gave it
    named: dict[Path, int] = {}  # root -> the path (no glob) that first named it
    for i, pattern in enumerate(config.roots):
        where = f"roots[{i}]"
        try:
            expanded = expand_user(pattern)
        except EverosError as exc:
            problems.append((config.file, where, str(exc).removeprefix("path ")))
            continue
        if not expanded.is_absolute():
            expanded = config.base_dir / expanded
        if _is_glob(pattern):
            matches = [Path(p) for p in sorted(glob.glob(str(expanded))) if Path(p).is_dir()]
            if not matches:
                problems.append((config.file, where, f"{quoted_value(pattern)} matches no folder"))
            for match in matches:
                if is_memory_root(match):
                    found.setdefault(match.resolve(), i)
                else:
                    (problems if skipped is None else skipped).append(
                        (config.file, where, f"{str(match)!r} (matched by "
                         f"{quoted_value(pattern)}) {_NOT_A_ROOT}"))
        else:
            try:
                if expanded.is_dir():
                    if is_memory_root(expanded):
                        real = expanded.resolve()
                        if real in named:
                            problems.append((config.file, where, _named_twice(
                                pattern, config.roots[named[real]], f"roots[{named[real]}]")))
                            continue
                        named[real] = i
                        found.setdefault(real, i)
                        continue
                    reason = _NOT_A_ROOT
                else:
                    reason = _missing(expanded)
            except OSError as exc:  # a name too long for the file system: a problem, not
                # an OSError quoting the whole path
                reason = f"cannot be looked up ({os_reason(exc)})"
            problems.append((config.file, where, f"{quoted_value(pattern)} {reason}"))
    problems += _nested(config.file, found)
    if problems:
        raise ConfigError(problems)
    return list(found)


def _named_twice(pattern: str, first: str, at: str) -> str:
    """Why a path naming a root another path named already (``a/``, ``./a``, a symlink to
    ``a``) is refused: both spellings. It was merged without a word, so a typo'd second
    shard path that happened to name the first (``shard-1`` for ``shard-11``) left a shard
    out unseen. A glob matching a root a path names is no mistake: "every shard" and "this
    one" overlap, each root run once. Both are shown whole, as a nested root is: cut at 60
    characters, two spellings of a long path read the same (the trailing ``/`` cut off)."""
    return f"{pattern!r} is the root {first!r} ({at}) again: the same folder; name each root once"


#: Why a folder is refused as a root. A fleet run opens each root, which makes its ``.index/``:
#: a typo'd or unrelated folder (a home directory, a glob one level off) became a "root", got
#: an index, and reported ``ok`` with nothing done. ``init`` makes a root.
_NOT_A_ROOT = ("is not a memory root (it has no everos.toml, ome.toml, .index/ or "
               "<app>/<project>/users/ folder; `everos-reflect init` makes one)")


def _missing(path: Path) -> str:
    """Why ``path``, which is no folder, is not one. A symlink loop was "does not exist"
    (``Path.exists`` says False for it), which sent the user looking for a missing folder."""
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symlink loop" if path.is_symlink() else "runs into a symlink loop"
        if exc.errno == errno.ENOENT and path.is_symlink():
            return f"is a symlink to {quoted_value(os.readlink(path))}, which does not exist"
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return "does not exist"
        raise
    return "is not a folder"


def distinct_roots(roots: Iterable[Path | str]) -> list[str]:
    """Each root once, in order, under its first spelling. The same folder given twice (a
    trailing slash, ``..``, a symlink) ran twice at once, the second run ``busy`` against the
    first, and the fleet's report held that folder's results under several names: a run
    failing against itself. :func:`resolve_roots` lists each root once already; this guards
    callers that build their own list (``run_fleet``, ``FleetScheduler``)."""
    seen: set[str] = set()
    out = []
    for root in roots:
        real = os.path.realpath(root)
        if real not in seen:
            seen.add(real)
            out.append(str(root))
    return out


def _nested(file: str, found: Mapping[Path, int]) -> list[Problem]:
    """A root inside another root of the fleet, one problem each. A root is self-contained:
    the inner "root" is one of the outer root's app, project or user folders (a glob one
    level too deep), and a run there would write an ``.index/`` into the outer root's tree
    and report an empty root ``ok``. Both are shown whole: they are folders found on disk
    (bounded by the file system), not values of the file, and the point is to tell which."""
    problems = []
    for root, i in found.items():
        outer = next((p for p in root.parents if p in found), None)
        if outer is not None:
            problems.append((file, f"roots[{i}]", f"{str(root)!r} is inside the root "
                             f"{str(outer)!r} (roots[{found[outer]}]); a memory root holds no "
                             "other root"))
    return problems


def strategy_defaults_for(path: str | Path, root: str | Path) -> dict[str, dict[str, Any]]:
    """The ``[strategies]`` defaults the fleet ``path`` gives ``root``, which must be one of
    its roots: what its runs lay the root's own ``ome.toml`` over (:func:`read_fleet`'s
    problems raised as they are)."""
    config, roots = read_fleet(path)
    if Path(root).resolve() not in roots:
        raise EverosError(f"{quoted_value(str(root))} is not a root of the fleet "
                          f"{quoted_value(config.file)} (no pattern of its roots names it)")
    return {name: dict(table) for name, table in config.strategies.items()}


def read_fleet(path: str | Path) -> tuple[FleetConfig, list[Path]]:
    """Read, validate and expand a ``fleet.toml`` file. An empty path (``--fleet ""``: what
    ``"$FLEET"`` gives when the variable is unset) is refused as such, as ``--root ""`` is: it
    was read as ``.``, "invalid configuration: .: (file): not a regular file"."""
    if not str(path):
        raise EverosError("the fleet file is an empty path: pass the fleet.toml file")
    file = expand_user(path, "--fleet")
    try:
        data = read_config_bytes(file)
        if data is None:
            raise EverosError(f"no fleet file at {file}")
        text = config_text(data, str(file))
    except OSError as exc:
        raise ConfigError([(str(file), "(file)", os_reason(exc))]) from None
    config = parse_fleet(text, str(file.resolve()))
    return config, resolve_roots(config)


def fleet_for(path: str | Path | None,
              given: Iterable[str] = ()) -> tuple[FleetConfig, list[Path]]:
    """The fleet a ``fleet`` command runs on: ``--fleet FILE``, narrowed to the ``--root``
    paths ``given`` (each must be one of its roots), or without a file the ``given`` roots
    alone, on a local Ray with no ``[strategies]`` defaults; with neither, the one root every
    command works on (``EVEROS_ROOT``, else ``~/.everos``), as SPEC §8 has it."""
    given = list(given)
    _each_once(given)
    if path is None:
        chosen = [resolve_root(r) for r in given] or [resolve_root(None)]
        for root in chosen:
            if (reason := not_a_root_reason(root)) is not None:
                raise EverosError(reason)
        config = FleetConfig("--root", tuple(_literal(root) for root in chosen))
        return config, resolve_roots(config)
    config, roots = read_fleet(path)
    if not given:
        return config, roots
    chosen = []
    for root in map(resolve_root, given):
        if root.resolve() not in roots:
            raise EverosError(f"{shown_path(root)} is not a root of the fleet "
                              f"{shown_path(config.file)} (no pattern of its roots names it)")
        chosen.append(root.resolve())
    narrowed = replace(config, roots=tuple(_literal(root) for root in chosen))
    return narrowed, resolve_roots(narrowed)


def _each_once(given: list[str]) -> None:
    """Refuse a ``--root`` naming a root an earlier ``--root`` named (``a/``, a symlink to
    ``a``), in the words of :func:`resolve_roots`, both as typed: their roots were resolved,
    so both spellings were one path by the time it could see them."""
    seen: dict[Path, str] = {}
    for spelled in given:
        real = resolve_root(spelled)
        if real in seen:
            raise EverosError(f"--root {_named_twice(spelled, seen[real], 'given before')}")
        seen[real] = spelled


def _literal(root: Path) -> str:
    """``root`` as a pattern of ``roots`` that names that folder only: absolute, and its
    ``*``, ``?`` and ``[`` matching themselves."""
    return glob.escape(os.path.abspath(root))
