"""Issue 47, items 1, 3 and 4 (readers): what counts once, checked by one rule set
(:mod:`diagevo.memory.counting`); no infinity or NaN in a config, from any door; a log that
holds a config its readers cannot use says how to get past it; the public writers take only
their own types; a bad event row is one line naming its seq for every reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagevo import rounds
from diagevo.catalog import CausePromoted, Event, FailureAttributed, LLMCalled, RoundCommitted
from diagevo.config.errors import ConfigError
from diagevo.config.sections import MemoryConfig
from diagevo.interchange import IngestError, ingest
from diagevo.log import Recorder, open_log
from diagevo.memory.counting import CountBreak, breaks
from diagevo.schemas import InvalidEvent, validate_event
from diagevo.train.config import load_config
from diagevo.views.verify import verify_run
from tests.logs import ForgedRow, stored, wire_event
from tests.test_cli_memory import assert_one_line_error, run_cli
from tests.test_rounds import RUN, promote_on_a_question, round_one

# --- the rules, on hand-written rows ---------------------------------------------------------


def test_the_rules_name_each_break_by_seq() -> None:
    rows = [
        (1, 0, "run.started", {"config": {"k": 0.5}}),
        (2, 1, "failure.recorded", {"failure_id": "f1"}),
        (3, 1, "failure.recorded", {"failure_id": "f1"}),  # recorded twice
        (4, 1, "failure.diagnosed", {"failure_id": "f1", "error_cause": "a new error"}),
        (5, 1, "diagnosis.failed", {"failure_id": "f1", "stage": "assign_node"}),  # same round: one diagnosis
        (6, 1, "cause.created", {"cause_id": "C1", "failure_id": "f1"}),
        (7, 1, "failure.attributed", {"failure_id": "f1", "cause_id": "C1"}),  # counted twice
        (8, 1, "cause.promoted", {"cause_id": "C1"}),
        (9, 1, "promotions.decided", {"promoted": ["C1"]}),
        (10, 1, "round.committed", {}),
        (11, 2, "failure.diagnosed", {"failure_id": "f1"}),  # diagnosed in a second round
        (12, 2, "question.generated", {"question_id": "q"}),
        (13, 2, "question.generated", {"question_id": "q"}),  # generated twice
        (14, 2, "question.scored", {"question_id": "q"}),
        (15, 2, "promotions.decided", {"promoted": ["C9"]}),  # names a promotion the round has not
        (16, 2, "cause.promoted", {"cause_id": "C2"}),  # after the round's decision
        (17, 2, "round.committed", {}),
        (18, 2, "round.committed", {}),  # committed twice
    ]
    assert list(breaks([stored(*r) for r in rows])) == [
        CountBreak(3, "failure recorded once", "failure 'f1' is recorded in round 1 already"),
        CountBreak(7, "failure counted once", "failure 'f1' was revealed a new cause in round 1 already"),
        CountBreak(11, "failure diagnosed once", "failure 'f1' is diagnosed in round 1 already"),
        CountBreak(13, "question generated once", "question 'q' is generated in round 2 already"),
        CountBreak(15, "promotions decided once", "round 2's decision names 'C9', which the round did not promote"),
        CountBreak(16, "promotions decided once", "cause 'C2' promoted after round 2's decision"),
        CountBreak(18, "round committed once", "round 2 is committed already"),
    ]


def test_a_promotion_its_decision_does_not_name_is_a_break() -> None:
    """The forged ``cause.promoted`` of issue 47 inserted before a decision that does not name it."""
    rows = [
        (1, 1, "cause.promoted", {"cause_id": "C4"}),
        (2, 1, "cause.promoted", {"cause_id": "C1", "acc": 0.01}),
        (3, 1, "promotions.decided", {"promoted": ["C4"]}),
    ]
    [broken] = breaks([stored(*r) for r in rows])
    assert broken == CountBreak(3, "promotions decided once", "round 1's decision does not name its promoted 'C1'")


def test_a_log_that_keeps_the_rules_breaks_none() -> None:
    rows = [
        (1, 1, "failure.recorded", {"failure_id": "f1"}),
        (2, 1, "failure.diagnosed", {"failure_id": "f1", "matched_cause": "C1"}),
        (3, 1, "cause.reactivated", {"cause_id": "C1", "failure_id": "f1"}),
        (4, 1, "failure.attributed", {"failure_id": "f1", "cause_id": "C1"}),  # Eq. 7: reactivated, then +1
        (5, 1, "failure.recorded", {"failure_id": "f2"}),
        (6, 1, "failure.diagnosed", {"failure_id": "f2", "error_cause": "a new error"}),
        (7, 1, "cause.created", {"cause_id": "C2", "failure_id": "f2"}),  # the new cause its diagnosis names
        (8, 1, "diagnosis.failed", {"stage": "merge"}),  # of the whole round
        (9, 1, "promotions.decided", {"promoted": []}),
        (10, 1, "round.committed", {}),
    ]
    assert list(breaks([stored(*r) for r in rows])) == []


# --- no infinity or NaN in a config ----------------------------------------------------------

FIELDS = ("memory.k", "filter.tau", "diagnosis.request_timeout_s", "diagnosis.failure_timeout_s", "grpo.kl_beta")


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("value", ["inf", "1e309", "nan", "-inf"])
def test_a_non_finite_override_is_refused_naming_the_field(field: str, value: str) -> None:
    with pytest.raises(ConfigError, match=rf"^config: {field}: Input should be a finite number"):
        load_config("configs/sim.toml", [f"{field}={value}"])


def test_a_non_finite_number_in_toml_or_python_is_refused(tmp_path: Path) -> None:
    toml = tmp_path / "c.toml"
    toml.write_text("[filter]\ntau = inf\n")
    with pytest.raises(ConfigError, match="filter.tau: Input should be a finite number"):
        load_config(toml)
    with pytest.raises(ConfigError, match="k: Input should be a finite number"):
        MemoryConfig(k=float("inf"))
    memory = MemoryConfig()
    with pytest.raises(ConfigError, match="k: Input should be a finite number"):
        memory.k = float("nan")
    assert memory.k == 0.5


def test_a_run_event_whose_config_carries_a_non_finite_number_is_refused() -> None:
    """A component's part is carried, not validated by the method's config: checked all the same."""
    raw = {
        "type": "run.started",
        "run": "r",
        "round": 0,
        "event_id": "r/0",
        "data": {"config": {"k": 0.5, "diagnosis": {"request_timeout_s": float("inf")}}},
    }
    with pytest.raises(InvalidEvent, match=r"diagnosis.request_timeout_s: must be a finite number, not inf"):
        validate_event(raw)


def test_a_refused_fork_option_creates_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'f.db'}"
    with open_log(db) as store:
        round_one(store)
        n = len(list(store.read(RUN)))
    code, _, err = run_cli(
        capsys, "memory", "fork", "--run", RUN, "--round", "1", "--to", "g", "--set", "filter.tau=inf", "--db", db
    )
    assert_one_line_error(code, err, "filter.tau", "finite number")
    with open_log(db) as store:
        assert store.runs() == [RUN] and len(list(store.read(RUN))) == n


# --- a stored config its readers cannot use ---------------------------------------------------


def _bricked(db: str) -> int:
    """Two rounds committed, then a ``run.configured`` with ``k: null`` (as an older diagevo
    stored ``--set memory.k=inf``), appended raw; returns its seq."""
    with open_log(db) as store:
        round_one(store)
        rounds.open_round(store, RUN)
        promote_on_a_question(rounds.Round(store, RUN, 2))
        rounds.Round(store, RUN, 2).commit()
        bad = {"config": {"memory": {"k": None, "theta_up": 0.5}}, "seed": 3}
        store.append([ForgedRow(type="run.configured", run=RUN, round=3, event_id="bad", data=bad)])
        return store.last_seq(RUN)


def test_a_config_no_reader_can_use_says_how_to_get_past_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The readers of the memory pass it over, named (issue 73), and so does what trains on the
    run's config: the fold refused it, so it is none of the run's (issue 82); the way back to a log
    without it is the fork each line names."""
    db = f"sqlite:///{tmp_path / 'b.db'}"
    seq = _bricked(db)
    for command in (("memory", "show", "--run", RUN), ("report", "--run", RUN, "-o", str(tmp_path / "r.html"))):
        code, _, err = run_cli(capsys, *command, "--db", db)
        assert code == 0, err
        assert f"run 'ext', seq {seq}: passed over: run.configured holds no positive k" in err, err
    code, out, _ = run_cli(capsys, "memory", "verify", "--run", RUN, "--db", db)
    assert code == 1 and f"seq {seq}: run.configured holds no positive k" in " ".join(out.split())
    with open_log(db) as store:  # the fold refused it: no config of the run's (issue 82), the one before it in force
        assert rounds.run_config(store, RUN).memory.k == 1.0
    # the way back: the fork leaves the bad config behind
    code, _, err = run_cli(capsys, "memory", "fork", "--run", RUN, "--round", "2", "--to", "ext-r2", "--db", db)
    assert code == 0, err
    with open_log(db) as store:
        assert verify_run(store, "ext-r2") == []
        assert rounds.run_config(store, "ext-r2").memory.k == 1.0


# --- the public writers take only their own types ---------------------------------------------


NOT_NOTES = [
    FailureAttributed(failure_id="x", cause_id="C1", via="recurrence"),
    RoundCommitted(),
    CausePromoted(cause_id="C1", acc=1.0, n_candidates=1),
    LLMCalled(stage="extract"),
]


@pytest.mark.parametrize("event", NOT_NOTES, ids=lambda e: e.name)
def test_a_note_is_bookkeeping_only(store: Recorder, event: Event) -> None:
    round_one(store)
    rounds.open_round(store, RUN)
    n = store.last_seq(RUN)
    with pytest.raises(rounds.ProtocolError, match=rf"^a note cannot be '{event.name}' \(it takes checkpoint.pruned, "):
        rounds.Round(store, RUN, 2).note("x", event)
    assert store.last_seq(RUN) == n


@pytest.mark.parametrize("etype", ["cause.promoted", "round.committed", "run.configured", "question.scored"])
def test_a_diagnosis_holds_no_promotion_milestone_or_config(store: Recorder, etype: str) -> None:
    round_one(store)
    rnd = rounds.Round.open(store, RUN)
    ev = ForgedRow(type=etype, run=RUN, round=2, event_id="x", data={})
    with pytest.raises(rounds.ProtocolError, match=rf"^a diagnosis cannot be '{etype}' "):
        rnd.append_diagnosis([ev])


def test_a_diagnosis_counts_a_failure_once(store: Recorder) -> None:
    """C1 was counted for failure x in round 1; an attribution of x again is refused, its retry
    (the same event) is not."""
    round_one(store)
    rnd = rounds.Round.open(store, RUN)
    again = wire_event("failure.attributed", RUN, 2, "again", failure_id="x", cause_id="C2", via="dedup")
    n = store.last_seq(RUN)
    with pytest.raises(rounds.ProtocolError, match="failure counted once: failure 'x' was attributed in round 1"):
        rnd.append_diagnosis([again])
    assert store.last_seq(RUN) == n
    recorded = wire_event(
        "failure.recorded", RUN, 2, "fail/y", failure_id="y", question_id="q", response="a", reference="b"
    )
    store.append([recorded])
    diagnosed = wire_event("failure.diagnosed", RUN, 2, "dx/y", failure_id="y", error_cause="a new error")
    first = wire_event("failure.attributed", RUN, 2, "first", failure_id="y", cause_id="C2", via="dedup")
    assert rnd.append_diagnosis([diagnosed, first]).appended == 2
    assert rnd.append_diagnosis([diagnosed, first]).appended == 0  # a retry


def test_ingest_refuses_an_id_clash_within_the_file(tmp_path: Path) -> None:
    events = [
        wire_event("run.started", "r", 0, "r/0", config={"k": 0.5}),
        wire_event("round.started", "r", 1, "r/1"),
        wire_event("run.noted", "r", 1, "n", note="one"),
        wire_event("run.noted", "r", 1, "n", note="one"),  # the same line twice: stored once
        wire_event("run.noted", "r", 1, "n", note="two"),
    ]
    text = "".join(json.dumps(e.line()) + "\n" for e in events)
    with open_log(f"sqlite:///{tmp_path / 'i.db'}") as store:
        with pytest.raises(IngestError, match=r"^line 5: event id 'n' of run 'r' is on line 3 as another event"):
            ingest(store, text)
        assert store.runs() == []
        assert ingest(store, "".join(text.splitlines(keepends=True)[:4])).appended == 3


# --- a bad event row: one line naming its seq, for every reader --------------------------------


def _readers(tmp_path: Path) -> list[tuple[str, ...]]:
    return [
        ("memory", "show", "--run", RUN),
        ("memory", "stats", "--run", RUN),
        ("report", "--run", RUN, "-o", str(tmp_path / "r.html")),
    ]


@pytest.mark.parametrize(
    ("rows", "said"),
    [
        (
            [(2, "cause.created", {"cause_id": "Cx", "node_id": ["x"], "description": "d"})],
            "out of shape: cause.created data.node_id is not of its type",
        ),
        ([(2, "round.started", {}), (9, "round.committed", {})], "round 9 starts before round 2 was committed"),
        (
            [(2, "failure.recorded", {"failure_id": ["f"], "question_id": "q"})],
            "out of shape: failure.recorded data.failure_id is not of its type",
        ),
    ],
    ids=["a list for a node id", "round 9 committed while round 2 is open", "a list for a failure id"],
)
def test_a_bad_row_is_one_line_naming_its_seq(
    store: Recorder, tmp_path: Path, capsys: pytest.CaptureFixture[str], rows: list, said: str
) -> None:
    """Stored raw (SQLite holds no check; the database takes any row its checks of shape let
    through): ``memory verify`` names it by its seq; every reader exits 0, and each that reads
    it names it in one line, passed over: a row out of its type's shape (what PostgreSQL refuses
    on insert) as a row the fold refuses (issue 73)."""
    round_one(store)
    raw = [ForgedRow(type=t, run=RUN, round=r, event_id=f"raw{i}", data=d) for i, (r, t, d) in enumerate(rows)]
    store.append(raw)
    seq = store.last_seq(RUN)
    assert any(p.startswith(f"seq {seq}: ") or f": seq {seq}: " in p for p in verify_run(store, RUN))
    for command in _readers(tmp_path):
        code, _, err = run_cli(capsys, *command, "--db", store.url)
        assert code == 0, (command, err)
        if command[1] != "show" or "failure.recorded" not in said:  # show reads what the fold applies
            assert f"run {RUN!r}, seq {seq}: passed over: {said}" in err, (command, err)
