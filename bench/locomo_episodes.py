"""LoCoMo (locomo10.json) as Episodes: one per session and per speaker, dated at the session.

Shared by the clustering calibration and the evaluation. Each speaker of a conversation is one
user (``<sample_id>-<speaker>``); each session they spoke in gives one Episode whose text is
chosen by ``mode``:

- ``observation`` (default): LoCoMo's per-speaker observations for that session — short
  third-person summary sentences, the closest thing in the data to an extracted Episode. A
  speaker without observations in a session falls back to their turns.
- ``turns``: the speaker's own utterances in that session, in order.

``dia_ids`` always lists every turn the speaker made in the session, so QA evidence (which cites
turn ids) maps to exactly one Episode. The data file is read from the path given; it is never
copied into the repository.

    python bench/locomo_episodes.py /path/to/locomo10.json [--mode turns] [--jsonl out.jsonl]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

MODES = ("observation", "turns")
_SESSION_RE = re.compile(r"^session_(\d+)$")
_SAFE_RE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class LocomoEpisode:
    sample_id: str
    session: int
    speaker: str
    user_id: str  # "<sample_id>-<speaker>", safe as an everos user id
    timestamp: datetime  # session start, UTC
    subject: str
    text: str
    dia_ids: tuple[str, ...]  # every turn of this speaker in this session
    source: str  # "observation" or "turns": where ``text`` came from

    @property
    def episode_key(self) -> str:
        return f"{self.user_id}/s{self.session:02d}"

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["timestamp"] = self.timestamp.isoformat()
        doc["dia_ids"] = list(self.dia_ids)
        return doc


@dataclass(frozen=True)
class LocomoQuestion:
    sample_id: str
    question: str
    category: int
    evidence: tuple[str, ...] = field(default_factory=tuple)


def parse_session_time(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` -> aware UTC datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def user_id_for(sample_id: str, speaker: str) -> str:
    return _SAFE_RE.sub("_", f"{sample_id}-{speaker}").strip("_.-")[:128]


def load(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def episodes(data: Iterable[dict[str, Any]], mode: str = "observation") -> list[LocomoEpisode]:
    """Every (sample, session, speaker) Episode, ordered by user, then time."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}: use one of {', '.join(MODES)}")
    out: list[LocomoEpisode] = []
    for sample in data:
        sample_id = str(sample["sample_id"])
        conv = sample["conversation"]
        observations = sample.get("observation", {})
        for key in conv:
            m = _SESSION_RE.match(key)
            if not m or not conv[key]:
                continue
            n = int(m.group(1))
            when = parse_session_time(conv[f"session_{n}_date_time"])
            obs = observations.get(f"session_{n}_observation", {})
            for speaker in (conv["speaker_a"], conv["speaker_b"]):
                turns = [t for t in conv[key] if t.get("speaker") == speaker]
                if not turns:
                    continue
                facts = [o[0] for o in obs.get(speaker, []) if o and o[0]]
                if mode == "observation" and facts:
                    text, source = " ".join(facts), "observation"
                    subject = facts[0]
                else:
                    text, source = " ".join(t["text"] for t in turns), "turns"
                    subject = turns[0]["text"]
                out.append(LocomoEpisode(
                    sample_id=sample_id, session=n, speaker=speaker,
                    user_id=user_id_for(sample_id, speaker), timestamp=when,
                    subject=subject[:120], text=text,
                    dia_ids=tuple(t["dia_id"] for t in turns), source=source,
                ))
    out.sort(key=lambda e: (e.user_id, e.timestamp, e.session))
    return out


def questions(data: Iterable[dict[str, Any]]) -> list[LocomoQuestion]:
    """QA items with their evidence turn ids (category 5, adversarial, has no evidence)."""
    out = []
    for sample in data:
        for qa in sample.get("qa", []):
            evidence = tuple(str(e).strip() for e in qa.get("evidence", []) if str(e).strip())
            out.append(LocomoQuestion(str(sample["sample_id"]), str(qa.get("question", "")),
                                      int(qa.get("category", 0)), evidence))
    return out


def episode_of_turn(eps: Iterable[LocomoEpisode]) -> dict[tuple[str, str], LocomoEpisode]:
    """``(sample_id, dia_id)`` -> the Episode holding that turn."""
    return {(e.sample_id, d): e for e in eps for d in e.dia_ids}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_path", help="path to locomo10.json")
    parser.add_argument("--mode", choices=MODES, default="observation")
    parser.add_argument("--jsonl", help="write the episodes here, one JSON object per line")
    args = parser.parse_args(argv)
    data = load(args.data_path)
    eps = episodes(data, args.mode)
    if args.jsonl:
        with open(args.jsonl, "w", encoding="utf-8") as f:
            for e in eps:
                f.write(json.dumps(e.to_json(), ensure_ascii=False) + "\n")
    users = {e.user_id for e in eps}
    fallback = sum(e.source == "turns" for e in eps)
    print(f"{len(eps)} episodes, {len(users)} users, {len(data)} conversations "
          f"({fallback} from turns, mode={args.mode})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
