"""How often the invented-name/date check refuses an honest merge, and how often it catches a lie.

    python bench/invented_names.py [--root memory_root_example] [--locomo locomo10.json]

Honest drafts (each should pass):

- **extractive**: the shipped offline provider's merge and facts for every cluster Reflection
  would merge, on a copy of the example root and (``--locomo``) on the LoCoMo root built by
  ``bench/locomo_root.py``, indexed and clustered with the shipped settings;
- **stories**: the extractive merge of each latest-state story (``bench/state_stories.json``,
  104 stories, one Episode a week);
- **model-style rewrites**: 16 stories rewritten by hand as a chat model writes
  (:data:`MODEL_STYLE`);
- **paraphrases**: each story rewritten as a model would: a Title Case title, the dates in
  words from the Episodes' dates ("On Monday, March 2, 2026," / "the second of March"),
  connectives opening each sentence ("Later," "By then,"), so a story's opening word — a name
  or an ordinary word — stands inside a sentence (lower-cased unless a source capitalises it
  inside a sentence), and "They" for the person's name after the first sentence.

Lies (each should be refused), made from every honest draft: a name the sources state inside
a sentence, replaced everywhere by one they do not; a month added that no source states; a
weekday likewise; and the check's known hole, a name that opens sentences (one the sources'
subjects carry) replaced everywhere: caught only where the draft also writes it inside a
sentence. Prints the false-rejection rate per set (with the reasons) and
the detection rate per lie. Nothing is timed.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from everos_reflect.clustering.service import ClusterService
from everos_reflect.index.sync import Indexer
from everos_reflect.llm import ExtractiveLLM
from everos_reflect.llm.base import MergeMember, MergeRequest
from everos_reflect.llm.prompts import DEFAULT_PROMPTS
from everos_reflect.runtime import Runtime
from everos_reflect.strategies.consolidate import draft, member_of, select
from everos_reflect.strategies.invented import MONTHS, WEEKDAYS, invented_name_or_date

HERE = Path(__file__).resolve().parent
#: Names no source of these sets states (checked per draft before use).
STRANGERS = ["Bartholomew", "Reykjavik", "Zanzibar", "Ottoline", "Quillfeather", "Vasquez"]
MONTH_NAMES = ["January", "February", "March", "April", "May", "June", "July", "August",
               "September", "October", "November", "December"]
DAY_NAMES = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
ORDINAL_WORDS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth",
                 "ninth", "tenth", "eleventh", "twelfth", "thirteenth", "fourteenth",
                 "fifteenth", "sixteenth", "seventeenth", "eighteenth", "nineteenth",
                 "twentieth", "twenty-first", "twenty-second", "twenty-third", "twenty-fourth",
                 "twenty-fifth", "twenty-sixth", "twenty-seventh", "twenty-eighth",
                 "twenty-ninth", "thirtieth", "thirty-first"]
CONNECTIVES = ["Later,", "By then,", "After that,", "In the end,", "Meanwhile,"]

Case = tuple[list[MergeMember], str, str, list[str]]  # members, title, content, facts

#: Honest rewrites of 16 stories in the manner of a chat model (written for this bench):
#: Title Case titles, "Currently", "Previously", dashes, parentheses, names moved about.
#: The stories' Episodes are dated Monday 2, 9 and 16 March 2026.
MODEL_STYLE = {
    "car-rep": ("Sam's Commute Car", "Sam used to drive a Honda Civic to work every day but "
                "has since switched to a Tesla Model 3. He also finds car insurance prices far "
                "too high. Currently, Sam drives the Tesla Model 3."),
    "phone-rep": ("Phone Upgrade", "In early March, Tomas used a Pixel 6; a week later he "
                  "switched to a Galaxy S23 — and he has already dropped its case in a puddle. "
                  "Tomas's current phone is the Galaxy S23."),
    "gym-rep": ("Ravi's Gym", "Ravi moved from the Ironworks gym to the Summit Fitness gym, "
                "and he bought new gloves with better grip. He now trains at Summit Fitness."),
    "language-rep": ("Language Studies", "At night school, Zara first studied Spanish, then "
                     "switched to Japanese; she watches films with subtitles to practise "
                     "listening. She is currently studying Japanese."),
    "language-num": ("Kofi's Italian Vocabulary", "Kofi's Italian vocabulary grew from 500 "
                     "words to 1,800 words. Currently, Kofi knows 1,800 words of Italian."),
    "language-neg": ("French Classes", "Hana took a weekly French class but has quit it and "
                     "no longer studies French (she still watches subtitled films to practise "
                     "listening)."),
    "language-rev": ("How Diego Studies German", "Diego first studied German with an app, "
                     "tried a private tutor, and then dropped the tutor. As of mid-March, Diego "
                     "studies German with the app again."),
    "streaming-rep": ("Streaming Subscriptions", "On March 2, Sofia subscribed to Netflix for "
                      "movies; by March 9 she had moved to Disney Plus. Last weekend she "
                      "finished a long documentary series. Sofia now subscribes to Disney "
                      "Plus."),
    "streaming-neg": ("Music Subscription", "Zara had a Spotify subscription, then cancelled "
                      "it; she finished a long documentary series last weekend. Zara currently "
                      "has no music subscription."),
    "bank-rep": ("Greta's Banking", "Greta used to bank with First Harbor Bank. She has moved "
                 "her accounts to Greenleaf Credit Union, and she read an article about "
                 "interest rates at the bank."),
    "doctor-rep": ("Family Doctor", "Priya's family doctor was Dr. Alvarez; it is now Dr. "
                   "Okafor. She recently waited an hour at the clinic reception."),
    "doctor-rev": ("Ravi's Dentist", "Ravi went to the dentist on Main Street, briefly "
                   "switched to one near the office, and has since returned to the dentist on "
                   "Main Street."),
    "coffee-rev": ("Coffee at Home", "Felix made coffee with a French press, bought an "
                   "espresso machine, then sold it. Currently, he uses the French press "
                   "again."),
    "team-rep": ("Football Allegiance", "Felix once supported the Rovers football club; he "
                 "supports United now, and he watched the match highlights with friends."),
    "computer-rep": ("Marco's Laptop", "Marco's laptop ran Windows and now runs Linux. He "
                     "also cleaned the dust out of the computer fan."),
    "rent-rep": ("Landlord Change", "Omar's landlord used to be Mr. Patel; his landlord is "
                 "now Ms. Kowalski. On Monday, March 16, he asked the building manager about "
                 "the broken doorbell."),
}


def root_drafts(src: Path, *, locomo: Path | None = None) -> list[Case]:
    """The extractive merge of every eligible cluster of a copy of ``src`` (or of the LoCoMo
    root built from ``locomo``)."""
    out: list[Case] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        if locomo is not None:
            sys.path.insert(0, str(HERE))
            import locomo_root

            locomo_root.build(locomo, root)
        else:
            shutil.copytree(src, root, ignore=shutil.ignore_patterns(".index"))
        rt = Runtime(root)
        Indexer(rt).scan()
        clusters = ClusterService(rt)
        llm = rt.llm
        for ref in rt.store.iter_users():
            for info in clusters.eligible_for_reflection(ref, 1000):
                sel = select(rt.store, clusters, info, max_sources=50)
                if sel is None:
                    continue
                d = draft(sel, llm, DEFAULT_PROMPTS)
                out.append(([member_of(e) for e in sel.replaced], d.title, d.content,
                             list(d.facts)))
        rt.close()
    return out


def stories() -> list[tuple[dict, list[MergeMember]]]:
    data = json.loads((HERE / "state_stories.json").read_text(encoding="utf-8"))["stories"]
    start = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    out = []
    for s in data:
        members = [MergeMember(f"ep_{n}", start + timedelta(days=7 * n),
                               f"{s['name']}'s {s['domain']}", e["text"])
                   for n, e in enumerate(s["episodes"])]
        out.append((s, members))
    return out


def story_drafts(llm: ExtractiveLLM) -> list[Case]:
    out: list[Case] = []
    for _, members in stories():
        merged = llm.merge(MergeRequest(mode="init", members=members,
                                        prompts=DEFAULT_PROMPTS))
        out.append((members, merged.title, merged.content, [m.content for m in members]))
    return out


def _inner_capitals(members: list[MergeMember]) -> set[str]:
    """Words a source capitalises inside a sentence (names, as the sources write them)."""
    found: set[str] = set()
    for m in members:
        for sentence in re.split(r"(?<=[.!?])\s+", m.content):
            found.update(re.findall(r"(?<=\s)[A-Z][\w'’]*", sentence))
    return found


def paraphrase(story: dict, members: list[MergeMember], n: int) -> Case:
    names = _inner_capitals(members) | {story["name"], f"{story['name']}'s"}
    sentences = []
    for i, m in enumerate(members):
        when = m.timestamp
        text = m.content.strip()
        first, _, rest = text.partition(" ")
        if first not in names:
            first = first.lower()
        elif i > 0 and first == story["name"]:
            first = "they"
        elif i > 0 and first == f"{story['name']}'s":
            first = "their"
        if i == 0:
            day = f"On {DAY_NAMES[when.weekday()]}, {MONTH_NAMES[when.month - 1]} {when.day}, " \
                  f"{when.year},"
        elif i % 2:
            day = f"{CONNECTIVES[(n + i) % len(CONNECTIVES)]} on the " \
                  f"{ORDINAL_WORDS[when.day - 1]} of {MONTH_NAMES[when.month - 1]},"
        else:
            day = f"{CONNECTIVES[(n + i) % len(CONNECTIVES)]} in {MONTH_NAMES[when.month - 1]},"
        sentences.append(f"{day} {first} {rest}")
    title = " ".join(w[:1].upper() + w[1:] for w in
                     f"how {story['name']}'s {story['domain']} changed".split())
    return members, title, " ".join(sentences), [m.content for m in members]


def lies(case: Case, rng: random.Random) -> dict[str, Case]:
    """The case with one invented name, month or weekday each (where one can be made)."""
    members, title, content, facts = case
    stated_text = " ".join(f"{m.subject} {m.content}" for m in members).lower()
    stranger = next(s for s in STRANGERS if s.lower() not in stated_text)
    out: dict[str, Case] = {}
    names = [w for w in _inner_capitals(members) if re.fullmatch(r"[A-Z][a-z]{2,}", w)
             and w.lower() not in MONTHS and w.lower() not in WEEKDAYS
             and re.search(rf"(?<=\s){w}\b", content)]
    if names:
        name = rng.choice(sorted(names))
        out["name"] = (members, title, re.sub(rf"\b{name}\b", stranger, content),
                       [re.sub(rf"\b{name}\b", stranger, f) for f in facts])
    # the hole: a name that only ever opens a sentence is not read
    openers = [w for w in re.findall(r"(?:^|[.!?:]\s+)([A-Z][a-z]{2,})\b", content)
               if re.search(rf"\b{w}\b", " ".join(m.subject for m in members))
               and w.lower() not in MONTHS and w.lower() not in WEEKDAYS]
    if openers:
        out["opening name"] = (members, title, re.sub(rf"\b{openers[0]}\b", stranger, content),
                               [re.sub(rf"\b{openers[0]}\b", stranger, f) for f in facts])
    stated_months = {m.timestamp.month for m in members}
    stated_days = {m.timestamp.weekday() for m in members}
    month = next(i for i in rng.sample(range(1, 13), 12) if i not in stated_months
                 and MONTH_NAMES[i - 1].lower() not in stated_text)
    day = next((i for i in rng.sample(range(7), 7) if i not in stated_days
                and DAY_NAMES[i].lower() not in stated_text), None)
    out["month"] = (members, title, _add(content, f"in {MONTH_NAMES[month - 1]}"), facts)
    if day is not None:
        out["weekday"] = (members, title, _add(content, f"on {DAY_NAMES[day]}"), facts)
    return out


def _add(content: str, phrase: str) -> str:
    """``phrase`` added to the end of the first sentence."""
    m = re.search(r"[.!?](\s|$)", content)
    at = m.start() if m else len(content)
    return f"{content[:at]} {phrase}{content[at:]}"


def report(label: str, cases: list[Case], rng: random.Random) -> None:
    refused = [(c, why) for c in cases if (why := invented_name_or_date(c[0], c[1], c[2], c[3]))]
    print(f"{label}: {len(refused)} of {len(cases)} honest drafts refused "
          f"({len(refused) / max(1, len(cases)):.1%})")
    for _, why in refused[:10]:
        print(f"    {why}")
    caught: dict[str, list[bool]] = {}
    for case in cases:
        for kind, lie in lies(case, rng).items():
            caught.setdefault(kind, []).append(
                invented_name_or_date(lie[0], lie[1], lie[2], lie[3]) is not None)
    print("    lies caught: " + ", ".join(f"{k} {sum(v)}/{len(v)}" for k, v in caught.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path("memory_root_example"))
    parser.add_argument("--locomo", type=Path, default=None, help="path to locomo10.json")
    args = parser.parse_args()
    rng = random.Random(7)
    report(f"extractive, {args.root}", root_drafts(args.root), rng)
    if args.locomo is not None:
        report("extractive, LoCoMo", root_drafts(args.root, locomo=args.locomo), rng)
    told = stories()
    report("extractive, state stories", story_drafts(ExtractiveLLM()), rng)
    report("paraphrases, state stories",
           [paraphrase(s, m, n) for n, (s, m) in enumerate(told)], rng)
    report("model-style rewrites, state stories",
           [(members, *MODEL_STYLE[s["id"]], [x.content for x in members])
            for s, members in told if s["id"] in MODEL_STYLE], rng)


if __name__ == "__main__":
    main()
