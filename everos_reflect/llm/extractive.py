"""The ``extractive`` provider: deterministic, offline merging with no model at all.

It rearranges what the members say, never invents: it orders the members by time, splits them
into sentences, drops restatements, works out which statements are the latest state, and writes
a dated narrative that ends with the current state. Nothing is paraphrased, so facts survive
word for word; the price is prose that reads like an annotated timeline.

Output format (language-neutral where it can be: ISO dates, no connective phrases)::

    2026-08-02 — Andrew mentioned that his Denver apartment doesn't allow dogs, ...
    2026-09-04 — Andrew adopted a dog! Toby is a three-year-old brindle lab/boxer mix ...

    Current state (as of 2026-09-07): Andrew now has two dogs, Toby and Buddy.

The only English words it adds are the "Current state (as of …):" label, and only when the input
reads as English; other input gets "→ (2026-09-07)" instead.

Known limits, by design:
- Restatements are found by word overlap (Jaccard ≥ 0.8 on content words, or a short sentence
  wholly contained in a later one). Paraphrases with different words are kept twice. Sentences
  whose numbers or negations differ are never merged ("one dog" vs "two dogs").
- "Latest state" is recognised only for a few English predicate families (where someone lives,
  works, what they own/adopted by kind, their diet, relationship status), keyed by
  (subject, family[, object kind]). A change it cannot recognise stays in the timeline and the
  current state falls back to the latest date's statements.
- Pronouns are resolved only for a sentence-initial English "He/She/They" (to the last named
  subject of the same member); other languages keep their text untouched.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date

from everos_reflect.llm.base import (
    FactsRequest,
    FactsResult,
    MergeMember,
    MergeRequest,
    MergeResult,
    Usage,
)
from everos_reflect.llm.tasks import TaskRequest, TaskResult, offline_task

# --- lexicon (English; other languages simply match nothing here) ---------------------------


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


STOPWORDS = _wordset(
    """a an the and or but if then so of to in on at by for with from into onto about as is are
    was were be been being am do does did has have had having it its this that these those there
    here he she they him her them his hers their theirs i me my we us our you your who whom which
    what when where why how also too very just again still now already yet than over under up
    down out off after before while during since until because which s t will would can could
    should may might must shall"""
)
# Never treated as noise: they flip or count a fact.
NEGATIONS = _wordset(
    "no not never none nobody nothing without cannot dont doesnt didnt isnt wasnt arent werent "
    "hasnt havent hadnt cant wont"
)
NUMBER_WORDS = _wordset(
    "zero one two three four five six seven eight nine ten eleven twelve first second third "
    "half both single"
)
FILLER = _wordset("ok okay thanks thank yes yeah sure great hi hello bye cool fine")
SINGULAR_PRONOUNS = {"he", "she"}
# Common function words of other Latin-script languages: input with more of these than of
# English STOPWORDS gets no English label.
OTHER_LANGUAGE_MARKERS = _wordset(
    "und der die das ist nicht ein eine einen mit hat auch le la les et est une des du pas avec "
    "el los las y es una que del con por il di che è sono het een en van niet ook og ikke er"
)
# Capitalised words that start sentences without naming anybody.
NOT_NAMES = STOPWORDS | FILLER | {"after", "before", "on", "in", "first", "last", "moving", "today"}
ABBREVIATIONS = ("Dr", "Mr", "Mrs", "Ms", "Prof", "St", "Jr", "Sr", "vs", "etc", "e.g", "i.e")

PET_WORDS = "dogs?|cats?|pets?|pupp(?:y|ies)|kittens?|rabbits?|parrots?|hamsters?"
# (family, pattern). A match keys the sentence as a statement of that family's current state.
STATE_RULES: list[tuple[str, re.Pattern[str]]] = [
    (
        "pets",
        re.compile(
            rf"\b(?:has|have|had|owns?|owned|adopt\w*|got|gets|rescued|no)\b[^.;]*?"
            rf"\b(?:{PET_WORDS})\b",
            re.IGNORECASE,
        ),
    ),
    (
        "residence",
        re.compile(
            r"\b(?:lives?|living|lived|moved?|moving|relocat\w*|resides?)\s+"
            r"(?:back\s+|now\s+)?(?:in|to|from|at)\b",
            re.IGNORECASE,
        ),
    ),
    (
        "work",
        re.compile(
            r"\b(?:works?|working|worked)\s+(?:at|for|as)\b|\bemployed\b|\bjob\s+(?:at|with)\b"
            r"|\b(?:starts?|started)\s+at\b|\bleft\s+[A-Z]|\bjoin(?:s|ed)?\s+[A-Z]",
        ),
    ),
    (
        "diet",
        re.compile(r"\b(?:vegetarian|vegan|pescatarian|eats?\s+(?:meat|fish))\b", re.IGNORECASE),
    ),
    (
        "relationship",
        re.compile(r"\b(?:married|engaged|divorced|single|dating|broke up)\b", re.IGNORECASE),
    ),
]

_WORD_RE = re.compile(r"\w+(?:'\w+)?", re.UNICODE)
_NAME_RE = re.compile(r"\b([A-Z][\w-]*)(?:'s)?\b")
_DATE_TOKEN_RE = re.compile(r"^\d{1,4}$")
_SENTENCE_END_RE = re.compile(r"(?<=[.!?…])\s+|(?<=[。！？])")
_PARAGRAPH_DATE_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})\s+—\s+")
_STATE_LABEL_RE = re.compile(r"^(?:Current state \(as of [^)]*\):|→ \([^)]*\))\s*")

JACCARD_DUPLICATE = 0.8
CONTAINED_DUPLICATE = 0.9


@dataclass
class _Sentence:
    text: str
    day: date
    order: int  # position in the input, for stable ordering
    tokens: frozenset[str] = field(init=False)
    markers: frozenset[str] = field(init=False)  # numbers and negations: must match to merge
    key: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        words = [w.lower().replace("'", "") for w in _WORD_RE.findall(self.text)]
        self.tokens = frozenset(w for w in words if w not in STOPWORDS or w in NEGATIONS)
        self.markers = frozenset(
            w for w in words if w in NEGATIONS or w in NUMBER_WORDS or w.isdigit()
        )


class ExtractiveLLM:
    """The default, offline provider. Thread-safe (no state); zero token usage."""

    provider = "extractive"
    model = "extractive-v1"

    def merge(self, req: MergeRequest) -> MergeResult:
        members = req.chronological()
        main_entity = _main_entity(f"{m.subject}. {m.content}"
                                   for m in [*members, *([req.existing] if req.existing else [])])
        sentences: list[_Sentence] = []
        if req.mode == "update" and req.existing is not None:
            sentences.extend(_narrative_sentences(req.existing, main_entity))
        for member in members:
            sentences.extend(_member_sentences(member, len(sentences), main_entity))
        english = _looks_english(" ".join(s.text for s in sentences))
        for s in sentences:
            s.key = _state_key(s.text, main_entity)
        kept = _drop_restatements(sentences)
        content = _render(kept, english=english)
        title = _title(members, req.existing, main_entity)
        return MergeResult(title, content, Usage(), self.provider, self.model)

    def run_task(self, name: str, req: TaskRequest) -> TaskResult:
        """Merge and facts as above; other tasks only where an honest offline method exists
        (importance: ``llm/importance.py``), else :class:`~everos_reflect.llm.tasks.NeedsLLM`."""
        return offline_task(self, name, req)

    def extract_facts(self, req: FactsRequest) -> FactsResult:
        facts: list[_Sentence] = []
        entity: str | None = None
        paragraphs = _paragraphs(req.text)
        person = _main_entity(paragraphs)
        for paragraph in paragraphs:
            body = _STATE_LABEL_RE.sub("", _PARAGRAPH_DATE_RE.sub("", paragraph))
            for text in split_sentences(body):
                text, entity = _resolve_pronoun(text, entity, person)
                if _is_filler(text):
                    continue
                facts.append(_Sentence(text, date.min, len(facts)))
        # Keep the first wording: in a narrative the current-state recap repeats earlier lines.
        kept: list[_Sentence] = []
        for s in facts:
            if not any(_restates(s, k) for k in kept):
                kept.append(s)
        return FactsResult([s.text for s in kept], Usage())


# --- sentences --------------------------------------------------------------------------


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: line wraps joined, bullets and blank lines are boundaries."""
    out: list[str] = []
    for paragraph in _paragraphs(text):
        lines = [re.sub(r"^\s*(?:[-*•]|\d+[.)])\s+", "", ln) for ln in paragraph.splitlines()]
        bullets = len(lines) > 1 and all(
            re.match(r"^\s*(?:[-*•]|\d+[.)])\s+", ln) for ln in paragraph.splitlines()
        )
        chunks = lines if bullets else [" ".join(ln.strip() for ln in lines)]
        for chunk in chunks:
            out.extend(_split_chunk(chunk))
    return [s for s in out if s]


def _split_chunk(chunk: str) -> list[str]:
    pieces = _SENTENCE_END_RE.split(chunk.strip())
    merged: list[str] = []
    for piece in pieces:
        piece = piece.strip()
        if not piece:
            continue
        # Rejoin after abbreviations and initials ("Dr. Mei Lin", "J. Smith").
        if merged and re.search(
            r"(?:\b(?:" + "|".join(re.escape(a) for a in ABBREVIATIONS) + r")|\b[A-Z])\.$",
            merged[-1],
        ):
            merged[-1] = f"{merged[-1]} {piece}"
        else:
            merged.append(piece)
    return merged


def _paragraphs(text: str) -> list[str]:
    return [p.strip() for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]


def _member_sentences(member: MergeMember, start: int, person: str | None) -> list[_Sentence]:
    day = member.timestamp.date()
    entity: str | None = None
    out: list[_Sentence] = []
    for text in split_sentences(member.content):
        text, entity = _resolve_pronoun(text, entity, person)
        out.append(_Sentence(text, day, start + len(out)))
    return out


def _narrative_sentences(existing: MergeMember, person: str | None) -> list[_Sentence]:
    """Sentences of an earlier narrative with their dates; its current-state recap is dropped
    (it is recomputed). Undated prose (an LLM's narrative) takes the narrative's date."""
    day = existing.timestamp.date()
    out: list[_Sentence] = []
    for paragraph in _paragraphs(existing.content):
        if _STATE_LABEL_RE.match(paragraph):
            continue
        dated = _PARAGRAPH_DATE_RE.match(paragraph)
        if dated:
            day = date.fromisoformat(dated.group(1))
            paragraph = paragraph[dated.end() :]
        entity: str | None = None
        for text in split_sentences(paragraph):
            text, entity = _resolve_pronoun(text, entity, person)
            out.append(_Sentence(text, day, len(out)))
    return out


def _names(text: str) -> list[str]:
    """Capitalised words that plausibly name someone or something (not sentence starters)."""
    return [n for n in _NAME_RE.findall(text) if n.lower() not in NOT_NAMES]


def _resolve_pronoun(
    text: str, entity: str | None, person: str | None
) -> tuple[str, str | None]:
    """Replace a leading He/She by ``person`` (the cluster's main entity) when the previous
    sentence was about that person; return the new last subject.

    Sentences are reordered and restatements dropped, so a leading pronoun can lose its
    antecedent; but a wrong guess would change a fact ("Northwind is leaning towards yes"), so
    only the unambiguous case is resolved: singular pronoun, previous subject = the person.
    "They" is never resolved (it is usually a group).
    """
    first = text.split(" ", 1)
    if (person and entity == person and first[0].lower() in SINGULAR_PRONOUNS
            and len(first) == 2):
        return f"{person} {first[1]}", person
    names = _names(text)
    if names and text.startswith(names[0]):
        entity = names[0]
    return text, entity


def _main_entity(texts: Iterable[str]) -> str | None:
    """Who the texts (members, paragraphs) are about: the name that most often starts a
    sentence — the grammatical subject — if one clearly does; else nobody.

    A company that every fragment names ("Northwind offered Andrew …") is rarely the one the
    memory is about, and a wrong guess here would rewrite "He accepted" into a false fact, so a
    tie means no main person (pronouns then stay as written)."""
    leading: Counter[str] = Counter()
    texts_naming: Counter[str] = Counter()
    mentions: Counter[str] = Counter()
    for text in texts:
        names = _names(text)
        texts_naming.update(set(names))
        mentions.update(names)
        for sentence in split_sentences(text):
            first = _names(sentence)
            if first and sentence.startswith(first[0]):
                leading[first[0]] += 1
    ranked = leading.most_common(2)
    if not ranked or (len(ranked) == 2 and ranked[0][1] == ranked[1][1]):
        return None
    return ranked[0][0]


def _state_key(text: str, main_entity: str | None) -> tuple[str, ...] | None:
    for family, pattern in STATE_RULES:
        if pattern.search(text):
            names = _names(text)
            subject = names[0] if names and text.startswith(names[0]) else main_entity
            return ((subject or "").lower(), family)
    return None


# --- restatements -----------------------------------------------------------------------


def _restates(a: _Sentence, b: _Sentence) -> bool:
    """Do ``a`` and ``b`` say the same thing (by words, with equal numbers and negations)?"""
    if a.markers != b.markers or not a.tokens or not b.tokens:
        return a.text.strip().lower() == b.text.strip().lower()
    overlap = len(a.tokens & b.tokens)
    if overlap / len(a.tokens | b.tokens) >= JACCARD_DUPLICATE:
        return True
    smaller = min(len(a.tokens), len(b.tokens))
    return smaller >= 3 and overlap / smaller >= CONTAINED_DUPLICATE


def _drop_restatements(sentences: list[_Sentence]) -> list[_Sentence]:
    """One sentence per restated fact: the later wording, unless the later one is shorter (a
    short recap of what an earlier sentence said in more detail)."""
    kept: list[_Sentence] = []
    for s in sentences:
        match = next((i for i, k in enumerate(kept) if _restates(s, k)), None)
        if match is None:
            kept.append(s)
        elif len(s.tokens) >= len(kept[match].tokens):
            del kept[match]
            kept.append(s)
    return kept


# --- rendering --------------------------------------------------------------------------


def _render(sentences: list[_Sentence], *, english: bool) -> str:
    by_day: dict[date, list[str]] = {}
    for s in sorted(sentences, key=lambda s: (s.day, s.order)):
        by_day.setdefault(s.day, []).append(s.text)
    paragraphs = [f"{day.isoformat()} — {' '.join(texts)}" for day, texts in by_day.items()]
    current = _current_state(sentences)
    if current:
        last_day = max(s.day for s in sentences).isoformat()
        label = f"Current state (as of {last_day}):" if english else f"→ ({last_day})"
        paragraphs.append(f"{label} {' '.join(s.text for s in current)}")
    return "\n\n".join(paragraphs)


def _current_state(sentences: list[_Sentence]) -> list[_Sentence]:
    """The latest statement of each recognised state, plus everything said on the last day."""
    if not sentences:
        return []
    last_day = max(s.day for s in sentences)
    latest: dict[tuple[str, ...], _Sentence] = {}
    for s in sorted(sentences, key=lambda s: (s.day, s.order)):
        if s.key is not None:
            latest[s.key] = s
    chosen = {id(s) for s in latest.values()}
    chosen |= {id(s) for s in sentences if s.day == last_day}
    ordered = sorted(sentences, key=lambda s: (s.day, s.order))
    if len(chosen) == len(ordered) and len({s.day for s in ordered}) == 1:
        return []  # a single day: the recap would repeat the whole narrative
    return [s for s in ordered if id(s) in chosen]


def _title(members: list[MergeMember], existing: MergeMember | None, entity: str | None) -> str:
    """The member subject closest to all the others (by shared words), naming the main subject.

    In update mode the existing title competes too, so a stable topic keeps a stable title.
    """
    candidates = [m.subject.strip() for m in members if m.subject.strip()]
    if existing is not None and existing.subject.strip():
        candidates.insert(0, existing.subject.strip())
    if not candidates:
        candidates = [split_sentences(members[-1].content)[0][:80]]
    token_sets = [_content_words(c) for c in candidates]

    def centrality(i: int) -> tuple[float, int]:
        score = sum(
            len(token_sets[i] & other) / (len(token_sets[i] | other) or 1)
            for j, other in enumerate(token_sets)
            if j != i
        )
        return (score, i)  # ties go to the later subject

    best = candidates[max(range(len(candidates)), key=centrality)]
    if entity and entity.lower() not in best.lower():
        best = f"{entity}: {best}"
    return best


def _content_words(text: str) -> frozenset[str]:
    return frozenset(w.lower() for w in _WORD_RE.findall(text) if w.lower() not in STOPWORDS)


def _looks_english(text: str) -> bool:
    """English by function words, and written mostly in Latin letters (CJK, Cyrillic… are not)."""
    letters = [ch for ch in text if ch.isalpha()]
    if not letters or sum(ch.isascii() for ch in letters) / len(letters) < 0.8:
        return False
    words = [w.lower() for w in _WORD_RE.findall(text)]
    english = sum(w in STOPWORDS for w in words)
    other = sum(w in OTHER_LANGUAGE_MARKERS for w in words)
    return english > other


def _is_filler(text: str) -> bool:
    """Dates-only, greetings and fragments carry no fact."""
    words = [w.lower() for w in _WORD_RE.findall(text)]
    meaningful = [
        w for w in words if not _DATE_TOKEN_RE.match(w) and w not in FILLER and not w.isdigit()
    ]
    letters = sum(ch.isalpha() for ch in "".join(meaningful))
    return not meaningful or letters < 4
