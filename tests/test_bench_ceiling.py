"""bench/ceiling.py: what an honest extractive merge may fold, counted in words."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import ceiling
import locomo_episodes as lm


def episode(day: str, text: str) -> lm.LocomoEpisode:
    when = datetime.fromisoformat(day).replace(tzinfo=UTC)
    return lm.LocomoEpisode("conv-1", int(day[-2:]), "Ann", "conv-1-Ann", when, text[:20], text,
                            ("D1:1",), "observation")


def toy_embed(texts: list[str]) -> np.ndarray:
    """Sentences about the garden share one direction; every other sentence its own."""
    out = np.zeros((len(texts), 16), dtype=np.float32)
    for i, text in enumerate(texts):
        out[i, 0 if "garden" in text else 1 + i % 15] = 1.0
    return out


def test_repeats_are_foldable_but_superseded_versions_are_kept_history() -> None:
    history = [
        episode("2026-01-05", "Ann planted tomatoes in her garden. Ann lives in Leeds."),
        episode("2026-01-12",
                "Ann has a garden where she planted tomatoes last spring. Ann adores jazz."),
        episode("2026-01-19", "Ann lives in York now."),
    ]
    c = ceiling.user_ceiling(history, toy_embed, paraphrase=0.75, version=0.75)
    assert c["source_words"] == sum(len(e.text.split()) for e in history)
    # the two garden sentences are one fact: the wording with less detail goes
    assert c["repeat_words"] == 6  # "Ann planted tomatoes in her garden."
    assert c["filler_words"] == 0
    # "lives in Leeds" -> "lives in York now": a version; the old one is history, counted apart
    assert c["superseded_words"] == 4  # "Ann lives in Leeds."
