"""``learn_lessons``: the seed's deploy flow through the real OpenAI client, restatement /
refinement / contradiction, the offline lessons, hand-written lessons, and the edges."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from everos_reflect.briefing.build import build_briefing
from everos_reflect.cli.main import cli
from everos_reflect.embedding import make_embedder
from everos_reflect.engine.registry import RunContext, validate_strategy_settings
from everos_reflect.index.search import search
from everos_reflect.llm.base import ScriptedLLM
from everos_reflect.llm.openai_llm import OpenAILLM
from everos_reflect.model import Kind, UserRef
from everos_reflect.procedural.lessons import read_lesson
from everos_reflect.procedural.tasks import new_task
from everos_reflect.runtime import Runtime
from everos_reflect.settings import Settings
from everos_reflect.strategies.lessons import NAME, LearnLessons
from tests.api_client import ApiClient

pytest_plugins = ["tests.fake_openai"]
pytestmark = pytest.mark.slow  # the bundled MiniLM embedder decides what restates what

REF = UserRef.of("u_ops")
LESSON_DIR = "default_app/default_project/users/u_ops/.lessons"


@cache
def embedder() -> Any:
    return make_embedder(Settings().embedding)


def make_runtime(root: Path, llm: Any) -> Runtime:
    return Runtime(root, embedder=embedder(), llm=llm)


def fake_server_runtime(root: Path, fake_openai: Any) -> Runtime:
    """A runtime whose LLM is the fake OpenAI server: no retries, no sleeping, hash vectors."""
    from everos_reflect.embedding.base import HashEmbedder

    llm = OpenAILLM(model="fake-model", base_url=fake_openai.base_url, api_key="k",
                    max_retries=0, timeout_seconds=10, sleep=lambda s: None)
    return Runtime(root, embedder=HashEmbedder(64), llm=llm)


@pytest.fixture
def scripted(root: Path) -> Iterator[tuple[Runtime, ScriptedLLM]]:
    llm = ScriptedLLM()
    rt = make_runtime(root, llm)
    yield rt, llm
    rt.close()


def task(rt: Runtime, day: int, outcome: str, steps: list[str], errors: tuple[str, ...] = (),
         task_type: str = "deploy", goal: str = "Deploy the web service") -> str:
    t = new_task(REF, task_type=task_type, goal=goal, steps=steps, outcome=outcome,
                 errors=list(errors), timestamp=f"2026-10-{day:02d}T10:00:00+00:00")
    return rt.store.append(REF, Kind.TASK, t.meta, t.sections, day=t.day).id


_runs = iter(range(10_000))


def learn(rt: Runtime, **settings: Any) -> dict[str, int]:
    values = validate_strategy_settings(NAME, settings, "ome.toml")
    ctx = RunContext(rt, values, run_id=f"run_test_{next(_runs)}", trigger="test")
    return {k: v for k, v in LearnLessons().run(ctx).items() if v}  # zero counts say nothing


def lessons(rt: Runtime, *, live_only: bool = True) -> list[Any]:
    found = [read_lesson(e) for e in rt.store.entries(REF, Kind.LESSON)]
    return [x for x in found if x.live or not live_only]


def reply(lessons: list[str] | None = None, avoid: list[str] | None = None) -> dict[str, Any]:
    return {"lessons": lessons or [], "avoid": avoid or []}


RETRY, WAIT = "Retry a failed deploy at once.", "Do not retry a failed deploy at once."


def contest(rt: Runtime, llm: ScriptedLLM) -> tuple[Any, Any]:
    """The lessons "retry at once" (learned from a success) and "do not retry at once" (from
    the failure after it), both contested, as (retry, wait)."""
    llm.queue_task("lessons", reply(lessons=[RETRY]), reply(lessons=[WAIT]))
    task(rt, 1, "success", ["retry", "deploy"])
    learn(rt)
    task(rt, 2, "failure", ["retry", "deploy"], ("timeout",))
    learn(rt)
    both = {x.text: x for x in lessons(rt)}
    return both[RETRY], both[WAIT]


# -- the seed's flow through the real client ---------------------------------------------------


def test_seed_flow_check_logs_before_retrying_confirmed_by_the_third_task(
    root: Path, fake_openai: Any
) -> None:
    llm = OpenAILLM(model="fake-model", base_url=fake_openai.base_url, api_key="k",
                    max_retries=0, timeout_seconds=10, sleep=lambda s: None)
    rt = make_runtime(root, llm)
    fake_openai.script(
        reply(avoid=["Deploying while the image registry is in its maintenance window."]),
        reply(lessons=["Check the logs before retrying a failed deploy."]),
        reply(lessons=["Read the deploy logs before you retry."]),
    )
    t1 = task(rt, 1, "failure", ["build image", "deploy"],
              ("ImagePullBackOff: registry timeout",))
    assert learn(rt) == {"owners": 1, "written": 1}
    t2 = task(rt, 2, "success", ["check logs", "fix registry credentials", "deploy"])
    assert learn(rt) == {"owners": 1, "written": 1}
    t3 = task(rt, 3, "success", ["check logs", "deploy"])
    assert learn(rt) == {"owners": 1}  # a restatement writes no new lesson

    by_text = {x.text: x for x in lessons(rt)}
    check = by_text["Check the logs before retrying a failed deploy."]
    assert (check.lesson_type, check.evidence, check.confirmations) == ("do", (t2, t3), 2)
    avoid = by_text["Deploying while the image registry is in its maintenance window."]
    assert (avoid.lesson_type, avoid.evidence, avoid.confirmations) == ("avoid", (t1,), 1)
    assert len(by_text) == 2

    bodies = fake_openai.chat_bodies()
    assert len(bodies) == 3
    for body in bodies:
        schema = body["response_format"]["json_schema"]["schema"]
        assert set(schema["properties"]) == {"lessons", "avoid"}
    third = next(m["content"] for m in bodies[2]["messages"] if m["role"] == "user")
    assert "Task type: deploy" in third
    assert "[1] 2026-10-03 task: Deploy the web service (outcome: success)" in third
    assert "[2]" not in third  # only the new task: earlier ones were already learned from
    rows = rt.db().execute("SELECT strategy, inputs, outputs, status, provider, model "
                           "FROM derivation_report ORDER BY created_at").fetchall()
    assert [(r["strategy"], json.loads(r["inputs"]), r["status"], r["model"]) for r in rows] == [
        (NAME, [t1], "ok", "fake-model"), (NAME, [t2], "ok", "fake-model"),
        (NAME, [t3], "ok", "fake-model")]

    briefing = build_briefing(rt, REF, "deploy the web service", task_type="deploy",
                              max_tokens=300)
    assert briefing.items[0].id == check.id and "confirmed 2x" in briefing.items[0].note
    assert learn(rt) == {}  # nothing new: no call, nothing written
    assert len(fake_openai.chat_bodies()) == 3
    rt.close()


# -- restatement, refinement, contradiction ----------------------------------------------------


def test_refinement_archives_the_older_lesson(scripted: tuple[Runtime, ScriptedLLM]) -> None:
    rt, llm = scripted
    llm.queue_task("lessons", reply(lessons=["Check the logs before retrying a failed deploy."]),
                   reply(lessons=["Check the logs and the registry credentials before "
                                  "retrying a failed deploy."]))
    t1 = task(rt, 1, "success", ["check logs", "deploy"])
    learn(rt)
    old = lessons(rt)[0]
    t2 = task(rt, 2, "success", ["check logs", "check registry credentials", "deploy"])
    learn(rt)
    [new] = lessons(rt)
    assert new.text.startswith("Check the logs and the registry credentials")
    assert new.evidence == (t1, t2) and new.confirmations == 2
    archived = next(x for x in lessons(rt, live_only=False) if x.id == old.id)
    assert archived.deprecated_by == new.id
    text = next((rt.root / LESSON_DIR).glob("lesson-*.md")).read_text()
    assert f"deprecated_entries:\n  {old.id}: {new.id}" in text
    assert rt.store.get(REF, new.id).meta["supersedes"] == old.id


def test_a_default_search_finds_contested_lessons_as_the_briefing_serves_them(
    scripted: tuple[Runtime, ScriptedLLM]
) -> None:
    """SPEC §7 leaves out deprecated and stale entries by default; a contested lesson is
    neither, and the briefing and ``lessons`` serve it: a search left it out."""
    rt, llm = scripted
    contested = {x.id for x in contest(rt, llm)}
    assert {x.status for x in lessons(rt)} == {"contested"} and len(contested) == 2

    hits = search(rt, "retry a failed deploy", kinds=["lesson"], user_id=REF.user_id, top_k=10)
    assert {h.id for h in hits} == contested
    assert {h.status for h in hits} == {"contested"}


def test_contradiction_keeps_both_contested_until_tasks_decide(
    scripted: tuple[Runtime, ScriptedLLM]
) -> None:
    rt, llm = scripted
    retry, wait = contest(rt, llm)
    assert retry.status == wait.status == "contested"
    assert retry.contested_with == (wait.id,) and wait.contested_with == (retry.id,)
    brief = build_briefing(rt, REF, "deploy", task_type="deploy", max_tokens=500)
    assert {i.id for i in brief.items if "contested" in i.note} == {retry.id, wait.id}

    # two more tasks restate "do not retry": ahead by 2 confirmations, it wins
    llm.queue_task("lessons", reply(lessons=["Don't retry a failed deploy at once."]),
                   reply(lessons=["Do not retry a failed deploy immediately."]))
    task(rt, 3, "success", ["wait", "deploy"])
    learn(rt)
    assert {x.status for x in lessons(rt)} == {"contested"}
    task(rt, 4, "success", ["wait", "deploy"])
    learn(rt)
    [winner] = lessons(rt)
    assert winner.id == wait.id and winner.status == "active" and winner.confirmations == 3
    loser = read_lesson(rt.store.get(REF, retry.id))
    assert loser.status == "retired"
    assert "contradicted by" in rt.store.get(REF, retry.id).meta["stale_reason"]


def test_one_reply_that_contradicts_itself_contests_both_with_real_ids(
    scripted: tuple[Runtime, ScriptedLLM]
) -> None:
    """A reply saying a thing and its opposite at once wrote the second lesson with
    `contested_with: ['?0']` (a batch placeholder, no lesson's id) and left the first
    active: a contest that could never be decided."""
    rt, llm = scripted
    llm.queue_task("lessons", reply(lessons=[RETRY, WAIT]))
    task(rt, 1, "success", ["retry", "deploy"])
    assert learn(rt)["written"] == 2
    both = {x.text: x for x in lessons(rt)}
    retry, wait = both[RETRY], both[WAIT]
    assert retry.status == wait.status == "contested"
    assert retry.contested_with == (wait.id,) and wait.contested_with == (retry.id,)
    # and the tasks can decide it: two more restate "do not retry"
    llm.queue_task("lessons", reply(lessons=["Don't retry a failed deploy at once."]),
                   reply(lessons=["Do not retry a failed deploy immediately."]))
    task(rt, 2, "success", ["wait", "deploy"])
    learn(rt)
    task(rt, 3, "success", ["wait", "deploy"])
    learn(rt)
    [winner] = lessons(rt)
    assert winner.id == wait.id and winner.status == "active"


def test_one_reply_that_refines_its_own_lesson_writes_the_refinement_only(
    scripted: tuple[Runtime, ScriptedLLM]
) -> None:
    """The refinement was written with `supersedes: ?0` beside the lesson it refines, both
    active."""
    rt, llm = scripted
    llm.queue_task("lessons", reply(lessons=[
        "Check the logs before retrying a failed deploy.",
        "Check the logs and the registry credentials before retrying a failed deploy."]))
    t1 = task(rt, 1, "success", ["check logs", "check registry credentials", "deploy"])
    assert learn(rt)["written"] == 1
    [only] = lessons(rt, live_only=False)
    assert only.text.startswith("Check the logs and the registry credentials")
    assert only.evidence == (t1,) and only.status == "active"
    assert "supersedes" not in rt.store.get(REF, only.id).meta


def test_two_candidates_of_one_reply_that_restate_each_other_make_one_lesson(
    scripted: tuple[Runtime, ScriptedLLM]
) -> None:
    rt, llm = scripted
    llm.queue_task("lessons", reply(lessons=["Check the logs before retrying a failed deploy.",
                                             "Read the deploy logs before you retry."]))
    t1 = task(rt, 1, "success", ["check logs", "deploy"])
    learn(rt)
    [one] = lessons(rt)
    assert one.evidence == (t1,) and one.confirmations == 1


def test_hand_written_lesson_is_confirmed_but_never_rewritten(
    scripted: tuple[Runtime, ScriptedLLM], root: Path
) -> None:
    rt, llm = scripted
    mine = rt.store.append(REF, Kind.LESSON, {
        "timestamp": "2026-09-01T09:00:00+00:00", "task_type": "deploy", "lesson_type": "do",
        "evidence": [], "confirmations": 5, "status": "active"},
        {"Lesson": "Check the logs before retrying a failed deploy."})
    path = rt.store.path_for_id(REF, mine.id)
    before = path.read_bytes()
    llm.queue_task("lessons", reply(lessons=["Read the deploy logs before you retry."]))
    task(rt, 1, "success", ["check logs", "deploy"])
    assert learn(rt) == {"owners": 1}
    assert path.read_bytes() == before
    assert [x.id for x in lessons(rt)] == [mine.id]


def test_a_garbled_evidence_mapping_is_reported_and_never_written_back_as_an_id(
    scripted: tuple[Runtime, ScriptedLLM], caplog: pytest.LogCaptureFixture
) -> None:
    # A daemon-written lesson whose `evidence` a hand edit made a mapping was confirmed by
    # writing `evidence: ["{'x': 1}", tk_…]`: Python's text of the mapping, kept as an id.
    rt, llm = scripted
    ours = rt.store.append(REF, Kind.LESSON, {
        "timestamp": "2026-09-01T09:00:00+00:00", "task_type": "deploy", "lesson_type": "do",
        "evidence": {"x": 1}, "confirmations": 1, "status": "active",
        "created_by": "learn_lessons"},
        {"Lesson": "Check the logs before retrying a failed deploy."})
    path = rt.store.path_for_id(REF, ours.id)
    before = path.read_bytes()
    assert b"evidence:" in before and b"x: 1" in before
    llm.queue_task("lessons", reply(lessons=["Read the deploy logs before you retry."]))
    task(rt, 1, "success", ["check logs", "deploy"])
    with caplog.at_level("WARNING"):
        assert learn(rt) == {"owners": 1}
    assert path.read_bytes() == before  # kept as written, not confirmed
    assert [x.evidence for x in lessons(rt)] == [()]
    [warning] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert ours.id in warning and f"{LESSON_DIR}/{path.name}" in warning
    assert "evidence is not a list of ids" in warning


def test_a_hand_written_signature_that_is_no_text_is_left_alone(
    scripted: tuple[Runtime, ScriptedLLM]
) -> None:
    # A person's `signature: [a, b]` (or a mapping) made the lookup of offline lessons raise
    # "TypeError: unhashable type: 'list'": the run stopped there for every owner, every run.
    rt, llm = scripted
    mine = [rt.store.append(REF, Kind.LESSON, {
        "timestamp": "2026-09-01T09:00:00+00:00", "task_type": "deploy", "lesson_type": "do",
        "evidence": [], "confirmations": 5, "status": "active", "signature": signature},
        {"Lesson": f"Hand-written lesson {n}."})
        for n, signature in enumerate((["a", "b"], {"error": "timeout"}))]
    before = rt.store.path_for_id(REF, mine[0].id).read_bytes()
    llm.queue_task("lessons", reply(lessons=["Check the logs before retrying a failed deploy."]))
    t1 = task(rt, 1, "success", ["check logs", "deploy"])
    assert learn(rt) == {"owners": 1, "written": 1}
    assert rt.store.path_for_id(REF, mine[0].id).read_bytes().startswith(before)
    new = [x for x in lessons(rt) if x.id not in {m.id for m in mine}]
    assert [(x.text, x.evidence) for x in new] == [
        ("Check the logs before retrying a failed deploy.", (t1,))]


def test_a_failed_llm_call_leaves_the_window_for_the_next_run(
    scripted: tuple[Runtime, ScriptedLLM]
) -> None:
    from everos_reflect.errors import ProviderUnavailable

    rt, llm = scripted
    llm.queue_task("lessons", ProviderUnavailable("server down"),
                   reply(lessons=["Check the logs before retrying a failed deploy."]))
    t1 = task(rt, 1, "success", ["check logs", "deploy"])
    assert learn(rt) == {"failed": 1}
    assert lessons(rt) == []
    assert learn(rt) == {"owners": 1, "written": 1}
    assert lessons(rt)[0].evidence == (t1,)


# -- offline -----------------------------------------------------------------------------------


@pytest.fixture
def offline(root: Path) -> Iterator[Runtime]:
    from everos_reflect.llm.extractive import ExtractiveLLM

    rt = make_runtime(root, ExtractiveLLM())
    yield rt
    rt.close()


def test_offline_lessons_on_a_fixture(offline: Runtime) -> None:
    rt = offline
    f1 = task(rt, 1, "failure", ["build image", "deploy"],
              ("ImagePullBackOff: registry timeout after 30s",))
    s1 = task(rt, 2, "success", ["check logs", "fix registry credentials", "deploy"])
    s2 = task(rt, 3, "success", ["Check logs", "deploy"])
    f2 = task(rt, 4, "failure", ["build image", "deploy"],
              ("ImagePullBackOff: registry timeout after 45s",))
    # another type with one success only: nothing to learn, nothing invented
    task(rt, 5, "success", ["back up", "migrate"], task_type="migrate")
    assert learn(rt) == {"owners": 1, "written": 2}
    found = {x.lesson_type: x for x in lessons(rt)}
    assert set(found) == {"do", "avoid"}
    assert found["avoid"].text == ('Avoid what led to the recurring error "ImagePullBackOff: '
                                   'registry timeout after 30s" (in 2 of 4 deploy tasks when '
                                   'learned).')
    assert found["avoid"].evidence == (f1, f2) and found["avoid"].confirmations == 2
    assert found["do"].text == ('Do "check logs": when learned, all 2 successful deploy tasks '
                                'did it and none of the 2 failed ones.')
    assert found["do"].evidence == (s1, s2, f1, f2) and found["do"].confirmations == 2
    rows = rt.db().execute("SELECT provider FROM derivation_report").fetchall()
    assert [r["provider"] for r in rows] == ["extractive"]

    # the error recurs once more: the same lesson, confirmed, not a new one
    f3 = task(rt, 6, "failure", ["deploy"], ("ImagePullBackOff: registry timeout after 60s",))
    assert learn(rt) == {"owners": 1}
    again = {x.lesson_type: x for x in lessons(rt)}
    assert again["avoid"].id == found["avoid"].id
    assert again["avoid"].evidence == (f1, f2, f3) and again["avoid"].confirmations == 3
    assert len(lessons(rt)) == 2
    assert {x.status for x in lessons(rt)} == {"active"}  # offline counts never contest


# -- edges -------------------------------------------------------------------------------------


def test_lessons_cli_and_api(scripted: tuple[Runtime, ScriptedLLM], root: Path) -> None:
    rt, llm = scripted
    llm.queue_task("lessons", reply(lessons=["Check the logs before retrying a failed deploy."],
                                    avoid=["Deploying on Fridays."]))
    t1 = task(rt, 1, "success", ["check logs", "deploy"])
    learn(rt)
    result = CliRunner().invoke(cli, ["lessons", "--task-type", "deploy", "--user", "u_ops",
                                      "--json"])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.output)["lessons"]
    assert {x["text"] for x in listed} == {"Check the logs before retrying a failed deploy.",
                                           "Deploying on Fridays."}
    assert all(x["evidence"] == [t1] and x["kind"] == "lesson" for x in listed)
    call = ApiClient(rt)
    resp = call("GET", "/api/v1/lessons", params={"task_type": "deploy"})
    assert resp.status_code == 200, resp.text
    assert resp.json()["data"]["lessons"] == listed  # every user, same shape as the CLI
    resp = call("GET", "/api/v1/lessons", params={"task_type": "a b"})
    assert resp.status_code == 422 and "task_type" in resp.json()["error"]["message"]
    resp = call("GET", "/api/v1/lessons", params={"task_type": "deploy", "colour": "red"})
    assert resp.status_code == 422
    result = CliRunner().invoke(cli, ["lessons", "--task-type", "migrate"])
    assert result.exit_code == 0 and "no lessons" in result.output


def test_data_trigger_sees_a_new_task_and_waits_out_the_cooldown(
    scripted: tuple[Runtime, ScriptedLLM]
) -> None:
    from datetime import UTC, datetime, timedelta

    rt, llm = scripted
    strategy = LearnLessons()
    assert strategy.data_trigger is not None
    assert strategy.observe(rt, None) == 0  # no task yet
    task(rt, 1, "success", ["check logs", "deploy"])
    assert strategy.observe(rt, None) == 1
    just_now = datetime.now(UTC) - timedelta(seconds=5)
    assert strategy.observe(rt, just_now) == 0  # inside the 60 s cooldown
    assert strategy.data_trigger.is_due(strategy.observe(rt, None), None, datetime.now(UTC))
    llm.queue_task("lessons", reply(lessons=["Check the logs before retrying a failed deploy."]))
    learn(rt)
    assert strategy.observe(rt, None) == 0  # consumed


def test_a_failed_call_for_one_task_type_writes_no_lesson_of_the_window(root: Path) -> None:
    # The window's task types were asked and written one after the other: "backup" got its
    # lesson written, then the "deploy" call failed. The run was recorded failed with no
    # outputs while a lesson stood on disk, and the next run took that lesson for a commit
    # interrupted after its write: it moved the cursor past "deploy", which never got one.
    from everos_reflect.embedding.base import HashEmbedder
    from everos_reflect.errors import ProviderUnavailable
    from everos_reflect.index.audit import list_derivations

    llm = ScriptedLLM()
    rt = Runtime(root, embedder=HashEmbedder(64), llm=llm)
    try:
        backup = task(rt, 1, "success", ["check the disk", "back up"], task_type="backup",
                      goal="Back up the database")
        deploy = task(rt, 2, "success", ["check logs", "deploy"])
        verify = reply(lessons=["Verify the backup archive after writing it."])
        smoke = reply(lessons=["Run the smoke test after each deploy."])
        llm.queue_task("lessons", verify, ProviderUnavailable("server down"))
        assert learn(rt) == {"failed": 1}
        assert lessons(rt) == []
        (row,) = list_derivations(rt.db(), strategy=NAME)
        assert (row["status"], row["outputs"]) == ("failed", [])

        llm.queue_task("lessons", verify, smoke)
        assert learn(rt) == {"owners": 1, "written": 2}
        assert {(x.task_type, x.evidence) for x in lessons(rt)} == {
            ("backup", (backup,)), ("deploy", (deploy,))}
    finally:
        rt.close()


def test_a_run_makes_no_more_lesson_calls_than_max_llm_calls(root: Path) -> None:
    # One call per task type of the window, but the run reserved one per owner: a window of
    # six task types made six calls under max_llm_calls = 2, and the run said "ok".
    from everos_reflect.embedding.base import HashEmbedder
    from everos_reflect.engine.engine import Engine

    (root / "ome.toml").write_text("[strategies.learn_lessons]\nenabled = true\n"
                                   "cooldown_seconds = 0\nmax_llm_calls = 2\n")
    llm = ScriptedLLM()
    rt = Runtime(root, embedder=HashEmbedder(64), llm=llm)
    try:
        types = [f"job{n}" for n in range(6)]
        for day, task_type in enumerate(types, start=1):
            task(rt, day, "success", ["check logs", "run"], task_type=task_type)
        for n in range(6):
            llm.queue_task("lessons", reply(lessons=[f"Check the logs before job {n}."]))
        outcomes = [Engine(rt).trigger(NAME, timeout=60) for _ in range(3)]
        assert [o.status for o in outcomes] == ["partial", "partial", "ok"]
        assert [len(o.counts) and o.counts.get("written") for o in outcomes] == [2, 2, 2]
        assert len(llm.task_requests) == 6  # two per run
        assert sorted(x.task_type for x in lessons(rt)) == types
    finally:
        rt.close()


def test_a_huge_task_is_shown_clipped_and_the_run_says_so(root: Path) -> None:
    # The task's text went into the prompt whole: a task `task add` accepts (100 steps of
    # 2,000 characters) is a 200 KB line, and a window of 50 such tasks a 10 MB prompt.
    from everos_reflect.embedding.base import HashEmbedder
    from everos_reflect.procedural.tasks import MAX_LINE_CHARS, MAX_STEPS
    from everos_reflect.strategies.lessons import MAX_TASK_PROMPT_CHARS

    llm = ScriptedLLM()
    rt = Runtime(root, embedder=HashEmbedder(64), llm=llm)
    try:
        small = task(rt, 1, "success", ["check logs", "deploy"])
        steps = [f"step {n} " + "x" * (MAX_LINE_CHARS - 10) for n in range(MAX_STEPS)]
        huge = task(rt, 2, "failure", steps)
        llm.queue_task("lessons", reply(lessons=["Check the logs before each deploy."]))
        assert learn(rt) == {"owners": 1, "written": 1, "clipped": 1}
        ((_, request),) = llm.task_requests
        texts = {r.id: r.text for r in request.records}
        assert texts[small] == ("Deploy the web service (outcome: success) — steps: check "
                                "logs; deploy")
        whole = len("Deploy the web service (outcome: failure) — steps: " + "; ".join(steps))
        assert texts[huge] == ("Deploy the web service (outcome: failure) — steps: "
                               + "; ".join(steps))[:MAX_TASK_PROMPT_CHARS] + (
                                   f"… (clipped from {whole:,} characters)")
    finally:
        rt.close()


def test_a_window_the_server_refuses_for_good_is_set_aside_and_the_rest_goes_on(
    root: Path, fake_openai: Any
) -> None:
    # A 400 (the request itself refused: too long, rejected content) failed the owner's whole
    # window, which stayed pending: every run sent the same tasks again and failed again, and
    # the owner's other task types never got a lesson.
    from everos_reflect.index.audit import list_derivations

    rt = fake_server_runtime(root, fake_openai)
    try:
        backup = task(rt, 1, "success", ["check the disk", "back up"], task_type="backup",
                      goal="Back up the database")
        deploy = task(rt, 2, "failure", ["deploy"], ("registry timeout",))
        verify = reply(lessons=["Verify the backup archive after writing it."])
        fake_openai.script(verify, fake_openai.Status(400, {"error": {
            "message": "This model's maximum context length is 8192 tokens",
            "type": "invalid_request_error"}}))
        assert learn(rt) == {"failed": 1, "set_aside": 1}
        assert lessons(rt) == []
        (row,) = list_derivations(rt.db(), strategy=NAME)
        assert row["status"] == "failed"
        assert "HTTP 400" in row["error"] and "maximum context length" in row["error"]
        assert f"set aside: {deploy}" in row["error"]

        fake_openai.script(verify)
        assert learn(rt) == {"owners": 1, "written": 1}
        assert [(x.task_type, x.evidence) for x in lessons(rt)] == [("backup", (backup,))]
        assert len(fake_openai.chat_bodies()) == 3
        assert learn(rt) == {}  # the refused task is not sent again
        assert len(fake_openai.chat_bodies()) == 3
    finally:
        rt.close()


def test_a_server_outage_or_bad_key_leaves_the_window_pending(
    root: Path, fake_openai: Any
) -> None:
    # only the request's own refusal sets tasks aside: a 401 or 503 says nothing about them
    rt = fake_server_runtime(root, fake_openai)
    try:
        t1 = task(rt, 1, "success", ["check logs", "deploy"])
        fake_openai.script(401, 503)
        assert learn(rt) == {"failed": 1}
        assert learn(rt) == {"failed": 1}
        fake_openai.script(reply(lessons=["Check the logs before each deploy."]))
        assert learn(rt) == {"owners": 1, "written": 1}
        assert lessons(rt)[0].evidence == (t1,)
    finally:
        rt.close()


def test_a_contest_is_over_once_no_rival_is_left_live(root: Path) -> None:
    # A contested lesson whose rival a person retired (or withdrew, or deleted) stayed
    # `contested` for good: only a live rival could ever be outconfirmed, so at 5
    # confirmations against none it was still briefed as contested. A rival archived into
    # a refinement lives on as that refinement, and the contest goes on against it.
    from datetime import date

    from everos_reflect.embedding.base import HashEmbedder
    from everos_reflect.strategies.lessons import LessonState, decide_contests

    rt = Runtime(root, embedder=HashEmbedder(16))

    def lesson(text: str, status: str, confirmations: int = 1) -> str:
        meta = {"timestamp": "2026-10-20T09:00:00+00:00", "task_type": "deploy",
                "lesson_type": "do", "evidence": ["tk_20261012_0001"],
                "confirmations": confirmations, "created_by": "learn_lessons", "depth": 1,
                "status": status}
        return rt.store.append(REF, Kind.LESSON, meta, {"Lesson": text},
                               day=date(2026, 10, 20)).id

    alone = lesson("Retry a failed deploy at once.", "contested", 5)
    gone = lesson("Do not retry a failed deploy at once.", "retired")
    itself = lesson("Pin the image tag.", "contested")
    left = lesson("Deploy on Fridays.", "contested")
    old = lesson("Never deploy on Fridays.", "contested")
    refined = lesson("Never deploy on Fridays or before a holiday.", "active")
    for who, rivals in ((alone, [gone]), (gone, [alone]), (itself, [itself]), (left, [old]),
                        (old, [left])):
        rt.store.update_meta(REF, who, {"contested_with": rivals})
    rt.store.deprecate(REF, {old: refined})
    decide_contests(rt, REF, LessonState.load(rt, REF), "deploy", 2)
    got = {i: read_lesson(rt.store.get(REF, i)) for i in (alone, itself, left)}
    assert [(got[i].status, got[i].contested_with) for i in (alone, itself, left)] == [
        ("active", ()), ("active", ()), ("contested", (old,))]
    rt.close()


def test_a_lesson_of_a_thousand_tasks_cites_the_latest_and_counts_them_all(root: Path) -> None:
    """An offline lesson cited every task its error recurred in: at some 900 tasks its
    metadata passed the 64 KiB a block may hold, it could not be written, and the task type
    failed every run, its tasks never consumed."""
    from collections import defaultdict

    from everos_reflect.embedding.base import HashEmbedder
    from everos_reflect.llm import ExtractiveLLM
    from everos_reflect.strategies.beliefs import MAX_CITATIONS as MAX_LESSON_EVIDENCE

    rt = Runtime(root, embedder=HashEmbedder(64), llm=ExtractiveLLM())

    def failed_deploys(numbers: range, day: int | None = None) -> list[str]:
        by_day: dict[str, list[Any]] = defaultdict(list)
        for i in numbers:
            t = new_task(REF, task_type="deploy", goal=f"Deploy build {i}", steps=["deploy"],
                         outcome="failure", errors=[f"registry timeout after {i} s"],
                         timestamp=f"2026-10-{day or 1 + i % 28:02d}T10:00:00+00:00")
            by_day[t.day].append((t.meta, t.sections))
        return [e.id for d in sorted(by_day)
                for e in rt.store.append_many(REF, Kind.TASK, by_day[d], day=d)]

    try:
        ids = failed_deploys(range(1_000))
        assert learn(rt, max_records=1_000) == {"owners": 1, "written": 1}
        (lesson,) = lessons(rt)
        assert lesson.confirmations == 1_000
        assert lesson.evidence == tuple(ids[-MAX_LESSON_EVIDENCE:])  # the latest tasks
        assert set(rt.store.get(REF, lesson.id).meta["evidence_hash"]) == set(lesson.evidence)
        # two more such tasks: counted, and cited in place of the two oldest cited
        ids += failed_deploys(range(1_000, 1_002), day=29)
        assert learn(rt, max_records=1_000) == {"owners": 1}
        (lesson,) = lessons(rt)
        assert lesson.confirmations == 1_002
        assert lesson.evidence == tuple(ids[-MAX_LESSON_EVIDENCE:])
        assert learn(rt, max_records=1_000) == {}  # nothing new: nothing written
    finally:
        rt.close()


def test_a_lesson_keeps_the_most_recent_tasks_by_time_as_every_tier_does(root: Path) -> None:
    """Lessons had a cap and rule of their own (the last tasks in file order), the other
    tiers `beliefs.most_recent` (by timestamp, ties by id): a task recorded late for an
    earlier time stood in a lesson's evidence in place of a later one."""
    from everos_reflect.embedding.base import HashEmbedder
    from everos_reflect.llm import ExtractiveLLM
    from everos_reflect.strategies.beliefs import MAX_CITATIONS

    rt = Runtime(root, embedder=HashEmbedder(64), llm=ExtractiveLLM())

    def failed_deploy(i: int, clock: str) -> str:
        t = new_task(REF, task_type="deploy", goal=f"Deploy build {i}", steps=["deploy"],
                     outcome="failure", errors=[f"registry timeout after {i} s"],
                     timestamp=f"2026-10-02T{clock}+00:00")
        return rt.store.append(REF, Kind.TASK, t.meta, t.sections, day=t.day).id

    try:
        ids = [failed_deploy(i, f"10:{i // 60:02d}:{i % 60:02d}") for i in range(MAX_CITATIONS)]
        late = failed_deploy(MAX_CITATIONS, "09:00:00")  # written last, for 09:00
        assert learn(rt, max_records=1_000) == {"owners": 1, "written": 1}
        (lesson,) = lessons(rt)
        assert lesson.confirmations == MAX_CITATIONS + 1
        assert late not in lesson.evidence
        assert lesson.evidence == tuple(ids)
    finally:
        rt.close()


def test_the_lessons_and_insights_answers_are_bounded_with_a_total(root: Path) -> None:
    """The MCP tools `lessons` and `insights` (and their routes) answered every record, into
    the prompt of the agent that asked: 3,000 lessons citing 200 tasks each made 13 MB. They
    answer the first `limit` (50 by default, at most 1,000) and count them all in `total`; a
    lesson lists its first 20 cited tasks and counts them in `evidence_count`."""
    from everos_reflect.api import ops
    from everos_reflect.api.models import InsightsQuery, LessonsQuery
    from everos_reflect.embedding.base import HashEmbedder

    rt = Runtime(root, embedder=HashEmbedder(16))
    try:
        cited = [f"tk_20261012_{n:04d}" for n in range(1, 201)]
        rt.store.append_many(REF, Kind.LESSON, [(
            {"timestamp": "2026-10-12T09:00:00+00:00", "task_type": "deploy",
             "lesson_type": "do", "evidence": cited, "confirmations": 1 + n, "depth": 1,
             "status": "active"}, {"Lesson": f"Check the registry before deploy {n}."})
            for n in range(120)])
        rt.store.append_many(REF, Kind.INSIGHT, [(
            {"timestamp": f"2026-10-12T09:{n // 60:02d}:{n % 60:02d}+00:00",
             "evidence": cited[:2], "depth": 1, "status": "active"}, {"Insight": f"Insight {n}."})
            for n in range(70)])
        mcp = ops.lessons(rt, LessonsQuery.model_validate({"task_type": "deploy"}))
        assert mcp["total"] == 120 and len(mcp["lessons"]) == 50
        assert [x["confirmations"] for x in mcp["lessons"]] == list(range(120, 70, -1))
        assert all(x["evidence"] == cited[:20] and x["evidence_count"] == 200
                   for x in mcp["lessons"])
        few = ops.lessons(rt, LessonsQuery.model_validate({"task_type": "deploy", "limit": 3}))
        assert [x["confirmations"] for x in few["lessons"]] == [120, 119, 118]
        assert ops.insights(rt, InsightsQuery.model_validate({"user_id": "u_ops"}))["total"] == 70

        call = ApiClient(rt)
        resp = call("GET", "/api/v1/lessons", params={"task_type": "deploy", "limit": "2"})
        assert resp.status_code == 200, resp.text
        data = resp.json()["data"]
        assert data["total"] == 120 and [x["confirmations"] for x in data["lessons"]] == [120, 119]
        resp = call("GET", "/api/v1/memory/insights", params={"user_id": "u_ops", "limit": "5"})
        assert resp.status_code == 200, resp.text
        data = resp.json()["data"]
        assert data["total"] == 70 and [x["text"] for x in data["insights"]] == [
            f"Insight {n}." for n in range(69, 64, -1)]  # newest first
        for url, params in [("/api/v1/lessons", {"task_type": "deploy", "limit": "0"}),
                            ("/api/v1/lessons", {"task_type": "deploy", "limit": "1_0"}),
                            ("/api/v1/memory/insights", {"user_id": "u_ops", "limit": "1001"})]:
            resp = call("GET", url, params=params)
            assert resp.status_code == 422 and "limit" in resp.json()["error"]["message"], url
        with pytest.raises(Exception, match="limit"):
            LessonsQuery.model_validate({"task_type": "deploy", "limit": "5"})  # JSON: a number
    finally:
        rt.close()

    result = CliRunner().invoke(cli, ["lessons", "--task-type", "deploy", "--user", "u_ops",
                                      "--limit", "2", "--root", str(root)])
    assert result.exit_code == 0, result.output
    assert "+180 more" in result.output and "118 more lessons not listed" in result.output


def test_a_lessons_rivals_are_listed_bounded_with_a_count(root: Path) -> None:
    # `contested_with` was answered whole: 3,000 rivals written by hand made a 60 KB answer
    # of one lesson (API and MCP), where its evidence is cut to 20 ids and counted
    from everos_reflect.api import ops
    from everos_reflect.api.models import LessonsQuery
    from everos_reflect.embedding.base import HashEmbedder

    rt = Runtime(root, embedder=HashEmbedder(16))
    try:
        rival_meta = {"timestamp": "2026-10-12T09:00:00+00:00", "task_type": "deploy",
                      "evidence": ["tk_20261012_0001"], "depth": 1}
        # live lessons of the task type: an id that is none is no rival (listed as none)
        rivals = [e.id for e in rt.store.append_many(
            REF, Kind.LESSON, [(rival_meta, {"Lesson": f"Rival {n}."}) for n in range(3000)])]
        rt.store.append(REF, Kind.LESSON, {
            **rival_meta, "lesson_type": "do", "confirmations": 5, "status": "contested",
            "contested_with": rivals}, {"Lesson": "Retry at once."})
        x = ops.lessons(rt, LessonsQuery.model_validate({"task_type": "deploy"}))["lessons"][0]
        assert x["contested_with"] == rivals[:20] and x["contested_count"] == 3000
        got = ApiClient(rt)("GET", "/api/v1/lessons",
                            params={"task_type": "deploy"}).json()["data"]["lessons"][0]
        assert got == x
        # a rival a hand edit wrote twice is one: it was listed and counted twice
        twice = read_lesson(rt.store.append(REF, Kind.LESSON, {
            "timestamp": "2026-10-12T09:00:00+00:00", "task_type": "deploy",
            "evidence": ["tk_20261012_0001"], "status": "contested",
            "contested_with": [rivals[1], rivals[0], rivals[1]]}, {"Lesson": "Wait."}))
        assert twice.contested_with == (rivals[1], rivals[0])
    finally:
        rt.close()
