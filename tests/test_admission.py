"""Issue 82: which stored rows the rules take is decided once (the fold's refusals, kept with the
memory, :mod:`diagevo.views.admission`), and the readers that trusted the raw rows read through it:
``memory why`` (a forged second creation of a cause, an attribution and a promotion into a round
already committed) and ``train --resume`` (a commit of a round that never ran, a config written
into a committed round). Each forged row is written past diagevo's checks: raw into SQLite, or as
PostgreSQL's trainer role with a plain INSERT."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagevo.log import open_log
from diagevo.rounds.runs import stored_config
from diagevo.views.admission import admission
from diagevo.views.forks import fork_marker
from diagevo.views.memory import committed_rounds, load_memory
from tests.input_cases import cli
from tests.test_log_trainer_role import roles  # noqa: F401 - the fixture (PostgreSQL's trainer role)
from tests.test_passed_over_rows import base, db  # noqa: F401 - the fixtures (a real two-round run 'm')
from tests.test_readers_take_what_the_fold_takes import RUN, Forged, forged, passed  # noqa: F401
from tests.test_stored_rows_bounded import _raw

FORGED = "FORGED: a description no diagnosis wrote"


def test_why_shows_no_row_the_rules_refuse(forged: Forged) -> None:  # noqa: F811
    """A second ``cause.created`` of C1, an attribution and a promotion of C1 into round 1 (already
    committed): ``memory why C1`` shows the cause as the fold has it, created once, Active, with no
    forged attribution, and names each forged row; the admission holds exactly those rows."""
    code, before, err = cli("memory", "why", "C1", "--run", RUN, "--db", forged.db, "--json")
    assert code == 0, err
    twice = forged.forge("cause.created", 2, {"cause_id": "C1", "node_id": "N1", "description": FORGED})
    attributed = forged.forge("failure.attributed", 1, {"failure_id": "f-forged", "cause_id": "C1", "via": "dedup"})
    promoted = forged.forge("cause.promoted", 1, {"cause_id": "C1", "acc": 1.0, "n_candidates": 1})
    code, out, err = cli("memory", "why", "C1", "--run", RUN, "--db", forged.db, "--json")
    assert code == 0, err
    assert FORGED not in out and "f-forged" not in out
    assert json.loads(out) == json.loads(before)  # the story as it was before the forged rows
    assert passed(twice, "cause 'C1' created twice") in err, err
    assert passed(attributed, "round 1 goes backwards: round 1 is already committed") in err, err
    assert passed(promoted, "round 1 goes backwards: round 1 is already committed") in err, err
    code, out, err = cli("memory", "why", "C1", "--run", RUN, "--db", forged.db)  # the table, too
    assert code == 0 and FORGED not in out and "f-forged" not in out, out
    with open_log(forged.db, create=False) as log:
        assert [r.seq for r in admission(log, RUN).refusals] == [twice, attributed, promoted]


def _commit_data(url: str, rnd: int) -> str:
    """The stored data of round ``rnd``'s commit, as written (a forged commit in shape)."""
    with open_log(url, create=False) as log:
        (row,) = [r for r in log.raw("m") if r.type == "round.committed" and r.round == rnd]
        return row.data


def test_resume_trains_past_a_commit_of_a_round_that_never_ran(db: str) -> None:  # noqa: F811
    """A ``round.committed`` of round 4 written after round 2 (round 3 never ran) is no commit:
    ``train --resume --rounds 3`` trains round 3 (not "nothing to do", as it said when resume read
    the raw commits). Round 4 can never be committed in this run (the database keeps one commit a
    round, and the forged one holds it): ``--rounds 4`` says so in one line before the round trains,
    naming the row and the fork from round 3, and opens no round (it trained round 4, then failed
    on the commit, at every try)."""
    commit = _raw(db, "m", "round.committed", 4, _commit_data(db, 2))
    with open_log(db, create=False) as log:
        assert committed_rounds(log, "m") == [1, 2]
        assert [r.seq for r in admission(log, "m").refusals] == [commit]
    code, _, err = cli("train", "--resume", "--run", "m", "--rounds", "3", "--quiet", "--db", db)
    assert code == 0, err
    with open_log(db, create=False) as log:
        head = log.last_seq("m")
    code, _, err = cli("train", "--resume", "--run", "m", "--rounds", "4", "--quiet", "--db", db)
    assert code == 1 and "internal error" not in err, err
    assert f"round.committed of round 4 at seq {commit} that the rules refuse" in err, err
    assert "fork it from round 3" in err and "diagevo memory fork --run m --round 3" in err, err
    with open_log(db, create=False) as log:
        assert committed_rounds(log, "m") == [1, 2, 3]
        assert [e.type for e in log.read("m", after_seq=head)] in ([], ["run.configured"])  # train.rounds=4 at most
        assert [r.seq for r in admission(log, "m").refusals] == [commit]


def test_resume_trains_with_no_config_the_fold_refused(db: str, tmp_path: Path) -> None:  # noqa: F811
    """A ``run.configured`` written into round 2, already committed, setting ``memory.k``: the fold
    refuses it, and so does resume, which trains round 3 with the run's own k, and the config it
    records (``train.rounds`` changed) is the run's, not a copy of the forged one."""
    with open_log(db, create=False) as log:
        config = dict(load_memory(log, "m").config)
        k = stored_config(log, "m").memory.k  # type: ignore[union-attr]
    memory = {**config.get("memory", {}), "k": k * 8}
    config_row = _raw(db, "m", "run.configured", 2, json.dumps({"config": {**config, "memory": memory}, "seed": 0}))
    with open_log(db, create=False) as log:
        assert stored_config(log, "m").memory.k == k  # type: ignore[union-attr]
    code, _, err = cli("train", "--resume", "--run", "m", "--rounds", "3", "--quiet", "--db", db)
    assert code == 0, err
    with open_log(db, create=False) as log:
        assert load_memory(log, "m").k == k and stored_config(log, "m").memory.k == k  # type: ignore[union-attr]
        written = [e.event for e in log.read("m") if e.type == "run.configured" and e.seq > config_row]
        assert written and all(e.config["memory"]["k"] == k for e in written)  # type: ignore[attr-defined]


def _raw_columns(url: str, type_: str, rnd: object, version: object, data: str) -> int:
    """A chained row whose columns SQLite keeps as given, of whatever type (its seq)."""
    from sqlalchemy import create_engine

    from diagevo.log.chain import canonical_event_json, chain_hash
    from tests.test_log_shapes_pg import raw_row
    from tests.test_log_trainer_role import insert

    row = raw_row(url, "m", type_, 2, {})
    row.update(round=rnd, schema_version=version, data=data)
    row["hash"] = chain_hash(row["prev_hash"], canonical_event_json(row["event_id"], "m", rnd, type_, version, data))
    engine = create_engine(url)
    insert(engine, row)
    engine.dispose()
    with open_log(url, create=False) as log:
        return log.last_seq("m")


@pytest.mark.parametrize(
    ("type_", "rnd", "version", "why"),
    [
        ("eval.recorded", "two", 1, "its round is not a whole number"),  # "2" SQLite would store as 2
        ("eval.recorded", 2, "one", "its schema_version is not a whole number"),
        ("", 2, 1, "'' is no event type this diagevo knows"),
    ],
)
def test_a_row_of_mistyped_columns_stops_no_reader(
    db: str,  # noqa: F811
    tmp_path: Path,
    type_: str,
    rnd: object,
    version: object,
    why: str,
) -> None:
    """SQLite keeps text in an INTEGER column and any text as a type: every reader exits 0, naming
    the row (it stopped verify, stats, events, report, runs, export and resume with `internal
    error: TypeError`, and a row of type '' stopped stats, report and resume); ``memory verify``
    names it and exits 1."""
    seq = _raw_columns(db, type_, rnd, version, '{"metrics":{"a":1}}')
    readers = [
        ("memory", "stats", "--run", "m"),
        ("memory", "show", "--run", "m"),
        ("memory", "events", "--run", "m", "--limit", "0"),
        ("memory", "why", "C1", "--run", "m"),
        ("runs",),
        ("report", "--run", "m", "-o", str(tmp_path / "r.html")),
        ("memory", "export", "--run", "m", "-o", str(tmp_path / "m.jsonl")),
    ]
    for command in readers:
        code, _, err = cli(*command, "--db", db)
        assert code == 0 and "internal error" not in err, (command, err[-1000:])
    code, _, err = cli("memory", "stats", "--run", "m", "--db", db)
    assert f"run 'm', seq {seq}: passed over: {why}" in err, err
    code, out, err = cli("memory", "verify", "--run", "m", "--db", db, "--json")
    assert code == 1 and "internal error" not in err, err
    assert any(p.startswith(f"seq {seq}: ") for p in json.loads(out)["problems"]), out
    code, _, err = cli("train", "--resume", "--run", "m", "--rounds", "3", "--quiet", "--db", db)
    assert code == 0, err


def test_a_commit_of_vast_figures_renders_everywhere(db: str, tmp_path: Path) -> None:  # noqa: F811
    """A ``round.committed`` in shape whose ``timing`` holds 1e308 seconds a phase and whose held-out
    accuracy is 1e308 (a raw row): ``report`` renders (it ended in `internal error: OverflowError`),
    and the commit, beyond the sense of its figures, is passed over by every reader (``memory
    stats`` shows no round 3) and named by ``memory verify`` alike (issue 91: it was drawn)."""
    code, _, err = cli("round", "start", "--run", "m", "--db", db)
    assert code == 0, err
    data = json.loads(_commit_data(db, 2))
    data["timing"] = dict.fromkeys(data["timing"], 1e308)
    data["heldout_acc"] = 1e308
    seq = _raw(db, "m", "round.committed", 3, json.dumps(data))
    code, _, err = cli("report", "--run", "m", "-o", str(tmp_path / "r.html"), "--db", db)
    assert code == 0 and "internal error" not in err, err
    code, out, err = cli("memory", "stats", "--run", "m", "--db", db, "--json")
    assert code == 0, err
    assert [r["round"] for r in json.loads(out)["rounds"]] == [1, 2], out
    assert f"seq {seq}: passed over: round.committed holds heldout_acc as 1e+308, not a share" in err, err
    code, out, _ = cli("memory", "verify", "--run", "m", "--db", db, "--json")
    problems = json.loads(out)["problems"]
    said = "heldout_acc as 1e+308, not a share"
    assert code == 1 and any(f"seq {seq}: " in p and said in p for p in problems), problems


def test_a_fork_leaves_behind_what_the_fold_refused(forged: Forged) -> None:  # noqa: F811
    """A second ``cause.created`` of C1 written into round 2, then round 2 committed: a fork at
    round 2 copies the run without the refused row (it copied it as a fact of its own), and the
    fork verifies."""
    twice = forged.forge("cause.created", 2, {"cause_id": "C1", "node_id": "N1", "description": FORGED})
    forged.forge("round.committed", 2, {})
    code, _, err = cli("memory", "fork", "--run", RUN, "--round", "2", "--to", "copy", "--db", forged.db)
    assert code == 0, err
    with open_log(forged.db, create=False) as log:
        copied = [e for e in log.read("copy", texts=True) if e.type == "cause.created"]
        assert copied and FORGED not in [e.event.description for e in copied]  # type: ignore[attr-defined]
        assert admission(log, "copy").refusals == ()
        assert twice in admission(log, RUN).refused
    code, out, err = cli("memory", "verify", "--run", "copy", "--db", forged.db, "--json")
    assert code == 0, out


READERS = [("memory", "show"), ("memory", "stats"), ("memory", "events"), ("memory", "why", "C1"), ("runs",)]


def test_every_command_names_the_same_refusals(db: str) -> None:  # noqa: F811
    """One admission, named the same way by every reader: a row no reader can take (its round a
    string, as SQLite keeps it) and a row the fold refuses (a second ``cause.created`` of a cause,
    into committed round 1). Each read command says both, once each, in log order; ``runs --json``
    lists both with the run; ``memory events --json`` shows the refused row, marked ``passed_over``."""
    mistyped = _raw_columns(db, "eval.recorded", "two", 1, '{"metrics": {}}')
    twice = _raw(db, "m", "cause.created", 1, json.dumps({"cause_id": "C1", "node_id": "N1", "description": FORGED}))
    with open_log(db, create=False) as log:
        refusals = admission(log, "m").refusals
    assert [r.seq for r in refusals] == [mistyped, twice]
    assert refusals[0].why == "its round is not a whole number" and "round 2 is already committed" in refusals[1].why
    lines = [f"run 'm', seq {r.seq}: passed over: {r.why}" for r in refusals]
    for read in READERS:
        code, _, err = cli(*read, "--db", db, *(["--run", "m"] if read[0] == "memory" else []))
        assert code == 0, (read, err)
        assert [line for line in err.splitlines() if "passed over" in line] == lines, (read, err)
    code, out, _ = cli("runs", "--db", db, "--json")
    assert [p["seq"] for p in json.loads(out)["runs"][0]["passed_over"]] == [mistyped, twice]
    code, out, _ = cli("memory", "events", "--run", "m", "--type", "cause.created", "--json", "--db", db)
    marked = {e["seq"]: e.get("passed_over") for e in json.loads(out)["events"]}
    assert marked[twice] == refusals[1].why and all(why is None for seq, why in marked.items() if seq != twice)


def test_a_snapshot_past_a_row_no_reader_can_take_verifies(db: str) -> None:  # noqa: F811
    """The fold's refusals hold a row no reader can take (a snapshot saves them): a round committed
    after one is written raw, its snapshot equals the audit's fold, and verify names only the row."""
    seq = _raw(db, "m", "eval.recorded", 3, '{"metrics": {"x": ' + "[" * 100 + "]" * 100 + "}}")
    code, _, err = cli("train", "--resume", "--run", "m", "--rounds", "3", "--quiet", "--db", db)
    assert code == 0, err
    with open_log(db, create=False) as log:
        snapshot = log.view_states("memory", "m", upto=3, latest=True)[0].state
        assert [r[0] for r in snapshot["refused"]] == [seq]  # type: ignore[index]
    code, out, _ = cli("memory", "verify", "--run", "m", "--db", db, "--json")
    problems = json.loads(out)["problems"]
    assert [p for p in problems if not p.startswith(f"seq {seq}: ")] == [], problems  # no snapshot differs
    assert len(problems) == 1 and problems[0].endswith("(every reader passes it over)"), problems


def test_a_whatif_of_a_run_whose_last_commit_is_out_of_shape_verifies(db: str) -> None:  # noqa: F811
    """Round 3 committed by a raw row out of shape (a count of 10^300, a string where a number
    belongs): a what-if of the run verifies, its marker one its own rules take (it wrote a marker
    naming that commit, which its rules then refused)."""
    code, _, err = cli("round", "start", "--run", "m", "--db", db)
    assert code == 0, err
    data = json.loads(_commit_data(db, 2)) | {"questions": 10**300, "F": "many"}
    _raw(db, "m", "round.committed", 3, json.dumps(data))
    code, out, err = cli("memory", "whatif", "--run", "m", "--set", "memory.k=1.0", "--to", "w", "--db", db, "--json")
    assert code == 0, err
    (made,) = json.loads(out)["whatifs"]
    code, out, _ = cli("memory", "verify", "--run", "w", "--db", db, "--json")
    assert code == 0, out
    with open_log(db, create=False) as log:
        assert fork_marker(log, "w") is not None and admission(log, "w").refusals == ()
        assert committed_rounds(log, "w") == list(range(1, made["source_round"] + 1))


def test_a_copy_takes_no_row_of_a_negative_seq(db: str) -> None:  # noqa: F811
    """A raw ``run.noted`` stored at seq -1, ahead of the run's start (SQLite keeps any integer a
    raw INSERT gives): the rules refuse it, and neither a fork nor a what-if copies it as the new
    run's first row (they did, and the copy then failed its own verification); both verify."""
    from sqlalchemy import create_engine, text

    engine = create_engine(db)
    with engine.begin() as conn:
        row = conn.execute(text("SELECT * FROM events WHERE run_id = 'm' AND seq = 1")).mappings().one()
        forged = {"seq": -1, "event_id": "m/noted-ahead", "type": "run.noted", "data": '{"note":"ahead"}'}
        values = dict(row) | forged
        names = ", ".join(values)
        conn.execute(text(f"INSERT INTO events ({names}) VALUES ({', '.join(':' + c for c in values)})"), values)
    engine.dispose()
    with open_log(db, create=False) as log:
        assert not admission(log, "m").admits(-1)
    fork = ("memory", "fork", "--round", "2", "--to", "f")
    whatif = ("memory", "whatif", "--set", "memory.k=1.0", "--to", "w")
    for args in (fork, whatif):
        code, _, err = cli(*args, "--run", "m", "--db", db)
        assert code == 0, err
    for run in ("f", "w"):
        code, out, _ = cli("memory", "verify", "--run", run, "--db", db, "--json")
        assert code == 0, (run, out)
        with open_log(db, create=False) as log:
            first = next(log.read(run, limit=1))
            assert first.type == "run.started" and "run.noted" not in {e.type for e in log.read(run)}, run


@pytest.mark.parametrize(
    ("column", "value", "said"),
    [
        ("texts", "[1, 2]", "its texts column is not a JSON object"),
        ("texts", "not json", "its texts column is not JSON"),
        ("recorded_at", "yesterday", "its recorded_at is not a timestamp (ISO 8601 with a UTC offset)"),
        ("recorded_at", "2026-11-28T10:00:00", "its recorded_at is not a timestamp (ISO 8601 with a UTC offset)"),
    ],
)
def test_verify_names_a_column_sqlite_keeps_and_postgresql_refuses(db: str, column: str, value: str, said: str) -> None:  # noqa: F811
    """A raw SQLite row of a type with no long texts whose ``texts`` column holds no JSON object, or
    whose ``recorded_at`` is no timestamp with its UTC offset (PostgreSQL's checks refuse both):
    ``memory verify`` names it by its seq; the readers read on."""
    from sqlalchemy import create_engine

    from tests.test_log_shapes_pg import raw_row
    from tests.test_log_trainer_role import insert

    engine = create_engine(db)
    insert(engine, raw_row(db, "m", "run.noted", 2, {"note": "a note"}, **{column: value}))
    engine.dispose()
    with open_log(db, create=False) as log:
        seq = log.last_seq("m")
    code, out, _ = cli("memory", "verify", "--run", "m", "--db", db, "--json")
    assert code == 1 and f"seq {seq}: {said}" in json.loads(out)["problems"], out
    code, _, err = cli("memory", "show", "--run", "m", "--db", db)
    assert code == 0, err


def test_a_run_whose_start_the_fold_cannot_take_is_listed_with_it(db: str) -> None:  # noqa: F811
    """A raw run ``z`` whose ``run.started`` lies in round 1 (the fold starts from none): ``diagevo
    runs`` lists every run with ``z``'s refusal (its admission), and no read of another run stops."""
    from sqlalchemy import create_engine

    from tests.test_log_shapes_pg import raw_row
    from tests.test_log_trainer_role import insert

    with open_log(db, create=False) as log:
        (started,) = [r for r in log.raw("m") if r.type == "run.started"]
    engine = create_engine(db)
    insert(engine, raw_row(db, "z", "run.started", 1, json.loads(started.data)))
    engine.dispose()
    code, out, err = cli("runs", "--db", db, "--json")
    assert code == 0, err
    listed = {r["run"]: r["passed_over"] for r in json.loads(out)["runs"]}
    assert set(listed) == {"m", "z"} and listed["m"] == []
    assert [p["why"] for p in listed["z"]] == ["run.started must be in round 0"], listed
    code, _, err = cli("memory", "stats", "--run", "m", "--db", db)
    assert code == 0 and "passed over" not in err, err
