"""Names and dates a merge states that none of its sources does: the check beside the numbers.

The merge prompt says "do not invent names, dates, numbers". Numbers are checked exactly
(:func:`consolidate.unsupported_numbers`); this module checks the other two as far as a
program can without a model, erring towards letting an honest draft through:

- **Dates in words**: a month or weekday name, and an ordinal day written in words next to a
  month ("the fourth of May", "May fourth"), must be stated by a source — in its words, or by
  a date it carries (its timestamp, as the merge prompt shows it, or an ISO date in its text:
  2026-09-04 vouches for "September", "Friday" and "fourth").
- **Names**: a capitalised word that does not open a sentence, or a run of them ("New York"),
  must be in a source, case aside, as a run in that order. A word that opens a sentence is
  skipped: without a dictionary, "Later" and "Boston" look the same there. A title in Title
  Case is read for dates only. An inflected form sharing a long prefix with a source word
  ("Canadian" for "Canada") counts as stated.

Capitalisation marks names only in languages that capitalise names alone, so names are read
only when the sources read as English (common English function words make up a share of
their words): in German every noun is capitalised, and each honest paraphrase would be
refused. Dates are English words and are read whatever the language.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date

from everos_reflect.llm.base import MergeMember
from everos_reflect.llm.extractive import shared_prefix
from everos_reflect.model import quoted_value
from everos_reflect.strategies.consolidate import Draft, member_of

MONTHS = {name: n for n, names in enumerate(
    [("january", "jan"), ("february", "feb"), ("march",), ("april", "apr"), ("may",),
     ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
     ("october", "oct"), ("november", "nov"), ("december", "dec")], start=1) for name in names}
# "Mon", "Wed", "Sat", "Sun" are English words too: left to the name check when capitalised.
WEEKDAYS = {name: n for n, names in enumerate(
    [("monday",), ("tuesday", "tue", "tues"), ("wednesday",), ("thursday", "thu", "thur", "thurs"),
     ("friday", "fri"), ("saturday",), ("sunday",)]) for name in names}
_ORDINAL_UNITS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth",
                  "ninth"]
ORDINALS = {
    **{w: n for n, w in enumerate(_ORDINAL_UNITS, start=1)},
    **{w: n for n, w in enumerate(["tenth", "eleventh", "twelfth", "thirteenth", "fourteenth",
                                    "fifteenth", "sixteenth", "seventeenth", "eighteenth",
                                    "nineteenth", "twentieth"], start=10)},
    "thirtieth": 30,
}
#: "twenty-first", "thirty first": a tens word before a unit ordinal.
TENS = {"twenty": 20, "thirty": 30}
#: Capitalised wherever they stand; never a name.
NOT_NAMES = frozenset({"i", "i'm", "i've", "i'd", "i'll", "mr", "mrs", "ms", "dr", "ok"})
#: Common English function words, none of them a word of German or Dutch: their share of the
#: sources' words says whether capitals can be read as names (see the module docstring).
ENGLISH = frozenset({"the", "and", "of", "to", "is", "with", "he", "she", "his", "her", "they",
                     "their", "for", "that", "on", "at", "it", "has", "have", "had", "from",
                     "by", "this", "was", "were", "are", "a", "an", "about", "after", "new"})
#: Share of the sources' words that must be :data:`ENGLISH` for names to be read. English
#: prose has about a third; terse English notes about one in eight; German almost none.
ENGLISH_SHARE = 0.05
#: An inflected form counts as stated when it shares a prefix this long (and at least
#: :data:`STEM_SHARE` of the shorter word) with a source word: "Canadian"/"Canada".
STEM_MIN = 4
STEM_SHARE = 0.75

_WORD_RE = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
_ISO_DATE_RE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
#: A day right after a month: "May 4", "May fourth".
_DAY_NEXT_RE = re.compile(r"\s+(?:\d|(?:" + "|".join([*ORDINALS, *TENS]) + r")\b)",
                          re.IGNORECASE)
#: What may stand between the end of one sentence and the first word of the next.
_OPENERS = "\"'“‘«([{*_-–—•>#"
_BREAKS = ".!?:\n"


@dataclass(frozen=True)
class _Word:
    text: str  # as written
    key: str  # lower case, possessive dropped
    start: int
    end: int
    initial: bool  # opens a sentence, a line or a quoted/bulleted span


def _key(word: str) -> str:
    low = word.lower().replace("’", "'")
    return low[:-2] if low.endswith("'s") else low.rstrip("'")


def _words(text: str) -> list[_Word]:
    out = []
    for m in _WORD_RE.finditer(text):
        i = m.start() - 1
        while i >= 0 and (text[i] in " \t\r\f\v" or text[i] in _OPENERS):
            i -= 1
        initial = i < 0 or text[i] in _BREAKS
        out.append(_Word(m.group(), _key(m.group()), m.start(), m.end(), initial))
    return out


def _possessive(word: _Word) -> bool:
    """"Acme's" ends a name: "Acme's New York office" is two names."""
    return word.key != word.text.lower().replace("’", "'")


def _capitalised(word: _Word) -> bool:
    return word.text[0].isupper()


def _ordinals(words: list[_Word]) -> list[tuple[int, int, int]]:
    """``(first index, last index, day)`` of each ordinal day in words ("fourth",
    "twenty-first")."""
    out = []
    for i, w in enumerate(words):
        day = ORDINALS.get(w.key)
        if day is None:
            continue
        if day < 10 and i > 0 and words[i - 1].key in TENS:
            out.append((i - 1, i, TENS[words[i - 1].key] + day))
        else:
            out.append((i, i, day))
    return out


def _month(words: list[_Word], i: int, text: str) -> int | None:
    """The month ``words[i]`` names, if it is one: capitalised, and "May" opening a sentence
    only before a day ("May 4", "May fourth"): "May I ..." is no date."""
    w = words[i]
    month = MONTHS.get(w.key)
    if month is None or not _capitalised(w):
        return None
    if w.key == "may" and w.initial and not _DAY_NEXT_RE.match(text, w.end):
        return None
    return month


@dataclass
class _Stated:
    """What the sources state: their words (in order, per text), months, weekdays, days."""

    runs: list[list[str]]
    vocabulary: set[str]
    months: set[int]
    weekdays: set[int]
    days: set[int]
    english: bool

    @classmethod
    def of(cls, members: Iterable[MergeMember]) -> _Stated:
        runs: list[list[str]] = []
        months: set[int] = set()
        weekdays: set[int] = set()
        days: set[int] = set()
        english = total = 0
        for member in members:
            stamp = member.timestamp
            months.add(stamp.month)
            weekdays.add(stamp.weekday())
            days.add(stamp.day)
            for text in (member.subject, member.content):
                words = _words(text)
                runs.append([w.key for w in words])
                total += len(words)
                english += sum(w.key in ENGLISH for w in words)
                for w in words:
                    if (month := MONTHS.get(w.key)) is not None and (
                            w.key != "may" or _capitalised(w)):
                        months.add(month)
                    if (weekday := WEEKDAYS.get(w.key)) is not None:
                        weekdays.add(weekday)
                days.update(day for _, _, day in _ordinals(words))
                for y, mo, d in _ISO_DATE_RE.findall(text):
                    try:
                        when = date(int(y), int(mo), int(d))
                    except ValueError:
                        continue
                    months.add(when.month)
                    weekdays.add(when.weekday())
                    days.add(when.day)
                days.update(int(n) for n in re.findall(r"\d{1,2}", text) if 1 <= int(n) <= 31)
        vocabulary = {k for run in runs for k in run}
        return cls(runs, vocabulary, months, weekdays, days,
                   english=total > 0 and english / total >= ENGLISH_SHARE)

    def has_word(self, key: str) -> bool:
        return key in self.vocabulary or any(_same(key, known) for known in self.vocabulary)

    def has_run(self, keys: list[str]) -> bool:
        if len(keys) == 1:
            return self.has_word(keys[0])
        if not all(self.has_word(k) for k in keys):
            return False
        n = len(keys)
        return any(all(_same(k, run[i + j]) for j, k in enumerate(keys))
                   for run in self.runs for i in range(len(run) - n + 1))


def _same(a: str, b: str) -> bool:
    """One word, or forms of one ("Labs"/"Lab", "Canadian"/"Canada")."""
    if a == b or a.rstrip("s") == b.rstrip("s"):
        return True
    shared = shared_prefix(a, b)
    return shared >= STEM_MIN and shared >= STEM_SHARE * min(len(a), len(b))


def _title_case(words: list[_Word]) -> bool:
    """Whether a title capitalises its words as a matter of style ("Andrew's Pet Adoption
    Journey"), where a capital says nothing about names."""
    long = [w for w in words if len(w.key) > 3]
    return bool(long) and all(_capitalised(w) for w in long)


def _date_problem(words: list[_Word], text: str, stated: _Stated) -> str | None:
    """The first month, weekday or ordinal day (in words, next to a month) that no source
    states, as written."""
    months = {i: m for i in range(len(words)) if (m := _month(words, i, text)) is not None}
    for i, w in enumerate(words):
        if i in months and months[i] not in stated.months:
            return w.text
        if (weekday := WEEKDAYS.get(w.key)) is not None and _capitalised(w) \
                and weekday not in stated.weekdays:
            return w.text
    for first, last, day in _ordinals(words):
        # "May fourth", "the fourth of May"
        dated = first - 1 in months or (last + 2 in months and words[last + 1].key == "of")
        if dated and day not in stated.days:
            return text[words[first].start:words[last].end]
    return None


def _name_problem(words: list[_Word], text: str, stated: _Stated) -> str | None:
    """The first run of capitalised words that no source states, as written. A run is
    capitalised words apart only by a space; a word opening a sentence, a month, a weekday
    and "I" are no part of one."""
    def named(w: _Word) -> bool:
        return _capitalised(w) and not w.initial and len(w.key) > 1 \
            and w.key not in NOT_NAMES and w.key not in MONTHS and w.key not in WEEKDAYS

    i = 0
    while i < len(words):
        if not named(words[i]):
            i += 1
            continue
        j = i + 1
        while j < len(words) and named(words[j]) and not _possessive(words[j - 1]) \
                and text[words[j - 1].end:words[j].start] == " ":
            j += 1
        if not stated.has_run([w.key for w in words[i:j]]):
            return text[words[i].start:words[j - 1].end]
        i = j
    return None


def invented_name_or_date(members: Sequence[MergeMember], title: str, content: str,
                          facts: Sequence[str], *, names: bool = True) -> str | None:
    """Why a draft states a name or a date in words that none of ``members`` states (None
    when it states none): the first such token, and where."""
    stated = _Stated.of(members)
    texts = [("the narrative", title, True), ("the narrative", content, False),
             *(("a fact", fact, False) for fact in facts)]
    for what, text, is_title in texts:
        words = _words(text)
        token = _date_problem(words, text, stated)
        kind = "dates"
        if token is None and names and stated.english and not (is_title and _title_case(words)):
            token, kind = _name_problem(words, text, stated), "names"
        if token is not None:
            return (f"{what} states {quoted_value(token)}, which none of its sources does "
                    f"(a merge may not invent {kind})")
    return None


def unsupported_names(draft_: Draft) -> str | None:
    """:func:`invented_name_or_date` for a draft, against every entry it replaces (the old
    narrative too, in update mode)."""
    return invented_name_or_date([member_of(e) for e in draft_.selection.replaced],
                                 draft_.title, draft_.content, draft_.facts)


__all__ = ["invented_name_or_date", "unsupported_names"]
