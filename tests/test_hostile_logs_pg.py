"""The database and the Python rules judge a hostile log as one contract (issues 61 and 73).

The database keeps the log whole, whoever writes it: a role that may only INSERT into ``events``
(the trainer's) cannot write a row out of its type's shape, past the readers' bounds or off the
chain. The rules of the memory, the counting and the checkpoints are Python's alone. The
hostile-log property (:mod:`tests.test_hostile_logs`: one or two mutations of a real log) holds
the two to that contract: each mutated log of run ``m`` is appended raw (no check but the store's
own) to SQLite, where ``memory verify`` judges it, and as the trainer to PostgreSQL. What the
database refuses, the Python rules refuse; what it takes, ``memory verify`` of the database names
exactly when it names it on SQLite, and no reader of the memory, of the checkpoints or of the runs
stops on it: each passes over the rows the rules refuse, named.
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
from diagevo.views.checkpoints import checkpoint_log
from diagevo.views.memory import load_memory
from diagevo.views.runs import runs
from diagevo.views.verify import verify_run
from tests.logs import ForgedRow
from tests.test_hostile_logs import Base, Line, base, hostile, read_alike, readers, refused_rows  # noqa: F401
from tests.test_log_trainer_role import Roles, roles  # noqa: F401 - the fixture

pytestmark = pytest.mark.postgres

EXAMPLES = int(os.environ.get("DIAGEVO_HOSTILE_EXAMPLES", "25"))
# the readers that print or write what they read, run as the trainer (each a command's first words)
OUTPUTS = {("memory", "show"), ("memory", "stats"), ("memory", "why"), ("report", "--run"), ("export", "dataset")}
_RUNS = itertools.count()  # one database for every case (a shrink's too): a run each


def _appended(url: str, lines: list[Line], run: str) -> bool:
    """The lines appended as one raw batch, run ``m``'s as run ``run``: whether the store took them."""
    raw = [{k: v for k, v in line.items() if k not in EXPORT_ONLY_FIELDS} for line in lines]
    events = [ForgedRow(**(line | ({"run": run} if line["run"] == "m" else {}))) for line in raw]
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
def test_a_hostile_log_is_refused_by_the_database_or_named_and_passed_over(
    base: Base,  # noqa: F811
    trainer: Roles,
    data: st.DataObject,
) -> None:
    case = data.draw(hostile(base))
    run = f"m-{next(_RUNS)}"
    db_took = _appended(trainer.trainer_url, case.lines, run)
    named = python_refuses(base, case.lines)
    if not db_took:  # what the database refuses (out of shape), the Python rules refuse too
        assert named is not None, f"the database refused what the Python rules accept: {case!r}"
        return
    with open_log(trainer.trainer_url, create=False) as store:  # read as the trainer
        problems = verify_run(store, run)
        load_memory(store, run)  # the readers of the memory pass over what the fold refuses
        assert run in [r.run for r in runs(store)]  # diagevo runs lists it
        if named and all(any(f": {rule}: " in p for rule in CHECKPOINT_RULES) for p in named):
            assert checkpoint_log(store, run).refused, (named, case)
    assert bool(problems) == (named is not None), (
        f"verify of the database names {problems} where verify of the same rows in SQLite names {named}: {case!r}"
    )
    refused = refused_rows(trainer.trainer_url, run)  # what no reader run as the trainer may show
    with tempfile.TemporaryDirectory() as tmp:
        every = readers(Path(tmp), trainer.trainer_url, case.lines, False, run)
        commands = [c for c in every if c[:2] in OUTPUTS and not c[-3].endswith("-k1")]
        read_alike(Path(tmp), trainer.trainer_url, commands, refused, bool(problems))


def test_the_unmutated_log_goes_in_as_the_trainer(base: Base, trainer: Roles) -> None:  # noqa: F811
    """The property's baseline: the log every case mutates is one both sides accept."""
    assert not python_refuses(base, base.m)
    assert _appended(trainer.trainer_url, base.m, "m-whole")
