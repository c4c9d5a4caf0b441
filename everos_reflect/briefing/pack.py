"""Fit ranked memory items into a token budget (pure: items and a counter in, a briefing out).

The block is a header line, then one ``## <section>`` heading per section that kept an item,
then one line per item — ``- [id · kind · date · cites a, b] text`` — and, when anything did
not fit, a last line saying what was left out. Sections come in priority order and items in
rank order; an item that does not fit is skipped (counted as left out) and smaller ones after it
may still fit. Long texts are cut at a token boundary to a share of the budget, so one long
narrative cannot crowd out everything else, and a section may be held to a share of the
budget (:attr:`Section.share`) while the sections after it have items that want the room.

The budget covers the whole block: the space the "left out" line may need is reserved before
packing, and the rendered block is counted again at the end.

Only the items that may still fit are tokenized: an item whose line surely costs more tokens
than are left (:func:`line_floor`, read without tokenizing) is left out as it would be after
counting. With 20,000 lessons of one task type and room for a dozen, tokenizing every line
took 3 s a briefing; the block is the same either way.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from everos_reflect.model import parse_timestamp


class Counts(Protocol):
    def count(self, text: str) -> int: ...
    def count_many(self, texts: list[str]) -> list[int]: ...
    def truncate(self, text: str, limit: int, marker: str = " …") -> str: ...
    def at_least(self, text: str) -> int: ...
    def surely_within(self, text: str, limit: int) -> bool: ...


MIN_ITEM_TOKENS = 24  # an item cut shorter than this says too little to be worth its line
MIN_LINE_TOKENS = 5  # "-", "[", two "·" and "]": the least any item line costs
MIN_PART_TOKENS = 8  # a part cut shorter than this, beside whole ones, says too little
MAX_CITED_SHOWN = 5  # ids of an item's evidence written out; the rest are counted
CUT_MARKER = " …"  # ends a text cut to its share of the budget
GAP = "…"  # stands where parts of a text cut by its parts were left out (:func:`cut_parts`)
#: The most ids of left-out items an answer lists, in priority order (``omitted`` counts
#: every one), and of one item's evidence (``evidence_count`` counts every one). The block
#: keeps to ``max_tokens``; its answer (the API's, the MCP tool's, ``briefing --json``)
#: listed every id left out and every citation of every item: a 500-token briefing of a
#: user with 3,000 lessons and 300 convictions each citing 200 records was an 88 KB answer,
#: all of it in the prompt of an agent calling the MCP tool.
MAX_OMITTED_IDS = 100
MAX_ITEM_EVIDENCE = 20


@dataclass
class Item:
    """One memory record offered to the briefing."""

    id: str
    kind: str
    text: str
    timestamp: str | None = None
    evidence: list[str] = field(default_factory=list)
    score: float | None = None
    note: str = ""  # e.g. "confirmed 3x", "contested"
    #: ``text`` as parts in its own order, each with the rank it is kept by when the text
    #: must be cut (lower first; :func:`cut_parts`), e.g. a narrative's current state before
    #: its oldest day (:mod:`everos_reflect.briefing.narrative`). Empty: cut at the opening.
    parts: tuple[tuple[int, str], ...] = field(default=(), repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The item as an answer lists it: at most :data:`MAX_ITEM_EVIDENCE` cited ids, the
        first ones (``evidence_count``: all of them; ``explain`` gives the whole tree)."""
        out = asdict(self)
        del out["parts"]  # how the text is cut, not what the block says
        out["evidence"] = list(self.evidence[:MAX_ITEM_EVIDENCE])
        out["evidence_count"] = len(self.evidence)
        return out


@dataclass
class Section:
    title: str
    items: list[Item]
    #: The most of the budget (after the header) this section takes, as a fraction, while
    #: the sections after it have items that want the room; the room they leave is its too
    #: (:func:`pack`). ``None``: no share of its own, only the whole budget.
    share: float | None = None


@dataclass
class Briefing:
    """The packed block and what went into it (and what did not)."""

    text: str
    items: list[Item]
    tokens: int
    max_tokens: int
    route: str
    omitted: dict[str, int] = field(default_factory=dict)  # kind -> items left out
    omitted_ids: list[str] = field(default_factory=list)
    #: facts given no line because the Episode they were taken from is in the block and says
    #: them word for word (:func:`restates`)
    restated_ids: list[str] = field(default_factory=list)
    #: items in the block whose text was cut to fit ("…" stands where text was left out)
    cut_ids: list[str] = field(default_factory=list)
    #: records given no line because a line in the block says the same word for word: the
    #: same task (or Episode, or fact) recorded again (:func:`fold_repeats`)
    repeated_ids: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The answer: bounded by the block's budget, not by how many records were offered
        (:data:`MAX_OMITTED_IDS`, :data:`MAX_ITEM_EVIDENCE`)."""
        return {
            "text": self.text,
            "items": [i.to_dict() for i in self.items],
            "tokens": self.tokens,
            "max_tokens": self.max_tokens,
            "route": self.route,
            "omitted": dict(self.omitted),
            "omitted_ids": list(self.omitted_ids[:MAX_OMITTED_IDS]),
            "restated_ids": list(self.restated_ids),
            "cut_ids": list(self.cut_ids),
            "repeated_ids": list(self.repeated_ids[:MAX_OMITTED_IDS]),
        }


def item_line(item: Item) -> str:
    """One item on one line. Every part is folded onto it, not only the text: the tags and the
    note come from metadata a person may write (a conviction's ``key``, a lesson's ``evidence``),
    and a line break there put a heading and items of their own into the block."""
    day = _one_line((item.timestamp or "")[:10]) or "undated"
    tags = [_one_line(item.id), _one_line(item.kind), day]
    if item.evidence:
        shown = ", ".join(_one_line(e) for e in item.evidence[:MAX_CITED_SHOWN])
        more = len(item.evidence) - MAX_CITED_SHOWN
        tags.append("cites " + shown + (f" +{more} more" if more > 0 else ""))
    text = _one_line(item.text)
    note = f" ({_one_line(item.note)})" if item.note else ""
    return f"- [{' · '.join(tags)}] {text}{note}"


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _plural(kind: str, n: int) -> str:
    word = kind.replace("_", " ")
    return f"{n} {word}" + ("" if n == 1 else "s")


def omitted_line(omitted: dict[str, int]) -> str:
    parts = [_plural(kind, n) for kind, n in sorted(omitted.items()) if n]
    return "Left out for budget: " + ", ".join(parts) + "."


def pack(
    sections: Sequence[Section],
    max_tokens: int,
    counter: Counts,
    *,
    header: str,
    route: str = "instance",
) -> Briefing:
    """The best block of at most ``max_tokens`` tokens from ``sections`` (priority order)."""
    every = [item for s in sections for item in s.items]
    kinds = sorted({i.kind for i in every})
    # room for the worst "left out" line: every kind, four-digit counts
    reserve = counter.count(omitted_line({k: 9999 for k in kinds})) if kinds else 0
    head_cost = counter.count(header)
    if head_cost + reserve > max_tokens:
        omitted = dict(Counter(i.kind for i in every))
        return Briefing("", [], 0, max_tokens, route, omitted, [i.id for i in every])

    cap = max(MIN_ITEM_TOKENS, (max_tokens - head_cost) // 3)
    shares = {n: int((max_tokens - head_cost) * s.share) for n, s in enumerate(sections)
              if s.share is not None}

    def packed(limits: dict[int, int]) -> _Packer:
        packer = _Packer(counter, room=max_tokens - reserve, used=head_cost, cap=cap,
                         lines=[header], cut=cut_floor(cap, counter))
        for n, section in enumerate(sections):
            if section.items:
                packer.section(section, limits.get(n))
        return packer

    packer = packed(shares)
    spare = packer.room - packer.used
    if packer.held_back and spare > 0:
        # what the later sections left is the held sections' too: they take it, and the
        # later sections, packed in the same room as before, keep what they kept
        packer = packed({n: packer.section_used.get(n, 0) + spare
                         for n in packer.held_back})
    kept, left, lines = packer.kept, packer.left, packer.lines
    restated = list(packer.restated)  # each one's Episode is kept
    omitted = dict(Counter(i.kind for i in left))
    if left:
        lines.append(omitted_line(omitted))
    text = "\n".join(lines)
    tokens = counter.count(text)
    while tokens > max_tokens and kept:  # counts add up over lines; checked all the same
        dropped = kept.pop()
        left.append(dropped)
        # a fact its Episode said is left out with it, not claimed as said in the block
        left += [i for i in restated if dropped.id in i.evidence]
        restated = [i for i in restated if dropped.id not in i.evidence]
        omitted = dict(Counter(i.kind for i in left))
        lines = [ln for ln in lines if not ln.startswith("Left out")][:-1]
        text = "\n".join([*lines, omitted_line(omitted)])
        tokens = counter.count(text)
    restated_ids = [i.id for i in restated]
    cut_ids = [i.id for i in kept if i.id in packer.cut_ids]
    if tokens > max_tokens:
        # Nothing kept, and the header with the "left out" line is still over: the reserve
        # is the line for 9999 of each kind, and some counts cost more ("3461 lessons" is a
        # token more than "9999 lessons"). As when not even the header fits: no block.
        return Briefing("", [], 0, max_tokens, route, omitted, [i.id for i in left])
    return Briefing(text, kept, tokens, max_tokens, route, omitted, [i.id for i in left],
                    restated_ids, cut_ids)


def fold_repeats(items: Sequence[Item], cut_kinds: Collection[str] = ()
                 ) -> tuple[list[Item], dict[str, list[str]]]:
    """``items`` with one item standing for each set of the same kind and line text, in the
    rank of the first of the set, and what each one stands for (its id -> the others' ids).

    A person who recorded the same failed deploy six times got six identical task lines, and
    the budget went to them instead of to other records. The one kept is the newest of its
    set (undated ones last); its note says how many records it stands for, "or more" for a
    kind in ``cut_kinds`` (fetched up to a limit: copies past it were not seen, and a task
    recorded 40 times said "recorded 12x").
    """
    sets: dict[tuple[str, str], list[Item]] = {}
    for item in items:
        sets.setdefault(line_key(item), []).append(item)
    out: list[Item] = []
    repeats: dict[str, list[str]] = {}
    for same in sets.values():
        if len(same) == 1:
            out.append(same[0])
            continue
        newest = max(same, key=_newest_first)
        note = repeat_note(len(same), newest.kind in cut_kinds, newest.note)
        out.append(Item(newest.id, newest.kind, newest.text, newest.timestamp,
                        list(newest.evidence), newest.score, note))
        repeats[newest.id] = [i.id for i in same if i is not newest]
    return out, repeats


def repeat_note(count: int, cut: bool, note: str = "") -> str:
    """The note of a line standing for ``count`` records (``cut``: more may lie unseen)."""
    return f"recorded {count}x" + (" or more" if cut else "") + (f", {note}" if note else "")


def line_key(item: Item) -> tuple[str, str]:
    """What makes two items one line to :func:`fold_repeats`: their kind and text as shown."""
    return item.kind, _one_line(item.text)


def _newest_first(item: Item) -> tuple[bool, datetime]:
    ts = parse_timestamp(item.timestamp)
    return (ts is not None, ts or datetime.min.replace(tzinfo=UTC))


#: The kind whose items may restate their Episode word for word (facts are its sentences).
FACT = "atomic_fact"


def _words(text: str) -> str:
    return " ".join(text.split()).casefold()


def restates(fact: Item, episode: Item) -> bool:
    """Whether ``episode``'s text (as shown, maybe cut) holds ``fact``'s text word for word.

    A fact the offline provider extracts is a sentence of its Episode: given a line of its
    own beside the Episode, it spent the budget saying it twice (two of a demo briefing's
    three items were such sentences while two Episodes were left out). A paraphrase is not
    caught: it may say what the Episode's words do not.
    """
    words = _words(fact.text)
    return bool(words) and words in _words(episode.text)


@dataclass
class _Packer:
    """The greedy packing of :func:`pack`, one section at a time.

    A fact whose Episode is in the same section and says it word for word waits for that
    Episode: once it is in the block (not cut before the fact's words) the fact is
    ``restated``; left out or cut, the fact is offered in its place.
    """

    counter: Counts
    room: int
    used: int
    cap: int
    lines: list[str]
    #: the fewest tokens a text cut to ``cap`` shows (:func:`line_floor`), counted once
    cut: int | None = None
    kept: list[Item] = field(default_factory=list)
    left: list[Item] = field(default_factory=list)
    restated: list[Item] = field(default_factory=list)
    #: ids of the kept items whose text was cut to fit
    cut_ids: set[str] = field(default_factory=set)
    #: tokens each section's lines took, by the section's index
    section_used: dict[int, int] = field(default_factory=dict)
    #: indexes of the sections whose share left out or cut an item
    held_back: list[int] = field(default_factory=list)

    def section(self, section: Section, limit: int | None = None) -> None:
        """Pack ``section``'s items, in at most ``limit`` tokens of the room when given."""
        index = len(self.section_used)
        start = self.used
        self._end = self.room if limit is None else min(self.room, start + limit)
        self._limited = self._end < self.room
        self._held = False
        self._heading = f"## {section.title}"
        self._heading_cost = self.counter.count(self._heading)
        self._opened = False
        self._candidates = {i.id: i for i in section.items}
        self._placed: dict[str, Item] = {}  # id -> the item as kept (maybe cut)
        self._decided: set[str] = set()
        self._waiting: dict[str, list[Item]] = {}  # Episode id -> its facts
        for item in section.items:
            self._consider(item)
        while self._waiting:  # facts that cite each other in a loop: none waits for good
            for fact in self._waiting.pop(next(iter(self._waiting))):
                self._offer(fact)
        self.section_used[index] = self.used - start
        if self._held:
            self.held_back.append(index)

    def _consider(self, item: Item) -> None:
        parent = None
        if item.kind == FACT:
            parent = next((p for p in item.evidence if p != item.id and p in self._candidates
                           and restates(item, self._candidates[p])), None)
        if parent is None:
            self._offer(item)
        elif parent in self._placed and restates(item, self._placed[parent]):
            self.restated.append(item)
        elif parent not in self._decided:
            self._waiting.setdefault(parent, []).append(item)
        else:
            self._offer(item)  # its Episode was left out, or cut before saying it

    def _offer(self, item: Item) -> None:
        self._decided.add(item.id)
        head = 0 if self._opened else self._heading_cost
        room, cap, cut = self._end, self.cap, self.cut
        if self._limited and not self.counter.surely_within(item.text, room - self.used):
            # held to a share: a long text is cut to what the share has left, not left out
            # whole for want of the third of the budget any text may take
            frame = self.counter.count(item_line(_with_text(item, "")))
            cap = max(MIN_ITEM_TOKENS, min(cap, room - self.used - head - frame))
            cut = cut_floor(cap, self.counter)
        if (room - self.used - head < MIN_LINE_TOKENS
                or self.used + head + line_floor(item, cap, self.counter, cut) > room):
            self.left.append(item)  # surely too long: not worth tokenizing
            self._held = self._held or self._limited
        else:
            whole = item
            item = _capped(item, cap, self.counter)
            extra = self.counter.count(item_line(item)) + head
            if self.used + extra > room:
                self.left.append(item)
                self._held = self._held or self._limited
            else:
                if item is not whole:
                    self.cut_ids.add(item.id)
                    self._held = self._held or (self._limited and cap < self.cap)
                if not self._opened:
                    self.lines.append(self._heading)
                    self._opened = True
                self.lines.append(item_line(item))
                self.used += extra
                self.kept.append(item)
                self._placed[item.id] = item
        for fact in self._waiting.pop(item.id, []):
            self._consider(fact)


def line_floor(item: Item, cap: int, counter: Counts, cut: int | None = None) -> int:
    """A lower bound of the tokens of ``item_line(_capped(item, cap, counter))``, without
    tokenizing. The line's parts meet at spaces or punctuation, which the tokenizer splits
    on, so its count is the sum of theirs: the fixed marks ("-", "[", each "·", "]", "cites",
    the commas between cited ids, the note's parentheses), then :meth:`~Counts.at_least` of
    the rest. A text that may be cut counts for its final "…" only."""
    shown = item.evidence[:MAX_CITED_SHOWN]
    marks = MIN_LINE_TOKENS + (1 + len(shown) if shown else 0) + (2 if item.note else 0)
    # the parts joined by spaces make the same pieces as the parts apart
    rest = " ".join([item.id, item.kind, (item.timestamp or "")[:10], *shown, item.note])
    text = counter.at_least(item.text)
    if item.parts and not counter.surely_within(item.text, cap):
        # cut by its parts, it keeps whole parts, which may leave room under ``cap``
        text = 0
    elif not counter.surely_within(item.text, cap):
        # cut, it still shows ``cap`` tokens less its marker's (:func:`cut_floor`): counted
        # as 1, every long text could fit, and each of 2,000 long lessons was cut to size and
        # counted (2.5 ms each) only to be left out
        text = min(text, cut_floor(cap, counter) if cut is None else cut)
    return marks + counter.at_least(rest) + text


def cut_floor(cap: int, counter: Counts) -> int:
    """The fewest tokens a text cut to ``cap`` tokens shows (:func:`_capped`): all but its
    marker's. The tokenizer splits the kept text into the tokens it was cut after, again."""
    return max(0, cap - counter.count(CUT_MARKER))


def _capped(item: Item, cap: int, counter: Counts) -> Item:
    if counter.surely_within(item.text, cap):
        return item
    if item.parts:
        if counter.count(item.text) <= cap:
            return item
        text = cut_parts(item.parts, cap, counter)
    else:
        text = counter.truncate(item.text, cap, CUT_MARKER)
    if text == item.text:
        return item
    return _with_text(item, text)


def _at_word(text: str, cut: str) -> str:
    """``cut`` (``text``'s opening and :data:`CUT_MARKER`) ending at a word's end: a token
    boundary falls inside a word ("Toby's ken …" of "kennel"), which a cut at the end of a
    text shows as cut but one amid kept parts reads as a word."""
    body = cut.removesuffix(CUT_MARKER)
    if body == cut or not body or not text.startswith(body) or len(body) >= len(text):
        return cut
    # "Toby" of "Toby," ends a word; "Andrew" of "Andrew's" and "Andrew'" do not
    after = text[len(body)]
    inside = not after.isspace() and (after.isalnum() or after in ("'", "’")
                                      or not body[-1].isalnum())
    if not inside or " " not in body:
        return cut
    return body.rsplit(" ", 1)[0].rstrip() + CUT_MARKER


def join_parts(parts: Sequence[tuple[int, str]], kept: Collection[int]) -> str:
    """The parts at the positions ``kept``, in their own order, with :data:`GAP` wherever
    parts before, between or after them were left out, but after a part cut short: its
    :data:`CUT_MARKER` says it already."""
    out: list[str] = []
    left_out = False
    for i, (_, text) in enumerate(parts):
        if i not in kept:
            left_out = True
            continue
        if left_out and not (out and out[-1].endswith(CUT_MARKER)):
            out.append(GAP)
        out.append(text)
        left_out = False
    if left_out and out and not out[-1].endswith(CUT_MARKER):
        out.append(GAP)
    return " ".join(out)


def cut_parts(parts: Sequence[tuple[int, str]], cap: int, counter: Counts) -> str:
    """The text of ``parts`` in at most ``cap`` tokens: whole parts taken by rank (lower
    first; at equal rank, the earlier) while they fit, shown in their own order
    (:func:`join_parts`); the first part that does not fit whole is cut at its opening to
    the room left, so the text fills its share as a text cut at its opening does. A part of
    negative rank (a narrative's subject) is kept with any other; when no other part fits
    whole, the text is cut at its opening as one without parts is. The whole text when it
    fits.

    Each part tried is tokenized once and the parts' counts are added up (they meet at
    spaces, where the tokenizer splits anyway); the text is counted once more at the end. Joining
    and counting the text at each part taken cost 7.3 s for a hand-written narrative of
    20,000 lines in a block of 30,000 tokens."""
    whole = " ".join(text for _, text in parts)
    if counter.at_least(whole) <= cap and counter.count(whole) <= cap:
        return whole
    gap = counter.count(GAP)
    n = len(parts)
    kept: list[int] = []  # positions, in order
    taken: list[int] = []  # the same, in the order taken
    used = gap  # nothing kept: one run left out, from before the first part to the end
    text: str | None = None
    for i in sorted(range(n), key=lambda m: (parts[m][0], m)):
        at = bisect.bisect(kept, i)
        before = kept[at - 1] if at else -1
        after = kept[at] if at < len(kept) else n
        # the run left out around ``i`` splits into the runs before and after it
        runs = (i - before > 1) + (after - i > 1) - (after - before > 1)
        cost = counter.count(parts[i][1])  # only the parts tried are tokenized
        if used + cost + runs * gap <= cap:
            kept.insert(at, i)
            taken.append(i)
            used += cost + runs * gap
            continue
        # the best part left does not fit whole: as much of its opening as the room holds
        room = cap - used - max(runs, 0) * gap
        if room >= MIN_PART_TOKENS:
            cut = _at_word(parts[i][1], counter.truncate(parts[i][1], room, CUT_MARKER))
            shown = [p if m != i else (p[0], cut) for m, p in enumerate(parts)]
            text = join_parts(shown, {*kept, i})
            if counter.count(text) > cap:
                text = None
        break
    if text is not None:
        return text
    held = set(kept)
    while taken and any(parts[m][0] >= 0 for m in held):
        text = join_parts(parts, held)
        if counter.count(text) <= cap:
            return text
        held.discard(taken.pop())  # the counts added up ran over: the last part taken goes
    # not even the best part beside the always-kept fits: cut at the opening, as a text
    # without parts is
    return counter.truncate(whole, cap, CUT_MARKER)


def _with_text(item: Item, text: str) -> Item:
    return Item(item.id, item.kind, text, item.timestamp, list(item.evidence), item.score,
                item.note)
