"""``diagevo memory whatif``: with no setting changed a what-if reproduces the recorded memory
exactly (every state, frequency, F_t and ε of every round) on a simulator run and on a log
written by an external trainer; under another θ_up, k or the "no state updates" ablation the
memory is decided again by hand-computed rules; settings that need model calls are refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from diagevo import rounds
from diagevo.catalog import RoundCommitted
from diagevo.errors import BadInput, fork_call
from diagevo.fork import ForkError, fork_run
from diagevo.log import Recorder, open_log, payload
from diagevo.memory.schedule import schedule
from diagevo.train.config import load_config
from diagevo.train.run import train
from diagevo.views.memory import commit_memories
from diagevo.whatif import MEANING, parse_settings, what_if, what_if_sweep
from tests.logs import Log, wire_event
from tests.test_cli_memory import run_cli
from tests.test_rounds import RUN, candidate, round_one

ROOT = Path(__file__).resolve().parent.parent


def memories(store: Recorder, run: str) -> list[dict[str, Any]]:
    """Every committed round's memory as numbers: states, frequencies, F_t, F_1, ε_{t+1}, p."""
    out = []
    for m in commit_memories(store, run):
        s = schedule(m)
        out.append(
            {
                "round": m.committed,
                "causes": {c.id: (c.node, c.state.value, c.frequency) for c in m.causes.values()},
                "nodes": {n.id: n.label for n in m.nodes.values()},
                "F": s.F,
                "F1": m.F1,
                "k": m.k,
                "epsilon": s.epsilon,
                "p": s.p,
            }
        )
    return out


def commits(store: Recorder, run: str) -> list[dict[str, Any]]:
    return [payload(e) for e in store.read(run, types=(RoundCommitted,))]


def assert_identity(db: str, run: str, capsys: pytest.CaptureFixture[str]) -> None:
    with open_log(db) as store:
        made = what_if(store, run, {}, f"{run}-same")
        assert made.created and made.settings == {}
        assert memories(store, run) == memories(store, f"{run}-same")
        assert commits(store, run) == commits(store, f"{run}-same")
        n_rounds = len(commits(store, run))
        recorded = [(e.round, e.type, e.event) for e in store.read(run, texts=True) if e.type != "run.forked"]
        derived = [(e.round, e.type, e.event) for e in store.read(f"{run}-same", texts=True)]
        assert derived[:-1] == recorded  # the same events in the same order
        assert derived[-1][1] == "run.forked" and derived[-1][2].whatif == {"settings": {}, "meaning": MEANING}
    for t in range(1, n_rounds + 1):
        code, out, err = run_cli(
            capsys, "memory", "diff", "--run", run, "--run", f"{run}-same", "--round", str(t), "--db", db, "--json"
        )
        assert code == 0, err
        d = json.loads(out)
        assert d["causes_differing"] == [] and d["causes_only_in"] == {run: [], f"{run}-same": []}
        assert d["nodes_only_in"] == {run: [], f"{run}-same": []} and d["same_id_differs"] == []
    assert run_cli(capsys, "memory", "verify", "--run", f"{run}-same", "--db", db)[0] == 0


@pytest.fixture(scope="module")
def five(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A five-round simulator run ``five`` (with promotions and reactivations)."""
    tmp = tmp_path_factory.mktemp("whatif")
    db = f"sqlite:///{tmp / 'five.db'}"
    cfg = load_config(
        ROOT / "configs" / "sim.toml",
        [
            "train.challenger_questions=16",
            "train.curriculum_questions=48",
            "train.rounds=5",
            'train.run="five"',
            f'train.out_dir="{tmp / "ckpt"}"',
        ],
    )
    with open_log(db) as store:
        train(cfg, store)
        stats = commits(store, "five")
    assert sum(c["promotions"] for c in stats) > 0 and sum(c["reactivations"] for c in stats) > 0
    return db


def test_no_change_reproduces_a_simulator_run(five: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert_identity(five, "five", capsys)


def test_no_change_reproduces_an_external_trainers_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from examples.external_trainer import main

    db = f"sqlite:///{tmp_path / 'ext.db'}"
    main(
        [
            "--db",
            db,
            "--run",
            "ext",
            "--rounds",
            "3",
            "--set",
            "train.challenger_questions=16",
            "--set",
            "train.curriculum_questions=48",
            "--set",
            f'train.out_dir="{tmp_path / "ckpt"}"',
        ]
    )
    capsys.readouterr()
    with open_log(db) as store:
        assert sum(c["promotions"] for c in commits(store, "ext")) > 0
    assert_identity(db, "ext", capsys)


def two_rounds(store: Recorder) -> None:
    """Round 1: C1 (f=2), C2 (f=1), θ_up = 0.5, k = 1. Round 2: every candidate at p1 = 9/12, so
    each targeted cause is promoted; then a failure ``y`` attributed to C1 reactivates it."""
    round_one(store)
    rounds.open_round(store, RUN)
    reqs = rounds.Round(store, RUN, 2).requests(20)
    rounds.Round(store, RUN, 2).record([candidate(q.question_id, q, agree=9) for q in reqs])
    assert {p.cause_id for p in rounds.Round(store, RUN, 2).promote()} == {"C1", "C2"}
    store.append(
        [
            wire_event("cause.reactivated", RUN, 2, f"{RUN}/2/r", cause_id="C1", failure_id="y"),
            wire_event("failure.attributed", RUN, 2, f"{RUN}/2/a", failure_id="y", cause_id="C1", via="recurrence"),
        ]
    )
    rounds.Round(store, RUN, 2).commit()


def test_other_settings_are_decided_again(store: Recorder) -> None:
    two_rounds(store)
    # recorded: C1 promoted then reactivated (Active, 1), C2 Mastered: F_2 = 1, ε_3 = 3 / (3 + 1/1)
    [_, rec] = memories(store, RUN)
    assert rec["causes"] == {"C1": ("N1", "active", 1), "C2": ("N1", "mastered", 0)}
    assert (rec["F"], rec["F1"], rec["epsilon"]) == (1, 3, 0.75)

    # θ_up = 0.8 > 9/12: nothing promoted, so y is no reactivation: C1 = 2 + 1, F_2 = 4, ε_3 = 3/7
    strict = what_if(store, RUN, {"memory.theta_up": "0.8"})
    assert strict.run == f"{RUN}~theta_up=0.8"
    [one, two] = memories(store, strict.run)
    assert one["causes"] == {"C1": ("N1", "active", 2), "C2": ("N1", "active", 1)}
    assert two["causes"] == {"C1": ("N1", "active", 3), "C2": ("N1", "active", 1)}
    assert (two["F"], two["epsilon"]) == (4, 3 / 7)
    assert [(r.round, r.promotions, r.reactivations) for r in strict.rounds] == [(1, 0, 0), (2, 0, 0)]
    assert commits(store, strict.run)[1]["epsilon_next"] == 3 / 7

    # θ_up = 0.75 = 9/12 exactly: promoted as recorded
    assert memories(store, what_if(store, RUN, {"memory.theta_up": "0.75"}).run)[1]["causes"] == rec["causes"]

    # no state updates: the same as no promotion
    frozen = what_if(store, RUN, {"memory.state_updates": "false"})
    assert memories(store, frozen.run)[1]["causes"] == two["causes"]

    # k = 2: the states as recorded, ε_2 = 3 / (3 + 3/2) and ε_3 = 3 / (3 + 1/2)
    wide = what_if(store, RUN, {"memory.k": "2"})
    m1, m2 = memories(store, wide.run)
    assert m2["causes"] == rec["causes"] and m1["k"] == 2.0
    assert (m1["epsilon"], m2["epsilon"]) == (3 / 4.5, 3 / 3.5)
    assert [r.epsilon_next for r in wide.rounds] == [3 / 4.5, 3 / 3.5]

    # an open round is not copied: the what-if ends at the source's last commit
    rounds.open_round(store, RUN)
    ended = what_if(store, RUN, {"memory.k": "3"})
    assert ended.source_round == 2 and [r.round for r in ended.rounds] == [1, 2]
    assert max(e.round for e in store.read(ended.run)) == 2
    with pytest.raises(BadInput, match="2 names for 1 what-ifs"):
        what_if_sweep(store, RUN, ["memory.k=4"], ["a", "b"])

    # the same what-if again is a no-op; another under a taken name is refused
    again = what_if(store, RUN, {"memory.k": "2"})
    assert not again.created and again.rounds == wide.rounds
    with pytest.raises(BadInput, match="exists already"):
        what_if(store, RUN, {"memory.k": "5"}, wide.run)


@pytest.mark.parametrize(
    ("setting", "why"),
    [
        ("filter.tau=2", "filter.tau: it changes which questions are retained"),
        ("diagnosis.theta_dup=0.4", "diagnosis.theta_dup: it changes what the diagnostician decides"),
        ("diagnosis.theta_merge=0.4", "diagnosis.theta_merge"),
        ("grpo.construction_responses=8", "N changes the votes"),
        ("memory.generation=free", "it changes which questions are asked"),
        ("memory.k", "not of the form section.field=value"),
        ("memory.k=", "an empty value"),
    ],
)
def test_settings_that_need_model_calls_are_refused(setting: str, why: str) -> None:
    with pytest.raises(BadInput) as exc:
        parse_settings([setting])
    assert why in str(exc.value) and "\n" not in str(exc.value)


def test_sweep_combinations() -> None:
    assert parse_settings(["memory.k=0.25,0.5", "memory.theta_up=0.7,0.9"]) == [
        {"memory.k": "0.25", "memory.theta_up": "0.7"},
        {"memory.k": "0.25", "memory.theta_up": "0.9"},
        {"memory.k": "0.5", "memory.theta_up": "0.7"},
        {"memory.k": "0.5", "memory.theta_up": "0.9"},
    ]


def test_cli_sweep_table_and_reads(five: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "memory", "whatif", "--run", "five", "--set", "memory.k=0.25,2", "--db", five)
    assert code == 0, err
    assert "five~k=0.25" in out and "five~k=2" in out and "What a what-if is" in out and "recorded" in out
    code, out, err = run_cli(
        capsys, "memory", "whatif", "--run", "five", "--set", "memory.k=0.25,2", "--db", five, "--json"
    )
    assert code == 0, err
    done = json.loads(out)
    assert [w["created"] for w in done["whatifs"]] == [False, False]
    low, high = (w["rounds"] for w in done["whatifs"])
    assert [r["F"] for r in low] == [r["F"] for r in high] == [r["F"] for r in done["recorded"]]
    assert all(a["epsilon_next"] > b["epsilon_next"] for a, b in zip(high, low))  # ε grows with k
    runs = json.loads(run_cli(capsys, "runs", "--db", five, "--json")[1])
    assert {"five~k=0.25", "five~k=2"} <= {r["run"] for r in runs["runs"]}
    report = tmp_path / "compare.html"
    code, out, err = run_cli(
        capsys, "report", "--run", "five", "--run", "five~k=2", "-o", str(report), "--db", five, "--json"
    )
    assert code == 0, err
    assert json.loads(out)["runs"] == ["five", "five~k=2"] and "five~k=2" in report.read_text(encoding="utf-8")
    code, _, err = run_cli(capsys, "memory", "whatif", "--run", "five", "--set", "filter.tau=2", "--db", five)
    assert code == 1 and "needs new model calls" in err and len(err.strip().splitlines()) == 1


def test_no_round_continues_a_whatif(store: Recorder, capsys: pytest.CaptureFixture[str]) -> None:
    """A what-if holds no model trained under its memory: opening a round in it, or forking it, is
    refused, with the fork of the source under the same settings as the way to train on; nothing
    is appended."""
    two_rounds(store)
    strict = what_if(store, RUN, {"memory.theta_up": "0.8"})
    head = store.last_seq(strict.run)
    with pytest.raises(rounds.ProtocolError, match=r"is a what-if of run .*no round continues it") as caught:
        rounds.open_round(store, strict.run)
    fork = caught.value.fix
    assert fork == fork_call(RUN, 2, f"{strict.run}-train", {"memory.theta_up": "0.8"})
    assert store.last_seq(strict.run) == head
    with pytest.raises(ForkError, match=r"is a what-if of run .*no fork of it trains on") as forked:
        fork_run(store, strict.run, 2, "fork-of-whatif")
    assert forked.value.fix == fork and not store.has_run("fork-of-whatif")
    rounds.open_round(store, RUN)  # the source goes on


def test_cli_round_start_refuses_a_whatif(five: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "memory", "whatif", "--run", "five", "--set", "memory.k=2", "--db", five)
    assert code == 0, err
    code, _, err = run_cli(capsys, "round", "start", "--run", "five~k=2", "--db", five)
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "is a what-if of run 'five'" in err and "memory fork --run five --round 5 --to" in err, err
    assert "--set memory.k=2" in err, err


def _unmarked_log() -> Log:
    """A log without ``promotions.decided`` (written before it existed, or by a trainer that does
    not write it). Round 2: C1's questions at p1 = 0.75 (promoted at θ_up = 0.7), C2's at 0.5, then
    a failure ``y`` on C1 reactivates it; round 3: C2's question at 8/12, nothing promoted."""
    log = Log(run="legacy", k=1.0).node("N1").cause("C1", "N1", failure="f1").cause("C2", "N1", failure="f2")
    log.commit()
    log.question("a1", 0.75, active="C1").question("a2", 0.75, active="C1").question("b1", 0.5, active="C2")
    log.add("cause.promoted", cause_id="C1", acc=0.75, n_candidates=2)
    log.reactivate("C1", "y")
    log.commit()
    log.question("b2", 8 / 12, active="C2").attribute("C2", "z").commit()
    return log


def test_a_log_without_promotion_markers_is_decided_where_it_promoted(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'legacy.db'}"
    with open_log(db) as store:
        store.append(_unmarked_log().events())
        same = what_if(store, "legacy", {}, "same")

        def kept(run: str) -> list[tuple[int, str, object]]:  # a commit's F and ε are counted again
            return [(e.round, e.type, e.type != "round.committed" and e.event) for e in store.read(run, texts=True)]

        assert kept(same.run)[:-1] == kept("legacy")
        assert memories(store, same.run) == memories(store, "legacy")

        def promoted(run: str) -> list[tuple[int, str, str | None]]:
            """Round, cause promoted, and the event that follows it in the derived run."""
            events = list(store.read(run))
            return [
                (e.round, e.event.cause_id, events[i + 1].type)
                for i, e in enumerate(events)
                if e.type == "cause.promoted"
            ]

        assert promoted(what_if(store, "legacy", {"memory.theta_up": "0.8"}).run) == []
        lower = what_if(store, "legacy", {"memory.theta_up": "0.6"}).run
        # round 2 at the source's promotion; round 3, where it promoted nothing, once its questions are in
        # (the failure that reactivates it recorded next)
        assert promoted(lower) == [(2, "C1", "failure.recorded"), (3, "C2", "failure.recorded")]
        assert all(e.type != "promotions.decided" for e in store.read(lower))
        [*_, three] = memories(store, lower)
        assert three["causes"]["C2"][1] == "active"  # promoted in round 3, then z reactivated it


def test_a_setting_of_a_vast_integer_is_refused_naming_it(store: Recorder) -> None:
    """Issue 83: a setting of 10**5000 (where the value text belongs) is the library's one-line
    refusal naming the setting; quoting the value raised Python's int-string ValueError."""
    with pytest.raises(BadInput, match=r"settings\['memory.k'\]: .*an integer of about 5,000 digits"):
        what_if(store, RUN, {"memory.k": 10**5000})  # type: ignore[dict-item]
