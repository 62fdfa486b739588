"""No stored row stops a reader (issue 73, on SQLite, where whoever may write the file may write any
row): a row no reader can take (a number beyond a double's range however it is spelt, data
nested past the readers' bounds or no JSON object, a round below 0) is passed over by every
reader, each naming it in one line (run, seq, why) and exiting 0, with nothing of the run's
valid rounds lost; ``memory verify`` names it (exit 1). A stored config the loader refuses
(``group_size: 1e1``) leaves every reader reading the run, a fork or a what-if passes it over,
and ``train --resume`` and the round protocol refuse the run in one line naming the field. A
``seed`` below 0 is named by verify. ``diagevo runs`` lists a run whose newest row no reader
can take with that row.

Each row is written raw into a copy of a real two-round run of ``diagevo train``."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from diagevo.catalog import RoundCommitted
from diagevo.interchange import export_lines
from diagevo.log import open_log
from diagevo.memory.state import Refusal
from diagevo.views.admission import admission
from tests.input_cases import cli
from tests.test_hostile_logs import SETS, store_raw
from tests.test_stored_rows_bounded import _raw

# 1 and 248 zeros e99: 1e347, 270 bytes; no run of 250 digits nor a 3-digit exponent
HUGE = "1" + "0" * 248 + "e99"


@dataclass(frozen=True)
class Base:
    """A run ``m`` of two rounds (its database and runs' folder), and what its readers showed."""

    folder: Path
    stats: list[dict[str, Any]]
    memory: dict[str, Any]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Base:
    root = tmp_path_factory.mktemp("passed")
    db = f"sqlite:///{root / 'x.db'}"
    code, _, err = cli("train", "--db", db, "--run", "m", "--rounds", "2", "--quiet", *SETS)
    assert code == 0, err
    return Base(root, *_valid_rounds(db))


@pytest.fixture()
def db(base: Base, tmp_path: Path) -> str:
    """A copy of the base run's database and folder (the checkpoints a resume loads)."""
    shutil.copy(base.folder / "x.db", tmp_path / "x.db")
    shutil.copytree(base.folder / "x.diagevo", tmp_path / "x.diagevo")
    return f"sqlite:///{tmp_path / 'x.db'}"


def _valid_rounds(db: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """What the readers show of rounds 1 and 2: their statistics and round 2's memory."""
    code, out, err = cli("memory", "stats", "--run", "m", "--json", "--db", db)
    assert code == 0, err
    stats = [r for r in json.loads(out)["rounds"] if r["round"] in (1, 2)]
    code, out, err = cli("memory", "replay", "--round", "2", "--run", "m", "--json", "--db", db)
    assert code == 0, err
    return stats, json.loads(out)


def _named(err: str, seq: int, why: str) -> bool:
    return f"run 'm', seq {seq}: passed over: {why}" in err


def readers(db: str, root: Path) -> dict[tuple[str, ...], bool]:
    """Every reader of run ``m`` -> whether it reads every row of the run (then it names a row
    it passed over): ``memory why`` of a cause of round 1, a fork at round 1, a what-if."""
    commands = {
        ("memory", "show", "--run", "m"): False,
        ("memory", "show", "--run", "m", "--json"): False,
        ("memory", "stats", "--run", "m"): True,
        ("memory", "stats", "--run", "m", "--json"): True,
        ("memory", "replay", "--round", "2", "--run", "m"): False,
        ("memory", "why", "C1", "--run", "m"): False,
        ("memory", "events", "--run", "m", "--limit", "0"): True,
        ("memory", "events", "--run", "m", "--limit", "0", "--json"): True,
        ("report", "--run", "m", "-o", str(root / "r.html")): True,
        ("memory", "export", "--run", "m", "-o", str(root / "m.jsonl")): True,
        ("export", "dataset", "--run", "m", "-o", str(root / "ds")): False,
        ("memory", "whatif", "--run", "m", "--set", "memory.k=1.0", "--to", "m-k1"): False,
        ("memory", "show", "--run", "m-k1"): False,
        ("memory", "fork", "--run", "m", "--round", "1", "--to", "m-f1"): False,
        ("memory", "show", "--run", "m-f1"): False,
    }
    return {(*c, "--db", db): reads_all for c, reads_all in commands.items()}


BAD_ROWS: dict[str, tuple[str, int | None, str, str]] = {
    # name: (type, round (None: the round it is written in), data as written, why)
    "a number beyond a double's range": (
        "eval.recorded",
        None,
        '{"metrics":{"x":' + HUGE + "}}",
        "its data cannot be read: a number beyond a double's range",
    ),
    "JSON nested 5,000 deep": (
        "eval.recorded",
        None,
        '{"metrics":{"x":' + "[" * 5000 + "]" * 5000 + "}}",
        "its data cannot be read: JSON nested deeper than 64 levels",
    ),
    "data that is no object": ("run.noted", None, "[1]", "its data is not a JSON object"),
    "a note of round -1": ("run.noted", -1, '{"note":"before the start"}', "its round is negative"),
}


@pytest.mark.parametrize("where", ["a committed round", "the open round"])
@pytest.mark.parametrize("bad", list(BAD_ROWS))
def test_a_row_no_reader_can_take_is_passed_over_by_every_reader(
    base: Base, db: str, tmp_path: Path, bad: str, where: str
) -> None:
    """Each reader exits 0 and each that reads the row names it by seq; ``memory verify`` names
    it and folds past it; the round protocol and ``train --resume`` continue the run, and rounds
    1 and 2 read as they did."""
    type_, rnd, data, why = BAD_ROWS[bad]
    if where == "the open round":
        code, _, err = cli("round", "start", "--run", "m", "--db", db)
        assert code == 0, err
    seq = _raw(db, "m", type_, (2 if where == "a committed round" else 3) if rnd is None else rnd, data)
    for command, reads_all in readers(db, tmp_path).items():
        code, _, err = cli(*command)
        assert code == 0, f"{' '.join(command[:-2])} exits {code}:\n{err[-2000:]}"
        assert "Traceback" not in err
        if reads_all:
            assert _named(err, seq, why), (command, err)
    code, out, _ = cli("memory", "verify", "--run", "m", "--db", db, "--json")
    problems = json.loads(out)["problems"]
    assert code == 1 and problems == [f"seq {seq}: {why} (every reader passes it over)"], problems
    assert _valid_rounds(db) == (base.stats, base.memory)  # nothing of the valid rounds is lost
    if where == "a committed round":  # the round protocol opens the next round past it
        code, _, err = cli("round", "start", "--run", "m", "--db", db)
        assert code == 0, err
    code, out, err = cli("round", "requests", "--run", "m", "--n", "2", "--db", db)
    assert code == 0, err
    code, _, err = cli("train", "--resume", "--run", "m", "--rounds", "3", "--quiet", "--db", db)
    assert code == 0, err
    with open_log(db, create=False) as log:
        assert [e.round for e in log.read("m", types=(RoundCommitted,))] == [1, 2, 3]


def test_a_passed_over_row_leaves_no_run_of_the_export_unreadable(db: str, tmp_path: Path) -> None:
    """The export of a run holding such a row holds every other event, in order."""
    seq = _raw(db, "m", "eval.recorded", 2, '{"metrics":{"x":' + HUGE + "}}")
    with open_log(db, create=False) as log:
        lines = [json.loads(line) for line in export_lines(log, "m")]
        assert seq not in {line["seq"] for line in lines}
        assert [line["seq"] for line in lines] == sorted(r.seq for r in log.raw("m") if r.seq != seq)
        assert admission(log, "m").refusals == (
            Refusal(seq, "eval.recorded", "its data cannot be read: a number beyond a double's range"),
        )


def test_a_page_of_newest_events_holds_its_length_past_a_passed_over_row(db: str) -> None:
    """A read of the newest event (``limit=1, newest=True``) past a row passed over is the
    event before it, not nothing."""
    with open_log(db, create=False) as log:
        before = next(log.read("m", limit=1, newest=True))
    seq = _raw(db, "m", "eval.recorded", 2, '{"metrics":{"x":' + HUGE + "}}")
    with open_log(db, create=False) as log:
        assert [e.seq for e in log.read("m", limit=1, newest=True)] == [before.seq]
        assert [e.seq for e in log.rows("m", limit=3, newest=True)][-1] == before.seq
        assert not admission(log, "m").admits(seq)


def test_diagevo_runs_lists_a_run_whose_newest_row_no_reader_can_take(db: str) -> None:
    """As it is (complete, 2/2), with the row: ``passed over at seq N: why``."""
    seq = _raw(db, "m", "eval.recorded", 2, '{"metrics":{"x":' + HUGE + "}}")
    code, out, err = cli("runs", "--db", db, "--json")
    assert code == 0, err
    (run,) = json.loads(out)["runs"]
    assert (run["status"], run["committed"], run["target"]) == ("complete", 2, 2)
    assert run["passed_over"] == [{"seq": seq, "why": "its data cannot be read: a number beyond a double's range"}]
    code, out, err = cli("runs", "--db", db)
    assert code == 0 and f"passed over at seq {seq}: " in out, out
    assert _named(err, seq, "its data cannot be read")


# --- a config the loader refuses ---------------------------------------------------------------


def _with_group_size_1e1(base: Base, tmp_path: Path) -> tuple[str, int]:
    """Run ``m``'s log stored raw with a ``run.configured`` of round 2 (before its first event
    after the start) whose ``solver.group_size`` is written ``1e1``: the database and its seq."""
    with open_log(f"sqlite:///{base.folder / 'x.db'}", create=False) as log:
        lines = [json.loads(line) for line in export_lines(log, "m")]
    at = next(i for i, line in enumerate(lines) if line["type"] == "round.started" and line["round"] == 2) + 1
    config = json.loads(json.dumps(lines[0]["data"]["config"]))
    config["solver"]["group_size"] = 10.0  # what Python reads of 1e1
    bad = {"type": "run.configured", "run": "m", "round": 2, "event_id": "m/1e1", "data": {"config": config}}
    db = f"sqlite:///{tmp_path / 'x.db'}"
    store_raw(db, [*lines[:at], bad, *lines[at:]])
    shutil.copytree(base.folder / "x.diagevo", tmp_path / "x.diagevo")
    return db, lines[at - 1]["seq"] + 1


def test_a_config_the_loader_refuses_stops_no_reader_and_no_resume_trains_on_it(base: Base, tmp_path: Path) -> None:
    db, seq = _with_group_size_1e1(base, tmp_path)
    said = "solver.group_size: Input should be a valid integer (got 10.0)"
    for command, _ in readers(db, tmp_path).items():
        code, _, err = cli(*command)
        assert code == 0, f"{' '.join(command[:-2])} exits {code}:\n{err[-2000:]}"
    code, out, _ = cli("memory", "verify", "--run", "m", "--db", db, "--json")
    assert code == 1 and any(
        p.startswith(f"seq {seq}: run.configured's config cannot be used: {said}") for p in json.loads(out)["problems"]
    )
    code, out, err = cli("runs", "--db", db, "--json")
    listed = json.loads(out)["runs"][0]
    assert code == 0 and "(config)" not in listed["changed"], out  # the config in force, the refused one passed over
    assert [p for p in listed["passed_over"] if p["seq"] == seq] == [
        {"seq": seq, "why": f"run.configured's config cannot be used: {said}"}
    ], out
    # a copy leaves it behind, named: the config before it in force
    for command in (
        ("memory", "fork", "--run", "m", "--round", "2", "--to", "m-f2"),
        ("memory", "whatif", "--run", "m", "--set", "memory.k=1.0", "--to", "m-k2"),
    ):
        code, _, err = cli(*command, "--db", db)
        assert code == 0 and _named(err, seq, f"run.configured's config cannot be used: {said}"), err
    code, out, err = cli("memory", "verify", "--run", "m-f2", "--db", db)
    assert code == 0, out
    # what trains on it cannot: one line naming the field, nothing written
    with open_log(db, create=False) as log:
        last = log.last_seq("m")
    for command in (("train", "--resume", "--run", "m", "--rounds", "3", "--quiet"), ("round", "start", "--run", "m")):
        code, _, err = cli(*command, "--db", db)
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 1 and len(lines) == 1 and said in lines[0] and f"seq {seq}" in lines[0], err
    with open_log(db, create=False) as log:
        assert log.last_seq("m") == last


def test_a_seed_below_0_is_named_by_verify(db: str) -> None:
    """Out of its type's shape (what PostgreSQL refuses on insert): every reader passes it over
    (issue 73), and verify says so."""
    with open_log(db, create=False) as log:
        config = next(log.read("m", limit=1)).event.config
    seq = _raw(db, "m", "run.configured", 3, {"config": config, "seed": -5})
    code, out, _ = cli("memory", "verify", "--run", "m", "--db", db, "--json")
    problems = json.loads(out)["problems"]
    why = "out of shape: run.configured data.seed is out of its range (>= 0)"
    assert code == 1 and f"seq {seq}: {why} (every reader passes it over)" in problems
    code, _, err = cli("memory", "show", "--run", "m", "--db", db)
    assert code == 0 and f"run 'm', seq {seq}: passed over: {why}" in err, err
