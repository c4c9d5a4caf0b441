"""Resident memory of ``reindex`` and of a ``serve`` process over a scripted search run.

Builds (or reuses) a LoCoMo memory root, runs ``everos-reflect reindex`` in a child process and
reports its peak RSS (the kernel's high-water mark), then starts ``everos-reflect serve`` on
loopback and samples its RSS (``/proc/<pid>/status``) at start, after the first search and
every ``--every`` searches up to ``--searches`` (LoCoMo questions, alternating a whole-root
search with a one-user search, hybrid mode). Targets (issue 15): reindex peak ≤ 400 MB, serve
≤ 250 MB and flat over 1,000 searches.

    python bench/bench_memory.py /path/to/locomo10.json [--root DIR] [--searches 1000]
        [--every 100] [--no-reindex] [--page-cache {as-is,cold,pip}]

``--no-reindex`` measures ``serve`` alone on a ``--root`` that is already indexed (to compare
two checkouts' ``serve`` on one root: run each with ``PYTHONPATH=/path/to/checkout``).

The file-backed part of the RSS depends on how the libraries' pages came into the page cache
(docs/memory.md): the kernel maps a whole page-cache folio on a fault, and a file written in
1 MiB pieces (as ``pip`` installs a wheel) sits in 1 MiB folios, while one read in by page faults
sits in small ones. ``--page-cache`` sets that state for this environment's shared libraries
(``*.so*`` under ``sys.prefix``, which belong to this environment only) before ``reindex`` and
again before ``serve`` start; it changes nothing in the processes measured:

- ``cold``: drop them from the page cache (``POSIX_FADV_DONTNEED``), so they are read back by
  the processes' page faults (``--cold-libraries`` is the same);
- ``pip``: rewrite each as ``pip`` does (same bytes, a new file written in 1 MiB pieces, renamed
  over the old one): the state straight after ``pip install``;
- ``as-is`` (default): leave the page cache alone.

Every sample also gives PSS (each shared page divided among the processes mapping it) and USS
(pages no other process maps), from ``/proc/<pid>/smaps_rollup``. ``--mappings N`` prints,
after the first search and after the last, the N mappings holding the most of ``serve``'s RSS
(``/proc/<pid>/smaps``: each shared library, the heap, the anonymous mappings together).
"""

from __future__ import annotations

import argparse
import collections
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo_episodes as lm
import locomo_root

CLI = [sys.executable, "-m", "everos_reflect.cli.main"]


def status_mb(pid: int) -> dict[str, float]:
    """RSS figures of ``pid`` in MB: ``VmRSS`` splits into ``RssAnon`` (the process's own
    memory) and ``RssFile`` (pages of mapped files — mostly the code of LanceDB's and
    onnxruntime's shared libraries, shared with other processes and reclaimable)."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            values[key] = int(rest.split()[0]) / 1024
    return values


def rollup_mb(pid: int) -> dict[str, float]:
    """PSS and USS of ``pid`` in MB, from ``/proc/<pid>/smaps_rollup``: PSS shares each page
    among the processes that map it; USS counts the pages only this process maps."""
    values = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("Pss", "Private_Clean", "Private_Dirty"):
            values[key] = int(rest.split()[0]) / 1024
    return {"PSS": values["Pss"], "USS": values["Private_Clean"] + values["Private_Dirty"]}


def mappings_mb(pid: int) -> dict[str, tuple[float, float]]:
    """``name -> (RSS, anonymous)`` in MB per mapped file of ``pid`` (a library under
    ``site-packages`` named with its package), ``[heap]``, and ``[anonymous]`` for every
    mapping without a name (mmap'd blocks, thread stacks, Python's arenas), from
    ``/proc/<pid>/smaps``."""
    kb: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    name = "[anonymous]"
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split(None, 5)
        if "-" in head[0] and ":" not in head[0]:  # a mapping's first line: range perms ...
            path = head[5].strip() if len(head) > 5 else ""
            parts = path.split("/")
            if "site-packages" in parts:
                at = parts.index("site-packages")
                name = f"{parts[at + 1]}: {parts[-1]}"
            else:
                name = parts[-1] if path.startswith("/") else (path or "[anonymous]")
        elif head[0] == "Rss:":
            kb[name][0] += int(head[1])
        elif head[0] == "Anonymous:":
            kb[name][1] += int(head[1])
    return {k: (v[0] / 1024, v[1] / 1024) for k, v in kb.items()}


def print_mappings(pid: int, top: int) -> None:
    """The ``top`` mappings holding the most of ``pid``'s RSS."""
    rows = sorted(mappings_mb(pid).items(), key=lambda kv: -kv[1][0])[:top]
    for name, (rss, anon) in rows:
        print(f"      {rss:6.1f} MB (anonymous {anon:5.1f})  {name}")


def libraries(prefix: Path) -> list[Path]:
    """The shared libraries of the environment at ``prefix`` (regular files, no symlinks)."""
    return [p for p in prefix.rglob("*.so*") if p.is_file() and not p.is_symlink()]


def drop_library_pages(prefix: Path) -> int:
    """Ask the kernel to drop the shared libraries under ``prefix`` from the page cache (clean
    pages only; nothing is written). Returns how many files were advised."""
    count = 0
    for path in libraries(prefix):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            count += 1
        finally:
            os.close(fd)
    return count


PIP_CHUNK = 1024 * 1024  # pip 26 copies each wheel member in pieces of up to 1 MiB


def rewrite_libraries_as_pip(prefix: Path) -> int:
    """Put the shared libraries under ``prefix`` in the page-cache state ``pip install`` leaves:
    each is written anew (same bytes and mode) in ``PIP_CHUNK`` pieces to a temporary file in
    its folder, which then replaces it (a running process keeps the file it mapped). Returns
    how many files were rewritten."""
    count = 0
    for path in libraries(prefix):
        data = path.read_bytes()
        tmp = path.with_name(f".{path.name}.bench-rewrite")
        with open(tmp, "wb") as out:
            for start in range(0, len(data), PIP_CHUNK):
                out.write(data[start:start + PIP_CHUNK])
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
        count += 1
    return count


def set_page_cache(state: str) -> None:
    """Bring this environment's libraries into page-cache ``state`` (see the module doc)."""
    if state == "cold":
        print(f"page cache: dropped {drop_library_pages(Path(sys.prefix))} shared libraries "
              f"under {sys.prefix}")
    elif state == "pip":
        print(f"page cache: rewrote {rewrite_libraries_as_pip(Path(sys.prefix))} shared "
              f"libraries under {sys.prefix} as pip installs them (1 MiB writes)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("locomo", help="path to locomo10.json")
    parser.add_argument("--root", type=Path, help="memory root to build/reuse (default: temp)")
    parser.add_argument("--searches", type=int, default=1000)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--no-reindex", action="store_true",
                        help="skip reindex: serve only, on a --root indexed earlier")
    parser.add_argument("--page-cache", choices=("as-is", "cold", "pip"), default="as-is",
                        help="page-cache state of this environment's shared libraries before "
                             "each measured process starts (see the module doc)")
    parser.add_argument("--mappings", type=int, default=0, metavar="N",
                        help="print the N mappings holding the most RSS after the first "
                             "search and after the last")
    parser.add_argument("--cold-libraries", action="store_const", const="cold",
                        dest="page_cache", help="the same as --page-cache cold")
    args = parser.parse_args(argv)
    if args.no_reindex and args.root is None:
        parser.error("--no-reindex needs --root (a root indexed earlier)")

    tmp = tempfile.TemporaryDirectory(prefix="everos-bench-memory-")
    root = args.root or Path(tmp.name) / "root"
    if not any(root.rglob("*.md")) if root.exists() else True:
        report = locomo_root.build(args.locomo, root)
        print(f"built LoCoMo root: {report.as_dict()}")
    env = {**os.environ, "EVEROS_ROOT": str(root), "EVEROS_EMBEDDING__PROVIDER": "local",
           "EVEROS_LLM__PROVIDER": "extractive"}

    if not args.no_reindex:
        set_page_cache(args.page_cache)
    t0 = time.perf_counter()
    done = None if args.no_reindex else subprocess.run(
        [*CLI, "reindex", "--root", str(root)], env=env, capture_output=True, text=True)
    if done is not None:
        if done.returncode != 0:
            print(done.stdout, done.stderr)
            return 1
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"reindex: {time.perf_counter() - t0:.1f} s wall, peak RSS {peak:.0f} MB "
              f"(target <= 400 MB)")

    questions = [q.question for q in lm.questions(lm.load(args.locomo)) if q.question]
    users = sorted({(e.user_id, e.sample_id) for e in lm.episodes(lm.load(args.locomo))})
    port = free_port()
    set_page_cache(args.page_cache)
    log = open(Path(tmp.name) / "serve.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([*CLI, "serve", "--root", str(root), "--port", str(port)],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}/api/v1", timeout=60) as client:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if client.get("/health").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit("serve did not come up; see its log")
                time.sleep(0.2)
            time.sleep(2.0)  # let the start-up reconcile scan settle
            mb = {**status_mb(proc.pid), **rollup_mb(proc.pid)}
            print(f"serve: RSS {mb['VmRSS']:.0f} MB before the first search = anonymous "
                  f"{mb['RssAnon']:.0f} + file-backed {mb['RssFile']:.0f}; PSS {mb['PSS']:.0f}, "
                  f"USS {mb['USS']:.0f}")
            samples = []
            latencies = []
            started = time.perf_counter()
            for n in range(1, args.searches + 1):
                body = {"query": questions[n % len(questions)], "top_k": 10}
                if n % 2 == 0:
                    user_id, sample_id = users[n % len(users)]
                    body.update(user_id=user_id, app_id="locomo", project_id=sample_id)
                sent = time.perf_counter()
                resp = client.post("/memory/search", json=body)
                latencies.append(time.perf_counter() - sent)
                if resp.status_code != 200:
                    raise SystemExit(f"search {n} failed: {resp.status_code} {resp.text[:200]}")
                if n == 1 or n % args.every == 0 or n == args.searches:
                    mb = {**status_mb(proc.pid), **rollup_mb(proc.pid)}
                    samples.append(mb["VmRSS"])
                    print(f"  after {n:5d} searches: RSS {mb['VmRSS']:6.0f} MB = anonymous "
                          f"{mb['RssAnon']:.0f} + file-backed {mb['RssFile']:.0f} (peak so far "
                          f"{mb['VmHWM']:.0f}); PSS {mb['PSS']:.0f}, USS {mb['USS']:.0f}")
                    if args.mappings and n in (1, args.searches):
                        print_mappings(proc.pid, args.mappings)
            seconds = time.perf_counter() - started
            print(f"serve: {args.searches} searches in {seconds:.1f} s; RSS after first "
                  f"{samples[0]:.0f} MB, last {samples[-1]:.0f} MB, max {max(samples):.0f} MB "
                  f"(target <= 250 MB, flat)")
            later = sorted(latencies[1:]) or latencies
            print(f"search latency over HTTP (query embedding included): first "
                  f"{latencies[0] * 1000:.0f} ms, then p50 {statistics.median(later) * 1000:.1f} "
                  f"ms, p95 {later[int(0.95 * (len(later) - 1))] * 1000:.1f} ms")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
