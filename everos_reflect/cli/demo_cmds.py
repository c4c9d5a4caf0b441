"""``undo`` (revert one merge) and ``demo`` (Reflection before/after on the example root).

``demo`` is the README's first command: it needs no API key and no network. It copies
``memory_root_example`` to a temporary root (or the folder ``--root`` names), indexes it
with the bundled embedder, clusters it, runs Reflection with the offline ``extractive``
provider, and shows what changed: merges made,
entries archived, one narrative in full, the audit rows exactly as ``sqlite3`` prints them, a
search whose answer turns from scattered fragments into the narrative, and one insight with its
evidence (the offline method's, or how to get a model's).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from everos_reflect.cli.common import (
    emit_json,
    handle_errors,
    json_option,
    one_line,
    open_runtime,
    progress,
    root_option,
    writable_root,
)
from everos_reflect.errors import EverosError
from everos_reflect.index import reads
from everos_reflect.model import UserRef, shell_word
from everos_reflect.runtime import Runtime

if TYPE_CHECKING:
    from everos_reflect.strategies.undo import UndoResult

# --------------------------------------------------------------------------- undo

#: ``undo``'s exit code when the merge was undone but a source could not be restored (as
#: ``trigger``'s for a partial run).
UNDO_PARTIAL_EXIT = 3


@click.command("undo")
@click.argument("merged_id")
@click.option("--user", "user_id", required=True, help="The user whose merge it is.")
@click.option("--app", "app_id", default=None, help="App id (default: default_app).")
@click.option("--project", "project_id", default=None,
              help="Project id (default: default_project).")
@click.option("--cascade", is_flag=True,
              help="Also undo later merges built on this one (newest first).")
@root_option
@json_option
@handle_errors
def undo_cmd(merged_id: str, user_id: str, app_id: str | None, project_id: str | None,
             cascade: bool, root: str | None, as_json: bool) -> None:
    """Revert the Reflection merge that wrote MERGED_ID: its sources and their facts live again,
    the narrative and its facts are archived (deprecated_by: undone). With --cascade the later
    merges built on it are undone first, newest first.

    Exit codes: 0 done; 3 partial: done, but a source could not be restored, its entry being
    no longer in the logs (named in the output); 1 refused or failed, the message saying what
    is left. Refused before any write, or by a log changed by hand half-way (the undo rolled
    back), the logs are as before. An I/O error half-way leaves the undo to the next command
    that writes (or run, or serve), which finishes it. A --cascade refused at an earlier merge
    takes back the later undos it did (one stopped by an I/O error is taken back by that next
    command); one a log refuses to take back stays done, named with what finishes the
    cascade."""
    from everos_reflect.markdown.parser import lookup_entry_id
    from everos_reflect.strategies.undo import undo_merge

    ref = UserRef.of(user_id, app_id, project_id)
    merged_id = lookup_entry_id(merged_id, ref)  # an impossible day: unknown, as at the API
    writable_root(root)  # refused in one line, before anything is done
    rt = open_runtime(root)
    try:
        result = undo_merge(rt, ref, merged_id, cascade=cascade)
        held = set() if as_json else _held_clusters(rt, ref)
        by_hand = {} if as_json else _archived_by_hand(rt, result)
    finally:
        rt.close()
    if as_json:
        emit_json(result.to_dict())
    else:
        _say_undone(result, held, by_hand)
    if result.status == "partial":
        sys.exit(UNDO_PARTIAL_EXIT)


def _held_clusters(rt: Runtime, ref: UserRef) -> set[str]:
    """The owner's clusters Reflection now holds back, under the settings a run would be given
    (``remerge_undone``): what the undo report says of the restored sources' cluster."""
    from everos_reflect.strategies.holdback import HoldRules, held_back, reflect_settings

    rules = HoldRules.from_settings(reflect_settings(rt))
    return {h.cluster_id for h in held_back(rt.db(), ref, rt.store, rules)}


def _archived_by_hand(rt: Runtime, result: UndoResult) -> dict[str, str]:
    """The narratives of ``result`` (and its cascade) the undo did not archive though they
    are still in the logs: they were archived already (by hand, ``deprecated_entries``), and
    the undo only restored their sources. Each with its archive key, so the report says so;
    it said "the narrative itself was deleted by hand" of a narrative still there."""
    from everos_reflect.errors import MarkdownError, UnknownEntry

    found: dict[str, str] = {}
    for step in [*result.cascaded, result]:
        if step.archived or step.replaced_by_hand:
            continue
        try:
            entry = rt.store.get(step.ref, step.merged_entry_id)
        except (UnknownEntry, MarkdownError):
            continue  # deleted by hand (or its log unreadable): as the report says
        if entry.deprecated_by is not None:
            found[step.merged_entry_id] = entry.deprecated_by
    return found


def _say_undone(result: UndoResult, held: set[str],
                by_hand: dict[str, str] | None = None) -> None:
    """The undo's report, one block per merge undone (the cascade first). ``by_hand``: the
    narratives a person had archived themselves (:func:`_archived_by_hand`)."""
    by_hand = by_hand or {}
    for step in [*result.cascaded, result]:
        click.echo(f"undid {step.mode} merge {step.merged_entry_id}"
                   f" (cluster {step.cluster_id or '?'})")
        click.echo(f"  restored {_count(step.restored, 'episode')}: "
                   f"{', '.join(step.restored) or '-'}")
        if step.restored_facts:
            click.echo(f"  restored {_count(step.restored_facts, 'atomic fact')}: "
                       f"{', '.join(step.restored_facts)}")
        kept = by_hand.get(step.merged_entry_id)
        gone = ("" if step.archived else
                f" ({step.merged_entry_id} holds an entry written by hand now, not the merge's "
                "narrative: left as it is)" if step.replaced_by_hand
                else f" ({step.merged_entry_id} was already archived "
                f"(deprecated_by: {kept}): left as it is)" if kept is not None
                else " (the narrative itself was deleted by hand)")
        click.echo(f"  archived {step.merged_entry_id if step.archived else 'no narrative'} and "
                   f"{_count(step.archived_facts, 'atomic fact')} (deprecated_by: undone){gone}")
        if step.edited_by_hand:
            click.echo(f"  note: {step.merged_entry_id} was edited by hand after the merge; "
                       "those edits are archived with it (still in its log): add them again as "
                       "an Episode if they should stay live")
        if step.cluster_narrative:
            click.echo(f"  cluster narrative: {step.cluster_narrative}")
        elif step.cluster_id in held:
            click.echo("  cluster narrative: none; Reflection holds the cluster back until a new "
                       "member joins it (remerge_undone = true merges it again)")
        else:
            click.echo("  cluster narrative: none (the next Reflection run may merge it again)")
        if step.missing:
            click.echo(f"  could not restore {_count(step.missing, 'source')}: "
                       f"{', '.join(step.missing)} (no longer in the logs: deleted by hand)")


def _count(items: list[str], noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


# --------------------------------------------------------------------------- demo

DEMO_USER = UserRef.of("u_andrew")
DEMO_QUERY = "how many pets does Andrew have"
AUDIT_SQL = ("SELECT cluster_id, mode, source_count, merged_entry_id FROM reflection_report "
             "ORDER BY created_at DESC LIMIT 10;")
SEARCH_TOP_K = 5
#: The example root's user whose history holds patterns across weeks (README of the root).
INSIGHT_USER = UserRef.of("u_nadia")
INSIGHTS = "reflect_insights"
INSIGHT_HOW = ("Offline, insights only state topics that recur across 3+ weeks. For insights "
               "written by a language model, set [llm] provider = \"openai\" (with base_url "
               "or api_key) in <root>/everos.toml and run `everos-reflect trigger "
               "reflect_insights --force --root <root>`; `everos-reflect insights --user U` "
               "lists them, `explain ID --user U` shows their evidence.")


def example_root() -> Path:
    """``memory_root_example``: the repo checkout next to the package, else the copy shipped as
    package data (``everos_reflect/example_root``)."""
    package = Path(__file__).resolve().parents[1]
    candidates = [package.parent / "memory_root_example", package / "example_root"]
    with contextlib.suppress(ModuleNotFoundError, TypeError):
        candidates.append(Path(str(resources.files("everos_reflect") / "example_root")))
    for path in candidates:
        if path.is_dir() and any(path.glob("*/*/users/*/episodes")):
            return path
    raise EverosError("memory_root_example not found: run the demo from a source checkout "
                      "(pip install -e .), or install a wheel that ships everos_reflect/"
                      "example_root")


@click.command("demo")
@click.option("--keep", is_flag=True, help="Keep the temporary root and print its path.")
@click.option("--root", "root", type=click.Path(path_type=str), default=None,
              help="Run the demo in this folder and keep it there: a new or empty folder "
                   "(nothing is ever deleted; to start over, remove it or give a new one). "
                   "Without it, a temporary folder ($EVEROS_ROOT is never used: the demo does "
                   "not touch your memory).")
@json_option
@handle_errors
def demo_cmd(keep: bool, root: str | None, as_json: bool) -> None:
    """Reflection on the example root, before and after: offline, no API key, about 20 s."""
    source = example_root()
    if root is not None:
        workdir, target = None, demo_folder(root)
    else:
        workdir = Path(tempfile.mkdtemp(prefix="everos-demo-"))
        target = workdir / "root"
    kept = keep or workdir is None
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".index", "*.tmp"),
                    dirs_exist_ok=True)
    try:
        document = run_demo(target, show=None if as_json else _Show())
    except BaseException:
        if workdir is not None and not keep:
            shutil.rmtree(workdir, ignore_errors=True)
        raise
    document["root"] = str(target) if kept else None
    if workdir is not None and not keep:
        shutil.rmtree(workdir, ignore_errors=True)
    if as_json:
        emit_json(document)
    elif kept:
        pasted = shell_word(target)
        click.echo(f"\nThe demo root is kept at {one_line(target)}\n"
                   f"  everos-reflect reports --root {pasted}\n"
                   f"  everos-reflect undo <merged_entry_id> --user u_andrew --root "
                   f"{pasted}")
    else:
        click.echo("\nThe temporary root was removed; run `everos-reflect demo --keep` to "
                   "explore it.")


def demo_folder(given: str) -> Path:
    """The folder ``demo --root`` runs in, empty: made new or found empty. Nothing is ever
    deleted: any folder with something in it is refused before a byte is written (an earlier
    demo's folder too: it may since have become someone's memory root), and so are a file and
    a folder inside a memory root."""
    from everos_reflect.cli.store_cmds import root_around
    from everos_reflect.model import shown_path
    from everos_reflect.runtime import resolve_root

    path = resolve_root(given)
    shown = shown_path(path)
    if path.exists() and not path.is_dir():
        raise EverosError(f"{shown} is not a folder: give demo --root a new or empty folder")
    outer = root_around(path)
    if outer is not None:
        raise EverosError(f"{shown} is inside the memory root {shown_path(outer)}: give demo "
                          "--root a folder outside any memory root")
    if not path.exists():
        path.mkdir(parents=True)
        return path
    if any(path.iterdir()):
        raise EverosError(f"{shown} is not empty: demo --root never deletes or writes among "
                          "files; to start an earlier demo over, remove its folder yourself, "
                          "or give a new one")
    return path


def run_demo(root: Path, show: _Show | None = None) -> dict[str, Any]:
    """Index, cluster and reflect the memory root at ``root`` with the embedded defaults
    (local embedder, extractive provider: never the caller's LLM or API key), and return the
    figures before and after. ``show`` prints each stage as it completes."""
    from everos_reflect.settings import load_settings

    rt = Runtime(root, load_settings(root, env={}))  # the shipped defaults, whatever the env
    quiet = logging.NullHandler()  # rejections and skips are part of the summary, not noise
    logging.getLogger("everos_reflect").addHandler(quiet)
    try:
        return _demo(rt, show)
    finally:
        logging.getLogger("everos_reflect").removeHandler(quiet)
        rt.close()


def _demo(rt: Runtime, show: _Show | None) -> dict[str, Any]:
    from everos_reflect.clustering.service import ClusterService
    from everos_reflect.engine.engine import OK, Engine
    from everos_reflect.index.sync import Indexer

    timings: dict[str, float] = {}
    started = time.perf_counter()
    files = sum(1 for _ in rt.store.iter_files())
    with progress("indexing the example root", files) as advance:
        scan = Indexer(rt).scan(progress=advance)
    timings["index"] = time.perf_counter() - started

    mark = time.perf_counter()
    ClusterService(rt).recluster()  # the canonical clustering, whatever the indexing order
    timings["cluster"] = time.perf_counter() - mark
    before = {
        **_counts(rt),
        "files": scan.files_seen,
        "clusters": _clusters(rt),
        "search": _search(rt),
    }
    if show:
        show.before(before)

    mark = time.perf_counter()
    engine = Engine(rt)
    if show:
        with show.status("reflect_episodes: merging clusters (extractive provider)…"):
            outcome = engine.trigger("reflect_episodes", force=True, timeout=None)
    else:
        outcome = engine.trigger("reflect_episodes", force=True, timeout=None)
    timings["reflect"] = time.perf_counter() - mark
    if outcome.status != OK:
        raise EverosError(f"reflect_episodes {outcome.status}: {outcome.error or 'no detail'}")

    reports = reads.reflection_reports(rt.db(), run_id=outcome.run_id, columns=(
        "cluster_id", "owner_id", "mode", "status", "source_count", "merged_entry_id",
        "provider"))
    merged = [r for r in reports if r["status"] == "ok"]
    search_after = _search(rt)
    docs = _narrative_docs(rt, merged)
    after = {
        **_counts(rt),
        "merges": len(merged),
        "not_merged": {s: sum(1 for r in reports if r["status"] == s)
                       for s in sorted({r["status"] for r in reports} - {"ok"})},
        "provider": merged[0]["provider"] if merged else rt.llm.provider,
        "narrative": _narrative(docs, search_after),
        "words": _word_totals(docs),
        "audit_sql": AUDIT_SQL,
        "audit": audit_text(rt.root),
        "search": search_after,
    }
    after["archived_episodes"] = after["archived"]["episode"]
    after["archived_facts"] = after["archived"]["atomic_fact"]

    mark = time.perf_counter()
    if show:
        with show.status("reflect_insights: looking for patterns across weeks…"):
            insight = _insight(rt, engine)
    else:
        insight = _insight(rt, engine)
    timings["insights"] = time.perf_counter() - mark
    timings["total"] = time.perf_counter() - started
    document = {
        "source": str(example_root()),
        "run": {"status": outcome.status, "run_id": outcome.run_id, "counts": outcome.counts},
        "before": before,
        "after": after,
        "insight": insight,
        "seconds": {k: round(v, 2) for k, v in timings.items()},
    }
    if show:
        show.after(document)
    return document


def _insight(rt: Runtime, engine: Any) -> dict[str, Any]:
    """Run ``reflect_insights`` once (forced: the demo does not wait for the accumulator) and
    pick one insight of :data:`INSIGHT_USER` with its evidence; without one, say why and how
    to get one. Offline the insight is the extractive method's (a topic recurring across
    weeks, counted); with an LLM configured in the root it would be the model's."""
    from everos_reflect.model import Kind

    outcome = engine.trigger(INSIGHTS, force=True, timeout=None)
    found = [e for e in rt.store.entries(INSIGHT_USER, Kind.INSIGHT)
             if e.deprecated_by is None and e.meta.get("status") == "active"]
    if not found:
        reason = outcome.error or next(
            (r.get("unavailable") for r in _strategy_rows(rt, engine) if r["name"] == INSIGHTS),
            None) or "no pattern was found"
        return {"status": outcome.status, "insight": None, "why": reason,
                "how": INSIGHT_HOW}
    entry = max(found, key=lambda e: (len(e.meta.get("evidence") or []), e.id))
    evidence = []
    for cited in entry.meta.get("evidence") or []:
        try:
            source = rt.store.get(INSIGHT_USER, cited)
        except EverosError:
            continue  # a cited record gone since: explain shows it as missing
        stamp = source.timestamp
        evidence.append({"id": source.id, "date": stamp.date().isoformat() if stamp else None,
                         "subject": source.subject or source.content[:60]})
    return {"status": outcome.status, "written": outcome.counts.get("written", 0),
            "insight": {"id": entry.id, "user_id": INSIGHT_USER.user_id,
                        "text": entry.content, "question": entry.meta.get("question"),
                        "provider": entry.meta.get("provider"), "evidence": evidence},
            "how": INSIGHT_HOW}


def _strategy_rows(rt: Runtime, engine: Any) -> list[dict[str, Any]]:
    from everos_reflect.engine.engine import strategies_status

    return strategies_status(rt, engine)


def _counts(rt: Runtime) -> dict[str, Any]:
    live_n, archived_n = reads.kind_totals(rt.db())
    live = {"episode": 0, "atomic_fact": 0, **live_n}
    archived = {"episode": 0, "atomic_fact": 0, **archived_n}
    return {"users": reads.indexed_owners(rt.db()), "live": live, "archived": archived}


def _clusters(rt: Runtime) -> list[dict[str, Any]]:
    """Clusters with at least two live members: what Reflection has to merge."""
    from everos_reflect.clustering.service import ClusterService

    found = [c for c in ClusterService(rt).clusters() if c.size >= 2]
    found.sort(key=lambda c: (str(c.ref), c.first_ts))
    return [{"cluster_id": c.cluster_id, "user_id": c.ref.user_id, "size": c.size,
             "preview": c.preview} for c in found]


def _search(rt: Runtime) -> dict[str, Any]:
    from everos_reflect.index.search import search

    hits = search(rt, DEMO_QUERY, top_k=SEARCH_TOP_K, user_id=DEMO_USER.user_id,
                  app_id=DEMO_USER.app, project_id=DEMO_USER.project)
    return {"query": DEMO_QUERY, "user_id": DEMO_USER.user_id,
            "hits": [{k: h.to_dict()[k] for k in ("id", "subject", "episode", "session_id",
                                                   "timestamp", "parent_type", "score",
                                                   "snippet", "snippet_date", "passage")}
                     for h in hits]}


def _narrative(shown: list[dict[str, Any]],
               search_after: dict[str, Any]) -> dict[str, Any] | None:
    """The narrative to show in full: the search's answer (Andrew's pets) when it saved words,
    else the merge that saved the most (the demo user's first on a tie) — the demo shows what
    consolidation does, and a merge of fragments that repeat nothing saves nothing offline."""
    answers = {h["id"] for h in search_after["hits"] if h["parent_type"] == "cluster"}
    answer = next((n for n in shown if n["user_id"] == DEMO_USER.user_id
                   and n["id"] in answers), None)
    if answer is not None and answer["words"] < answer["source_words"]:
        return answer
    return max(shown, key=lambda n: (n["source_words"] - n["words"],
                                     n["user_id"] == DEMO_USER.user_id), default=None)


def _narrative_doc(rt: Runtime, ref: UserRef, narrative_id: str) -> dict[str, Any]:
    from everos_reflect.provenance import provenance

    entry = rt.store.get(ref, narrative_id)
    return {"id": entry.id, "user_id": ref.user_id, "subject": entry.subject,
            "content": entry.content, "timestamp": entry.meta.get("timestamp"),
            "parent_id": entry.parent_id, "sources": entry.sources,
            "words": len(entry.content.split()),
            "source_words": sum(len(rt.store.get(ref, s).content.split()) for s in entry.sources),
            "provenance": provenance(entry).to_dict()["sentences"],
            "file": rt.store.rel(rt.store.path_for_id(ref, entry.id))}


def _narrative_docs(rt: Runtime, merged: list[dict[str, Any]]) -> list[dict[str, Any]]:
    refs = {u.user_id: u for u in rt.store.iter_users()}
    return [_narrative_doc(rt, refs[r["owner_id"]], r["merged_entry_id"]) for r in merged]


def _word_totals(docs: list[dict[str, Any]]) -> dict[str, int]:
    """Words of every narrative this run wrote against the words of the sources it replaced."""
    return {"narratives": sum(d["words"] for d in docs),
            "sources": sum(d["source_words"] for d in docs),
            "shorter": sum(1 for d in docs if d["words"] < d["source_words"])}


def audit_text(root: Path) -> str:
    """The audit query's output exactly as ``sqlite3`` prints it (list mode, ``|`` between
    columns, NULL as nothing): the sqlite3 CLI itself when installed, else the same format."""
    db = root / ".index" / "sqlite" / "system.db"
    binary = shutil.which("sqlite3")
    if binary:
        done = subprocess.run([binary, str(db), AUDIT_SQL], capture_output=True, text=True,
                              timeout=30, check=False)
        if done.returncode == 0:
            return done.stdout
    rows = reads.readonly_query(root, AUDIT_SQL)
    return "".join("|".join("" if v is None else str(v) for v in row) + "\n" for row in rows)


# --------------------------------------------------------------------------- presentation


class _Show:
    """The demo on a terminal, stage by stage, with rich."""

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(highlight=False)

    def status(self, text: str) -> Any:
        return self.console.status(text)

    def before(self, before: dict[str, Any]) -> None:
        from rich.markup import escape
        from rich.table import Table

        c = self.console
        c.rule("[bold]everos-reflect demo[/bold]: Reflection on memory_root_example")
        c.print(f"Indexed {before['files']} daily logs: [bold]{before['live']['episode']}"
                f"[/bold] episodes and {before['live']['atomic_fact']} atomic facts of "
                f"{before['users']} users (local all-MiniLM-L6-v2, offline).")
        clusters = before["clusters"]
        c.print(f"\n[bold]Before[/bold]: {len(clusters)} clusters of similar, time-adjacent "
                "episodes with 2+ members — the same topic scattered over fragments.")
        table = Table(box=None, pad_edge=False, header_style="dim", expand=True)
        table.add_column("user", no_wrap=True)
        table.add_column("cluster", no_wrap=True)
        table.add_column("size", justify="right", no_wrap=True)
        table.add_column("first member", overflow="ellipsis", no_wrap=True, ratio=1)
        for row in clusters[:8]:
            table.add_row(row["user_id"], row["cluster_id"], str(row["size"]),
                          escape(row["preview"]))
        c.print(table)
        if len(clusters) > 8:
            c.print(f"[dim]… and {len(clusters) - 8} more[/dim]")
        self._search("Search before", before["search"])

    def after(self, document: dict[str, Any]) -> None:
        from rich.markup import escape
        from rich.panel import Panel

        c, after = self.console, document["after"]
        run = document["run"]
        c.print(f"\n[bold]Reflection[/bold] (reflect_episodes, {after['provider']} provider): "
                f"{run['status']} in {document['seconds']['reflect']:.1f} s — "
                f"[bold]{after['merges']}[/bold] merges; "
                f"[bold]{after['archived_episodes']}[/bold] episodes and "
                f"{after['archived_facts']} atomic facts archived (deprecated_by), none deleted; "
                f"{after['live']['episode']} live episodes now.")
        if after["not_merged"]:
            skipped = ", ".join(f"{n} {s}" for s, n in after["not_merged"].items())
            c.print(f"[dim]Not merged this run: {skipped} (see `everos-reflect reports`).[/dim]")
        words = after["words"]
        if words["sources"]:
            c.print(f"Narratives: {words['narratives']:,} words from {words['sources']:,} words "
                    f"of their sources (×{words['narratives'] / words['sources']:.2f}); "
                    f"{words['shorter']} of {after['merges']} shorter than their sources. "
                    "[dim]Offline, a merge folds repeated and superseded sentences and adds "
                    "each day's date; a language model (provider = \"openai\") rewrites."
                    "[/dim]")
        narrative = after["narrative"]
        if narrative:
            body = (f"[dim]{escape(narrative['file'])}\nparent_type: cluster   parent_id: "
                    f"{narrative['parent_id']}\nsources: {', '.join(narrative['sources'])}"
                    f"[/dim]\n\n[bold]{escape(narrative['subject'])}[/bold]\n"
                    f"{escape(narrative['content'])}")
            c.print(Panel(body, title=f"narrative {narrative['id']} ({narrative['user_id']}): "
                          f"{narrative['words']} words from {narrative['source_words']} words "
                          f"of {len(narrative['sources'])} sources",
                          title_align="left", expand=False))
        c.print(f"\n[bold]Audit[/bold]: sqlite3 <root>/.index/sqlite/system.db "
                f"\"{escape(AUDIT_SQL)}\"")
        c.print(escape(after["audit"].rstrip("\n")) or "[dim](no rows)[/dim]")
        self._search("Search after", after["search"])
        self._insight(document["insight"], document["seconds"].get("insights", 0.0))
        c.print(f"\n[dim]Done in {document['seconds']['total']:.1f} s.[/dim]")

    def _insight(self, result: dict[str, Any], seconds: float) -> None:
        from rich.markup import escape
        from rich.panel import Panel

        c = self.console
        insight = result["insight"]
        if insight is None:
            c.print(f"\n[bold]Insights[/bold] (reflect_insights, {seconds:.1f} s): none — "
                    f"{escape(result['why'])}")
            c.print(f"[dim]{escape(result['how'])}[/dim]")
            return
        lines = "\n".join(f"  {e['id']}  {e['date'] or '?'}  {escape(e['subject'])}"
                          for e in insight["evidence"])
        body = (f"[bold]{escape(insight['text'])}[/bold]\n[dim]question: "
                f"{escape(str(insight['question']))}[/dim]\n\nevidence:\n{lines}")
        c.print(f"\n[bold]Insights[/bold] (reflect_insights, {insight['provider']} provider, "
                f"{seconds:.1f} s): {result['written']} written; one of {insight['user_id']}'s:")
        c.print(Panel(body, title=f"insight {insight['id']} ({insight['user_id']})",
                      title_align="left", expand=False))
        if insight["provider"] == "extractive":
            c.print(f"[dim]{escape(result['how'])}[/dim]")

    def _search(self, title: str, result: dict[str, Any]) -> None:
        from rich.markup import escape
        from rich.table import Table

        self.console.print(f"\n[bold]{title}[/bold]: \"{result['query']}\" "
                           f"(user {result['user_id']})")
        table = Table(box=None, pad_edge=False, header_style="dim", expand=True)
        table.add_column("#", justify="right", no_wrap=True)
        table.add_column("id", no_wrap=True, min_width=16)
        table.add_column("session", no_wrap=True)
        table.add_column("episode", overflow="ellipsis", no_wrap=True, ratio=1)
        for rank, hit in enumerate(result["hits"], 1):
            text = " ".join(f"{hit['subject']}: {hit['snippet'] or hit['episode']}".split())
            if hit.get("passage"):  # a further passage of an entry already listed: say so
                text = " ".join(f"(passage {int(hit['passage']) + 1} of this entry) "
                                f"{hit.get('snippet_date') or ''}: {hit['snippet']}".split())
            table.add_row(str(rank), hit["id"], str(hit["session_id"]) if hit["session_id"]
                          else "[bold]null[/bold]", escape(text))
        self.console.print(table)


COMMANDS: list[click.Command] = [undo_cmd, demo_cmd]
