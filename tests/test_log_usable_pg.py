"""What the trainer's role writes stops no reader (issue 73): JSON past the readers' bounds is
refused by the database; a node the fold does not hold, a config no reader can use, a checkpoint
whose name is not its event's are named by ``memory verify`` by their seq and passed over by
every reader (the rules are Python's alone). And a row that slipped in past the database's check
(the guard lifted by an administrator) is named and passed over too.

Each case is a raw INSERT by the trainer (the documented grants) of a row whose chain and shape
are right; its legal counterpart goes in. Where ingest judges the same event, it refuses it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import text

from diagevo.interchange import IngestError, ingest
from diagevo.log import open_log
from diagevo.log.chain import canonical_event_json, chain_hash
from diagevo.rounds.runs import config_record
from diagevo.train.config import Config
from diagevo.views.admission import admission
from diagevo.views.memory import load_memory
from diagevo.views.runs import runs
from diagevo.views.verify import verdict
from tests.logs import Log
from tests.test_log_rules_pg import ingest_says, refused
from tests.test_log_shapes_pg import open_round, raw_row, still_whole  # noqa: F401 - the fixture
from tests.test_log_trainer_role import Roles, insert, roles  # noqa: F401 - the fixture

pytestmark = pytest.mark.postgres

DEEP = "[" * 1100 + "]" * 1100  # 2.2 KB
HUGE = "1" * 5000


def _raw_data(roles: Roles, type_: str, rnd: int, data_json: str) -> dict[str, Any]:  # noqa: F811
    """A row whose data is ``data_json`` as written (JSON Python would not write back), chained right."""
    row = raw_row(roles.trainer_url, "base", type_, rnd, {})
    row["data"] = data_json
    canonical = canonical_event_json(row["event_id"], "base", rnd, type_, 1, data_json)
    return row | {"hash": chain_hash(row["prev_hash"], canonical)}


def _refused_raw(roles: Roles, row: dict[str, Any]) -> str:  # noqa: F811
    with pytest.raises(Exception, match="diagevo: refused event") as caught:
        insert(roles.trainer, row)
    first = str(getattr(caught.value, "orig", caught.value)).splitlines()[0]
    return first.split(f"refused event {row['event_id']}: ", 1)[1]


def test_a_duplicate_node_created_is_refused(open_round: Roles) -> None:  # noqa: F811
    data = {"node_id": "N1", "label": "again"}
    assert refused(open_round, "node.created", 2, data) == "node 'N1' created twice"
    assert ingest_says(open_round, "node.created", 2, data) == "node 'N1' created twice"
    insert(
        open_round.trainer, raw_row(open_round.trainer_url, "base", "node.created", 2, {"node_id": "N2", "label": "n"})
    )
    still_whole(open_round)


def test_a_merge_of_a_node_with_itself_is_refused(open_round: Roles) -> None:  # noqa: F811
    data = {"survivor": "N1", "absorbed": "N1", "label": "l", "similarity": None}
    assert refused(open_round, "nodes.merged", 2, data) == "node N1 merged with itself"
    assert ingest_says(open_round, "nodes.merged", 2, data) == "node N1 merged with itself"
    still_whole(open_round)


@pytest.mark.parametrize(("survivor", "absorbed"), [("N1", "N9"), ("N9", "N1")])
def test_a_merge_with_an_unknown_node_is_refused(open_round: Roles, survivor: str, absorbed: str) -> None:  # noqa: F811
    data = {"survivor": survivor, "absorbed": absorbed, "label": "l", "similarity": None}
    assert refused(open_round, "nodes.merged", 2, data) == "unknown node 'N9'"
    assert ingest_says(open_round, "nodes.merged", 2, data) == "unknown node 'N9'"
    still_whole(open_round)


def test_a_merge_of_two_held_nodes_goes_in_and_the_absorbed_is_gone(open_round: Roles) -> None:  # noqa: F811
    url = open_round.trainer_url
    insert(open_round.trainer, raw_row(url, "base", "node.created", 2, {"node_id": "N2", "label": "n"}))
    merge = {"survivor": "N1", "absorbed": "N2", "label": "both", "similarity": 0.9}
    insert(open_round.trainer, raw_row(url, "base", "nodes.merged", 2, merge))
    assert refused(open_round, "cause.created", 2, {"cause_id": "C7", "node_id": "N2", "description": "d"}) == (
        "unknown node 'N2'"
    )
    insert(open_round.trainer, raw_row(url, "base", "node.created", 2, {"node_id": "N2", "label": "anew"}))
    with open_log(open_round.owner_url, create=False) as log:
        assert set(load_memory(log, "base").nodes) == {"N1", "N2"}
    still_whole(open_round)


def test_a_cause_under_an_unknown_node_is_refused(open_round: Roles) -> None:  # noqa: F811
    data = {"cause_id": "C7", "node_id": "N9", "description": "d", "failure_id": None}
    assert refused(open_round, "cause.created", 2, data) == "unknown node 'N9'"
    assert ingest_says(open_round, "cause.created", 2, data) == "unknown node 'N9'"
    still_whole(open_round)


CONFIGS: dict[str, tuple[dict[str, Any], str]] = {
    # (the config, the field the loader or the fold names)
    "k 0": ({"k": 0}, "k"),
    "k missing": ({"theta_up": 0.7}, "k"),
    "memory.k 0": ({"memory": {"k": 0}}, "k"),
    'theta_up "high"': ({"k": 0.5, "theta_up": "high"}, "theta_up"),
    "an unknown section": ({"k": 0.5, "evil": {"x": 1}}, "evil"),
    "an unknown field of a closed section": ({"k": 0.5, "memory": {"kk": 1}}, "kk"),
    "a count that is not whole": ({"k": 0.5, "train": {"rounds": 2.0}}, "train.rounds"),
}


@pytest.mark.parametrize("case", list(CONFIGS))
def test_a_run_configured_no_reader_can_use_is_refused(open_round: Roles, case: str) -> None:  # noqa: F811
    """``k`` 0 or missing, ``theta_up`` "high", an unknown section: named by verify and passed
    over by the readers (the config before it in force), refused by ingest; ``memory show`` of
    the run still folds."""
    config, field = CONFIGS[case]
    said = refused(open_round, "run.configured", 2, {"config": config})
    assert ("positive k" in said or "run.configured's config cannot be used: " in said) and field in said, said
    assert ingest_says(open_round, "run.configured", 2, {"config": config})  # ingest refuses it too
    with open_log(open_round.owner_url, create=False) as log:
        assert load_memory(log, "base").k == 0.5
    still_whole(open_round)


def test_a_usable_run_configured_goes_in(open_round: Roles) -> None:  # noqa: F811
    """diagevo's own stored config (every section, the components' tables) and a flat one."""
    full = config_record(Config())
    for config in ({"k": 0.25, "theta_up": 0.6}, {**full, "memory": {**full["memory"], "k": 0.3}}):
        insert(open_round.trainer, raw_row(open_round.trainer_url, "base", "run.configured", 2, {"config": config}))
    with open_log(open_round.owner_url, create=False) as log:
        assert load_memory(log, "base").k == 0.3
    still_whole(open_round)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ('{"accuracy":0.5,"x":' + DEEP + "}", "its data is JSON nested deeper than 64 levels"),
        ('{"accuracy":' + HUGE + "}", "its data holds a number beyond a double's range"),
    ],
    ids=["an eval.recorded nested 1,100 deep", "an eval.recorded holding a 5,000-digit number"],
)
def test_an_eval_recorded_past_the_readers_bounds_is_refused(open_round: Roles, data: str, reason: str) -> None:  # noqa: F811
    assert _refused_raw(open_round, _raw_data(open_round, "eval.recorded", 1, data)) == reason
    line = json.dumps({"type": "eval.recorded", "run": "base", "round": 1, "event_id": "e", "data": {}})
    with open_log(open_round.owner_url, create=False) as log, pytest.raises(IngestError, match="line 1: "):
        ingest(log, line.replace('"data": {}', f'"data": {data}') + "\n")  # ingest: past its own bounds
    ok = '{"accuracy":0.5,"x":' + "[" * 63 + "]" * 63 + ',"big":' + "9" * 300 + "}"  # 64 deep, 1e300
    insert(open_round.trainer, _raw_data(open_round, "eval.recorded", 1, ok))
    still_whole(open_round)


def _written(phase: str, path: str) -> dict[str, Any]:
    return {"path": path, "phase": phase, "bytes": 10}


def test_a_checkpoint_written_names_its_round_and_phase(open_round: Roles) -> None:  # noqa: F811
    url = open_round.trainer_url
    named = "checkpoint named by its event: checkpoint.written of round 2 after solver names"
    assert refused(open_round, "checkpoint.written", 2, _written("solver", "round001-solver")).startswith(
        f"{named} round001-solver, not round002-solver"
    )
    assert refused(open_round, "checkpoint.written", 2, _written("solver", "round002-challenger")).startswith(
        f"{named} round002-challenger, not round002-solver"
    )
    assert "phase" in refused(open_round, "checkpoint.written", 2, {"path": "round002-solver", "bytes": 1})
    insert(open_round.trainer, raw_row(url, "base", "checkpoint.written", 2, _written("solver", "round002-solver")))
    old = "/elsewhere/runs/base/round002-challenger"  # an older log's absolute path: its last part
    insert(open_round.trainer, raw_row(url, "base", "checkpoint.written", 2, _written("challenger", old)))
    still_whole(open_round)


def test_a_checkpoint_pruned_names_an_earlier_checkpoint_never_the_latest(roles: Roles) -> None:  # noqa: F811
    """Rounds 2 and 3 write the solver's checkpoints: round 3 may prune round 2's, never its own
    (the latest), nor one never written."""
    url = roles.trainer_url
    for t in (2, 3):
        insert(roles.trainer, raw_row(url, "base", "round.started", t, {}))
        insert(roles.trainer, raw_row(url, "base", "checkpoint.written", t, _written("solver", f"round{t:03d}-solver")))
        if t == 2:
            insert(roles.trainer, raw_row(url, "base", "round.committed", t, {}))

    def prune(path: str, at: int) -> dict[str, Any]:
        return {"path": path, "phase": "solver", "written_round": at, "bytes": 10}

    assert refused(roles, "checkpoint.pruned", 3, prune("round003-solver", 3)).startswith(
        "checkpoint pruned once written: checkpoint.pruned names round003-solver, the latest checkpoint of solver"
    )
    assert "round009-solver" in refused(roles, "checkpoint.pruned", 3, prune("round009-solver", 9))
    insert(roles.trainer, raw_row(url, "base", "checkpoint.pruned", 3, prune("round002-solver", 2)))
    with open_log(roles.owner_url, create=False) as log:  # the one taken: verify names only the two passed over
        assert len(verdict(log, "base").problems) == 2


def _slipped_in(roles: Roles, data: str) -> int:  # noqa: F811
    """A row past the guards (the administrator lifts them): its seq."""
    with roles.admin.connect() as conn:
        conn.execute(text(f"ALTER TABLE {roles.schema}.events DISABLE TRIGGER events_check_chain"))
    try:
        insert(roles.trainer, _raw_data(roles, "eval.recorded", 1, data))
    finally:
        with roles.admin.connect() as conn:
            conn.execute(text(f"ALTER TABLE {roles.schema}.events ENABLE TRIGGER events_check_chain"))
    with open_log(roles.owner_url, create=False) as log:
        return log.last_seq("base")


@pytest.mark.parametrize("data", ['{"x":' + DEEP + "}", '{"accuracy":' + HUGE + "}"], ids=["deep", "a huge number"])
def test_a_row_that_slipped_in_is_named_by_verify_and_passed_over_by_every_reader(roles: Roles, data: str) -> None:  # noqa: F811
    with open_log(roles.owner_url, create=False) as log:
        log.append(Log("other").node("N1").commit().events())
    seq = _slipped_in(roles, data)
    with open_log(roles.owner_url, create=False) as log:
        checked = verdict(log, "base")
        [problem] = checked.problems
        assert problem.startswith(f"seq {seq}: its data cannot be read: "), checked.problems
        assert problem.endswith(" (every reader passes it over)") and checked.way_back is None
        assert [s.run for s in runs(log)] == ["base", "other"]  # diagevo runs: every run
        assert load_memory(log, "other").committed == 1 and verdict(log, "other").ok
        assert seq not in [e.seq for e in log.read("base")] and not admission(log, "base").admits(seq)
