"""The SPEC §9 tasks: every structured call a strategy makes, with its schema and validator.

The schemas' top-level properties are exactly the keys SPEC §9 names. Validators enforce what a
schema cannot (non-empty text, ranges, citations to shown numbers, the citation floor) and ignore
extra keys. Templates are the defaults; a strategy overrides one with its ``prompts`` table.
"""

from __future__ import annotations

from typing import Any

from everos_reflect.llm.base import CITED_ID_RE, FactsRequest, MergeRequest
from everos_reflect.llm.importance import score_importance
from everos_reflect.llm.tasks import (
    NUMBERS,
    STRING,
    InvalidReply,
    TaskRequest,
    TaskSpec,
    list_field,
    object_schema,
    register_task,
    strings,
    text_field,
)
from everos_reflect.model import MAX_SUBJECT_CHARS, blank, quoted_value
from everos_reflect.problem_words import json_type

#: The fewest records an insight (and a reconciliation) must cite (seed 000's citation floor).
MIN_CITATIONS = 2

# -- Reflection: merge and facts (their prompts stay in prompts.py) --------------------------


def _parse_merge(obj: dict[str, Any], req: TaskRequest) -> tuple[str, str]:
    payload: MergeRequest = req.payload
    # an invisible formatting character its sources hold may be restated; a new one is refused
    sources = "".join(f"{m.subject}{m.content}" for m in
                      [*payload.members, *([payload.existing] if payload.existing else [])])
    title = text_field(obj, "title", limit=MAX_SUBJECT_CHARS, shown=sources)
    content = text_field(obj, "content", limit=200_000, shown=sources)
    unknown = sorted(set(CITED_ID_RE.findall(f"{title}\n{content}")) - payload.shown_ids())
    if unknown:
        raise InvalidReply(f"reply cites entries it was not shown: {', '.join(unknown)}")
    return title, content


#: The fewest characters (whitespace aside) of the text one extracted fact may account for.
CHARS_PER_FACT = 4


def _parse_facts(obj: dict[str, Any], req: TaskRequest) -> list[str]:
    payload: FactsRequest = req.payload
    facts = strings(obj, "facts", limit=5_000, shown=payload.text)
    # Every fact restates part of the text, so it holds at most one distinct fact per few
    # characters; more is a runaway or lying reply, refused before thousands of facts are
    # embedded and written. Characters, not words: Chinese or Japanese has no spaces to count.
    chars = sum(1 for c in payload.text if not c.isspace())
    if len(facts) > max(1, chars // CHARS_PER_FACT):
        raise InvalidReply(f"{len(facts)} facts from a text of {chars} characters: more than "
                           f"one per {CHARS_PER_FACT} characters")
    return facts


MERGE = register_task(TaskSpec(
    "merge", "merged_narrative",
    object_schema({"title": STRING, "content": STRING}),
    _parse_merge,
    messages=lambda req, prompts: prompts.merge_messages(req.payload),
))
FACTS = register_task(TaskSpec(
    "facts", "atomic_facts",
    object_schema({"facts": {"type": "array", "items": STRING}}),
    _parse_facts,
    messages=lambda req, prompts: prompts.facts_messages(req.payload),
))


def merge_request(req: MergeRequest) -> TaskRequest:
    return TaskRequest(payload=req, prompts=req.prompts, language=req.language)


def facts_request(req: FactsRequest) -> TaskRequest:
    return TaskRequest(payload=req, prompts=req.prompts, language=req.language)


# -- importance -------------------------------------------------------------------------------

IMPORTANCE_PROMPT = """\
On a scale of 1 to 10, where 1 is purely mundane (brushing teeth, small talk) and 10 is \
extremely poignant or consequential (a breakup, a production outage, a decision that changes \
how the user works), rate the likely importance of the memory below.

Reply as JSON: {"importance": <integer 1-10>}

$records"""


def _parse_importance(obj: dict[str, Any], req: TaskRequest) -> int:
    value = obj.get("importance")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10:
        raise InvalidReply(f"'importance' must be a whole number 1-10, got {quoted_value(value)}")
    return value


IMPORTANCE = register_task(TaskSpec(
    "importance", "importance",
    object_schema({"importance": {"type": "integer"}}),
    _parse_importance, IMPORTANCE_PROMPT,
    offline=lambda req: score_importance(" ".join(r.text for r in req.records)),
))

# -- salient questions ------------------------------------------------------------------------

QUESTIONS_PROMPT = """\
Given only the records below, what are the $count most salient high-level questions we can \
answer about the subjects in the statements? Ask about patterns across records (habits, \
preferences, recurring problems, changes of mind), not about one single event.
- $language_rule

Reply as JSON: {"questions": ["<question>", ...]}

$records"""


#: The most characters of one salient question; ``reflect_insights`` refuses a longer one
#: alone (the others are asked), as the tiers refuse a long item.
MAX_QUESTION_CHARS = 500


def _parse_questions(obj: dict[str, Any], req: TaskRequest) -> list[str]:
    # a question over MAX_QUESTION_CHARS, or holding a control or invisible character, is
    # refused by reflect_insights, that one alone: it failed the call, and the run
    questions = strings(obj, "questions", limit=None, shown=None)
    if not questions:
        raise InvalidReply("'questions' is empty")
    limit = int(req.values.get("count", "3"))
    return questions[:limit]


QUESTIONS = register_task(TaskSpec(
    "questions", "salient_questions",
    object_schema({"questions": {"type": "array", "items": STRING}}),
    _parse_questions, QUESTIONS_PROMPT, frozenset({"records", "count"}),
))

# -- insights ---------------------------------------------------------------------------------

INSIGHTS_PROMPT = """\
Question: $question

What at most $count high-level insights can you infer from the numbered records below that \
answer the question? Each insight generalises across records (it says something no single \
record says) and cites the numbers of the records it rests on, at least two of them. Cite only \
numbers shown below. If you cannot ground an insight in at least two records, leave it out; \
an empty list is a fine answer.
- $language_rule

Reply as JSON: {"insights": [{"insight": "<one sentence>", "evidence": [<record number>, ...]}]}

$records"""


def _parse_cited_items(obj: dict[str, Any], req: TaskRequest, key: str, text_key: str,
                       limit: int) -> list[tuple[str, list[str]]]:
    """``[(text, [ids])]`` up to ``limit`` items at the citation floor; every citation
    checked. An item under the floor or without text (``""``) is passed on (it takes no
    place in ``limit``) for the tier to refuse and count ``refused``: dropped here, a reply
    whose every item cited one record ran as an ``ok`` run that wrote nothing and said
    nothing; failing the call for an empty one threw the reply's good items away."""
    numbering = req.numbering
    out: list[tuple[str, list[str]]] = []
    kept = 0
    for item in list_field(obj, key):
        if not isinstance(item, dict):
            raise InvalidReply(f"each item of {key!r} must be an object")
        text = optional_text(item, text_key)
        ids = numbering.resolve(item.get("evidence"))
        if kept < limit:
            out.append((text, ids))
            kept += bool(text) and len(ids) >= MIN_CITATIONS
    return out


def optional_text(item: dict[str, Any], key: str) -> str:
    """``item[key]`` as :func:`text_field` checks it, or ``""`` when it is blank: an item
    without text is refused alone by its tier, not the whole reply."""
    value = item.get(key)
    if isinstance(value, str) and blank(value):
        return ""
    # a control or invisible formatting character, or more than MAX_ITEM_CHARS, is refused by
    # the tier, that item alone (:func:`~everos_reflect.strategies.beliefs.text_problem`): a
    # long one, or one holding an ESC, failed the call, and the reply's good items with it
    return text_field(item, key, limit=None, shown=None)


def _parse_insights(obj: dict[str, Any], req: TaskRequest) -> list[tuple[str, list[str]]]:
    return _parse_cited_items(obj, req, "insights", "insight",
                              int(req.values.get("count", "5")))


INSIGHTS = register_task(TaskSpec(
    "insights", "insights",
    object_schema({"insights": {"type": "array", "items": object_schema(
        {"insight": STRING, "evidence": NUMBERS})}}),
    _parse_insights, INSIGHTS_PROMPT, frozenset({"records", "question", "count"}),
))

# -- revalidation -----------------------------------------------------------------------------

REVALIDATE_PROMPT = """\
An earlier insight rested on records that have since changed (merged, edited or deleted). \
Here is the insight and the current versions of its evidence.

Insight: $insight

Does the insight still hold on the records below? Answer "holds" (cite the records that \
support it now), "revise" (write the corrected insight and cite its records, at least two) or \
"retire" (the records no longer support it; leave insight empty and evidence []).
- $language_rule

Reply as JSON: {"verdict": "holds" | "revise" | "retire", "insight": "<text>", \
"evidence": [<record number>, ...]}

$records"""


def _parse_revalidation(obj: dict[str, Any], req: TaskRequest) -> dict[str, Any]:
    """The verdict as the model gave it. An unknown verdict or a number it was not shown
    fails the call; a "holds" or "revise" citing fewer than :data:`MIN_CITATIONS` records,
    or a "revise" without text (``""``), is passed on for ``revalidate_insights`` to refuse
    (the insight stays stale, counted ``refused``): failing the call for it was retried, and
    the insight asked about again on every run, with a model that kept saying it."""
    verdict = obj.get("verdict")
    if verdict not in ("holds", "revise", "retire"):
        raise InvalidReply(f"'verdict' must be holds, revise or retire, got "
                           f"{quoted_value(verdict)}")
    evidence = req.numbering.resolve(obj.get("evidence", []))
    text = obj.get("insight") or ""
    if verdict == "revise":
        text = optional_text(obj, "insight")
    return {"verdict": verdict, "insight": str(text).strip(), "evidence": evidence}


REVALIDATION = register_task(TaskSpec(
    "revalidation", "revalidation",
    object_schema({"verdict": {"type": "string", "enum": ["holds", "revise", "retire"]},
                   "insight": STRING, "evidence": NUMBERS}),
    _parse_revalidation, REVALIDATE_PROMPT, frozenset({"records", "insight"}),
))

# -- belief tiers and lessons (seeds 004 and 002): schema and validation ----------------------

WORLDVIEW_PROMPT = """\
Current convictions, by key:
$current

Which convictions (keys: $keys) have shifted given the numbered records below? Return only \
shifted keys, each with the new conviction text and the records it rests on; leave out a key \
the records do not change. Commitments (promises made to others) stay in force until the \
records say they were fulfilled or cancelled: a new plan or strategy does not change them.
- $language_rule

Reply as JSON: {"convictions": [{"key": "<key>", "text": "<conviction>", \
"evidence": [<record number>, ...]}]}

$records"""


def _parse_worldview(obj: dict[str, Any], req: TaskRequest) -> list[dict[str, Any]]:
    """Proposals as the model wrote them. A key outside ``keys`` (an empty one, or one no
    configured key can be, included) or a conviction without text or citing nothing is
    passed on for :func:`~everos_reflect.strategies.beliefs.plan_versions` to refuse and
    count that one item: failing the call for it threw away the reply's good convictions,
    retried, and failed the owner's window on every run, as one too long to write
    (:data:`~everos_reflect.llm.tasks.MAX_ITEM_CHARS`) or holding a control character is. A key
    or text that is no string fails the call."""
    out = []
    for item in list_field(obj, "convictions"):
        if not isinstance(item, dict):
            raise InvalidReply("each item of 'convictions' must be an object")
        key, text = item.get("key"), item.get("text")
        for name, value in (("key", key), ("text", text)):
            if not isinstance(value, str):
                raise InvalidReply(f"{name!r} must be a string, got {json_type(value)}")
        evidence = req.numbering.resolve(item.get("evidence"))
        out.append({"key": key.strip(),
                    "text": optional_text(item, "text"),
                    "evidence": evidence})
    return out


WORLDVIEW = register_task(TaskSpec(
    "worldview", "worldview",
    object_schema({"convictions": {"type": "array", "items": object_schema(
        {"key": STRING, "text": STRING, "evidence": NUMBERS})}}),
    _parse_worldview, WORLDVIEW_PROMPT, frozenset({"records", "current", "keys"}),
))

CONTRADICTIONS_PROMPT = """\
Which pairs of the numbered convictions below contradict each other? Name each pair by its two \
numbers and say in one sentence what the contradiction is. Only pairs that include a \
conviction marked "just changed" count. An empty list is a fine answer.
- $language_rule

Reply as JSON: {"contradictions": [{"between": [<n>, <n>], "text": "<what contradicts>"}]}

$records"""


def _parse_contradictions(obj: dict[str, Any], req: TaskRequest) -> list[dict[str, Any]]:
    """Pairs as the model named them. A number it was not shown fails the call (SPEC §9); a
    pair that is no pair (``[2, 2]``, three numbers), or one without text, is passed on as
    written, for the detector to refuse and count that one item: failing the call for it
    threw away the reply's good pairs, retried, and failed the owner's window on every run."""
    out = []
    for item in list_field(obj, "contradictions"):
        if not isinstance(item, dict):
            raise InvalidReply("each item of 'contradictions' must be an object")
        numbers = item.get("between")
        req.numbering.resolve(numbers, what="between")  # raises unless all were shown
        between = [req.numbering.records[n - 1].id for n in numbers]
        out.append({"between": between, "text": optional_text(item, "text")})
    return out


CONTRADICTIONS = register_task(TaskSpec(
    "contradictions", "contradictions",
    object_schema({"contradictions": {"type": "array", "items": object_schema(
        {"between": NUMBERS, "text": STRING})}}),
    _parse_contradictions, CONTRADICTIONS_PROMPT,
))

RECONCILIATION_PROMPT = """\
The numbered records below contradict each other. Write one insight that reconciles them \
(what is true now, and why the records differ), citing at least two of them.
- $language_rule

Reply as JSON: {"insight": "<text>", "evidence": [<record number>, ...]}

$records"""


def _parse_reconciliation(obj: dict[str, Any], req: TaskRequest) -> dict[str, Any]:
    """The reconciliation as the model wrote it. A number it was not shown fails the call;
    one without text (``""``) or citing fewer than :data:`MIN_CITATIONS` records is passed on
    for ``reconcile`` to refuse that reconciliation (counted ``refused``), as the other tiers
    refuse one item: failing the call for it was retried, and the owner's window failed on
    every run."""
    evidence = req.numbering.resolve(obj.get("evidence"))
    return {"insight": optional_text(obj, "insight"), "evidence": evidence}


RECONCILIATION = register_task(TaskSpec(
    "reconciliation", "reconciliation",
    object_schema({"insight": STRING, "evidence": NUMBERS}),
    _parse_reconciliation, RECONCILIATION_PROMPT,
))

LESSONS_PROMPT = """\
Task type: $task_type

From the numbered task records below, what should an agent do next time ("lessons") and what \
should it avoid ("avoid")? One short imperative sentence each, only what the records show.
- $language_rule

Reply as JSON: {"lessons": ["<do this>", ...], "avoid": ["<avoid this>", ...]}

$records"""


def _parse_lessons(obj: dict[str, Any], req: TaskRequest) -> dict[str, list[str]]:
    """A reply with more than :data:`LESSONS_PER_RECORD` lessons (or things to avoid) per
    record shown, and more than :data:`LESSONS_FLOOR` in all, is refused: the prompt asks only
    for what the records show, and each lesson is written and served, so a model that floods
    the reply must not flood the memory."""
    # a control or invisible formatting character, or more than MAX_ITEM_CHARS, is refused by
    # the tier, that lesson alone
    out = {"lessons": strings(obj, "lessons", limit=None, shown=None),
           "avoid": strings(obj, "avoid", limit=None, shown=None)}
    limit = max(LESSONS_FLOOR, LESSONS_PER_RECORD * len(req.numbering))
    for key, items in out.items():
        if len(items) > limit:
            raise InvalidReply(f"{len(items)} {key!r} items for {len(req.numbering)} records: "
                               f"at most {limit}")
    return out


#: a record may teach a few things; a reply past this many per record shown is a flood
LESSONS_PER_RECORD = 3
#: ... unless the whole reply stays this small
LESSONS_FLOOR = 10


LESSONS = register_task(TaskSpec(
    "lessons", "lessons",
    object_schema({"lessons": {"type": "array", "items": STRING},
                   "avoid": {"type": "array", "items": STRING}}),
    _parse_lessons, LESSONS_PROMPT, frozenset({"records", "task_type"}),
))
