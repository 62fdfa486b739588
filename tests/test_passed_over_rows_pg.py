"""No row the trainer role writes stops a reader (issue 73, on PostgreSQL, as the trainer with the
documented grants): the database reads every JSON number's value, so a number beyond a double's
range is refused however it is spelt (``1`` and 248 zeros ``e99`` passed the old check, whose
walk of the JSON only started when a regex saw 250 digits or a 3-digit exponent); a row that
slipped in while the checks were lifted is passed over by every reader, named by its seq; a
config the loader refuses that the database takes (``1e1``, which jsonb stores as ``10``) stops
no reader, and the round protocol refuses it naming the field; a ``seed`` below 0 and a round
below 0 are refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from diagevo.log import open_log
from tests.input_cases import cli
from tests.test_log_shapes_pg import open_round, raw_row, still_whole  # noqa: F401 - the fixture
from tests.test_log_trainer_role import Roles, insert, roles  # noqa: F401 - the fixture
from tests.test_log_usable_pg import _raw_data, _refused_raw
from tests.test_passed_over_rows import HUGE

pytestmark = pytest.mark.postgres

BEYOND = "its data holds a number beyond a double's range"


@pytest.mark.parametrize(
    "number",
    [HUGE, "1e309", "-1.8e308", "0.00000000001e320", "1.7976931348623159e308"],
    ids=["1 and 248 zeros e99", "1e309", "-1.8e308", "0.00000000001e320", "just past the largest double"],
)
@pytest.mark.parametrize(("type_", "rnd"), [("eval.recorded", 1), ("phase.completed", 2)], ids=["committed", "open"])
def test_a_number_beyond_a_double_is_refused_however_spelt(
    open_round: Roles,  # noqa: F811
    number: str,
    type_: str,
    rnd: int,
) -> None:
    """In a committed round's note and in the open round, at any depth; what a double holds
    (the largest, 1e300 written out, 1e-400, which reads as 0) goes in."""
    field = "metrics" if type_ == "eval.recorded" else "stats"
    phase = '"phase":"x",' if type_ == "phase.completed" else ""
    for deep in (number, f'{{"a":[1,{{"b":{number}}}]}}'):
        data = f'{{{phase}"{field}":{{"x":{deep}}}}}'
        row = _raw_data(open_round, type_, rnd, data)
        row["schema_version"] = 2  # the figures in one field (the type's version 2)
        assert _refused_raw(open_round, _rehash(row)) == BEYOND
    for fits in ("1.7976931348623157e308", "-1.7976931348623157e308", "1" + "0" * 300, "1e-400"):
        row = _raw_data(open_round, type_, rnd, f'{{{phase}"{field}":{{"x":{fits}}}}}')
        row["schema_version"] = 2
        insert(open_round.trainer, _rehash(row))
    still_whole(open_round)


def _rehash(row: dict[str, Any]) -> dict[str, Any]:
    """The row's hash again, after its ``schema_version`` changed."""
    from diagevo.log.chain import canonical_event_json, chain_hash

    canonical = canonical_event_json(
        row["event_id"], row["run_id"], row["round"], row["type"], row["schema_version"], row["data"]
    )
    return row | {"hash": chain_hash(row["prev_hash"], canonical)}


def _slipped_in(roles: Roles, data: str) -> int:  # noqa: F811
    """A row the trainer wrote while the administrator had lifted the checks: its seq."""
    with roles.admin.connect() as conn:
        conn.execute(text(f"ALTER TABLE {roles.schema}.events DISABLE TRIGGER events_check_chain"))
    try:
        insert(roles.trainer, _raw_data(roles, "eval.recorded", 1, data))
    finally:
        with roles.admin.connect() as conn:
            conn.execute(text(f"ALTER TABLE {roles.schema}.events ENABLE TRIGGER events_check_chain"))
    with open_log(roles.owner_url, create=False) as log:
        return log.last_seq("base")


def _readers(url: str, root: Path) -> list[tuple[str, ...]]:
    return [
        (*command, "--db", url)
        for command in (
            ("memory", "show", "--run", "base"),
            ("memory", "stats", "--run", "base", "--json"),
            ("memory", "replay", "--round", "1", "--run", "base"),
            ("memory", "why", "C1", "--run", "base"),
            ("memory", "events", "--run", "base", "--limit", "0"),
            ("report", "--run", "base", "-o", str(root / "r.html")),
            ("runs",),
            ("memory", "export", "--run", "base", "-o", str(root / "base.jsonl")),
        )
    ]


def test_a_row_past_the_lifted_checks_is_passed_over_by_the_trainers_readers(
    open_round: Roles,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Each reader, as the trainer, exits 0 and names it; ``memory verify`` names it; the round
    protocol asks for round 2's questions; round 1 reads as it did."""
    url = open_round.trainer_url
    code, before, err = cli("memory", "stats", "--run", "base", "--json", "--db", url)
    assert code == 0, err
    seq = _slipped_in(open_round, '{"metrics":{"x":' + HUGE + "}}")
    named = f"run 'base', seq {seq}: passed over: its data cannot be read: a number beyond a double's range"
    for command in _readers(url, tmp_path):
        code, out, err = cli(*command)
        assert code == 0, f"{' '.join(command[:-2])} exits {code}:\n{err[-2000:]}"
        if command[:2] in (("memory", "stats"), ("memory", "events"), ("report", "--run"), ("memory", "export")):
            assert named in err, (command, err)
    code, out, _ = cli("memory", "stats", "--run", "base", "--json", "--db", url)
    assert out == before
    code, out, _ = cli("memory", "verify", "--run", "base", "--db", url, "--json")
    assert code == 1 and json.loads(out)["problems"] == [
        f"seq {seq}: its data cannot be read: a number beyond a double's range (every reader passes it over)"
    ]
    code, out, err = cli("round", "requests", "--run", "base", "--n", "2", "--db", url)
    assert code == 0, err


def test_a_config_written_1e1_stops_no_reader_and_the_round_protocol_names_it(
    open_round: Roles,  # noqa: F811
    tmp_path: Path,
) -> None:
    """jsonb reads ``1e1`` as ``10``, so the database's check of a config (generated from its
    schema) takes it; Python reads 10.0, which an integer field refuses. Its readers read the
    run, ``memory verify`` names it, and the round protocol refuses the run in one line naming
    the field, writing nothing; a fork or a what-if past it passes it over, named."""
    url = open_round.trainer_url
    row = raw_row(url, "base", "run.configured", 2, {"config": {"k": 0.5, "solver": {"group_size": 10}}})
    row["data"] = row["data"].replace('"group_size":10', '"group_size":1e1')
    assert "1e1" in row["data"]
    insert(open_round.trainer, _rehash(row))
    with open_log(open_round.owner_url, create=False) as log:
        seq = log.last_seq("base")
    said = "solver.group_size: Input should be a valid integer (got 10.0)"
    for command in _readers(url, tmp_path):
        code, _, err = cli(*command)
        assert code == 0, f"{' '.join(command[:-2])} exits {code}:\n{err[-2000:]}"
    code, out, _ = cli("memory", "verify", "--run", "base", "--db", url, "--json")
    assert code == 1 and any(
        p.startswith(f"seq {seq}: run.configured's config cannot be used: {said}") for p in json.loads(out)["problems"]
    )
    code, _, err = cli("round", "requests", "--run", "base", "--n", "2", "--db", url)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 1 and len(lines) == 1 and said in lines[0] and f"seq {seq}" in lines[0], err
    with open_log(open_round.owner_url, create=False) as log:
        assert log.last_seq("base") == seq
    # the round committed past it (raw, as the trainer may): a copy of the run leaves it behind, named
    insert(open_round.trainer, raw_row(url, "base", "round.committed", 2, {}))
    for command in (
        ("memory", "fork", "--run", "base", "--round", "2", "--to", "base-f2"),
        ("memory", "whatif", "--run", "base", "--set", "memory.k=1.0", "--to", "base-k1"),
        ("memory", "show", "--run", "base-f2"),
        ("memory", "show", "--run", "base-k1"),
    ):
        code, _, err = cli(*command, "--db", url)
        assert code == 0, err
        if command[1] in ("fork", "whatif"):
            assert f"run 'base', seq {seq}: passed over: run.configured's config cannot be used: {said}" in err, err


@pytest.mark.parametrize(
    ("type_", "rnd", "data", "refusal"),
    [
        (
            "run.configured",
            2,
            {"config": {"k": 0.5}, "seed": -5},
            "its data.seed is out of its range (run.configured: >= 0)",
        ),
        ("run.noted", -1, {"note": "before the start"}, "its round is negative"),
        ("question.scored", 2, {"question_id": "q1", "n": 0, "p1": 0.5, "p2": 0.5, "retained": True}, "its data.n"),
    ],
    ids=["a seed of -5", "a note of round -1", "a question scored of 0 answers"],
)
def test_a_value_below_its_bound_is_refused(
    open_round: Roles,  # noqa: F811
    type_: str,
    rnd: int,
    data: dict[str, Any],
    refusal: str,
) -> None:
    with pytest.raises(Exception, match="diagevo: refused event") as caught:
        insert(open_round.trainer, raw_row(open_round.trainer_url, "base", type_, rnd, data))
    assert refusal in str(getattr(caught.value, "orig", caught.value)).splitlines()[0]
    insert(open_round.trainer, raw_row(open_round.trainer_url, "base", "run.configured", 2, {"config": {"k": 0.5}}))
    still_whole(open_round)
