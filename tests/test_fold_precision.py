"""The extractive merge folds restatements, never two different facts about one subject.

With the bundled MiniLM, short sentences about one entity sit close: "Andrew adopted a dog named
Rex." and "Andrew's dog Rex learned to sit and fetch." at cosine 0.774. At the 0.75 the provider
shipped with, the merge kept the first and the tricks left live memory; the coverage guard,
counting a fact as kept at the same cosine, passed it at coverage 1.00.
"""

from __future__ import annotations

import sys
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from everos_reflect.embedding.local import LocalEmbedder
from everos_reflect.llm import extractive
from everos_reflect.llm.base import FactsRequest, MergeMember, MergeRequest
from everos_reflect.llm.extractive import ExtractiveLLM, plain_sentences
from everos_reflect.strategies.reflect import DEFAULT_FACT_MATCH_THRESHOLD
from tests.merge_fixtures import loaded_local, narrative

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import fold_pairs


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return loaded_local()


def merged(llm: ExtractiveLLM, *texts: str) -> list[str]:
    return plain_sentences(narrative(llm, *texts, subject="Rex"))


def possessive(row: dict) -> bool:
    """Does a pair of the bench open a sentence with someone's something?"""
    return any(extractive._holder(t, None) for t in row["texts"])


def test_two_facts_about_one_dog_both_stay(local: LocalEmbedder) -> None:
    kept = merged(ExtractiveLLM(local), "Andrew adopted a dog named Rex.",
                  "Andrew's dog Rex had a vet visit; Rex is healthy.",
                  "Andrew's dog Rex learned to sit and fetch.")
    assert kept == ["Andrew adopted a dog named Rex.",
                    "Andrew's dog Rex had a vet visit; Rex is healthy.",
                    "Andrew's dog Rex learned to sit and fetch."]


def test_a_restatement_is_still_folded(local: LocalEmbedder) -> None:
    kept = merged(ExtractiveLLM(local), "Andrew adopted a dog named Rex.",
                  "Andrew got a dog called Rex.")
    assert len(kept) == 1


def test_the_shipped_threshold_folds_no_distinct_pair_of_the_bench(local: LocalEmbedder) -> None:
    rows = fold_pairs.load_pairs()
    llm = ExtractiveLLM(local)
    lost = [r["texts"] for r in rows
            if r["label"] == "distinct" and fold_pairs.folded(llm, r["texts"])]
    assert lost == []
    # and it does fold: most restatements keep one sentence
    restates = [r for r in rows if r["label"] == "restates"]
    assert sum(fold_pairs.folded(llm, r["texts"]) for r in restates) >= len(restates) // 2


def test_the_bench_chooses_the_lowest_value_clean_on_the_calibration_half() -> None:
    table = {"0.7": {"calibration": {"distinct_folded": 2}},
             "0.78": {"calibration": {"distinct_folded": 0}},
             "0.85": {"calibration": {"distinct_folded": 0}}}
    assert fold_pairs.choose(table) == "0.78"
    assert fold_pairs.choose({"0.7": {"calibration": {"distinct_folded": 1}}}) is None


def about(llm: ExtractiveLLM, subject: str, *texts: str) -> str:
    return narrative(llm, *texts, subject=subject)


@pytest.mark.parametrize("first, second", [
    ("Mia is allergic to peanuts.", "Mia's brother is allergic to peanuts."),
    ("Caroline is visiting Ohio next week.", "Caroline's mom is visiting from Ohio next week."),
    ("Andrew loves the beach.", "Andrew's dog Rex loves the beach."),
    ("Kofi's car is in the repair shop.", "Kofi's brother's car is in the repair shop."),
    ("Ana's phone is always running out of battery.",
     "Ana's laptop is always running out of battery."),
    # an apostrophe in the name, a full name: read as nobody's holder, one fact was dropped
    ("O'Brien is sick.", "O'Brien's dog is sick."),
    ("D’Angelo loves the beach.", "D’Angelo’s dog Rex loves the beach."),
    ("Mia Wong is allergic to peanuts.", "Mia Wong's brother is allergic to peanuts."),
])
def test_someone_s_relative_or_thing_is_another_subject(local: LocalEmbedder, first: str,
                                                         second: str) -> None:
    # cosine 0.75-0.92: one wording was kept and the other's fact lost, or the later was
    # written as the "Current state" of the earlier, a change that never happened
    content = about(ExtractiveLLM(local), "Notes", first, second)
    assert plain_sentences(content) == [first, second]
    assert "Current state" not in content


def test_her_brother_is_not_the_main_person(local: LocalEmbedder) -> None:
    content = about(ExtractiveLLM(local, paraphrase=0.7, version=0.7), "Mia",
                    "Mia is allergic to peanuts. Mia carries an EpiPen.",
                    "Her brother is allergic to peanuts.")
    assert "Her brother is allergic to peanuts." in plain_sentences(content)
    assert "Mia is allergic to peanuts." in plain_sentences(content)
    assert "Current state" not in content


def test_a_restatement_through_a_possessive_still_folds(local: LocalEmbedder) -> None:
    kept = merged(ExtractiveLLM(local), "Mia is severely allergic to peanuts.",
                  "Mia's allergy to peanuts is severe.")
    assert len(kept) == 1


def test_a_possessive_that_names_its_owner_again_is_still_a_version(local: LocalEmbedder) -> None:
    content = about(ExtractiveLLM(local), "Felix", "Felix gets a yearly bonus.",
                    "Felix's company dropped bonuses, so Felix gets no bonus now.")
    assert content.split("\n\n")[-1] == ("Current state (2026-11-12): Felix's company dropped "
                                         "bonuses, so Felix gets no bonus now.")


def test_the_guard_counts_no_fact_of_another_holder_as_stated(local: LocalEmbedder) -> None:
    # "Mia is allergic to peanuts." stated her brother's allergy (0.912): an LLM merge
    # writing one sentence for both facts passed the coverage guard; 25 of the 86 distinct
    # pairs of the bench were credited so at the shipped 0.75
    rows = [r for r in fold_pairs.load_pairs() if possessive(r)]
    credited = [r["texts"] for r in rows if r["label"] == "distinct"
                and fold_pairs.credited(local, r["texts"], DEFAULT_FACT_MATCH_THRESHOLD)]
    assert credited == [  # the known limit (docs/evaluation.md)
        ("Kofi's car is in the repair shop.", "Kofi's brother's car is in the repair shop."),
    ]
    # two facts of two holders written in one sentence are both stated
    both = [c["sentence"] for c in fold_pairs.load_combined()
            if fold_pairs.coverage(local, list(c["facts"]), c["sentence"],
                                   DEFAULT_FACT_MATCH_THRESHOLD) == 1.0]
    assert "Mia and her brother are both allergic to peanuts." in both
    assert "Ana's phone and laptop are always running out of battery." in both


@pytest.mark.parametrize("fact, sentence", [
    ("Ada works at a bakery.", "Ada's bakery won a local award."),
    ("Zoe takes the tram.", "Zoe's tram was late."),
    ("Andrew adopted a dog named Rex.", "Andrew's dog Rex learned to sit and fetch."),
    ("Marek has a cat named Pixel.", "Marek's cat Pixel caught a mouse."),
])
def test_the_guard_counts_no_news_of_someone_s_thing_as_their_fact(local: LocalEmbedder,
                                                                   fact: str,
                                                                   sentence: str) -> None:
    # cosine 0.77-0.79 and the thing ("bakery") named by both: an LLM merge that kept only
    # the award passed the guard at coverage 1.00, and that Ada works there was lost; the
    # merge itself keeps both (test_a_fact_of_someone_s_thing_is_not_folded_into_theirs)
    assert fold_pairs.coverage(local, [fact], sentence, DEFAULT_FACT_MATCH_THRESHOLD) == 0.0
    # still stated: the possessive sentence names its owner again, or tells nothing more
    assert fold_pairs.coverage(local, ["Ada works at a bakery."],
                               "Ada's bakery, where she works, won a local award.",
                               DEFAULT_FACT_MATCH_THRESHOLD) == 1.0
    assert fold_pairs.coverage(local, ["Mei is writing her thesis on coral reef decline."],
                               "Mei's thesis is about the decline of coral reefs.",
                               DEFAULT_FACT_MATCH_THRESHOLD) == 1.0


@pytest.mark.parametrize("first, second", [
    ("Ines is allergic to cats.", "Ines has an allergy to cats."),
    ("Iris painted a portrait of her grandfather.",
     "Iris made a painting of her grandfather's portrait."),
    ("Hana sings in a community choir.", "Hana is a singer in her local community choir."),
])
def test_a_rewording_of_a_word_s_form_is_no_change(local: LocalEmbedder, first: str,
                                                   second: str) -> None:
    # cosine 0.93-0.97, a word or two swapped ("allergic" -> "allergy") with most shared: the
    # value-swap rule refused the fold and the later wording became the "Current state", a
    # change that never happened
    content = about(ExtractiveLLM(local), "Notes", first, second)
    assert len(plain_sentences(content)) == 1
    assert "Current state" not in content


@pytest.mark.parametrize("first, second, current", [
    ("Aisha commutes to work by bus.", "Aisha commutes to work by bicycle now.", "bicycle"),
    ("Sam pays the rent by cheque.", "Sam pays the rent by bank transfer.", "transfer"),
    ("Kofi sleeps with the window open.", "Kofi sleeps with the window closed.", "closed"),
])
def test_a_replaced_value_is_still_a_version(local: LocalEmbedder, first: str, second: str,
                                              current: str) -> None:
    content = about(ExtractiveLLM(local), "Notes", first, second)
    assert plain_sentences(content) == [first, second]
    assert current in content.split("\n\n")[-1]
    assert content.split("\n\n")[-1].startswith("Current state (2026-11-12): ")


def test_the_bench_counts_restatements_written_as_versions(local: LocalEmbedder) -> None:
    rows = [r for r in fold_pairs.load_pairs()
            if r["texts"][0] in ("Ines is allergic to cats.", "Kurt is afraid of heights.")]
    llm = ExtractiveLLM(local)
    table = fold_pairs.sweep(rows, [0.78], embedder=local)
    report = table["0.78"]["report"]
    assert report["restates"] == 2
    # "allergic" -> "allergy" is one word in two forms; "afraid" -> "fear" is not (known limit)
    assert report["reworded"] == [["Kurt is afraid of heights.", "Kurt has a fear of heights."]]
    assert report["restates_versioned"] == 1
    assert not fold_pairs.outcome(llm, rows[0]["texts"])[1]


@pytest.mark.parametrize("first, second", [
    ("Leah is vegetarian.", "Leah is vegan."),
    ("Omar is a nurse.", "Omar is a family doctor."),
    ("Raj is unemployed.", "Raj is employed."),
    ("Omar's son plays youth football.", "Omar's son plays school basketball."),
])
def test_a_value_replaced_in_a_short_sentence_is_a_version(local: LocalEmbedder, first: str,
                                                           second: str) -> None:
    # cosine 0.85-0.92 with only the subject (or two words) shared: the value-swap test
    # wanted most content words shared, so the pair was folded as a restatement and the
    # earlier value left the narrative, dated as if it had been said last
    content = about(ExtractiveLLM(local), "Notes", first, second)
    assert plain_sentences(content) == [first, second]
    assert content.split("\n\n")[-1] == f"Current state (2026-11-12): {second}"


def test_the_bench_folds_no_real_change(local: LocalEmbedder) -> None:
    rows = [r for r in fold_pairs.load_pairs() if r["label"] == "changes"]
    cell = fold_pairs.sweep(rows, [0.78], embedder=local)["0.78"]
    assert cell["calibration"]["changes"] >= 12
    assert cell["calibration"]["dropped"] == []
    assert cell["report"]["dropped"] == []


@pytest.mark.parametrize("first, second", [
    ("The test passed.", "The test did not pass."),
    ("Lars is a smoker.", "Lars is a non-smoker."),
])
def test_the_same_words_negated_are_a_version(local: LocalEmbedder, first: str,
                                              second: str) -> None:
    # "passed" / "did not pass" sit at 0.745, below the version threshold, and "pass" was
    # read as the plural "pas", so both stayed in the timeline with no current state;
    # "non-smoker" carried no negation, so the pair (0.962) was folded and the change lost
    content = about(ExtractiveLLM(local), "Notes", first, second)
    assert plain_sentences(content) == [first, second]
    assert content.split("\n\n")[-1] == f"Current state (2026-11-12): {second}"


def test_two_negations_of_one_fact_are_no_flip(local: LocalEmbedder) -> None:
    # both negated ("never" / "not"): no change of polarity, whatever the cosine says
    old, new = (extractive._Sentence(t, date(2026, 11, 10 + i), i) for i, t in enumerate(
        ("Pedro never drinks coffee.", "Pedro does not drink coffee.")))
    assert not extractive._flips(old, new)
    assert extractive._flips(extractive._Sentence("Pedro drinks coffee.", date(2026, 11, 10), 0),
                             new)


@pytest.mark.parametrize("first, second", [
    ("Zoe takes the tram.", "Zoe's tram was late."),
    ("Andrew adopted a dog named Rex.", "Andrew's dog Rex learned to sit and fetch."),
    ("Kai had dinner with his old college roommate.",
     "Kai's roommate from college now runs a bakery."),
])
def test_news_of_someone_s_thing_is_no_change_of_their_fact(local: LocalEmbedder, first: str,
                                                            second: str) -> None:
    # cosine 0.75-0.79 and the thing ("tram") named by both: the holder rule read them as one
    # subject, so "Zoe's tram was late." was written as the current state and "Zoe takes the
    # tram." as history, a change that never happened
    content = about(ExtractiveLLM(local), "Notes", first, second)
    assert plain_sentences(content) == [first, second]
    assert "Current state" not in content and "→" not in content


@pytest.mark.parametrize("first, second", [
    ("Ada works at a bakery.", "Ada's bakery won a local award."),
    ("Tess has a van.", "Tess's van was sold."),
])
def test_a_fact_of_someone_s_thing_is_not_folded_into_theirs(local: LocalEmbedder, first: str,
                                                             second: str) -> None:
    # cosine 0.78-0.82, nothing swapped: the pair was folded and one wording kept, so that
    # Ada works there (or that Tess had a van) left live memory
    assert merged(ExtractiveLLM(local), first, second) == [first, second]


@pytest.mark.parametrize("first, second", [
    ("Mei is writing her thesis on coral reef decline.",
     "Mei's thesis is about the decline of coral reefs."),
    ("Tom's manager praised his quarterly report.",
     "Tom got praise from his manager for the quarterly report."),
])
def test_a_possessive_that_adds_nothing_still_restates(local: LocalEmbedder, first: str,
                                                       second: str) -> None:
    assert len(merged(ExtractiveLLM(local), first, second)) == 1


def test_the_bench_writes_no_distinct_pair_of_holders_as_versions(local: LocalEmbedder) -> None:
    rows = [r for r in fold_pairs.load_pairs() if r["label"] == "distinct" and possessive(r)]
    cell = fold_pairs.sweep(rows, [0.78], embedder=local)["0.78"]
    assert cell["calibration"]["claimed"] == []
    assert cell["report"]["claimed"] == []


def test_telegraphic_english_gets_the_english_label(local: LocalEmbedder) -> None:
    # no function word of English nor of another language: the tie went to "→", so short
    # English notes ("Omar's son plays youth football.") were labelled as foreign
    content = about(ExtractiveLLM(local), "Notes", "New job: nurse.", "New job: teacher.")
    assert content.split("\n\n")[-1] == "Current state (2026-11-12): New job: teacher."
    assert extractive._looks_english("Omar's son plays youth football.")
    # an accent still says it is not English; a function word of either side still decides
    assert not extractive._looks_english("Umzug nach Köln. Neue Stelle: Ärztin.")
    assert not extractive._looks_english("Andreas hat einen Hund.")
    assert extractive._looks_english("Moved to Lyon.")


@pytest.mark.parametrize("first, second, version", [
    # two events of one frame in the present are written as versions when half their content
    # words are shared ("Andrew" counts): a change claimed that did not happen, nothing lost
    # (in the past they are two events: test_two_events_told_in_the_past_are_no_versions)
    ("Andrew meets Tom for lunch.", "Andrew meets Lisa for lunch.", True),
    # the same note without a name, a value of another kind in the same frame: two events
    ("Ordered a pizza.", "Ordered a taxi.", False),
])
def test_events_and_changes_of_one_frame_known_limit(local: LocalEmbedder, first: str,
                                                     second: str, version: bool) -> None:
    # measured in session 28 (docs/reflection.md): taking a value replaced in place as a
    # version also for such notes gained as many false versions as changes on held-out notes
    content = about(ExtractiveLLM(local), "Notes", first, second)
    assert plain_sentences(content) == [first, second]
    assert content.split("\n\n")[-1].startswith("Current state (2026-11-12): ") is version


@pytest.mark.parametrize("first, second", [
    ("Nina is vegan.", "Nina was vegetarian as a teenager."),
    ("Mina rides a scooter to work.", "Mina used to ride a bike to work."),
])
def test_a_later_sentence_about_an_earlier_time_is_not_the_current_state(
        local: LocalEmbedder, first: str, second: str) -> None:
    # cosine 0.82 / 0.80: the later sentence was written as the "Current state" ("Current
    # state: Nina was vegetarian as a teenager."), though it tells how things were years ago
    content = about(ExtractiveLLM(local), "Notes", first, second)
    assert plain_sentences(content) == [first, second]
    assert "Current state" not in content


def test_a_change_stays_current_when_an_earlier_time_is_told_after_it(
        local: LocalEmbedder) -> None:
    content = about(ExtractiveLLM(local), "Notes", "Nina is vegetarian.", "Nina is vegan now.",
                    "Nina was vegetarian as a teenager.")
    assert content.split("\n\n")[-1] == "Current state (2026-11-12): Nina is vegan now."
    assert "Nina was vegetarian as a teenager." in plain_sentences(content)


@pytest.mark.parametrize("text, then", [
    ("Nina was vegetarian as a teenager.", True),
    ("Maria did not have any pets growing up.", True),
    ("Omar ran 5 km a week as a student.", True),
    ("Kai lived in Rome years ago.", True),
    # a role now, or a state that still holds: no earlier time
    ("Ravi works as a student assistant.", False),
    ("Mia got used to the cold.", False),
    ("Lena used to play the piano.", True),
    ("Nina has been vegan since she was a teenager.", False),
    ("Nina is vegan.", False),
    # other languages match nothing: their merge is as it was
    ("Nina war als Teenager Vegetarierin.", False),
])
def test_which_sentences_tell_of_an_earlier_time(text: str, then: bool) -> None:
    assert extractive.about_earlier_time(text) is then


@pytest.mark.parametrize("first, second, label", [
    ("Job: barista.", "Job: accountant.", "Current state (2026-11-12): "),
    ("Bank: Monzo.", "Bank: Revolut.", "Current state (2026-11-12): "),
    ("Car: Honda Civic.", "Car: Tesla Model 3.", "Current state (2026-11-12): "),
    ("Beruf: Lehrerin.", "Beruf: Ärztin.", "→ (2026-11-12) "),  # structure, not words: any language
])
def test_a_labelled_note_with_a_new_value_is_a_version(local: LocalEmbedder, first: str,
                                                       second: str, label: str) -> None:
    # cosine 0.5-0.7, one content word shared: both stayed in the timeline with no current
    # state, so "Job: barista." read as true as "Job: accountant."
    content = about(ExtractiveLLM(local), "Notes", first, second)
    assert plain_sentences(content) == [first, second]
    assert content.split("\n\n")[-1] == f"{label}{second}"


@pytest.mark.parametrize("first, second", [
    ("Gift for Mum: scarf.", "Gift for Dad: book."),
    # a sentence under a generic label: two facts, not one attribute's versions
    ("Update: Nina got a job at Acme.", "Update: Tom moved to Paris."),
    ("Note: call the bank.", "Note: renew the passport."),
])
def test_notes_of_two_labels_or_of_a_generic_label_are_no_versions(local: LocalEmbedder,
                                                                    first: str,
                                                                    second: str) -> None:
    content = about(ExtractiveLLM(local), "Notes", first, second)
    assert plain_sentences(content) == [first, second]
    assert "Current state" not in content


def test_a_note_s_opening_verb_is_nobody(local: LocalEmbedder) -> None:
    # "Moved" opened most sentences, so it was taken for the cluster's main person and the
    # pronoun after it rewritten: "She says the rent is fair." became "Moved says the rent is
    # fair.", a sentence nobody wrote
    members = [MergeMember("ep_20261110_0001", datetime(2026, 11, 10, 10, tzinfo=UTC), "Move",
                           "Moved to Lyon with Ana."),
               MergeMember("ep_20261117_0001", datetime(2026, 11, 17, 10, tzinfo=UTC),
                           "Settling in", "Moved into a flat near the river. "
                           "She says the rent is fair.")]
    result = ExtractiveLLM(local).merge(MergeRequest("init", members))
    assert "She says the rent is fair." in plain_sentences(result.content)
    assert not result.title.startswith("Moved")
    # a name followed by a verb still leads its sentence
    assert extractive._main_entity(["Moved to Lyon.", "Moved to Paris."]) is None
    assert extractive._main_entity(["Ana moved to Lyon.", "Ana moved to Paris."]) == "Ana"


@pytest.mark.parametrize("first, second", [
    ("Nina is vegan.", "Is Nina still vegan?"),
    ("Nina lives in Paris.", "Does Nina still live in Paris?"),
    ("Is Sam married?", "Sam is married."),
])
def test_a_question_is_neither_a_restatement_nor_a_version(local: LocalEmbedder, first: str,
                                                            second: str) -> None:
    # same words, or cosine 0.9: the pair was folded and the question kept, so the narrative
    # said only "Is Nina still vegan?" and that Nina is vegan left live memory
    content = about(ExtractiveLLM(local), "Notes", first, second)
    assert plain_sentences(content) == [first, second]
    assert "Current state" not in content


def test_facts_keep_a_statement_asked_about() -> None:
    facts = ExtractiveLLM().extract_facts(FactsRequest("Is Nina vegan? Nina is vegan.")).facts
    assert facts == ["Is Nina vegan?", "Nina is vegan."]


@pytest.mark.parametrize("first, second", [
    ("Ravi weighs 80 kg.", "Ravi wants to weigh 70 kg."),
    ("Ben has a car.", "Ben might sell his car."),
    ("Nina is vegan.", "Nina should stop being vegan, her doctor says."),
])
def test_a_wish_or_a_possibility_is_no_version_of_a_fact(local: LocalEmbedder, first: str,
                                                         second: str) -> None:
    # the wish was written as the "Current state" (a weight nobody has), or the fact was
    # folded into the later wording, which adds a word, and lost ("Ben has a car.")
    content = about(ExtractiveLLM(local), "Notes", first, second)
    assert plain_sentences(content) == [first, second]
    assert "Current state" not in content


def test_a_wish_still_folds_with_its_restatement_and_may_is_a_month(local: LocalEmbedder) -> None:
    assert len(merged(ExtractiveLLM(local), "Ben might sell his car.",
                      "Ben may sell his car.")) == 1
    assert not extractive._Sentence("Tom started learning piano in May.", date.min, 0).wish


@pytest.mark.parametrize("fact, sentence", [
    ("Nina is vegan.", "Is Nina still vegan?"),
    ("Nina is vegan.", "Nina was vegetarian as a teenager."),
    ("Ben has a car.", "Ben might sell his car."),
    ("Ravi weighs 80 kg.", "Ravi wants to weigh 70 kg."),
])
def test_the_guard_counts_no_question_past_or_wish_as_stating_a_fact(local: LocalEmbedder,
                                                                      fact: str,
                                                                      sentence: str) -> None:
    # cosine 0.8-0.9: an LLM merge that kept only the question (or the wish) lost the fact
    # and passed the guard at coverage 1.00
    assert fold_pairs.coverage(local, [fact], sentence, DEFAULT_FACT_MATCH_THRESHOLD) == 0.0
    # a plain sentence stating both still states each
    both = "Nina is vegan and was vegetarian as a teenager."
    assert fold_pairs.coverage(local, ["Nina is vegan.", "Nina was vegetarian as a teenager."],
                               both, DEFAULT_FACT_MATCH_THRESHOLD) == 1.0


@pytest.mark.parametrize("question, deed", [
    ("Tariq asked how to fix the bike.", "Tariq fixed the bike."),
    ("Rosa asked whether the gym has a pool.", "Rosa said the gym has a pool."),
    ("Is Nina still vegan?", "Nina is vegan."),
])
def test_the_guard_counts_no_deed_or_statement_as_stating_a_question(local: LocalEmbedder,
                                                                     question: str,
                                                                     deed: str) -> None:
    # cosine 0.8-0.9: a merge that kept only the deed was credited with the asking, while
    # the deed was already not credited to the question
    threshold = DEFAULT_FACT_MATCH_THRESHOLD
    assert fold_pairs.coverage(local, [question], deed, threshold) == 0.0
    assert fold_pairs.coverage(local, [deed], question, threshold) == 0.0
    # a sentence telling of the asking and the deed states both
    both = "Tariq fixed the bike after asking how to fix it."
    assert fold_pairs.coverage(local, ["Tariq asked how to fix the bike.",
                                       "Tariq fixed the bike."], both, threshold) == 1.0


@pytest.mark.parametrize("first, second", [
    ("Andrew met Tom for lunch.", "Andrew met Lisa for lunch."),
    ("Sam started learning the cello.", "Sam took up the cello."),
    ("Omar cooked pasta for dinner.", "Omar cooked curry for dinner."),
])
def test_two_events_told_in_the_past_are_no_versions(local: LocalEmbedder, first: str,
                                                     second: str) -> None:
    # half their content words shared, or cosine 0.8-0.9: the later event was written as the
    # "Current state" of the earlier, a change that never happened
    content = about(ExtractiveLLM(local), "Notes", first, second)
    assert plain_sentences(content) == [first, second]
    assert "Current state" not in content


def test_a_negated_event_and_a_present_fact_are_still_versions(local: LocalEmbedder) -> None:
    content = about(ExtractiveLLM(local), "Notes", "The test passed.",
                    "The test did not pass.")
    assert content.split("\n\n")[-1] == "Current state (2026-11-12): The test did not pass."
    assert not extractive._past_event(extractive._Sentence("Ted lives in Leeds.", date.min, 0))
    assert extractive._past_event(extractive._Sentence("Ted moved to Leeds.", date.min, 0))


@pytest.mark.parametrize("first, second", [
    ("Note: buy milk.", "Note: call Ana."),
    ("Todo: fix bike.", "Todo: renew insurance."),
    ("Dinner: pasta.", "Dinner: curry."),
    ("Dinner: pasta.", "Lunch: salad."),
    ("Today: gym.", "Today: dentist."),
])
def test_notes_of_a_generic_meal_or_time_slot_label_are_no_versions(local: LocalEmbedder,
                                                                    first: str,
                                                                    second: str) -> None:
    # two things to do, two dinners: the later was written as the "Current state" of the
    # earlier, as if the milk no longer needed buying once Ana was to be called
    content = about(ExtractiveLLM(local), "Notes", first, second)
    assert plain_sentences(content) == [first, second]
    assert "Current state" not in content


@pytest.mark.parametrize("first, second", [
    ("Meeting: 10:30.", "Meeting: 11:00."),
    ("Lunch spot: Taco Town.", "Lunch spot: Noodle Bar."),
    ("Job: barista.", "Job: accountant."),
])
def test_a_label_that_names_an_attribute_is_still_versioned(local: LocalEmbedder, first: str,
                                                            second: str) -> None:
    content = about(ExtractiveLLM(local), "Notes", first, second)
    assert content.split("\n\n")[-1] == f"Current state (2026-11-12): {second}"


@pytest.mark.parametrize("first, second", [
    ("Ines plays the violin.", "Ines switched to the cello."),
    ("Ines plays the violin.", "Ines changed to the cello."),
    ("Ravi uses Gmail.", "Ravi now uses Proton Mail instead."),
    # no name: the owner is the subject; a name for a name in one change's frame
    ("Moved to Lyon.", "Moved to Paris."),
    ("Mia switched to Proton Mail.", "Mia switched back to Gmail."),
])
def test_a_change_verb_makes_the_later_the_current_state(local: LocalEmbedder, first: str,
                                                         second: str) -> None:
    # cosine 0.66-0.74, below the version threshold, or two events in the past: both stayed
    # in the timeline with no current state, so the violin read as true as the cello
    content = about(ExtractiveLLM(local), "Notes", first, second)
    assert plain_sentences(content) == [first, second]
    assert content.split("\n\n")[-1] == f"Current state (2026-11-12): {second}"


@pytest.mark.parametrize("first, second", [
    ("Ordered a pizza.", "Ordered a taxi."),
    ("Ines plays the violin.", "Ines switched to a new violin teacher."),
    ("Ines lives in Berlin.", "Ines started working at Globex."),
    ("Ines started working on a novel.", "Ines started working at the library."),
    ("Switched to decaf.", "Switched to night shifts."),
    ("Switched off the heating.", "Switched off the lights."),
])
def test_a_change_of_something_else_is_no_version(local: LocalEmbedder, first: str,
                                                  second: str) -> None:
    content = about(ExtractiveLLM(local), "Notes", first, second)
    assert plain_sentences(content) == [first, second]
    assert "Current state" not in content


def test_one_change_in_other_change_words_is_a_restatement(local: LocalEmbedder) -> None:
    # cosine 0.97: "switched" / "changed" read as a value swapped, so with the past-event
    # rule lifted for changes the later was written as the current state of the earlier
    kept = merged(ExtractiveLLM(local), "Kemal switched to night shifts.",
                  "Kemal changed to night shifts.")
    assert len(kept) == 1


def test_which_sentences_tell_of_a_change() -> None:
    assert extractive._changed_to("Ines switched to the cello.") == "cello"
    assert extractive._changed_to("Ines switched to a cheaper phone plan.") == "plan"
    assert extractive._changed_to("Ravi now uses Proton Mail instead.") == "mail"
    assert extractive._changed_to("Ines started working at the library.") == "library"
    for text in ("Moved the sofa to the window.", "Switched off the lights.",
                 "Ines started working on a novel.", "Ines plays the cello now."):
        assert extractive._changed_to(text) is None
    wish = extractive._Sentence("Ines might have switched to the cello.", date.min, 0)
    assert wish.change is None


@pytest.mark.parametrize("titles", [("Move: Settling in", "Move: A month on"),
                                    ("Notes", "Notes")])
def test_a_title_is_not_the_main_person(local: LocalEmbedder, titles: tuple[str, str]) -> None:
    # "Move" (or "Notes") opened both titles, more often than "Ana" opened a sentence, so
    # it was taken for the person the cluster is about: the unnamed note was read as the
    # title's, not Ana's, and her new distance was no version of her old one
    members = [MergeMember(f"ep_202611{10 + 2 * i}_0001",
                           datetime(2026, 11, 10 + 2 * i, 10, tzinfo=UTC), title, text)
               for i, (title, text) in enumerate(zip(titles, ("Ana runs 5 km a day.",
                                                              "Now runs 10 km a day."),
                                                     strict=True))]
    content = ExtractiveLLM(local).merge(MergeRequest("init", members)).content
    assert content.split("\n\n")[-1] == "Current state (2026-11-12): Now runs 10 km a day."


@pytest.mark.parametrize("first, second", [
    ("Leo drives to work along the highway.", "Leo takes the highway when he drives to work."),
    ("Ben rides his bike to school.", "Ben cycles to school on his bike."),
    ("Theo takes a pottery class on Tuesdays.", "On Tuesdays Theo goes to a pottery class."),
])
def test_a_rewording_in_another_order_is_a_restatement(local: LocalEmbedder, first: str,
                                                       second: str) -> None:
    # most content words shared and one word for another ("rides" / "cycles") read as a value
    # swapped, though the shared words come in another order: the later was written as the
    # "Current state" of the earlier, a change that never happened
    for titles in ("Notes", "Theo: pottery"):
        content = about(ExtractiveLLM(local), titles, first, second)
        assert len(plain_sentences(content)) == 1, content
