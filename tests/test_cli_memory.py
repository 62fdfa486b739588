"""``diagevo memory ...`` and ``diagevo db ...`` end to end, including every bad input."""

from __future__ import annotations

import json
import random
import re
import sqlite3
import sys
from pathlib import Path

import pytest

from diagevo.cli.app import main
from diagevo.log import open_log
from tests.logs import ForgedRow, Log
from tests.strategies import random_log


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    old = sys.argv
    sys.argv = ["diagevo", *args]
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = old
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str, *needles: str) -> None:
    assert code != 0
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.fixture()
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'mem.db'}"


def write(tmp_path: Path, log: Log | str, name: str = "log.jsonl") -> Path:
    p = tmp_path / name
    p.write_text(log if isinstance(log, str) else log.jsonl(), encoding="utf-8")
    return p


def case_study() -> Log:
    log = Log()
    log.node("N1", "Checking Conditions after Algebraic Steps").cause("C1", "N1", "AM-GM equality not checked")
    log.question("q1", 0.5)
    log.commit()
    log.question("q2", 0.8, active="C1")
    log.add("cause.promoted", cause_id="C1", acc=0.8, n_candidates=1)
    log.commit()
    log.add("question.generated", question_id="q3", mode="targeted", active_cause="C1", text="Solve sqrt(x+6)=x")
    log.add("failure.recorded", failure_id="fx", question_id="q3", response="x=3 or x=-2", reference="x=3")
    log.add(
        "failure.diagnosed", failure_id="fx", matched_cause="C1", model="diag-model", raw='{"matched_cause_id": "C1"}'
    )
    log.add("cause.reactivated", cause_id="C1", failure_id="fx")
    log.attribute("C1", "fx", via="recurrence")
    log.commit()
    return log


def test_ingest_replay_why_stats_events_verify(tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "memory", "ingest", str(write(tmp_path, case_study())), "--db", db)
    assert code == 0, err
    code, out, _ = run_cli(capsys, "memory", "replay", "--round", "2", "--db", db, "--json")
    assert code == 0
    m2 = json.loads(out)
    assert set(m2) == {"run", "round", "F", "F1", "k", "epsilon_next", "p_next", "causes", "nodes"}
    assert m2["round"] == 2 and m2["F"] == 0 and m2["F1"] == 1 and m2["epsilon_next"] == 1.0
    assert m2["causes"] == [
        {"id": "C1", "node": "N1", "description": "AM-GM equality not checked", "state": "mastered", "frequency": 0}
    ]
    assert m2["nodes"] == [{"id": "N1", "label": "Checking Conditions after Algebraic Steps", "causes": ["C1"]}]
    m3 = json.loads(run_cli(capsys, "memory", "replay", "--round", "3", "--db", db, "--json")[1])
    assert m3["causes"][0]["state"] == "active" and m3["causes"][0]["frequency"] == 1
    assert m3["epsilon_next"] == pytest.approx(1 / (1 + 1 / 0.5)) and m3["p_next"] == {"C1": 1.0}
    code, out, _ = run_cli(capsys, "memory", "replay", "--round", "3", "--db", db)
    assert code == 0 and "C1" in out and "Checking Conditions" in out

    why = json.loads(run_cli(capsys, "memory", "why", "C1", "--db", db, "--json")[1])
    kinds = [e["kind"] for e in why["timeline"]]
    assert kinds == ["created", "promoted", "reactivated", "attributed"]
    react = why["timeline"][2]
    assert react["via"] == "recurrence" and react["failure"]["failure_id"] == "fx"
    assert react["failure"]["question"]["mode"] == "targeted"
    assert react["failure"]["question"]["text"] == "Solve sqrt(x+6)=x"
    assert why["timeline"][1]["acc"] == 0.8 and why["timeline"][1]["n_candidates"] == 1
    code, out, _ = run_cli(capsys, "memory", "why", "C1", "--db", db)
    assert code == 0 and "reactivated by failure fx" in out

    stats = json.loads(run_cli(capsys, "memory", "stats", "--db", db, "--json")[1])["rounds"]
    assert [(r["round"], r["active"], r["mastered"], r["promotions"], r["reactivations"]) for r in stats] == [
        (1, 1, 0, 0, 0),
        (2, 0, 1, 1, 0),
        (3, 1, 0, 0, 1),
    ]
    types = ["question.generated", "failure.diagnosed", "cause.reactivated", "failure.attributed"]
    out = run_cli(capsys, "memory", "events", "--db", db, "--cause", "C1", "--round", "3", "--json")[1]
    doc = json.loads(out)  # one document, like every read command
    assert [e["type"] for e in doc["events"]] == types and doc["truncated"] is False
    out = run_cli(capsys, "memory", "events", "--db", db, "--cause", "C1", "--round", "3", "--jsonl")[1]
    assert [json.loads(x)["type"] for x in out.splitlines()] == types
    doc = json.loads(run_cli(capsys, "memory", "events", "--db", db, "--limit", "2", "--json")[1])
    assert len(doc["events"]) == 2 and doc["truncated"] is True
    code, out, _ = run_cli(capsys, "memory", "events", "--db", db, "--limit", "2")
    assert code == 0 and "the first 2 events shown; more match" in out
    code, _, err = run_cli(capsys, "memory", "events", "--db", db, "--type", "bogus.type")
    assert_one_line_error(code, err, "unknown event type 'bogus.type'", "`diagevo memory events --help` lists")
    code, _, err = run_cli(capsys, "memory", "events", "--db", db, "--type", "run.taged")
    assert_one_line_error(code, err, "unknown event type 'run.taged' (did you mean 'run.tagged'")
    code, out, _ = run_cli(capsys, "memory", "events", "--help")
    from diagevo.catalog import CATALOG as EVENT_TYPES

    flat = re.sub(r",\s+", ",", " ".join(out.replace("│", " ").split()))  # the help's lines joined
    for t in EVENT_TYPES:  # the hint is true: the help names every known type
        head, _, tail = t.partition(".")
        assert re.search(rf"\b{re.escape(head)}\.(\{{[a-z,]*\b)?{re.escape(tail)}\b", flat), t
    code, out, _ = run_cli(capsys, "memory", "verify", "--db", db)
    assert code == 0 and "hash chain intact" in out
    assert run_cli(capsys, "memory", "plot", "--db", db)[0] == 0
    assert run_cli(capsys, "memory", "show", "--db", db, "--json")[0] == 0


def test_export_ingest_round_trip(tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]) -> None:
    log = random_log(random.Random(3), 4)
    run_cli(capsys, "memory", "ingest", str(write(tmp_path, log)), "--db", db)
    out_file = tmp_path / "export.jsonl"
    code, out, _ = run_cli(capsys, "memory", "export", "--db", db, "-o", str(out_file))
    n = len(out_file.read_text().splitlines())
    assert code == 0 and " ".join(out.split()) == f"wrote {out_file} ({n} events of run {log.run})"
    first = json.loads(out_file.read_text().splitlines()[0])
    assert {"seq", "recorded_at", "hash"} <= set(first)
    db2 = f"sqlite:///{tmp_path / 'copy.db'}"
    assert run_cli(capsys, "memory", "ingest", str(out_file), "--db", db2)[0] == 0
    for t in range(1, 5):
        a = run_cli(capsys, "memory", "replay", "--round", str(t), "--db", db, "--json")[1]
        b = run_cli(capsys, "memory", "replay", "--round", str(t), "--db", db2, "--json")[1]
        assert a == b


BREACHES = {
    "attribution to a Mastered cause": (
        lambda log: (
            log.question("q", 0.9, active="C1")
            .add("cause.promoted", cause_id="C1", acc=0.9, n_candidates=1)
            .attribute("C1", "f9")
        ),
        "without cause.reactivated",
    ),
    "unknown cause": (lambda log: log.attribute("C404", "f9", via="dedup"), "unknown cause 'C404'"),
    "unknown node": (lambda log: log.cause("C9", "N404"), "unknown node 'N404'"),
    "round going backwards": (
        lambda log: log.commit().__setattr__("round", 1) or log.add("round.started"),
        "goes backwards",
    ),
    "second commit": (lambda log: log.commit().__setattr__("round", 1) or log.commit(), "committed twice"),
    "unknown type": (
        lambda log: log._events.append(
            ForgedRow(**{**log._events[-1].line(), "type": "cause.exploded", "event_id": "x"})
        ),
        "unknown event type",
    ),
}


@pytest.mark.parametrize("breach", sorted(BREACHES))
def test_ingest_rejects_invariant_breaches_and_stores_nothing(
    tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str], breach: str
) -> None:
    log = Log()
    log.node("N1").cause("C1", "N1")
    mutate, message = BREACHES[breach]
    mutate(log)
    n_lines = len(log.jsonl().splitlines())
    code, _, err = run_cli(capsys, "memory", "ingest", str(write(tmp_path, log)), "--db", db)
    assert_one_line_error(code, err, f"line {n_lines}:", message)
    with open_log(db) as s:
        assert s.runs() == []


def test_ingest_bad_files(tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]) -> None:
    good = Log().jsonl()
    code, _, err = run_cli(capsys, "memory", "ingest", str(write(tmp_path, good + "{not json\n")), "--db", db)
    assert_one_line_error(code, err, "line 2:", "malformed JSON")
    bad_data = (
        good
        + json.dumps({"type": "round.started", "run": "r1", "round": 1, "event_id": "e", "data": {"surprise": 1}})
        + "\n"
    )
    code, _, err = run_cli(capsys, "memory", "ingest", str(write(tmp_path, bad_data)), "--db", db)
    assert_one_line_error(code, err, "line 2:", "surprise")
    code, _, err = run_cli(capsys, "memory", "ingest", str(tmp_path / "missing.jsonl"), "--db", db)
    assert_one_line_error(code, err, "no such file")
    with open_log(db) as s:
        assert s.runs() == []


def test_replay_of_uncommitted_round_names_last_committed(
    tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run_cli(capsys, "memory", "ingest", str(write(tmp_path, case_study())), "--db", db)
    code, _, err = run_cli(capsys, "memory", "replay", "--round", "7", "--db", db)
    assert_one_line_error(code, err, "round 7 was never committed", "last committed round: 3")
    code, _, err = run_cli(capsys, "memory", "why", "C99", "--db", db)
    assert_one_line_error(code, err, "unknown cause 'C99'")
    code, _, err = run_cli(capsys, "memory", "stats", "--db", db, "--run", "nope")
    assert_one_line_error(code, err, "no run 'nope'")


def test_an_unknown_cause_or_run_suggests_the_one_meant(
    tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run_cli(capsys, "memory", "ingest", str(write(tmp_path, case_study())), "--db", db)
    for args in (["why", "c1"], ["why", "c1", "--json"], ["why", "C1", "--all", "--run", "r1"]):
        code, out, err = run_cli(capsys, "memory", *args[:2], "--db", db, *args[2:])
        if args[1] == "C1":
            assert code == 0, err
            continue
        assert_one_line_error(code, err, "error: unknown cause 'c1' in run 'r1' (did you mean 'C1'?)")
    code, _, err = run_cli(capsys, "memory", "why", "C11", "--db", db)  # close: C1
    assert_one_line_error(code, err, "unknown cause 'C11' in run 'r1' (did you mean 'C1'?)")
    code, _, err = run_cli(capsys, "memory", "why", "zzz", "--db", db)  # nothing close: where they are listed
    assert_one_line_error(code, err, "unknown cause 'zzz' in run 'r1': the causes are listed by `diagevo memory show")
    for command in (["stats"], ["show"], ["replay", "--round", "1"], ["events"]):
        code, _, err = run_cli(capsys, "memory", *command, "--db", db, "--run", "R1")
        assert_one_line_error(code, err, "error: no run 'R1' in", "(did you mean 'r1'?): the runs are listed by")
    code, _, err = run_cli(capsys, "memory", "stats", "--db", db, "--run", "elsewhere")
    assert_one_line_error(code, err, "no run 'elsewhere' in")
    assert "did you mean" not in err


@pytest.mark.parametrize(
    ("command", "valid"), [(["replay"], "0"), (["events"], "0"), (["fork", "--run", "r1", "--to", "f"], "1")]
)
def test_a_negative_round_says_rounds_start_at_0(
    tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str], command: list[str], valid: str
) -> None:
    run_cli(capsys, "memory", "ingest", str(write(tmp_path, case_study())), "--db", db)
    code, _, err = run_cli(capsys, "memory", *command, "--round", "-1", "--db", db)
    assert code == 2
    assert_one_line_error(code, err, "'--round'", "-1: rounds start at 0")
    assert run_cli(capsys, "memory", *command, "--round", valid, "--db", db)[0] == 0


def test_verify_detects_a_tampered_snapshot(tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]) -> None:
    run_cli(capsys, "memory", "ingest", str(write(tmp_path, case_study())), "--db", db)
    with open_log(db) as s:
        snap = s.view_states("memory", "r1", upto=2, latest=True)[0]
        snap.state["causes"][0][4] = 5  # frequency
        s.put_view_states([snap])
    code, out, _ = run_cli(capsys, "memory", "verify", "--db", db)
    assert code == 1 and "snapshot of round 2 differs" in out


def test_old_schema_revision_is_refused_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], next_migration: str
) -> None:
    path = tmp_path / "old.db"
    db = f"sqlite:///{path}"
    with open_log(db):
        pass
    con = sqlite3.connect(path)
    con.execute("UPDATE alembic_version SET version_num = '0001'")
    con.commit()
    con.close()
    before = path.read_bytes()
    code, _, err = run_cli(capsys, "memory", "stats", "--db", db)
    assert_one_line_error(code, err, "diagevo db upgrade")
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "memory.k=-1"], "config: memory.k: Input should be greater than 0"),
        (["--set", "memory.nope=1"], "unknown config field 'memory.nope'"),
        (["--set", 'filter.mode="weird"'], "config: filter.mode: Input should be"),
        (["--set", "bad"], "not of the form section.field=value"),
        (["--config", "/nonexistent/x.toml"], "no config file at /nonexistent/x.toml"),
    ],
)
def test_train_rejects_bad_config_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    db = f"sqlite:///{tmp_path / 'cfg.db'}"
    code, _, err = run_cli(capsys, "train", "--db", db, "--quiet", *args)
    assert_one_line_error(code, err, message)


def test_why_in_the_terminal_tells_the_whole_story(tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Question, the pseudo-label's confidence, failing and reference trajectories and the
    diagnosis: what ``--json`` has, shown (model text as text, not markup)."""
    from tests.logs import Log

    log = Log()
    log.question("q1", 0.75)
    log.add(
        "failure.recorded",
        failure_id="f1",
        question_id="q1",
        response="[bold]x = 3 or x = -2[/bold] " + "step " * 200,
        reference="x = 3, since x = -2 fails the check",
    )
    log.add(
        "failure.diagnosed",
        failure_id="f1",
        error_cause="keeps a root that fails the original equation",
        model="diag-m",
        raw="{}",
    )
    log.node("N1", "roots").cause("C1", "N1", "keeps a root that fails the original equation", failure="f1")
    log.commit()
    assert run_cli(capsys, "memory", "ingest", str(write(tmp_path, log)), "--db", db)[0] == 0
    code, out, err = run_cli(capsys, "memory", "why", "C1", "--db", db)
    text = " ".join(out.split())
    assert code == 0, err
    assert "question q1 (free): question q1" in text
    assert "pseudo-label: 1 (p1=0.750, p2=0.250 of 12 construction answers)" in text
    assert "failing response (f1): [bold]x = 3 or x = -2[/bold] step" in text and "characters left out]…" in text
    assert "reference: x = 3, since x = -2 fails the check" in text
    assert "diagnosis (diag-m): keeps a root that fails the original equation" in text
    story = json.loads(run_cli(capsys, "memory", "why", "C1", "--db", db, "--json")[1])
    assert story["timeline"][0]["failure"]["question"]["p1"] == 0.75


def test_tables_fit_80_columns_and_say_what_they_left_out(
    tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    log = case_study()
    log.add("eval.recorded", benchmark="gsm8k", n=10, accuracy=0.25)
    log.commit(heldout_acc=0.5)
    assert run_cli(capsys, "memory", "ingest", str(write(tmp_path, log)), "--db", db)[0] == 0
    # the terminal's width as the console reads it (setting console.width would pin it for later tests)
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_cli(capsys, "memory", "stats", "--db", db)
    assert code == 0 and max(len(line) for line in out.splitlines()) <= 80
    assert "left out to fit 80 columns:" in out and "bench/gsm8k" in out and "--wide" in out
    code, out, _ = run_cli(capsys, "memory", "stats", "--db", db, "--wide")
    header = next(line for line in out.splitlines() if line.lstrip().startswith("t "))
    assert "merge" in header and "held-out" in header and "bench/gsm8k" in header and "left out" not in out
    code, out, _ = run_cli(capsys, "memory", "plot", "--db", db)
    assert code == 0 and max(len(line) for line in out.splitlines()) <= 80


def test_json_alone_on_stdout_whatever_a_library_prints(
    tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library printing on stdout during a --json command (DeepSpeed's logger does on its first
    import, when installed) reaches stderr: stdout holds the JSON alone, and once the command is
    done stdout is stdout again."""
    import diagevo.views.queries as views  # where `memory show` (the library's query) finds resolve_run

    assert run_cli(capsys, "memory", "ingest", str(write(tmp_path, case_study())), "--db", db)[0] == 0
    resolve_run = views.resolve_run

    def noisy(*args: object, **kwargs: object) -> str:
        print("[WARNING] a library's line")
        return resolve_run(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(views, "resolve_run", noisy)
    code, out, err = run_cli(capsys, "memory", "show", "--db", db, "--json")
    assert code == 0 and "C1" in json.dumps(json.loads(out))
    assert "[WARNING] a library's line" in err
    code, out, _ = run_cli(capsys, "memory", "show", "--db", db)
    assert code == 0 and out.startswith("[WARNING] a library's line") and "C1" in out
