"""How a candidate lesson meets the lessons a task type already has, and the offline lessons.

Pure functions over plain values (texts, vectors, task records): no file, index or clock.

**Matching** (``classify``). A candidate is compared with each live lesson of its task type by
cosine similarity of their embeddings and by the overlap of their content words (the
embedding alone cannot tell "check the logs first" from "check the logs and the credentials
first", nor from "never check the logs"):

- *contradiction*: related (similarity ≥ ``related``) but of opposite polarity — a ``do`` and
  an ``avoid`` of the same action, or one negated ("never", "without", "don't", …) and the other
  not. Both are kept and marked ``contested``.
- *refinement*: related, same polarity, the candidate keeps most of the old lesson's content
  words and adds at least two of its own: the new lesson archives the old one.
- *restatement*: same polarity and either very similar (≥ ``restate``) or related with most
  content words shared: the old lesson gains the task as evidence and a confirmation.
- otherwise a *new* lesson.

**Offline** (``offline_candidates``): only what the records show, each citing its tasks —
an error that recurs across tasks of a type becomes an ``avoid`` lesson quoting it with its
count; a step that every successful task of the type took and no failed one did becomes a
``do`` lesson (at least two successes and one failure, so one lucky run proves nothing).
Nothing else.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from everos_reflect.procedural.lessons import Lesson
from everos_reflect.procedural.tasks import MAX_LINE_CHARS, TaskRecord

Action = Literal["new", "restate", "refine", "contradict"]

RESTATE_SIMILARITY = 0.80
RELATED_SIMILARITY = 0.60
SHARED_WORDS = 0.6  # share of the smaller lesson's content words the other must contain
MIN_RECURRENCE = 2
MIN_SUCCESSES = 2

_WORD_RE = re.compile(r"[a-z0-9][a-z0-9'_-]*")
_NEGATION_RE = re.compile(
    r"\b(never|not|no|don't|dont|do not|doesn't|without|avoid|stop|skip|skipping)\b")
_LEADING_NEGATION_RE = re.compile(r"^(avoid|never|don't|dont|do not|stop)\b\s*")
_STOP = frozenset(" ".join((
    "a an the and or of to in on at for with by from before after then than this that these "
    "those it its is are be been was were as if when while into onto up down out over again "
    "you your we our they their i my me always first next time do does did will would should "
    "can could must may might any all each every some",
)).split())
_VOLATILE_RE = re.compile(
    r"0x[0-9a-f]+|\b[0-9a-f]{8,}\b|\d+(\.\d+)*|/[\w./-]+|'[^']*'|\"[^\"]*\"")


@dataclass(frozen=True)
class Candidate:
    """A lesson proposed by the LLM or the offline method, with the tasks it cites."""

    text: str
    lesson_type: str  # do | avoid
    evidence: tuple[str, ...]
    signature: str | None = None  # offline lessons: what they count (stable across runs)
    count: int = 0


@dataclass(frozen=True)
class Decision:
    action: Action
    candidate: Candidate
    target: Lesson | None = None
    similarity: float = 0.0


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> frozenset[str]:
    """Lower-cased, lightly stemmed words that carry meaning (no stop words, no negations)."""
    words = _WORD_RE.findall(text.lower().replace("’", "'"))
    return frozenset(_stem(w) for w in words if w not in _STOP and not _NEGATION_RE.fullmatch(w))


def polarity(text: str, lesson_type: str) -> int:
    """+1 for "do this", -1 for "don't do this": an ``avoid`` flips it, and so does a negation
    in the text (an ``avoid`` lesson opening with "Avoid"/"Don't" says it once, not twice)."""
    body = text.lower().replace("’", "'").strip()
    sign = 1
    if lesson_type == "avoid":
        sign = -1
        body = _LEADING_NEGATION_RE.sub("", body)
    if _NEGATION_RE.search(body):
        sign = -sign
    return sign


def classify(
    candidate: Candidate,
    vector: np.ndarray,
    existing: Sequence[tuple[Lesson, np.ndarray]],
    *,
    restate: float = RESTATE_SIMILARITY,
    related: float = RELATED_SIMILARITY,
) -> Decision:
    """What ``candidate`` is to the live lessons ``existing`` (see the module docstring).

    The most similar related lesson decides; vectors are L2-normalised.
    """
    best: tuple[float, Lesson] | None = None
    for lesson, vec in existing:
        sim = float(np.dot(vector, vec))
        if sim >= related and (best is None or sim > best[0]):
            best = (sim, lesson)
    if best is None:
        return Decision("new", candidate)
    sim, lesson = best
    if polarity(candidate.text, candidate.lesson_type) != polarity(lesson.text,
                                                                    lesson.lesson_type):
        return Decision("contradict", candidate, lesson, sim)
    new_words, old_words = content_words(candidate.text), content_words(lesson.text)
    kept = len(new_words & old_words) / max(1, len(old_words))
    if kept >= SHARED_WORDS and len(new_words - old_words) >= 2:
        return Decision("refine", candidate, lesson, sim)
    smaller = min(len(new_words), len(old_words)) or 1
    shared = len(new_words & old_words) / smaller
    if sim >= restate or shared >= SHARED_WORDS:
        return Decision("restate", candidate, lesson, sim)
    return Decision("new", candidate)


# -- offline ------------------------------------------------------------------------------


def error_signature(error: str) -> str:
    """An error with its volatile parts (numbers, ids, paths, quoted values) blanked, so the
    same failure on another day or host counts as the same error."""
    text = _VOLATILE_RE.sub("#", error.lower())
    return " ".join(text.split())


def step_signature(step: str) -> str:
    return " ".join(sorted(content_words(step)))


#: The longest signature kept whole, and the longest error or step an offline lesson quotes:
#: a step or error of a task record added at any edge is at most this long. A hand-written
#: one may be as long as an entry (256 KiB): its signature, 70 KB in the lesson's metadata,
#: was refused at the write ("YAML block is over 64 KiB"), and every run after failed the
#: task type the same way, its lessons never learned.
MAX_SIGNATURE_CHARS = MAX_LINE_CHARS
#: What a signature cut keeps readable before its hash.
SIGNATURE_HEAD_CHARS = 200


def bounded_signature(sig: str) -> str:
    """``sig`` when it is at most :data:`MAX_SIGNATURE_CHARS` long, else its head and a hash of
    the whole: as stable across runs, and as distinct, as the signature it stands for."""
    if len(sig) <= MAX_SIGNATURE_CHARS:
        return sig
    digest = hashlib.sha256(sig.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{sig[:SIGNATURE_HEAD_CHARS]}… sha256:{digest}"


def _quote(text: str) -> str:
    """``text`` cut to :data:`MAX_LINE_CHARS` characters for a lesson to quote."""
    return text if len(text) <= MAX_LINE_CHARS else text[: MAX_LINE_CHARS - 1] + "…"


@dataclass
class _Seen:
    tasks: list[str] = field(default_factory=list)
    forms: dict[str, int] = field(default_factory=lambda: defaultdict(int))


def offline_candidates(
    tasks: Sequence[TaskRecord],
    *,
    min_recurrence: int = MIN_RECURRENCE,
    min_successes: int = MIN_SUCCESSES,
) -> list[Candidate]:
    """The honest offline lessons of one task type's live task records (sorted, stable)."""
    task_type = tasks[0].task_type if tasks else ""
    out: list[Candidate] = []
    errors: dict[str, _Seen] = defaultdict(_Seen)
    for task in tasks:
        for sig, error in {error_signature(e): e for e in task.errors}.items():
            if sig.strip("# "):
                errors[sig].tasks.append(task.id)
                errors[sig].forms[error] += 1
    for sig, seen in sorted(errors.items()):
        if len(seen.tasks) >= min_recurrence:
            quote = _quote(max(seen.forms.items(), key=lambda kv: (kv[1], -len(kv[0])))[0])
            text = (f'Avoid what led to the recurring error "{quote}" '
                    f"(in {len(seen.tasks)} of {len(tasks)} {task_type} tasks when learned).")
            out.append(Candidate(text, "avoid", tuple(seen.tasks),
                                 f"error:{bounded_signature(sig)}", len(seen.tasks)))

    succeeded = [t for t in tasks if t.succeeded]
    failed = [t for t in tasks if t.failed]
    if len(succeeded) >= min_successes and failed:
        in_success: dict[str, _Seen] = defaultdict(_Seen)
        for task in succeeded:
            for sig, step in {step_signature(s): s for s in task.steps}.items():
                if sig:
                    in_success[sig].tasks.append(task.id)
                    in_success[sig].forms[step] += 1
        failed_sigs = {step_signature(s) for t in failed for s in t.steps}
        for sig, seen in sorted(in_success.items()):
            if len(seen.tasks) == len(succeeded) and sig not in failed_sigs:
                step = _quote(max(seen.forms.items(), key=lambda kv: (kv[1], -len(kv[0])))[0])
                # one failure: "none of the 1 failed ones" was written into the lesson
                failed_did_not = ("the failed one did not" if len(failed) == 1
                                  else f"none of the {len(failed)} failed ones")
                text = (f'Do "{step}": when learned, all {len(succeeded)} successful '
                        f"{task_type} tasks did it and {failed_did_not}.")
                cited = tuple(seen.tasks) + tuple(t.id for t in failed)
                out.append(Candidate(text, "do", cited, f"step:{bounded_signature(sig)}",
                                     len(succeeded)))
    return out
