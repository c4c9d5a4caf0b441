"""Build an everos-reflect memory root from LoCoMo (locomo10.json), with provenance.

What is written (through ``MarkdownStore.append``, so the files are exactly what the daemon
reads):

- **Tenant and users**: app ``locomo``, project = the conversation (``conv-26`` ...), one user
  per conversation and speaker (``conv-26-Caroline``). A project holds exactly one
  conversation, so "search both speakers of a conversation" is one project-scoped search.
- **Episodes**: one per session and speaker (``bench/locomo_episodes.py``), dated at the
  session's start. The text (``--text``):
  ``observation`` (default) — LoCoMo's per-speaker observations of that session joined into
  one paragraph (third-person summary sentences, the closest thing in the data to an
  extracted Episode; a speaker without observations falls back to their turns);
  ``turns`` — the speaker's own utterances in the session, in order.
  Metadata: ``session_id: conv-26_s03``, ``parent_type: memcell``, and
  ``dia_ids: [D3:1, D3:3, ...]`` = every turn the speaker made in the session.
- **Atomic facts**: one per LoCoMo observation of that speaker and session
  (``parent_type: episode``, ``parent_id`` = the Episode), with ``dia_ids`` = the
  observation's evidence turns. Skipped with ``--no-facts``.

Session summaries and event summaries are not used. The data file is read from the path given;
nothing of it is copied into the repository.

    python bench/locomo_root.py /path/to/locomo10.json OUT [--text turns] [--no-facts] [--bulk]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo_episodes as lm

from everos_reflect.markdown import writer
from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.model import EntryId, Kind, UserRef

APP = "locomo"
_DIA_RE = re.compile(r"D:?(\d+):(\d+)")

#: ``(sample_id, session, speaker)`` -> that speaker's observations: ``[(fact, dia_ids)]``.
ObservationMap = Mapping[tuple[str, int, str], Sequence[tuple[str, tuple[str, ...]]]]


def dia_ids_in(value: Any) -> tuple[str, ...]:
    """Every turn id in a LoCoMo evidence value, normalised.

    The data holds a few irregular forms (``"D8:6; D9:17"``, ``"D9:1 D4:4"``, ``"D:11:26"``,
    lists); each names turns ``D<session>:<turn>``, and all of them are kept.
    """
    parts = value if isinstance(value, list) else [value]
    out: list[str] = []
    for part in parts:
        for s, t in _DIA_RE.findall(str(part)):
            ident = f"D{int(s)}:{int(t)}"
            if ident not in out:
                out.append(ident)
    return tuple(out)


def observations(data: Iterable[dict[str, Any]]) -> dict[tuple[str, int, str], list[
        tuple[str, tuple[str, ...]]]]:
    """LoCoMo's observations (atomic facts with evidence) per sample, session and speaker."""
    out: dict[tuple[str, int, str], list[tuple[str, tuple[str, ...]]]] = {}
    for sample in data:
        sample_id = str(sample["sample_id"])
        for key, by_speaker in (sample.get("observation") or {}).items():
            m = re.fullmatch(r"session_(\d+)_observation", key)
            if not m or not isinstance(by_speaker, dict):
                continue
            for speaker, facts in by_speaker.items():
                kept = [(str(f[0]).strip(), dia_ids_in(f[1])) for f in facts
                        if isinstance(f, list) and len(f) >= 2 and str(f[0]).strip()]
                if kept:
                    out[(sample_id, int(m.group(1)), speaker)] = kept
    return out


def ref_for(episode: lm.LocomoEpisode) -> UserRef:
    return UserRef(APP, episode.sample_id, episode.user_id)


@dataclass
class BuildReport:
    episodes: int = 0
    facts: int = 0
    seconds: float = 0.0
    users: set[str] = field(default_factory=set)
    sources: dict[str, int] = field(default_factory=dict)  # episode text source -> count

    def as_dict(self) -> dict[str, Any]:
        return {"episodes": self.episodes, "facts": self.facts, "users": len(self.users),
                "text_sources": dict(self.sources), "seconds": round(self.seconds, 2)}


class _BulkWriter:
    """Renders entries with the daemon's own writer and writes each file once at the end.

    Same bytes as ``MarkdownStore.append`` on a fresh root (pinned by a test), without a lock,
    a read-back and an fsync per entry: for the synthetic scale-ups of ``bench/cost.py``.
    """

    def __init__(self, store: MarkdownStore) -> None:
        self.store = store
        self.files: dict[Path, list[Any]] = {}  # path -> [text, next seq]

    def append(self, ref: UserRef, kind: Kind, meta: Mapping[str, Any],
               sections: Mapping[str, str], *, day: Any) -> str:
        path = self.store.log_path(ref, kind, day)
        slot = self.files.setdefault(path, [writer.new_log_text(kind, ref.user_id, day), 1])
        entry_id = str(EntryId(kind, day, slot[1]))
        values = {"owner_id": ref.user_id, **meta}
        slot[0] = writer.append_entry(slot[0], writer.render_entry(entry_id, values, sections))
        slot[1] += 1
        return entry_id

    def flush(self) -> None:
        for path, (text, _) in self.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")


def write_root(
    out: Path,
    episodes: Iterable[lm.LocomoEpisode],
    facts: ObservationMap | None = None,
    *,
    bulk: bool = False,
) -> BuildReport:
    """Write every Episode (and its observations as atomic facts) into the root at ``out``.

    By default each entry goes through ``MarkdownStore.append`` (ids, files and frontmatter
    are the daemon's own); ``bulk`` renders the same bytes and writes each file once. Episodes
    are written in time order per user, as an application would have logged them.
    """
    store = MarkdownStore(out)
    bulk_writer = _BulkWriter(store) if bulk else None
    report = BuildReport()
    started = time.perf_counter()

    def append(ref: UserRef, kind: Kind, meta: dict[str, Any], sections: dict[str, str],
               day: Any) -> str:
        if bulk_writer is not None:
            return bulk_writer.append(ref, kind, meta, sections, day=day)
        return store.append(ref, kind, meta, sections, day=day).id

    for ep in episodes:
        ref = ref_for(ep)
        day = ep.timestamp.date()
        session = f"{ep.sample_id}_s{ep.session:02d}"
        entry_id = append(
            ref, Kind.EPISODE,
            {"timestamp": ep.timestamp, "session_id": session, "parent_type": "memcell",
             "parent_id": f"mc_{session}_{ep.speaker}", "dia_ids": list(ep.dia_ids)},
            {"Subject": ep.subject, "Content": ep.text},
            day,
        )
        report.episodes += 1
        report.users.add(str(ref))
        report.sources[ep.source] = report.sources.get(ep.source, 0) + 1
        for text, dia in (facts or {}).get((ep.sample_id, ep.session, ep.speaker), ()):
            append(
                ref, Kind.ATOMIC_FACT,
                {"timestamp": ep.timestamp, "parent_type": "episode", "parent_id": entry_id,
                 "dia_ids": list(dia)},
                {"Fact": text},
                day,
            )
            report.facts += 1
    if bulk_writer is not None:
        bulk_writer.flush()
    report.seconds = time.perf_counter() - started
    return report


def build(data_path: str | Path, out: str | Path, *, text: str = "observation",
          with_facts: bool = True, bulk: bool = False) -> BuildReport:
    """locomo10.json -> a fresh memory root at ``out`` (which must not hold Markdown yet)."""
    out = Path(out)
    if out.exists() and any(out.rglob("*.md")):
        raise SystemExit(f"{out} already holds Markdown files: give an empty or new folder")
    out.mkdir(parents=True, exist_ok=True)
    data = lm.load(data_path)
    return write_root(out, lm.episodes(data, text), observations(data) if with_facts else None,
                      bulk=bulk)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("data_path", help="path to locomo10.json")
    parser.add_argument("out", help="memory root to create (empty or new folder)")
    parser.add_argument("--text", choices=lm.MODES, default="observation",
                        help="Episode text: the speaker's observations (default) or turns")
    parser.add_argument("--no-facts", action="store_true",
                        help="do not write LoCoMo observations as atomic facts")
    parser.add_argument("--bulk", action="store_true",
                        help="write each file once (same bytes, ~40x faster than one "
                             "MarkdownStore.append per entry)")
    args = parser.parse_args(argv)
    report = build(args.data_path, args.out, text=args.text, with_facts=not args.no_facts,
                   bulk=args.bulk)
    r = report.as_dict()
    print(f"{r['episodes']} episodes and {r['facts']} atomic facts for {r['users']} users "
          f"in {r['seconds']} s (episode text: {r['text_sources']}) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
