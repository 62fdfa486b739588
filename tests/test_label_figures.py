"""The label figures of a round (``diagevo.train.labels``): how often the retained questions'
pseudo-labels are right and how many of the solver's positive rewards go to wrong answers, where
the world knows the truth. By hand on a made-up world; then on simulator runs, recomputed from
the log, with the oracle reward (``solver.reward = "true_answer"``) and with
``challenger.known_questions_only``."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from diagevo.catalog import FailureRecorded, PhaseCompleted, QuestionGenerated, QuestionScored, RoundCommitted, of_type
from diagevo.curriculum.equivalence import agrees
from diagevo.log import open_log
from diagevo.memory.sampler import GenerationRequest
from diagevo.train.backend import Truth
from diagevo.train.config import load_config
from diagevo.train.labels import (
    LABEL_FIELDS,
    OUTSIDE,
    SHARED_LABEL_VOTES,
    audit_labels,
    draw_shared_questions,
    in_wrong_share,
    shared_label_accuracy,
    wrong_label,
)
from diagevo.train.run import TrainOptions, train
from diagevo.train.sim.backend import SimBackend, wrap
from tests.test_cli_memory import run_cli

ROOT = Path(__file__).resolve().parent.parent

WORLD = {
    "q1": Truth("5", "add"),
    "q2": Truth("7", "add"),
    "q3": Truth("10", None),  # an answer the world knows, of none of its skills
    "q5": Truth("3", "mul"),
}  # "q4": a text the world does not know


def test_label_figures_by_hand() -> None:
    audit = audit_labels(
        ["q1", "q2", "q3", "q4", "q5"],
        ["5", "8", "10", "1", None],  # right, wrong, right, unknown truth, no label
        [
            [r"\boxed{5}", r"\boxed{5}", r"\boxed{6}"],
            [r"\boxed{8}", r"\boxed{7}", r"\boxed{8}"],
            [r"\boxed{10}", r"\boxed{9}"],
            [r"\boxed{1}"],
            [r"\boxed{3}", r"\boxed{2}"],
        ],
        [[1.0, 1.0, -1.0], [1.0, -1.0, 1.0], [1.0, -1.0], [1.0], [-1.0, 0.0]],
        WORLD.get,
    )
    # labels: add 1 of 2 right (q1, not q2), outside 1 of 1 (q3), mul 0 of 1 (q5 has none); q4 unknown:
    # 2 of 4. Positive rewards: add 4 (q1's two right, q2's two on the wrong label 8), outside 1 (right),
    # mul none (a reward of 0 is no positive one), q4's unknown: 2 wrong of 5
    assert audit.summary() == {
        "retained_label_acc": 0.5,
        "retained_label_acc_by_skill": {"add": 0.5, OUTSIDE: 1.0, "mul": 0.0},
        "wrong_reward_share": 0.4,
        "wrong_reward_share_by_skill": {"add": 0.5, OUTSIDE: 0.0},
    }
    assert OUTSIDE == "outside"
    assert set(audit.summary()) == set(LABEL_FIELDS) <= set(RoundCommitted.model_fields)


def test_shared_label_accuracy_by_hand() -> None:
    """Figure 3(c): the majority of each shared question's responses against its true answer."""
    figures = shared_label_accuracy(
        ["q1", "q2", "q3", "q4", "q5"],
        [
            [r"\boxed{5}", r"\boxed{6}", r"\boxed{5}"],  # majority 5: right
            [r"\boxed{8}", r"\boxed{8}", r"\boxed{7}"],  # majority 8: wrong (a shared error)
            [r"\boxed{10}"],  # right, of no skill of the world
            [r"\boxed{1}"],  # the truth unknown: left out
            ["no answer", "none either"],  # no label at all: wrong
        ],
        WORLD.get,
    )
    # add 1 of 2, outside 1 of 1, mul 0 of 1: 2 of 4
    assert figures == {
        "pseudo_label_acc": 0.5,
        "pseudo_label_acc/add": 0.5,
        f"pseudo_label_acc/{OUTSIDE}": 1.0,
        "pseudo_label_acc/mul": 0.0,
    }
    assert shared_label_accuracy(["q4"], [[r"\boxed{1}"]], WORLD.get) == {}  # absent, not zero
    assert SHARED_LABEL_VOTES == 12  # the paper's: as many as curriculum construction


def test_the_shared_questions_are_the_first_distinct_gradable_ones_and_fixed_by_the_seed() -> None:
    def outputs(rng: random.Random) -> list[str]:
        return [f"<question>q{rng.randint(1, 6)}</question>" for _ in range(4)] + ["no question"]

    known = lambda q: q in WORLD  # noqa: E731
    drawn = draw_shared_questions(outputs, known, 3, seed=7)
    assert len(drawn) == 3 == len(set(drawn)) and set(drawn) <= set(WORLD)
    assert drawn == draw_shared_questions(outputs, known, 3, seed=7)  # every arm and round of a seed: the same
    # fewer than asked where the challenger writes no more: all it could grade
    assert set(draw_shared_questions(outputs, known, 10, seed=7, tries=50)) == set(WORLD)
    seeds = {tuple(draw_shared_questions(outputs, known, 3, seed=s)) for s in range(8)}
    assert len(seeds) > 1  # another seed, another set


def test_no_figure_where_the_truth_is_never_known() -> None:
    audit = audit_labels(["q4", "q6"], ["1", "2"], [[r"\boxed{1}"], [r"\boxed{3}"]], [[1.0], [-1.0]], WORLD.get)
    assert audit.summary() == {}
    # a known question with no positive reward: a label figure, no reward figure
    audit = audit_labels(["q1"], ["6"], [[r"\boxed{5}"]], [[-1.0]], WORLD.get)
    assert audit.summary() == {"retained_label_acc": 0.0, "retained_label_acc_by_skill": {"add": 0.0}}


# --- on the simulator ------------------------------------------------------------------------


SMALL = ("train.challenger_questions=16", "train.curriculum_questions=48")


def sim_run(
    tmp_path: Path, name: str, sets: Sequence[str] = (), world: type[SimBackend] = SimBackend, rounds: int = 2
) -> SimBackend:
    """A simulator run ``name`` of small rounds into ``tmp_path/NAME.db``; the backend it ran on,
    whose registry then knows every question text it wrote."""
    cfg = load_config(
        ROOT / "configs" / "sim.toml",
        [
            *SMALL,
            f"train.rounds={rounds}",
            f'train.run="{name}"',
            f'train.out_dir="{tmp_path / "ckpt"}"',
            *sets,
        ],
    )
    backend = world(cfg)
    with open_log(f"sqlite:///{tmp_path / name}.db") as store:
        train(cfg, store, TrainOptions(backend=backend))
    return backend


def stats_rows(capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str) -> list[dict[str, Any]]:
    code, out, err = run_cli(capsys, "memory", "stats", "--db", f"sqlite:///{tmp_path / name}.db", "--json")
    assert code == 0, err
    rows: list[dict[str, Any]] = json.loads(out)["rounds"]
    return rows


def scored_texts(tmp_path: Path, name: str) -> list[tuple[int, str, QuestionScored]]:
    """(round, question text, its question.scored) of every scored question of the run."""
    with open_log(f"sqlite:///{tmp_path / name}.db", readonly=True) as store:
        events = list(store.read(name, types=(QuestionGenerated, QuestionScored), texts=True))
    text = {e.event.question_id: e.event.text for e in events if isinstance(e.event, QuestionGenerated)}
    return [(e.round, text[e.event.question_id], e.event) for e in events if isinstance(e.event, QuestionScored)]


def test_memory_stats_has_the_label_figures_the_log_gives(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each round's retained_label_acc (overall and by skill) is the share of its retained
    questions (question.scored, retained) whose pseudo-label is the simulator's true answer."""
    backend = sim_run(tmp_path, "labels")
    rows = stats_rows(capsys, tmp_path, "labels")
    assert [r["round"] for r in rows] == [1, 2]
    tally: dict[int, dict[str, list[bool]]] = {1: {}, 2: {}}
    for t, text, scored in scored_texts(tmp_path, "labels"):
        known = backend.truth(text)
        if scored.retained and known is not None:
            tally[t].setdefault(known.skill or OUTSIDE, []).append(agrees(scored.pseudo_label, known.answer))
    for row in rows:
        by_skill = tally[row["round"]]
        every = [ok for oks in by_skill.values() for ok in oks]
        assert len(every) > 10  # the round retained questions of the world's own
        assert math.isclose(row["retained_label_acc"], sum(every) / len(every))
        for skill, oks in by_skill.items():
            assert math.isclose(row[f"retained_label_acc/{skill}"], sum(oks) / len(oks))
        assert 0.0 <= row["wrong_reward_share"] <= 1.0
        shares = [v for k, v in row.items() if k.startswith("wrong_reward_share/")]
        assert shares and min(shares) <= row["wrong_reward_share"] <= max(shares)


def test_the_true_answer_as_reward_pays_no_wrong_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The oracle arm: with the world's answer as the reward, no positive reward is for a wrong
    answer; with the pseudo-label (the paper's), the same world pays some (in one of three small
    rounds: a round's votes may all be right)."""
    sim_run(tmp_path, "voted", rounds=3)
    sim_run(tmp_path, "oracle", ['solver.reward="true_answer"'], rounds=3)
    voted, oracle = stats_rows(capsys, tmp_path, "voted"), stats_rows(capsys, tmp_path, "oracle")
    assert any(r["wrong_reward_share"] > 0 for r in voted)
    assert [r["round"] for r in oracle] == [1, 2, 3]
    assert [r["wrong_reward_share"] for r in oracle] == [0.0, 0.0, 0.0]
    # the labels measured are still the votes' (the oracle changes the reward, not the labels)
    assert all(0.0 <= r["retained_label_acc"] <= 1.0 for r in oracle)


def test_the_control_s_wrong_label_by_hand() -> None:
    """``solver.wrong_label_share``'s label: the world's shared error where it names one, else the
    group's most common wrong answer (the first given on ties), else the true answer."""
    carry = Truth("85", "add_c", shared_error="75")
    assert wrong_label(carry, [r"\boxed{85}", r"\boxed{84}", r"\boxed{84}"]) == "75"  # the world's, not 84
    product = Truth("266", "mul")
    group = [r"\boxed{266}", r"\boxed{259}", r"\boxed{256}", r"\boxed{256}", r"\boxed{259}", "no answer"]
    assert wrong_label(product, group) == "259"  # 259 and 256 twice each: 259 came first
    assert wrong_label(product, [r"\boxed{266}", r"\boxed{266.0}", "no answer"]) == "266"  # nothing wrong to pay


def test_the_control_s_share_is_a_draw_of_the_seed_and_the_question_alone() -> None:
    questions = [f"{a}+{b}=" for a in range(10, 100) for b in range(10, 100)]  # 8,100
    drawn = [q for q in questions if in_wrong_share(0, q, 0.3)]
    assert abs(len(drawn) / len(questions) - 0.3) < 0.02
    assert drawn == [q for q in reversed(questions) if in_wrong_share(0, q, 0.3)][::-1]  # the order does not matter
    assert set(drawn) != {q for q in questions if in_wrong_share(1, q, 0.3)}  # another seed, other questions
    assert not any(in_wrong_share(0, q, 0.0) for q in questions)
    assert {q for q in questions if in_wrong_share(0, q, 0.1)} <= set(drawn)  # a larger share adds questions


def test_the_mini_world_s_shared_errors_are_its_weak_skills_systematic_ones() -> None:
    from diagevo.train.mini.world import truth

    assert truth("47+38=") == Truth("85", "add_c", shared_error="75")  # the carry dropped
    assert truth("83-47=") == Truth("36", "sub_b", shared_error="46")  # the borrow forgotten
    assert truth("7*38=") == Truth("266", "mul")  # none named: the group's most common wrong answer


def test_a_chosen_share_of_wrong_labels_pays_wrong_answers_and_needs_the_true_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The control of chosen label accuracy: the oracle's reward with half the questions paid a
    wrong answer gives wrong answers positive rewards where the oracle gives none; without the
    true answer as the reward it is a config error naming the key."""
    from diagevo.config.errors import ConfigError

    sim_run(tmp_path, "half", ['solver.reward="true_answer"', "solver.wrong_label_share=0.5"])
    rows = stats_rows(capsys, tmp_path, "half")
    assert all(r["wrong_reward_share"] > 0.05 for r in rows)
    with pytest.raises(ConfigError, match="wrong_label_share needs reward = true_answer"):
        load_config(ROOT / "configs" / "sim.toml", ["solver.wrong_label_share=0.5"])


UNKNOWN = "What is the airspeed velocity of an unladen swallow {i}?"


class StrangeQuestions(SimBackend):
    """The simulator, whose challenger also writes every third question in words the world does
    not know (its solver answers those with guesses, no truth)."""

    def generate(self, requests: Sequence[GenerationRequest], rng: random.Random) -> list[str]:
        out = super().generate(requests, rng)
        return [wrap(UNKNOWN.format(i=i)) if i % 3 == 0 else o for i, o in enumerate(out)]


@pytest.mark.parametrize("known_only", [False, True])
def test_known_questions_only_leaves_the_world_s_unknown_questions_out(tmp_path: Path, known_only: bool) -> None:
    sets = [f"challenger.known_questions_only={str(known_only).lower()}"]
    backend = sim_run(tmp_path, "known", sets, StrangeQuestions)
    texts = [text for _, text, _ in scored_texts(tmp_path, "known")]
    unknown = [text for text in texts if backend.truth(text) is None]
    assert texts and {t for t in unknown if t.startswith("What is the airspeed")} == set(unknown)
    if known_only:
        assert unknown == []
    else:  # the same world without the switch: its unknown questions are scored
        assert unknown


def test_anchors_join_the_solvers_questions_and_are_no_evidence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``solver.anchor_share``: confident questions (p1 above p_high) join the retained ones,
    ``share / (1 - share)`` of them per retained question while the round has them; none is
    recorded as a failure, and the log verifies (a failure of an unretained question would not)."""
    sim_run(tmp_path, "anchored", ["solver.anchor_share=0.5"])
    sim_run(tmp_path, "plain")
    with open_log(f"sqlite:///{tmp_path / 'anchored'}.db", readonly=True) as store:
        events = list(store.read("anchored", types=(QuestionScored, FailureRecorded, PhaseCompleted)))
    for t in (1, 2):
        scored = [e.event for e in events if e.round == t and isinstance(e.event, QuestionScored)]
        retained = {s.question_id for s in scored if s.retained}
        confident = [s for s in scored if not s.retained and s.pseudo_label is not None and s.p1 > 0.75]
        (solver,) = [
            e.event
            for e in events
            if e.round == t and isinstance(e.event, PhaseCompleted) and e.event.phase == "solver"
        ]
        assert solver.stats is not None
        assert solver.stats.get("anchors", 0) == min(len(confident), len(retained)) > 0
        failed = {e.event.question_id for e in events if e.round == t and isinstance(e.event, FailureRecorded)}
        assert failed and failed <= retained
    with open_log(f"sqlite:///{tmp_path / 'plain'}.db", readonly=True) as store:
        phases = [e.event for e in store.read("plain", types=(PhaseCompleted,)) if e.event.phase == "solver"]
    assert phases and all("anchors" not in (p.stats or {}) for p in phases)
    code, _, err = run_cli(capsys, "memory", "verify", "--db", f"sqlite:///{tmp_path / 'anchored'}.db")
    assert code == 0, err


def test_the_shared_label_accuracy_reaches_stats_diff_and_the_round_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Figure 3(c)'s figure, as each round's commit holds it: in ``memory stats`` (its column
    ``shared lab``), side by side in ``memory diff`` of two runs of one database, and absent (not
    zero) from a run whose commits lack it."""
    sim_run(tmp_path, "labels", rounds=1)
    db = f"sqlite:///{tmp_path / 'labels'}.db"
    with open_log(db) as store:
        (commit,) = of_type(RoundCommitted, store.rows("labels", types=(RoundCommitted,)))
    assert commit.pseudo_label_acc is not None and 0 < commit.pseudo_label_acc <= 1
    (row,) = stats_rows(capsys, tmp_path, "labels")
    assert row["pseudo_label_acc"] == commit.pseudo_label_acc
    code, out, err = run_cli(capsys, "memory", "stats", "--run", "labels", "--db", db)
    assert code == 0 and "shared lab" in out, err
    code, out, err = run_cli(capsys, "memory", "fork", "--run", "labels", "--round", "1", "--to", "copy", "--db", db)
    assert code == 0, err
    code, out, err = run_cli(capsys, "memory", "diff", "--run", "labels", "--run", "copy", "--db", db, "--json")
    assert code == 0, err
    sides = json.loads(out)["schedule"]
    assert sides["labels"]["pseudo_label_acc"] == sides["copy"]["pseudo_label_acc"] == commit.pseudo_label_acc
    assert sides["labels"]["heldout_acc"] == commit.heldout_acc
    code, out, err = run_cli(capsys, "memory", "diff", "--run", "labels", "--run", "copy", "--db", db)
    assert code == 0 and "shared label acc (Fig. 3c)" in out and f"{commit.pseudo_label_acc:.3f}" in out, err


def test_the_initial_labeler_votes_as_the_run_started(tmp_path: Path) -> None:
    """``filter.labeler = "initial"``: the labels of round 1 are the solver's (it has not trained
    yet); from round 2 on the votes come from the run's first solver, so they differ from the
    trained solver's: the same questions, scored otherwise."""
    plain = sim_run(tmp_path, "plain", rounds=2)
    first = sim_run(tmp_path, "first", ['filter.labeler="initial"'], rounds=2)
    a, b = scored_texts(tmp_path, "plain"), scored_texts(tmp_path, "first")
    assert [s for t, _, s in a if t == 1] == [s for t, _, s in b if t == 1]
    assert [s for t, _, s in a if t == 2] != [s for t, _, s in b if t == 2]
    # the backend's own: after training, the initial votes are an untrained world's, the others are not
    texts = [text for t, text, _ in b if t == 2][:40]
    fresh = SimBackend(first.config)
    fresh.registry = first.registry
    assert first.sample(texts, 8, random.Random(5), initial=True) == fresh.sample(texts, 8, random.Random(5))
    assert first.sample(texts, 8, random.Random(5)) != fresh.sample(texts, 8, random.Random(5))
    assert plain.config.filter.labeler == "solver"
