"""PostgreSQL roles keep their promise (issues 52 and 73): a memory change the fold refuses, a
``round.committed`` whose summary a reader cannot read, or a ``run.forked`` anywhere but at the
opening of a run a fork or what-if creates, INSERTed raw by the trainer's role, is refused by the
database (the summary's types) or named by its seq and passed over by every reader (the rules,
which are Python's alone): it stops no reader and moves no memory.

Each case is a raw INSERT by the trainer (the documented grants) of a row whose chain and shape
are right; its legal counterpart goes in and folds, so each test can fail both ways. Where ingest
judges the same event (the owner's Python path), it says what the readers say: one rule, one place."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from diagevo.catalog import RunForked
from diagevo.fork import fork_run
from diagevo.interchange import IngestError, copied_event, ingest
from diagevo.log import open_log
from diagevo.views.forks import is_whatif
from diagevo.views.memory import load_memory
from diagevo.views.verify import verify_run
from diagevo.whatif import what_if
from tests.input_cases import cli
from tests.logs import wire_event
from tests.test_log_shapes_pg import open_round, raw_row, still_whole  # noqa: F401 - the fixture
from tests.test_log_trainer_role import Roles, insert, refused_or_passed_over, roles  # noqa: F401 - the fixture

pytestmark = pytest.mark.postgres


def refused(roles: Roles, type_: str, rnd: int, data: dict[str, Any]) -> str:  # noqa: F811
    """The trainer's raw INSERT of this event is refused by the database, or named and passed
    over by its readers (:func:`~tests.test_log_trainer_role.refused_or_passed_over`): the reason."""
    return refused_or_passed_over(roles, raw_row(roles.trainer_url, "base", type_, rnd, data))


def ingest_says(roles: Roles, type_: str, rnd: int, data: dict[str, Any]) -> str:  # noqa: F811
    """What ingest (the owner's Python path) says of the same event, less its line number."""
    line = {"type": type_, "run": "base", "round": rnd, "event_id": f"ing-{uuid.uuid4().hex[:6]}", "data": data}
    with open_log(roles.owner_url, create=False) as log, pytest.raises(IngestError) as caught:
        ingest(log, json.dumps(line) + "\n")
    return str(caught.value).removeprefix("line 1: ")


FOLD_REFUSES: dict[str, tuple[str, int, dict[str, Any], str]] = {
    # (type, round, data, the reason): C1 is Active, round 2 open
    "a reactivation of an Active cause": (
        "cause.reactivated",
        2,
        {"cause_id": "C1", "failure_id": "f1"},
        "cause C1 reactivated but it is not Mastered",
    ),
    "a reactivation of an unknown cause": (
        "cause.reactivated",
        2,
        {"cause_id": "C9", "failure_id": "f1"},
        "unknown cause 'C9'",
    ),
    "an attribution to an unknown cause": (
        "failure.attributed",
        2,
        {"failure_id": "f1", "cause_id": "C9", "via": "dedup", "similarity": None},
        "unknown cause 'C9'",
    ),
    "a promotion of an unknown cause": (
        "cause.promoted",
        2,
        {"cause_id": "C9", "acc": 0.9, "n_candidates": 1},
        "unknown cause 'C9'",
    ),
    "a cause created twice": (
        "cause.created",
        2,
        {"cause_id": "C1", "node_id": "N1", "description": "again", "failure_id": None},
        "cause 'C1' created twice",
    ),
}


@pytest.mark.parametrize("case", list(FOLD_REFUSES))
def test_the_trainer_cannot_insert_a_change_the_fold_refuses(open_round: Roles, case: str) -> None:  # noqa: F811
    type_, rnd, data, reason = FOLD_REFUSES[case]
    assert refused(open_round, type_, rnd, data) == reason
    assert ingest_says(open_round, type_, rnd, data) == reason  # the owner's path: the same words
    still_whole(open_round)


def test_a_double_promotion_is_refused_and_a_reactivation_only_of_a_mastered_cause(open_round: Roles) -> None:  # noqa: F811
    """The legal sequence goes in (promote, reactivate, attribute) and folds; each step out of
    turn is refused with the fold's words."""
    url, promote = open_round.trainer_url, {"cause_id": "C1", "acc": 0.9, "n_candidates": 1}
    insert(open_round.trainer, raw_row(url, "base", "cause.promoted", 2, promote))
    assert refused(open_round, "cause.promoted", 2, promote) == "cause C1 promoted but it is not Active"
    attribute = {"failure_id": "f1", "cause_id": "C1", "via": "recurrence", "similarity": None}
    assert refused(open_round, "failure.attributed", 2, attribute) == (
        "failure f1 attributed to Mastered cause C1 without cause.reactivated"
    )
    insert(open_round.trainer, raw_row(url, "base", "cause.reactivated", 2, {"cause_id": "C1", "failure_id": "f1"}))
    insert(open_round.trainer, raw_row(url, "base", "failure.attributed", 2, attribute))
    insert(
        open_round.trainer,
        raw_row(url, "base", "cause.created", 2, {"cause_id": "C2", "node_id": "N1", "description": "d"}),
    )
    with open_log(open_round.owner_url, create=False) as log:
        mem = load_memory(log, "base")
    assert (mem.causes["C1"].active, mem.causes["C1"].frequency) == (True, 1) and mem.causes["C2"].active


@pytest.mark.parametrize(
    ("summary", "field"), [({"timing": [1]}, "timing"), ({"promotions": "many"}, "promotions"), ({"F": 1.5}, "F")]
)
def test_a_commit_whose_summary_readers_cannot_read_is_refused(
    open_round: Roles,  # noqa: F811
    summary: dict[str, Any],
    field: str,
) -> None:
    assert (
        refused(open_round, "round.committed", 2, summary) == f"its data.{field} is not of its type (round.committed)"
    )
    still_whole(open_round)


def test_a_commit_with_a_readable_summary_goes_in(open_round: Roles) -> None:  # noqa: F811
    summary = {"timing": {"solver": 1.5}, "promotions": 0, "heldout_acc": None, "epsilon_next": 1, "own": [1]}
    insert(open_round.trainer, raw_row(open_round.trainer_url, "base", "round.committed", 2, summary))
    with open_log(open_round.owner_url, create=False) as log:
        assert verify_run(log, "base") == [] and load_memory(log, "base").committed == 2


def _forked(roles: Roles, rnd: int) -> dict[str, Any]:  # noqa: F811
    """A what-if's ``run.forked`` naming base's commit of round 1, its seq and hash right."""
    with open_log(roles.owner_url, create=False) as log:
        commit = next(e for e in log.read("base") if e.type == "round.committed" and e.round == 1)
    return {
        "source_run": "base",
        "source_round": rnd,
        "source_hash": commit.hash,
        "source_seq": commit.seq,
        "whatif": {"settings": {}, "meaning": "x"},
    }


def test_a_run_forked_inserted_into_a_normal_run_is_refused(roles: Roles) -> None:  # noqa: F811
    """Right after base's commit (the attack of the issue: base "a what-if of itself"), and
    after its next round opened: both refused, base goes on."""
    data = _forked(roles, 1)
    reason = "run forked at its opening: run 'base' is in the database already: run.forked only opens a run a fork"
    assert "run 'base' names itself as its source" in refused(roles, RunForked.name, 1, data)  # verify's words
    assert ingest_says(roles, RunForked.name, 1, data).startswith(reason)
    still_whole(roles)  # round 2 opened by the trainer
    assert refused(roles, RunForked.name, 2, _forked(roles, 2)).startswith("run forked at its opening: ")
    still_whole(roles)
    with open_log(roles.owner_url, create=False) as log:  # base is no what-if of itself
        assert not is_whatif(log, "base")


def test_the_trainer_forks_and_writes_what_ifs(roles: Roles) -> None:  # noqa: F811
    """diagevo's fork and what-if, run as the trainer: their opening ``run.forked`` goes in."""
    with open_log(roles.trainer_url, create=False) as log:
        fork_run(log, "base", 1, "copy")
        made = what_if(log, "base", {"memory.theta_up": "0.6"})
    with open_log(roles.owner_url, create=False) as log:
        assert verify_run(log, "copy") == [] and verify_run(log, made.run) == []


@pytest.mark.parametrize(
    ("hash_", "refusal"),
    [
        (
            "0" * 64,
            "run forked at its opening: the commit of round 1 of run 'base' has another hash than the one it names",
        ),
        (None, None),
    ],
)
def test_a_run_opened_by_run_forked_names_its_source_commit(
    roles: Roles,  # noqa: F811
    hash_: str | None,
    refusal: str | None,
) -> None:
    """A new run that copies base through its commit of round 1 and ends in ``run.forked``,
    appended in one statement by the trainer through the plain append: the source's commit must
    be there with the hash it names."""
    data = _forked(roles, 1) | ({"source_hash": hash_} if hash_ else {})
    with open_log(roles.trainer_url, create=False) as log:
        copy = [copied_event(e, "base", "copy") for e in log.read("base", upto_seq=data["source_seq"], texts=True)]
        copy.append(wire_event(RunForked.name, "copy", 1, "copy/1/run.forked", **data))
        assert log.append(copy).appended == len(copy)
        problems = verify_run(log, "copy")
        load_memory(log, "copy")  # its readers do not stop
    if refusal is None:
        assert problems == []
    else:  # taken by the database, named by verify at its seq
        assert any(re.match(r"^seq \d+: ", p) and refusal in p for p in problems), problems


EVIDENCE: dict[str, tuple[str, int, dict[str, Any]]] = {
    # what migration 0019 refused before the baseline (issue 73): the counting rules' alone now
    "a question scored but never generated": (
        "question.scored",
        2,
        {"question_id": "q-ghost", "n": 12, "p1": 0.5, "p2": 0.5, "pseudo_label": "1", "retained": True},
    ),
    "a failure of a question its round did not retain": (
        "failure.recorded",
        2,
        {"failure_id": "f-ghost", "question_id": "q-ghost", "response": "r", "reference": "x"},
    ),
    "a failure diagnosed twice": (
        "failure.diagnosed",
        2,
        {"failure_id": "f-C1-1", "matched_cause": None, "error_cause": "again", "model": "m"},
    ),
    "a decision naming a cause the round did not promote": (
        "promotions.decided",
        2,
        {"promoted": ["C1"], "candidates": 1},
    ),
    "a free question naming a cause": (
        "question.generated",
        2,
        {"question_id": "q-free", "mode": "free", "active_cause": "C1", "mastered_cause": None, "text": "t"},
    ),
    "a diagnosis matching a cause the memory does not hold": (
        "failure.diagnosed",
        2,
        {"failure_id": "f-new", "matched_cause": "C9", "error_cause": None, "model": "m"},
    ),
}


@pytest.mark.parametrize("case", list(EVIDENCE))
def test_forged_evidence_is_named_and_stops_no_reader(open_round: Roles, case: str, tmp_path: Path) -> None:  # noqa: F811
    """Each as the trainer: taken by the database, named by ``memory verify`` by its seq (exit 1),
    and every other reader exits 0: ``memory stats``, ``show``, ``report``, ``runs``, ``round
    requests`` (the round protocol)."""
    type_, rnd, data = EVIDENCE[case]
    said = refused(open_round, type_, rnd, data)
    url = open_round.trainer_url
    with open_log(url, create=False) as log:
        seq = log.last_seq("base")
    code, out, _ = cli("memory", "verify", "--run", "base", "--db", url, "--json")
    assert code == 1 and any(p.startswith(f"seq {seq}: ") for p in json.loads(out)["problems"]), said
    for command in (
        ("memory", "stats", "--run", "base"),
        ("memory", "show", "--run", "base"),
        ("report", "--run", "base", "-o", str(tmp_path / "r.html")),
        ("runs",),
        ("round", "requests", "--run", "base", "--n", "2"),
    ):
        code, _, err = cli(*command, "--db", url)
        assert code == 0, f"{' '.join(command)} exits {code} on {case}:\n{err[-2000:]}"
