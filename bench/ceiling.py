"""How far can an honest extractive merge compress LoCoMo? The word ceiling, before tuning.

A merge that keeps every fact may drop only what says a fact again: a paraphrased repeat
(folded into one sentence) and filler (greetings, fragments). A superseded version is *not*
droppable — SPEC §5 keeps the timeline, so the old value stays as history — but its words are
counted too, as the most a merge that dropped history could save. Everything is measured with
the extractive merge's own tests (``everos_reflect.llm.extractive``) at the thresholds it ships
(paraphrase and version cosine, bundled MiniLM), on each user's **whole history as one merge**:
the best any clustering could do, since a repeat can only be folded with a sentence in the same
cluster.

Figures per split (default: conversations 0-4, the calibration split):

- source words; words of sentences that restate an earlier kept sentence (foldable);
- words of filler sentences (droppable);
- words of sentences that a later version supersedes (history: kept);
- the resulting floor on live words ÷ source words for a fact-keeping merge of everything, and
  the same floor for the words Reflection can reach at all (the Episodes of clusters that merge).

    python bench/ceiling.py /path/to/locomo10.json [--split 0-4] [--paraphrase 0.75]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo_episodes as lm

from everos_reflect.embedding import make_embedder
from everos_reflect.llm import extractive as ex
from everos_reflect.settings import Settings


def _words(text: str) -> int:
    return len(text.split())


def user_ceiling(episodes: Sequence[lm.LocomoEpisode], embed: Any, paraphrase: float,
                 version: float) -> Counter[str]:
    """Word counts of one user's history: sources, foldable repeats, filler, superseded."""
    person = ex._main_entity(f"{e.subject}. {e.text}" for e in episodes)
    sentences: list[ex._Sentence] = []
    for e in sorted(episodes, key=lambda e: e.timestamp):
        entity: str | None = None
        for text in ex.split_sentences(e.text):
            text, entity = ex._resolve_pronoun(text, entity, person)
            sentences.append(ex._Sentence(text, e.timestamp.date(), len(sentences),
                                          (e.episode_key,)))
    c: Counter[str] = Counter()
    c["source_words"] = sum(_words(e.text) for e in episodes)
    c["sentences"] = len(sentences)
    filler = [s for s in sentences if ex._is_filler(s.text)]
    c["filler_words"] = sum(_words(s.text) for s in filler)
    for i, s in enumerate(sentences):
        s.subject = ex._subject(s.text, person)
        s.vector = i
    vectors = np.asarray(embed([s.text for s in sentences]), dtype=np.float32)
    sims = vectors @ vectors.T
    kept = ex._fold_restatements(sentences, sims, paraphrase)
    c["kept_sentences"] = len(kept)
    c["kept_words"] = sum(_words(s.text) for s in kept)
    c["repeat_words"] = c["source_words"] - c["kept_words"]
    current = ex._current_versions(kept, sims, version, paraphrase)
    # every member of a version group but its latest is superseded history
    latest = {id(s) for s in current}
    grouped = _version_members(kept, sims, version, paraphrase)
    c["superseded_words"] = sum(_words(s.text) for s in grouped if id(s) not in latest)
    c["version_groups"] = len(current)
    return c


def _version_members(kept: list[ex._Sentence], sims: np.ndarray, version: float,
                     paraphrase: float) -> list[ex._Sentence]:
    """The kept sentences that belong to some version group (old and latest alike)."""
    return [s for s in kept if any(
        t is not s and (ex._versions(s, t, sims, version, paraphrase)
                        or ex._versions(t, s, sims, version, paraphrase)) for t in kept)]


def run(data_path: Path, split: str, paraphrase: float, version: float) -> dict[str, Any]:
    data = lm.load(data_path)
    lo, hi = (0, 5) if split == "0-4" else (5, 10)
    data = data[lo:hi]
    settings = Settings()
    embedder = make_embedder(settings.embedding)
    cache: dict[str, np.ndarray] = {}

    def embed(texts: list[str]) -> np.ndarray:
        todo = list(dict.fromkeys(t for t in texts if t not in cache))
        if todo:
            cache.update(zip(todo, embedder.embed(todo), strict=True))
        return np.stack([cache[t] for t in texts])

    by_user: dict[str, list[lm.LocomoEpisode]] = {}
    for e in lm.episodes(data):
        by_user.setdefault(e.user_id, []).append(e)
    total: Counter[str] = Counter()
    for episodes in by_user.values():
        total.update(user_ceiling(episodes, embed, paraphrase, version))  # keeps zero counts
    src = total["source_words"]
    foldable = total["repeat_words"] + total["filler_words"]
    return {
        "split": split, "users": len(by_user), "paraphrase": paraphrase, "version": version,
        **dict(total),
        "floor_keep_history": round((src - foldable) / src, 3),
        "floor_drop_history": round((src - foldable - total["superseded_words"]) / src, 3),
    }


def markdown(r: dict[str, Any]) -> str:
    src = r["source_words"]

    def share(n: int) -> str:
        return f"{n} ({100 * n / src:.1f} %)"

    return "\n".join([
        f"### Compression ceiling, conversations {r['split']} ({r['users']} users)",
        "",
        f"Each user's whole history as one extractive merge, paraphrase cosine "
        f"{r['paraphrase']}, version cosine {r['version']} (bundled MiniLM).",
        "",
        "| | words |",
        "|---|---:|",
        f"| source words | {src} |",
        f"| paraphrased repeats (foldable) | {share(r['repeat_words'])} |",
        f"| filler sentences (droppable) | {share(r['filler_words'])} |",
        f"| superseded versions (history: kept) | {share(r['superseded_words'])} |",
        f"| floor on words ÷ source words, keeping every fact and the history | "
        f"×{r['floor_keep_history']} |",
        f"| floor if history were dropped too (not allowed) | ×{r['floor_drop_history']} |",
        "",
    ])


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_path", type=Path)
    parser.add_argument("--split", choices=("0-4", "5-9"), default="0-4")
    parser.add_argument("--paraphrase", type=float, default=ex.PARAPHRASE_COSINE)
    parser.add_argument("--version", type=float, default=ex.VERSION_COSINE)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(list(argv) if argv is not None else None)
    result = run(args.data_path, args.split, args.paraphrase, args.version)
    print(json.dumps(result, indent=2) if args.json else markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
