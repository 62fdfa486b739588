"""The database's rules and the Python rules judge a hostile log alike (issue 61, item 2).

PostgreSQL restates the fold's and ingest's rules in SQL (migrations 0013, 0014, 0016) so that a
role that may only INSERT into ``events`` (the trainer's) cannot write a log its readers stop on.
The hostile-log property (:mod:`tests.test_hostile_logs`: one or two mutations of a real log)
holds the two to each other: each mutated log of run ``m`` is appended raw (no check but the
store's own) to SQLite, where ``memory verify`` judges it, and as the trainer to PostgreSQL, where
the triggers do. A log the database refuses is one ``memory verify`` names; whatever else the
Python rules refuse, the database refuses too, but for the checkpoint rule, which is Python's alone
(issue 73): a checkpoint row the database takes and the rule refuses is passed over by every
reader of checkpoints, named (:func:`diagevo.views.checkpoints.checkpoint_log`).
"""

from __future__ import annotations

import itertools
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from diagevo.errors import BadInput
from diagevo.interchange import EXPORT_ONLY_FIELDS
from diagevo.log import StoreError, open_log
from diagevo.memory.checkpoints import CHECKPOINT_RULES
from diagevo.schemas import EventIn
from diagevo.views.checkpoints import checkpoint_log
from diagevo.views.verify import verify_run
from tests.test_hostile_logs import Base, Line, base, hostile  # noqa: F401 - the fixture
from tests.test_log_trainer_role import Roles, roles  # noqa: F401 - the fixture

pytestmark = pytest.mark.postgres

EXAMPLES = int(os.environ.get("DIAGEVO_HOSTILE_EXAMPLES", "25"))
_RUNS = itertools.count()  # one database for every case (a shrink's too): a run each


def _appended(url: str, lines: list[Line], run: str) -> bool:
    """The lines appended as one raw batch, run ``m``'s as run ``run``: whether the store took them."""
    raw = [{k: v for k, v in line.items() if k not in EXPORT_ONLY_FIELDS} for line in lines]
    events = [EventIn.model_construct(**(line | ({"run": run} if line["run"] == "m" else {}))) for line in raw]
    try:
        with open_log(url, create=False) as store:
            store.append(events)
    except (BadInput, StoreError):
        return False
    return True


def python_refuses(base: Base, lines: list[Line]) -> list[str] | None:  # noqa: F811 - the fixture's value
    """The Python rules' verdict: what ``memory verify`` names (``["the store refused them"]``:
    the store refuses the lines), None when it names nothing."""
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{Path(tmp) / 'x.db'}"
        with open_log(db):
            pass
        assert _appended(db, base.o, "o")
        if not _appended(db, lines, "m"):
            return ["the store refused them"]
        with open_log(db, create=False) as store:
            return verify_run(store, "m") or None


@pytest.fixture
def trainer(roles: Roles, base: Base) -> Roles:  # noqa: F811 - the imported fixtures
    """Run ``o`` in the database, by its owner; run ``m``'s mutations go in as the trainer."""
    assert _appended(roles.owner_url, base.o, "o")
    return roles


@seed(61)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_database_refuses_a_hostile_log_the_python_rules_refuse(
    base: Base,  # noqa: F811
    trainer: Roles,
    data: st.DataObject,
) -> None:
    case = data.draw(hostile(base))
    run = f"m-{next(_RUNS)}"
    db_took = _appended(trainer.trainer_url, case.lines, run)
    named = python_refuses(base, case.lines)
    if db_took and named and all(any(f": {rule}: " in p for rule in CHECKPOINT_RULES) for p in named):
        with open_log(trainer.trainer_url, create=False) as store:  # the readers pass them over
            assert checkpoint_log(store, run).passed, (named, case)
        return
    assert (named is not None) == (not db_took), (
        f"{'the database took' if db_took else 'the database refused'} what the Python rules "
        f"{'refuse' if db_took else 'accept'}: {case!r}"
    )


def test_the_unmutated_log_goes_in_as_the_trainer(base: Base, trainer: Roles) -> None:  # noqa: F811
    """The property's baseline: the log every case mutates is one both sides accept."""
    assert not python_refuses(base, base.m)
    assert _appended(trainer.trainer_url, base.m, "m-whole")
