"""Which diagevo wrote a run (issue 92): ``run.started`` records the version that opened it and
each ``round.committed`` the version that committed it; ``runs --json``, ``memory show`` and the
report show them, and a log of an older diagevo, which recorded none, reads without them. A row
too new for this diagevo is passed over naming the version that wrote it, where it says."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from diagevo import rounds
from diagevo.api import version
from diagevo.catalog import RoundCommitted, RunStarted
from diagevo.log import Recorder, open_log
from diagevo.log.registry import shape_problem
from tests.logs import Log
from tests.test_cli_memory import run_cli
from tests.test_runs import committed


def test_a_run_records_the_diagevo_that_opened_it_and_committed_each_round(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    here = version()
    with open_log(db_url) as store:
        rounds.start_run(store, "r", {"k": 0.5})
        committed(store, "r", 2)
        stored = [(r.type, json.loads(r.data)) for r in store.raw("r")]
    started = [data for type_, data in stored if type_ == RunStarted.name]
    commits = [data for type_, data in stored if type_ == RoundCommitted.name]
    assert [d["diagevo"] for d in started] == [here] and [d["diagevo"] for d in commits] == [here, here]

    code, out, _ = run_cli(capsys, "runs", "--db", db_url, "--json")
    (run,) = json.loads(out)["runs"]
    assert code == 0 and run["diagevo"] == here and run["round_diagevo"] == {"1": here, "2": here}

    code, out, _ = run_cli(capsys, "memory", "show", "--db", db_url, "--run", "r", "--json")
    shown = json.loads(out)
    assert code == 0 and shown["diagevo"] == shown["committed_diagevo"] == here
    code, out, _ = run_cli(capsys, "memory", "show", "--db", db_url, "--run", "r")
    assert code == 0 and f"run opened by diagevo {here}" in " ".join(out.split())

    page = tmp_path / "report.html"
    code, _, err = run_cli(capsys, "report", "--db", db_url, "--run", "r", "-o", str(page))
    assert code == 0, err
    said = html.unescape(page.read_text(encoding="utf-8"))
    assert f"diagevo: opened by {here}; rounds committed by {here}<" in said


def test_a_commit_keeps_a_figure_named_diagevo_as_the_trainers_own(store: Recorder) -> None:
    rounds.start_run(store, "r", {"k": 0.5})
    rnd = rounds.Round.open(store, "r")
    rnd.promote(allow_empty=True)
    done = rnd.commit(summary={"diagevo": "my trainer's"})
    assert done.diagevo == version() and done.summary == {"diagevo": "my trainer's"}


def test_an_older_diagevos_log_reads_without_the_versions(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log of the diagevo before version 3 of run.started and round.committed (as written,
    at version 1): no version anywhere, and nothing said of one."""
    log = Log(run="old").question("q1", 0.5)
    log.add("promotions.decided", candidates=1, promoted=[]).commit(F=0)
    with open_log(db_url) as store:
        store.append(log.events())
        assert [e.version for e in store.read("old", types=(RunStarted, RoundCommitted))] == [1, 1]
    code, out, _ = run_cli(capsys, "runs", "--db", db_url, "--json")
    (run,) = json.loads(out)["runs"]
    assert code == 0 and run["diagevo"] is None and run["round_diagevo"] == {}
    code, out, _ = run_cli(capsys, "memory", "show", "--db", db_url, "--json")
    assert json.loads(out)["diagevo"] is json.loads(out)["committed_diagevo"] is None
    code, out, _ = run_cli(capsys, "memory", "show", "--db", db_url)
    assert code == 0 and "diagevo" not in out
    page = tmp_path / "report.html"
    assert run_cli(capsys, "report", "--db", db_url, "-o", str(page))[0] == 0
    assert "diagevo: opened" not in page.read_text(encoding="utf-8")


def test_a_recorded_version_is_shown_as_text_never_as_markup(db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    log = Log(run="r").question("q1", 0.5)
    log.add("promotions.decided", candidates=1, promoted=[]).commit(F=0, diagevo="[bold red]9.9[/bold red]")
    with open_log(db_url) as store:
        store.append(log.events())
    code, out, _ = run_cli(capsys, "memory", "show", "--db", db_url)
    assert code == 0 and "M_1 committed by diagevo [bold red]9.9[/bold red]" in out


def test_a_row_too_new_names_the_diagevo_that_wrote_it() -> None:
    """Every reader passes over a row of a version its class does not have, saying why; where the
    row records the diagevo that wrote it, the reason names that version."""
    newer, too_new = {"config": {"k": 0.5}, "seed": 0, "diagevo": "9.0.0"}, RunStarted.class_version + 1
    assert shape_problem(RunStarted.name, newer, too_new) == (
        f"written by a newer diagevo ('9.0.0'): run.started version {too_new} "
        f"(this diagevo reads up to version {RunStarted.class_version})"
    )
    assert shape_problem(RoundCommitted.name, {"F": 1}, 9) == (
        f"written by a newer diagevo: round.committed version 9 (this diagevo reads up to version {too_new - 1})"
    )
