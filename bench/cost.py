"""What consolidation costs as memory grows: wall time and peak RSS per stage, and LLM overlap.

Memory: the LoCoMo root of ``bench/locomo_root.py`` (1× = 544 Episodes + 2,541 atomic facts,
20 users), scaled up synthetically: replica ``r`` of every conversation is a new project and new
users (``conv-26x3-Caroline``), its dates shifted by ``r`` days and the sentences of each text
rotated by ``r`` (so no two replicas hold the same text). Roots are written in bulk (same bytes
as ``MarkdownStore.append``, one write per file).

Stages, each in its own subprocess, so one stage's peak RSS never masks another's (the child
reports ``getrusage(RUSAGE_SELF).ru_maxrss`` at exit):

- **index**: ``Indexer.scan()`` — parse, embed, write SQLite + LanceDB, and online clustering
  of each new Episode (the indexer hands new Episodes to the cluster service);
- **cluster**: ``ClusterService.recluster()`` — rebuild every cluster from stored vectors;
- **reflect**: ``reflect_episodes`` with the extractive provider over every eligible cluster
  (``max_clusters_per_run = 1000``), including the coverage guard's embeddings.

``--embedder hash`` (default for scales above 1) swaps the bundled MiniLM model for the
deterministic hash embedder so embedding does not dominate the large scales; the table says
which embedder each row used. ``--llm-latency`` runs Reflection at each of ``--llm-scales``
(default 1×) against the fake OpenAI-compatible server (tests/fake_openai.py, in a process of
its own) answering every call after a fixed delay, and compares the run with the ideal: total
LLM time ÷ ``llm.max_concurrency``, both from the same run.

    python bench/cost.py /path/to/locomo10.json [--scales 1,10,100] [--out bench/results]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from datetime import timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.fake_openai (LLM stage)
import locomo_episodes as lm
import locomo_root

OME = """[strategies.reflect_episodes]
enabled = false
max_clusters_per_run = 1000
"""
STAGES = ("index", "cluster", "reflect")


# --------------------------------------------------------------------------- building


def scaled_episodes(data: list[dict[str, Any]], scale: int) -> tuple[list[lm.LocomoEpisode],
                                                                     dict[Any, Any]]:
    """``scale`` replicas of every conversation (replica 0 is LoCoMo unchanged)."""
    base = lm.episodes(data)
    facts = locomo_root.observations(data)
    episodes: list[lm.LocomoEpisode] = []
    all_facts: dict[Any, Any] = {}
    for r in range(scale):
        for ep in base:
            sample = ep.sample_id if r == 0 else f"{ep.sample_id}x{r}"
            sentences = ep.text.split(". ")
            k = r % max(1, len(sentences))
            text = ". ".join(sentences[k:] + sentences[:k])
            episodes.append(replace(ep, sample_id=sample, user_id=lm.user_id_for(sample,
                                    ep.speaker), timestamp=ep.timestamp + timedelta(days=r),
                                    text=text))
            own = facts.get((ep.sample_id, ep.session, ep.speaker))
            if own:
                all_facts[(sample, ep.session, ep.speaker)] = own
    return episodes, all_facts


def build_scaled(data_path: Path, root: Path, scale: int) -> dict[str, Any]:
    episodes, facts = scaled_episodes(lm.load(data_path), scale)
    root.mkdir(parents=True, exist_ok=True)
    (root / "ome.toml").write_text(OME, encoding="utf-8")
    report = locomo_root.write_root(root, episodes, facts, bulk=True)
    return report.as_dict()


# --------------------------------------------------------------------------- one stage (child)


def _runtime(root: Path, embedder: str, llm_url: str | None = None) -> Any:
    from everos_reflect.runtime import Runtime
    from everos_reflect.settings import load_settings

    settings = load_settings(root)
    settings = replace(settings, embedding=replace(settings.embedding, provider=embedder))
    if llm_url:
        settings = replace(settings, llm=replace(settings.llm, provider="openai",
                                                 base_url=llm_url, api_key="x", model="fake"))
    return Runtime(root, settings)


#: The fake LLM's narrative length, as a share of its sources' words: a real model asked for at
#: most ``NARRATIVE_WORD_RATIO`` (0.7) × the sources writes about this much.
FAKE_NARRATIVE_RATIO = 0.6
_CONTENT_RE = re.compile(r"<content>\n(.*?)\n</content>", re.DOTALL)


def fake_narrative(prompt: str, ratio: float = FAKE_NARRATIVE_RATIO) -> str:
    """A short narrative honestly built from a merge prompt's sources (its ``<content>`` blocks:
    the Episodes and, in update mode, the old narrative), about ``ratio`` × their words.

    Like a model told to compress without dropping facts, it says each sentence once and
    leaves out function words (never a negation, nor a sentence's first word), keeping
    names, numbers and content words; if that is still too long it drops the longest
    sentences. Nothing is invented."""
    from everos_reflect.llm.extractive import NEGATIONS, STOPWORDS, split_sentences

    sources = _CONTENT_RE.findall(prompt)
    budget = max(1, round(ratio * sum(len(s.split()) for s in sources)))
    function_words = STOPWORDS - NEGATIONS
    seen: set[str] = set()
    sentences: list[str] = []
    for source in sources:
        for sentence in split_sentences(source):
            first, *rest = sentence.split()
            kept = [first, *(w for w in rest
                             if w.lower().strip(".,;:!?\"'") not in function_words)]
            short = " ".join(kept)
            if short.lower() not in seen:
                seen.add(short.lower())
                sentences.append(short)
    words = sum(len(s.split()) for s in sentences)
    dropped: set[int] = set()
    for longest in sorted(range(len(sentences)), key=lambda i: -len(sentences[i].split())):
        if words <= budget or len(dropped) == len(sentences) - 1:
            break
        words -= len(sentences[longest].split())
        dropped.add(longest)
    return " ".join(s if s.endswith((".", "!", "?")) else s + "."
                    for i, s in enumerate(sentences) if i not in dropped)


def _fake_reply(body: dict[str, Any]) -> dict[str, Any]:
    """A plausible reply to a merge or fact-extraction request, built from the prompt: a merge
    gets :func:`fake_narrative` (short enough for the narrative length guard), an extraction
    gets the sentences of the text it was given."""
    from everos_reflect.llm.extractive import split_sentences

    schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema", {})
    text = body["messages"][-1]["content"]
    if "facts" in schema.get("properties", {}):
        block = re.search(r"<text>\n(.*)\n</text>", text, re.DOTALL)
        return {"facts": split_sentences(block.group(1) if block else text)}
    return {"title": "Merged narrative", "content": fake_narrative(text)}


class FakeServer:
    """tests/fake_openai.py answering every chat call with :func:`_fake_reply` after
    ``latency``, in a process of its own: a real LLM server runs elsewhere, so its work (HTTP,
    JSON, writing the fake narrative) must not hold the measured process's interpreter lock.
    Its CPU still counts against the same machine."""

    def __init__(self, latency: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--serve-fake", str(latency)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            raise SystemExit(f"fake LLM server did not start: {self.base_url!r}")

    def calls(self) -> int:
        """Chat calls answered so far."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("count\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def stop(self) -> dict[str, Any]:
        """Stop it; the chat calls it answered (``calls``), the most it had in flight at once
        (``max_in_flight``) and ``in_flight_log`` (see ``FakeOpenAI.in_flight_log``)."""
        out, _ = self.proc.communicate("", timeout=60)
        return json.loads(out.strip().splitlines()[-1])


def serve_fake(latency: float) -> None:
    """The fake server's process: prints its URL, serves until stdin closes, prints counts."""
    from tests.fake_openai import FakeOpenAI

    fake = FakeOpenAI(latency=latency).start()
    fake.script(*[_fake_reply] * 100_000)
    print(fake.base_url, flush=True)
    for line in sys.stdin:  # "count": the chat calls so far; end of input: stop
        if line.strip() == "count":
            print(len(fake.chat_bodies()), flush=True)
    fake.stop()
    print(json.dumps({"calls": len(fake.chat_bodies()), "max_in_flight": fake.max_in_flight,
                      "in_flight_log": fake.in_flight_log}), flush=True)


def window(log: list[tuple[float, int]], start: float, end: float,
           width: int) -> dict[str, float]:
    """How the run used the server, from its ``in_flight_log`` (``time.monotonic()``, the same
    clock in every process): seconds from the run's start to its first call, from its last
    answer to the run's end, and in between with fewer than ``width`` calls in flight (the
    window not full: waiting for local work, or fewer than ``width`` calls left)."""
    events = [(t, n) for t, n in log if start <= t <= end]
    if not events:
        return {"to_first_call_s": round(end - start, 2), "after_last_reply_s": 0.0,
                "window_not_full_s": 0.0}
    not_full = 0.0
    for (t, n), (t_next, _) in pairwise(events):
        if n < width:
            not_full += t_next - t
    return {"to_first_call_s": round(events[0][0] - start, 2),
            "after_last_reply_s": round(end - events[-1][0], 2),
            "window_not_full_s": round(not_full, 2)}


def llm_floor(rt: Any, calls: int) -> dict[str, Any]:
    """The same number of calls by the same client (the runtime's LLM) at the same
    concurrency with no local work at all: what the run would take if Reflection's own work
    were free. The ideal (calls × latency ÷ concurrency) leaves out the client's and the
    server's own time per call; this does not."""
    from concurrent.futures import ThreadPoolExecutor

    from everos_reflect.llm.base import FactsRequest

    text = "Caroline went to a support group. It made her feel accepted. She plans to go again."
    workers = max(1, int(rt.settings.llm.max_concurrency))
    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda _: rt.llm.extract_facts(FactsRequest(text=text)), range(calls)))
    return {"calls": calls, "seconds": round(time.perf_counter() - started, 2)}


def child(stage: str, root: Path, embedder: str, llm_latency: float | None) -> dict[str, Any]:
    from everos_reflect.clustering.service import ClusterService
    from everos_reflect.engine.engine import Engine
    from everos_reflect.index.sync import Indexer

    fake = FakeServer(llm_latency) if llm_latency is not None else None
    rt = _runtime(root, embedder, fake.base_url if fake else None)
    client_seconds = 0.0
    if fake is not None:
        # the LLM client is built before the clock starts, as the runtime itself is: a daemon
        # builds it once (importing ``openai`` takes ~1 s of CPU), not once per run
        t = time.perf_counter()
        assert rt.llm is not None
        client_seconds = time.perf_counter() - t
    started = time.perf_counter()
    started_mono = time.monotonic()
    if stage == "index":
        counts: Any = Indexer(rt).scan().as_dict()
        counts.pop("problems", None)
    elif stage == "cluster":
        counts = ClusterService(rt).recluster()
    else:
        outcome = Engine(rt).trigger("reflect_episodes", force=True, timeout=None)
        counts = {"status": outcome.status, **outcome.counts}
    seconds = time.perf_counter() - started
    ended_mono = time.monotonic()
    out = {"stage": stage, "seconds": round(seconds, 2),
           "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
           "counts": counts}
    if fake is not None:
        run_calls = fake.calls()
        floor = llm_floor(rt, run_calls)
        stats = fake.stop()
        calls = int(stats["calls"]) - floor["calls"]
        width = int(rt.settings.llm.max_concurrency)
        out["llm"] = {"calls": calls, "latency_s": llm_latency,
                      "floor_seconds": floor["seconds"],
                      "client_build_seconds": round(client_seconds, 2),
                      **window(stats["in_flight_log"], started_mono, ended_mono, width),
                      "max_concurrency": rt.settings.llm.max_concurrency,
                      "max_in_flight": int(stats["max_in_flight"]),
                      "llm_seconds_total": round(calls * llm_latency, 2),
                      "ideal_seconds": round(calls * llm_latency
                                             / rt.settings.llm.max_concurrency, 2)}
    rt.close()
    return out


def run_stage(stage: str, root: Path, embedder: str,
              llm_latency: float | None = None) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", stage, "--root", str(root),
           "--embedder", embedder]
    if llm_latency is not None:
        cmd += ["--llm-latency", str(llm_latency)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                          env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    if proc.returncode != 0:
        raise SystemExit(f"stage {stage} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- parent


def measure_scale(data_path: Path, work: Path, scale: int, embedder: str,
                  keep_indexed: Path | None = None,
                  stages: tuple[str, ...] = STAGES) -> dict[str, Any]:
    """Build, then run each stage in a child; ``keep_indexed`` gets a copy of the root as it
    is before Reflection (for the LLM run)."""
    root = work / f"x{scale}-{embedder}"
    if root.exists():
        shutil.rmtree(root)
    t = time.perf_counter()
    built = build_scaled(data_path, root, scale)
    row: dict[str, Any] = {"scale": scale, "embedder": embedder, "episodes": built["episodes"],
                           "facts": built["facts"], "users": built["users"],
                           "build_seconds": round(time.perf_counter() - t, 1)}
    if keep_indexed is not None and "reflect" not in stages:
        stages = (*stages, "copy")
    for stage in stages:
        if stage in ("reflect", "copy") and keep_indexed is not None:
            if keep_indexed.exists():
                shutil.rmtree(keep_indexed)
            shutil.copytree(root, keep_indexed)
        if stage == "copy":
            continue
        row[stage] = run_stage(stage, root, embedder)
        print(f"  x{scale} {embedder} {stage}: {row[stage]['seconds']} s, "
              f"{row[stage]['peak_rss_mb']} MB", flush=True)
    row["disk_mb"] = round(sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
                           / 2**20, 1)
    return row


def measure_llm(root: Path, latency: float, embedder: str, scale: int = 1) -> dict[str, Any]:
    """Reflection on an indexed, clustered root, every LLM call answered after ``latency``."""
    result = run_stage("reflect", root, embedder, llm_latency=latency)
    result["embedder"] = embedder
    result["scale"] = scale
    print(f"  llm run: {result['seconds']} s, {result['llm']}", flush=True)
    return result


def llm_only(roots: list[tuple[int, Path]], latency: float, embedder: str, out: Path) -> int:
    """The LLM run alone on copies of prebuilt roots; results to ``cost_llm.json`` / ``.md``."""
    out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"cpus": os.cpu_count(), "scales": [], "llm_runs": []}
    with tempfile.TemporaryDirectory(prefix="everos-cost-") as tmp:
        for scale, root in roots:
            copy = Path(tmp) / f"llm-x{scale}"
            shutil.copytree(root, copy)
            result["llm_runs"].append(measure_llm(copy, latency, embedder, scale))
            shutil.rmtree(copy)
            (out / "cost_llm.json").write_text(json.dumps(result, indent=2) + "\n",
                                               encoding="utf-8")
            (out / "cost_llm.md").write_text(markdown(result), encoding="utf-8")
    print(markdown(result))
    return 0


def markdown(result: dict[str, Any]) -> str:
    if not result["scales"]:  # --llm-roots: the LLM run alone
        lines = ["# Reflection against the fake LLM", "",
                 f"Generated by `python bench/cost.py --llm-roots ...` on {os.cpu_count()} "
                 "CPU(s), on copies of roots built, indexed and clustered beforehand."]
    else:
        lines = [
            "# Cost of consolidation vs memory size",
            "",
            f"Generated by `python bench/cost.py locomo10.json --scales "
            f"{','.join(str(r['scale']) for r in result['scales'])}` on {os.cpu_count()} CPU(s). "
            "Each stage runs in its own process; peak RSS is that process's maximum resident set. "
            "Method: docs/evaluation.md.",
            "",
            "| scale | embedder | Episodes | facts | index s | index MB | cluster s | cluster MB "
            "| reflect s | reflect MB | merges | disk MB |",
            "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
    for r in result["scales"]:
        r = {"reflect": {"seconds": "—", "peak_rss_mb": "—", "counts": {"merged": "—"}}, **r}
        lines.append(
            f"| {r['scale']}× | {r['embedder']} | {r['episodes']} | {r['facts']} | "
            f"{r['index']['seconds']} | {r['index']['peak_rss_mb']} | {r['cluster']['seconds']} "
            f"| {r['cluster']['peak_rss_mb']} | {r['reflect']['seconds']} | "
            f"{r['reflect']['peak_rss_mb']} | {r['reflect']['counts'].get('merged', 0)} | "
            f"{r['disk_mb']} |")
    runs = result.get("llm_runs") or ([result["llm"]] if result.get("llm") else [])
    if runs:
        latency = runs[0]["llm"]["latency_s"]
        lines += [
            "",
            f"## Reflection against a fake OpenAI server at {latency * 1000:.0f} ms per call",
            "",
            "| scale | embedder | LLM calls | total LLM time s | max_concurrency | ideal s "
            "(total ÷ concurrency) | reflect run s | run ÷ ideal | LLM floor s | run ÷ floor "
            "| max calls in flight | to first call s | window not full s | after last reply s "
            "| merges |",
            "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for llm in runs:
            info = llm["llm"]
            lines.append(
                f"| {llm.get('scale', 1)}× | {llm['embedder']} | {info['calls']} | "
                f"{info['llm_seconds_total']} | {info['max_concurrency']} | "
                f"{info['ideal_seconds']} | {llm['seconds']} | "
                f"{llm['seconds'] / max(info['ideal_seconds'], 1e-9):.2f}× | "
                f"{info.get('floor_seconds', '—')} | "
                + (f"{llm['seconds'] / max(info['floor_seconds'], 1e-9):.2f}× | "
                   if info.get("floor_seconds") else "— | ")
                + f"{info['max_in_flight']} | {info.get('to_first_call_s', '—')} | "
                f"{info.get('window_not_full_s', '—')} | {info.get('after_last_reply_s', '—')} | "
                f"{llm['counts'].get('merged', 0)} |")
        lines += [
            "",
            "The fake server runs in a process of its own (a real one runs elsewhere), on the "
            "same CPUs. The LLM floor is as many (short, fact-extraction) calls, made right "
            "after the run by the same client at the same concurrency, with nothing else to "
            "do: the ideal leaves out the client's and the server's own time per call, the "
            "floor does not. The LLM client is built before the run's clock starts, as the "
            "runtime is (a daemon builds both once); building it took "
            + ", ".join(f"{r['llm'].get('client_build_seconds', '—')} s" for r in runs)
            + ". From the server's own log of calls in flight: the time from the run's start "
            "to its first call, the time between its first call and its last answer with fewer "
            "than max_concurrency calls in flight, and the time from its last answer to the "
            "run's end. "
            "The run's time above the floor is local work: the coverage guard's "
            "embeddings (one call for all the drafts waiting) on the guard's thread, and the "
            "batched commits on the run's thread, sharing the machine's cores with the LLM "
            "client.",
        ]
    if result["scales"]:
        lines += ["", "![cost vs memory size](cost_scale.png)"]
    lines.append("")
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted(result["scales"], key=lambda r: r["episodes"])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for stage, marker in zip(STAGES, "os^", strict=True):
        for emb, ls in (("local", "-"), ("hash", "--")):
            pts = [r for r in rows if r["embedder"] == emb and stage in r]
            if not pts:
                continue
            xs = [r["episodes"] + r["facts"] for r in pts]
            ax1.plot(xs, [r[stage]["seconds"] for r in pts], marker + ls,
                     label=f"{stage} ({emb})")
            ax2.plot(xs, [r[stage]["peak_rss_mb"] for r in pts], marker + ls,
                     label=f"{stage} ({emb})")
    for ax, label in ((ax1, "wall time (s)"), (ax2, "peak RSS (MB)")):
        ax.set_xscale("log")
        ax.set_xlabel("entries in memory (Episodes + atomic facts)")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    ax1.set_yscale("log")
    ax1.legend(fontsize=7)
    fig.suptitle("Cost per stage vs memory size (synthetic scale-up of LoCoMo)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _scaled_roots(text: str) -> list[tuple[int, Path]]:
    pairs = [item.split("=", 1) for item in text.split(",") if item.strip()]
    return [(int(scale), Path(path)) for scale, path in pairs]


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.replace(",", " ").split()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_path", type=Path, nargs="?", help="path to locomo10.json")
    parser.add_argument("--scales", type=_ints, default=[1, 10, 100])
    parser.add_argument("--embedder", choices=("local", "hash"),
                        help="embedder for every scale (default: local at 1x, hash above)")
    parser.add_argument("--local-at-1", action="store_true",
                        help="also measure 1x with the local model when --embedder hash")
    parser.add_argument("--llm-latency", type=float, default=0.3,
                        help="fake server latency in seconds; 0 skips the LLM run")
    parser.add_argument("--llm-scales", type=_ints, default=[1],
                        help="scales at which to run Reflection against the fake LLM too")
    parser.add_argument("--skip-reflect", action="store_true",
                        help="no extractive Reflection stage (the LLM run still happens)")
    parser.add_argument("--serve-fake", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--work", type=Path, help="keep the roots here (default: a temp dir)")
    parser.add_argument("--llm-roots", type=_scaled_roots, default=None,
                        help="only the LLM run, on a copy of each root already built, indexed "
                             "and clustered by an earlier run with --work (e.g. "
                             "1=work/x1-local,10=work/x10-local); nothing else is measured")
    parser.add_argument("--child", choices=STAGES, help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.serve_fake is not None:
        serve_fake(args.serve_fake)
        return 0
    if args.child:
        latency = args.llm_latency if "--llm-latency" in (argv or sys.argv) else None
        print(json.dumps(child(args.child, args.root, args.embedder or "local", latency)))
        return 0
    if args.llm_roots:
        return llm_only(args.llm_roots, args.llm_latency, args.embedder or "local", args.out)
    if args.data_path is None or not args.data_path.is_file():
        parser.error(f"no such file: {args.data_path}")
    args.out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"cpus": os.cpu_count(), "scales": []}

    def save() -> None:  # after every measurement: a long run that is cut short keeps its rows
        (args.out / "cost.json").write_text(json.dumps(result, indent=2) + "\n",
                                            encoding="utf-8")
        (args.out / "cost.md").write_text(markdown(result), encoding="utf-8")
        plot(result, args.out / "cost_scale.png")

    with tempfile.TemporaryDirectory(prefix="everos-cost-") as tmp:
        work = args.work or Path(tmp)
        plan = [(s, args.embedder or ("local" if s == 1 else "hash")) for s in args.scales]
        if args.local_at_1 and args.embedder == "hash":
            plan.insert(0, (1, "local"))
        # one LLM run per scale asked, on its first embedder (local at 1× when measured)
        llm_plan = {s: e for s, e in reversed(plan) if s in args.llm_scales}
        result["llm_runs"] = []
        for scale, embedder in plan:
            llm_here = args.llm_latency > 0 and llm_plan.get(scale) == embedder
            keep = (work / f"llm-x{scale}") if llm_here else None
            stages = tuple(st for st in STAGES if st != "reflect" or not args.skip_reflect)
            result["scales"].append(measure_scale(args.data_path, work, scale, embedder, keep,
                                                  stages))
            save()
            if keep is not None:
                result["llm_runs"].append(measure_llm(keep, args.llm_latency, embedder, scale))
                save()
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
