"""PostgreSQL roles keep their promise (issue 52, item 2): the trainer's role cannot INSERT a
memory change the fold refuses, a ``round.committed`` whose summary a reader cannot read, or a
``run.forked`` anywhere but at the opening of a run a fork or what-if creates.

Each case is a raw INSERT by the trainer (the documented grants) of a row whose chain, shape and
round are right, so only migration 0014's rules (or the summary's types) can refuse it; its legal
counterpart goes in, so each test can fail both ways. Where ingest judges the same event (the
owner's Python path), it says what the database says: one rule, two places."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from diagevo.catalog import RunForked
from diagevo.fork import fork_run
from diagevo.interchange import IngestError, ingest
from diagevo.log import StoreError, open_log
from diagevo.memory.fold import fold
from diagevo.views.verify import verify_run
from diagevo.whatif import what_if
from tests.logs import Log
from tests.test_log_shapes_pg import open_round, raw_row, still_whole  # noqa: F401 - the fixture
from tests.test_log_trainer_role import Roles, insert, roles  # noqa: F401 - the fixture

pytestmark = pytest.mark.postgres


def refused(roles: Roles, type_: str, rnd: int, data: dict[str, Any]) -> str:  # noqa: F811
    """The trainer's raw INSERT of this event is refused: the database's reason."""
    row = raw_row(roles.trainer_url, "base", type_, rnd, data)
    with pytest.raises(Exception, match="diagevo: refused event") as caught:
        insert(roles.trainer, row)
    first = str(getattr(caught.value, "orig", caught.value)).splitlines()[0]
    return first.split(f"refused event {row['event_id']}: ", 1)[1]


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
        mem = fold(log.rows("base"), "base")
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
        assert verify_run(log, "base") == [] and fold(log.rows("base"), "base").committed == 2


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
    assert refused(roles, RunForked.name, 1, data).startswith(reason)
    assert ingest_says(roles, RunForked.name, 1, data).startswith(reason)
    still_whole(roles)  # round 2 opened by the trainer
    assert refused(roles, RunForked.name, 2, _forked(roles, 2)) == (
        "run forked at its opening: run.forked (source round 2) does not follow the commit of round 2: only a fork "
        "or a what-if writes it, right after the rounds it copies"
    )
    still_whole(roles)


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
    """A new run whose opening ends in ``run.forked``, appended in one statement by the trainer
    through the plain append: the source's commit must be there with the hash it names."""
    data = _forked(roles, 1) | ({"source_hash": hash_} if hash_ else {})
    copy = Log("copy").node("N1").commit()
    copy.round = 1
    copy.add(RunForked.name, **data)
    with open_log(roles.trainer_url, create=False) as log:
        if refusal is None:
            assert log.append(copy.events()).appended == len(copy.events())
        else:
            with pytest.raises(StoreError, match=f"failed: diagevo: refused event copy-[0-9]+: {refusal}") as e:
                log.append(copy.events())
            assert "\n" not in str(e.value)  # the project's one-line error
            assert not log.has_run("copy")
