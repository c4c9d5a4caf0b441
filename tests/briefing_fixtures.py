"""Deterministic briefing inputs for the golden test.

``tests/data/briefing_golden.json`` holds what :func:`pack` and :func:`build_briefing` answered
for these inputs before the packer stopped tokenizing every item (session 18); the test checks
that the answers stay byte for byte the same.
"""

from __future__ import annotations

import random
from datetime import date
from typing import Any

from everos_reflect.briefing.pack import Item, Section
from everos_reflect.model import UserRef

WORDS = ["check", "the", "registry", "credentials", "before", "rolling", "out", "pin", "image",
         "tags", "read", "logs", "retry", "once", "canary", "Überprüfe", "die", "Zugangsdaten",
         "先备份数据库", "résumé", "naïve", "🚀", "e\u0301te\u0301", "x" * 120, "a\x07b",
         "co-operate", "v2.3.1", "node-17", "#1", "über-cool"]
BUDGETS = (40, 150, 600, 2500)
GOLDEN_QUERIES = ("What usually breaks our deploys?", "When did the registry time out?")
REF = UserRef.of("u_gold")
# The day the golden file was recorded: entries are appended to this day's logs, so their ids
# (``ls_20261203_0001``) are the same on whatever day the suite runs.
LOG_DAY = date(2026, 12, 3)


def _text(rng: random.Random) -> str:
    n = rng.choice([1, 3, 8, 20, 40, 400])  # the 400-word texts are cut to a third of a budget
    sep = rng.choice([" ", " ", " ", "\n", "  ", "\t"])
    return sep.join(rng.choice(WORDS) for _ in range(n)) + rng.choice(["", ".", "!"])


def pack_sections(seed: int) -> list[Section]:
    """Four sections of items of every kind, texts plain, non-ASCII, long, or odd."""
    rng = random.Random(seed)
    sections = []
    for title, kind, count in [("Current convictions", "conviction", 3),
                               ("Lessons for deploy", "lesson", 120),
                               ("Insights", "insight", 8), ("Episodes", "episode", 12)]:
        items = []
        for n in range(count):
            evidence = [f"tk_20261012_{rng.randint(1, 9999):04d}"
                        for _ in range(rng.choice([0, 1, 2, 7]))]
            items.append(Item(
                f"{kind[:2]}_20261012_{n + 1:04d}", kind, _text(rng),
                rng.choice([None, "2026-10-12T09:00:00+00:00", " ", "20261012"]), evidence,
                rng.choice([None, 0.5, 3.0]),
                rng.choice(["", "do, confirmed 3x", "avoid, confirmed 1x, contested",
                            "identité"])))
        sections.append(Section(title, items))
    return sections


def lesson_rows(seed: int) -> list[tuple[dict[str, Any], dict[str, str]]]:
    """Lessons (metadata, sections) for :func:`build_briefing`, of two types and all statuses."""
    rng = random.Random(seed)
    rows = []
    for n in range(150):
        meta = {"timestamp": f"2026-10-{10 + n % 9}T09:{n % 60:02d}:00+00:00",
                "task_type": rng.choice(["deploy"] * 4 + ["migrate"]),
                "lesson_type": rng.choice(["do", "avoid"]),
                "evidence": [f"tk_20261012_{rng.randint(1, 999):04d}"
                             for _ in range(rng.randint(1, 7))],
                "confirmations": rng.randint(1, 9),
                "status": rng.choice(["active"] * 6 + ["contested", "stale", "retired"]),
                "depth": 1}
        rows.append((meta, {"Lesson": _text(rng)}))
    return rows



def summary(briefing: Any) -> dict[str, Any]:
    """What the golden file keeps of a briefing: its text and counts in full, the rest (items
    with their texts, the ids left out) as a digest of its JSON."""
    import hashlib
    import json
    from dataclasses import asdict

    # the packer's whole result, as recorded (the answer lists a bounded part of it)
    # (without an item's ``parts``, added after the recording: how its text may be cut, which
    # the items' texts show)
    document = {"text": briefing.text,
                "items": [{k: v for k, v in asdict(i).items() if k != "parts"}
                          for i in briefing.items],
                "tokens": briefing.tokens, "max_tokens": briefing.max_tokens,
                "route": briefing.route, "omitted": dict(briefing.omitted),
                "omitted_ids": list(briefing.omitted_ids),
                "restated_ids": list(briefing.restated_ids)}
    # recorded before facts restated by their Episode were told apart: none is here
    assert document.pop("restated_ids") == []
    whole = json.dumps(document, sort_keys=True, ensure_ascii=False)
    return {"text": briefing.text, "tokens": briefing.tokens, "omitted": briefing.omitted,
            "kept": [i.id for i in briefing.items],
            "sha256": hashlib.sha256(whole.encode()).hexdigest()}
