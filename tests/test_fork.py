"""``diagevo memory fork`` / ``diff``: a fork replays like its source through the fork round,
has its own chain and provenance, tells the story from before the fork, and continues under
another k with ``train --resume --set``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagevo import rounds
from diagevo.catalog import CheckpointWritten, RunConfigured
from diagevo.log import Recorder, open_log
from diagevo.views.checkpoints import checkpoint_path
from tests.logs import wire_event
from tests.test_cli_memory import run_cli
from tests.test_rounds import RUN, candidate, round_one


def two_rounds(db: str) -> None:
    """A run of ``diagevo train``'s (which ``train --resume`` continues), written through the protocol."""
    with open_log(db) as store:
        round_one(store, rounds.OUR_TRAINER)
        rounds.open_round(store, RUN)
        reqs = rounds.Round(store, RUN, 2).requests(20)
        rounds.Round(store, RUN, 2).record([candidate(q.question_id, q, agree=9) for q in reqs])
        assert rounds.Round(store, RUN, 2).promote()  # C1 and/or C2 mastered in round 2
        rounds.Round(store, RUN, 2).commit()


def test_fork_replay_why_diff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'f.db'}"
    two_rounds(db)
    code, out, err = run_cli(
        capsys, "memory", "fork", "--run", RUN, "--round", "1", "--to", "what-if", "--db", db, "--json"
    )
    assert code == 0, err
    prov = json.loads(out)
    with open_log(db) as s:
        src = list(s.read(RUN))
        new = list(s.read("what-if"))
        commit1 = next(e for e in src if e.type == "round.committed" and e.round == 1)
        assert prov["source_hash"] == commit1.hash and prov["source_seq"] == commit1.seq
        stored = [(r.type, r.round, r.data) for r in s.raw("what-if")][:-1]  # the bytes copied as they were
        assert stored == [(r.type, r.round, r.data) for r in s.raw(RUN) if r.seq <= commit1.seq]
        assert new[-1].type == "run.forked" and new[-1].event.source_run == RUN
        assert new[0].hash != src[0].hash  # its own chain
    for r in ("0", "1"):
        a = json.loads(run_cli(capsys, "memory", "replay", "--round", r, "--run", RUN, "--db", db, "--json")[1])
        b = json.loads(run_cli(capsys, "memory", "replay", "--round", r, "--run", "what-if", "--db", db, "--json")[1])
        assert {**a, "run": "what-if"} == b
    code, out, _ = run_cli(capsys, "memory", "replay", "--round", "2", "--run", "what-if", "--db", db, "--json")
    assert code == 1
    why = json.loads(run_cli(capsys, "memory", "why", "C1", "--run", "what-if", "--db", db, "--json")[1])
    assert why["timeline"][0]["kind"] == "created"
    assert run_cli(capsys, "memory", "verify", "--run", "what-if", "--db", db)[0] == 0

    d = json.loads(
        run_cli(capsys, "memory", "diff", "--run", RUN, "--run", "what-if", "--round", "1", "--db", db, "--json")[1]
    )
    assert d["causes_differing"] == [] and d["schedule"][RUN] == d["schedule"]["what-if"]
    d = json.loads(run_cli(capsys, "memory", "diff", "--run", RUN, "--run", "what-if", "--db", db, "--json")[1])
    assert d["schedule"][RUN]["round"] == 2 and d["schedule"]["what-if"]["round"] == 1
    differing = {c["cause_id"]: c for c in d["causes_differing"]}
    assert differing and all(
        c[RUN]["state"] == "mastered" and c["what-if"]["state"] == "active" for c in differing.values()
    )
    code, out, err = run_cli(capsys, "memory", "diff", "--run", RUN, "--run", "what-if", "--db", db)
    assert code == 0 and "ε_t+1" in out and "causes differ" in out
    code, out, err = run_cli(capsys, "memory", "diff", "--run", RUN, "--run", "what-if", "--round", "1", "--db", db)
    assert code == 0 and "no cause differs in state or frequency" in out and "┃ cause" not in out  # no empty table

    for args, msg in [
        (["--round", "3", "--to", "x"], "round 3 of run 'ext' is not committed"),
        (["--round", "1", "--to", "what-if"], "run 'what-if' exists already"),
    ]:
        code, _, err = run_cli(capsys, "memory", "fork", "--run", RUN, *args, "--db", db)
        assert code == 1 and msg in err and "Traceback" not in err
    code, _, err = run_cli(capsys, "memory", "diff", "--run", RUN, "--db", db)
    assert code == 1 and "exactly twice" in err


@pytest.mark.slow
def test_fork_continues_under_another_k(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.test_train import small_args

    db = f"sqlite:///{tmp_path / 't.db'}"
    assert run_cli(capsys, *small_args(db, "src", 2, tmp_path))[0] == 0
    assert run_cli(capsys, "memory", "fork", "--run", "src", "--round", "1", "--to", "k1", "--db", db)[0] == 0
    out_dir = tmp_path / "ckpt"  # small_args's train.out_dir: the command names it again, the log never does
    again = ["train", "--run", "k1", "--resume", "--db", db, "--rounds", "2", "--quiet", "--out-dir", str(out_dir)]
    code, _, err = run_cli(capsys, *again, "--set", "memory.k=1.0")
    assert code == 0, err
    with open_log(db) as s:
        [conf] = [e for e in s.read("k1", types=(RunConfigured,))]
        assert conf.round == 2 and conf.event.config["memory"]["k"] == 1.0  # k is stored once, as memory.k
        paths = {r: [(e.round, e.event.path) for e in s.read(r, types=(CheckpointWritten,))] for r in ("src", "k1")}
        assert [p for p in paths["k1"] if p[0] == 1] == [p for p in paths["src"] if p[0] == 1]  # continues from these
        # round 2 writes its own, in the fork's folder
        assert {checkpoint_path(s, "k1", p, out_dir).parent.name for t, p in paths["k1"] if t == 2} == {"k1"}
        assert {checkpoint_path(s, "k1", p, out_dir).parent.name for t, p in paths["k1"] if t == 1} == {"src"}
    stats = {
        r: json.loads(run_cli(capsys, "memory", "stats", "--run", r, "--db", db, "--json")[1])["rounds"]
        for r in ("src", "k1")
    }
    assert stats["src"][0] == {**stats["k1"][0]}  # round 1 is shared history
    assert stats["k1"][1]["epsilon_next"] != stats["src"][1]["epsilon_next"]  # k = 1.0 from round 2 on
    assert run_cli(capsys, "memory", "verify", "--run", "k1", "--db", db)[0] == 0


def test_reconfiguring_a_run_is_refused_mid_round_and_for_bad_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'c.db'}"
    two_rounds(db)
    code, _, err = run_cli(capsys, "train", "--run", RUN, "--resume", "--db", db, "--quiet", "--set", "memory.k=-1")
    assert code == 1 and err.startswith("error: config:") and "Traceback" not in err
    with open_log(db) as s:
        rounds.open_round(s, RUN)
        n = len(list(s.read(RUN)))
    code, _, err = run_cli(capsys, "train", "--run", RUN, "--resume", "--db", db, "--quiet", "--set", "memory.k=2.0")
    assert code == 1 and "in the middle of round 3" in err
    with open_log(db) as s:
        assert len(list(s.read(RUN))) == n  # nothing stored


def _new_cause_in_round_two(store: Recorder, run: str, text: str) -> None:
    """Round 2 of ``run`` creates cause C3 (each run numbers its new causes on its own)."""
    from diagevo.catalog.ids import event_id

    rounds.open_round(store, run)
    rounds.Round(store, run, 2).record([candidate("q2-x")])
    store.append(
        [
            wire_event("node.created", run, 2, event_id(run, 2, "n9"), node_id="N9", label=f"node for: {text}"),
            wire_event("cause.created", run, 2, event_id(run, 2, "c3"), cause_id="C3", node_id="N9", description=text),
        ]
    )
    rounds.Round(store, run, 2).promote()
    rounds.Round(store, run, 2).commit()


def test_diff_matches_causes_by_the_event_that_created_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'd.db'}"
    with open_log(db) as store:
        round_one(store, rounds.OUR_TRAINER)  # train's run: its fork continues with train --resume
    code, out, _ = run_cli(capsys, "memory", "fork", "--run", RUN, "--round", "1", "--to", "other", "--db", db)
    assert code == 0 and f"continue with: diagevo train --run other --resume --db {db}" in " ".join(out.split())
    with open_log(db) as store:
        _new_cause_in_round_two(store, RUN, "misreads the question's units and converts hours to minutes twice")
        _new_cause_in_round_two(store, "other", "drops a negative sign when moving a term across the equals sign")
    d = json.loads(run_cli(capsys, "memory", "diff", "--run", RUN, "--run", "other", "--db", db, "--json")[1])
    assert d["matched_by"] == "creating event"
    assert d["causes_only_in"] == {RUN: ["C3"], "other": ["C3"]}  # two different causes named C3
    assert [c["cause_id"] for c in d["same_id_differs"]] == ["C3"]
    assert d["causes_differing"] == []  # C1 and C2 are the same causes, in the same state
    assert d["nodes_only_in"] == {RUN: ["N9"], "other": ["N9"]} and d["same_node_id_differs"] == ["N9"]
    code, out, _ = run_cli(capsys, "memory", "diff", "--run", RUN, "--run", "other", "--db", db)
    assert code == 0 and "1 id names a different cause in each run" in " ".join(out.split())
    assert "1 node id names a different skill node in each run (created after the fork): N9" in " ".join(out.split())


def test_a_long_id_list_is_cut_with_the_count_of_the_rest() -> None:
    from diagevo.cli.fork import LISTED, _some

    assert _some([]) == "-" and _some(["C1", "C2"]) == "C1, C2"
    ids = [f"C{i}" for i in range(1, LISTED + 8)]
    assert _some(ids) == ", ".join(ids[:LISTED]) + " and 7 more"
