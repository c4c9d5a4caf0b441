"""bench/locomo_root.py on a tiny LoCoMo-shaped file: episodes, facts, provenance, bulk path."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import locomo_root

from everos_reflect.markdown.store import MarkdownStore
from everos_reflect.model import Kind, UserRef

SAMPLE = {
    "sample_id": "conv-1",
    "conversation": {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a dog named Toby."},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "Nice! I bought a bike."},
            {"speaker": "Ann", "dia_id": "D1:3", "text": "Toby loves the park."},
        ],
        "session_2_date_time": "10:00 am on 20 May, 2023",
        "session_2": [
            {"speaker": "Ann", "dia_id": "D2:1", "text": "Now I have two dogs."},
            {"speaker": "Bob", "dia_id": "D2:2", "text": "Wow."},
        ],
    },
    "observation": {
        "session_1_observation": {
            "Ann": [["Ann adopted a dog named Toby.", "D1:1"],
                    ["Toby loves the park.", "D1:3; D1:1"]],
            "Bob": [["Bob bought a bike.", ["D1:2"]]],
        },
        "session_2_observation": {"Ann": [["Ann now has two dogs.", "D:2:1"]]},
    },
    "qa": [{"question": "What is Ann's dog called?", "answer": "Toby", "evidence": ["D1:1"],
            "category": 4}],
}


@pytest.fixture
def data_path(tmp_path: Path) -> Path:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([SAMPLE]), encoding="utf-8")
    return path


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text(encoding="utf-8")
            for p in sorted(root.rglob("*.md"))}


def test_dia_ids_in_normalises_the_irregular_evidence_forms() -> None:
    assert locomo_root.dia_ids_in("D8:6; D9:17") == ("D8:6", "D9:17")
    assert locomo_root.dia_ids_in("D9:1 D4:4 D9:1") == ("D9:1", "D4:4")
    assert locomo_root.dia_ids_in("D:11:26") == ("D11:26",)
    assert locomo_root.dia_ids_in(["D1:2", "D01:3"]) == ("D1:2", "D1:3")
    assert locomo_root.dia_ids_in("D") == ()


def test_each_session_becomes_one_episode_per_speaker_with_its_turn_ids(
        data_path: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    report = locomo_root.build(data_path, root)
    assert (report.episodes, report.facts, len(report.users)) == (4, 4, 2)

    store = MarkdownStore(root)
    ann = UserRef("locomo", "conv-1", "conv-1-Ann")
    episodes = store.entries(ann, Kind.EPISODE)
    assert [e.meta["dia_ids"] for e in episodes] == [["D1:1", "D1:3"], ["D2:1"]]
    assert [e.session_id for e in episodes] == ["conv-1_s01", "conv-1_s02"]
    assert episodes[0].timestamp == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert episodes[0].id == "ep_20230508_0001"
    assert episodes[0].content == "Ann adopted a dog named Toby. Toby loves the park."
    assert episodes[0].parent_type == "memcell"

    facts = store.entries(ann, Kind.ATOMIC_FACT)
    assert [(f.content, f.parent_id, f.meta["dia_ids"]) for f in facts] == [
        ("Ann adopted a dog named Toby.", "ep_20230508_0001", ["D1:1"]),
        ("Toby loves the park.", "ep_20230508_0001", ["D1:3", "D1:1"]),
        ("Ann now has two dogs.", "ep_20230520_0001", ["D2:1"]),
    ]
    bob = store.entries(UserRef("locomo", "conv-1", "conv-1-Bob"), Kind.EPISODE)
    assert [e.meta["dia_ids"] for e in bob] == [["D1:2"], ["D2:2"]]
    assert bob[1].content == "Wow."  # no observation that session: the turns stand in


def test_turns_mode_uses_the_speakers_own_utterances(data_path: Path, tmp_path: Path) -> None:
    locomo_root.build(data_path, tmp_path / "root", text="turns", with_facts=False)
    ann = UserRef("locomo", "conv-1", "conv-1-Ann")
    store = MarkdownStore(tmp_path / "root")
    assert store.entries(ann, Kind.EPISODE)[0].content == (
        "I adopted a dog named Toby. Toby loves the park.")
    assert store.entries(ann, Kind.ATOMIC_FACT) == []


def test_bulk_writing_gives_the_same_bytes_as_store_appends(
        data_path: Path, tmp_path: Path) -> None:
    locomo_root.build(data_path, tmp_path / "a")
    locomo_root.build(data_path, tmp_path / "b", bulk=True)
    a, b = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert len(a) == 7  # 4 episode logs + 3 fact logs
    assert a == b


def test_refuses_a_root_that_already_holds_markdown(data_path: Path, tmp_path: Path) -> None:
    locomo_root.build(data_path, tmp_path / "root")
    before = _files(tmp_path / "root")
    with pytest.raises(SystemExit, match="already holds Markdown"):
        locomo_root.build(data_path, tmp_path / "root")
    assert _files(tmp_path / "root") == before
