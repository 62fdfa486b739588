"""A ``batch.withdrawn`` written past the round protocol (raw into SQLite, or by PostgreSQL's
trainer role with a plain INSERT) is held to the rule the protocol holds a withdrawal to
(:func:`diagevo.views.withdrawn.withdrawal_problem`): one that takes back half a recorded batch
is applied by no reader and no step of the round (its questions stand: promotions, the commit's
counts), and every reader names it once, as ``memory verify`` does."""

from __future__ import annotations

import json
from typing import Any

import diagevo
from diagevo.log import open_log
from tests.input_cases import cli
from tests.test_log_trainer_role import roles  # noqa: F401 - the fixture (PostgreSQL's trainer role)
from tests.test_readers_take_what_the_fold_takes import RUN, Forged, forged  # noqa: F401 - the fixture


def _record_four(db: str) -> tuple[int, int]:
    """Round 2 of ``base``: four questions recorded in one append; the seqs of their batch."""
    with open_log(db, create=False) as store:
        rnd = diagevo.Round.open(store, RUN)
        reqs = rnd.requests(4)
        recorded = rnd.record(
            [
                diagevo.Candidate(
                    q.question_id,
                    q.mode,
                    f"what is {i} + {i}?",
                    active_cause=q.active_cause,
                    mastered_cause=q.mastered_cause,
                    answers=(str(2 * i),) * 5 + ("0",) * 3,
                )
                for i, q in enumerate(reqs, 1)
            ]
        )
    assert recorded.batch is not None
    first, last = map(int, recorded.batch.split("-"))
    return first, last


def test_a_withdrawal_of_half_a_batch_is_applied_by_no_reader_and_named(forged: Forged) -> None:  # noqa: F811 - the fixture
    first, last = _record_four(forged.db)
    assert last - first + 1 == 8  # four question.generated and four question.scored
    with open_log(forged.db, create=False) as store:
        rows = list(store.rows(RUN, after_seq=first - 1, upto_seq=first + 1))
    half: dict[str, Any] = {
        "first_seq": first,
        "last_seq": first + 1,
        "questions": [r.event.question_id for r in rows if r.type == "question.generated"],
        "failures": [],
        "counts": {"questions": 2},  # a lawful withdrawal's counts are taken back from the round's
        "reason": "forged",
    }
    seq = forged.forge("batch.withdrawn", 2, half)
    named = f"run {RUN!r}, seq {seq}: passed over: batch {first}-{first + 1} of round 2 of run {RUN!r} is not one"
    code, out, err = cli("memory", "stats", "--run", RUN, "--db", forged.db, "--json")
    assert code == 0 and err.count(named) == 1, err
    assert {r["round"]: r["questions"] for r in json.loads(out)["rounds"]}.get(2, 4) == 4
    with open_log(forged.db, create=False) as store:
        rnd = diagevo.Round.open(store, RUN)
        assert len(rnd.questions()) == 4  # the forged withdrawal took back none of them
        assert rnd.next_step == "promote"
        rnd.promote()
        assert rnd.commit().questions == 4
    code, out, err = cli("memory", "verify", "--run", RUN, "--db", forged.db, "--json")
    problems = json.loads(out)["problems"]
    assert code == 1 and any(f"seq {seq}:" in p and "not one recorded batch" in p for p in problems), problems
    code, out, err = cli("runs", "--db", forged.db, "--json")
    base = next(r for r in json.loads(out)["runs"] if r["run"] == RUN)
    assert [p["seq"] for p in base["passed_over"]].count(seq) == 1
