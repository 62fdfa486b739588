"""The round protocol (``diagevo.rounds``): order, idempotency, votes/filter, promotions, commit."""

from __future__ import annotations

from collections import Counter

import pytest

from diagevo import rounds
from diagevo.catalog import QuestionGenerated, QuestionScored
from diagevo.config.errors import ConfigError
from diagevo.log import Recorder, open_log
from diagevo.views.memory import load_memory
from tests.logs import wire_event

RUN = "ext"


def _evidence(t: int, fid: str, matched: str | None = None, error_cause: str | None = None) -> list:
    """``failure.recorded`` and ``failure.diagnosed`` of failure ``fid`` (of the round's first
    question, which :func:`round_one` records retained): what a memory change follows from."""
    return [
        wire_event(
            "failure.recorded",
            RUN,
            t,
            f"{RUN}/{t}/fail/{fid}",
            failure_id=fid,
            question_id=f"q{t}-00000",
            response="a",
            reference="b",
        ),
        wire_event(
            "failure.diagnosed",
            RUN,
            t,
            f"{RUN}/{t}/dx/{fid}",
            failure_id=fid,
            matched_cause=matched,
            error_cause=error_cause,
        ),
    ]


def _cause_events(t: int) -> list:
    e = []
    e.append(wire_event("node.created", RUN, t, f"{RUN}/{t}/n1", node_id="N1", label="fractions and ratios"))
    for i, text in enumerate(
        (
            "adds numerators and denominators separately when summing fractions",
            "forgets to reduce the final ratio to lowest terms before answering",
        ),
        1,
    ):
        e += _evidence(t, f"f{i}", error_cause=text)
        e.append(
            wire_event(
                "cause.created",
                RUN,
                t,
                f"{RUN}/{t}/c{i}",
                cause_id=f"C{i}",
                node_id="N1",
                description=text,
                failure_id=f"f{i}",
            )
        )
    e += _evidence(t, "x", matched="C1")
    e.append(wire_event("failure.attributed", RUN, t, f"{RUN}/{t}/a1", failure_id="x", cause_id="C1", via="recurrence"))
    return e


def answers(label: str, agree: int, n: int = 12) -> list[str | None]:
    return [label] * agree + [str(1000 + i) for i in range(n - agree)]


def promote_on_a_question(rnd: rounds.Round) -> None:
    """``rnd``'s promotions decided after one free question of the trainer's own: a round decides
    them from its questions, and promoting before any is recorded is refused."""
    rnd.record([candidate(f"own-{rnd.t}")])
    rnd.promote()


def candidate(qid: str, req: rounds.Request | None = None, label: str = "7", agree: int = 6) -> rounds.Candidate:
    if req is None:
        return rounds.Candidate(qid, "free", f"question {qid}?", answers=tuple(answers(label, agree)))
    return rounds.Candidate(
        qid,
        req.mode,
        f"question {qid}?",
        req.active_cause,
        req.mastered_cause,
        req.node,
        answers=tuple(answers(label, agree)),
    )


def round_one(store: Recorder, trainer: str = rounds.EXTERNAL_TRAINER) -> None:
    """Round 1 with two causes (C1: f=2, C2: f=1), committed."""
    assert rounds.start_run(store, RUN, {"k": 1.0, "memory": {"theta_up": 0.5}}, seed=3, trainer=trainer)
    assert rounds.open_round(store, RUN) == 1
    reqs = rounds.Round(store, RUN, 1).requests(4)
    assert {r.mode for r in reqs} == {"free"}  # F_0 = 0: free exploration only
    rounds.Round(store, RUN, 1).record([candidate(r.question_id) for r in reqs])
    store.append(_cause_events(1))
    rounds.Round(store, RUN, 1).promote()
    rounds.Round(store, RUN, 1).commit({"heldout_acc": 0.5})


def test_a_round_through_the_protocol(store: Recorder) -> None:
    round_one(store)
    assert rounds.open_round(store, RUN) == 2
    reqs = rounds.Round(store, RUN, 2).requests(40)
    assert reqs == rounds.Round(store, RUN, 2).requests(40)  # deterministic for (run, round, seed)
    assert reqs != rounds.Round(store, RUN, 2).requests(40, seed=4)
    modes = Counter(r.mode for r in reqs)
    assert modes["targeted"] > 0 and modes["free"] > 0  # ε_2 = F1/(F1+F/k) = 1/2
    targeted = [r for r in reqs if r.mode == "targeted"]
    assert {r.active_cause for r in targeted} <= {"C1", "C2"}
    assert "adds numerators" in " ".join(
        m["content"] for m in next(r for r in targeted if r.active_cause == "C1").messages()
    )
    c2 = [r for r in targeted if r.active_cause == "C2"]
    c1 = [r for r in targeted if r.active_cause == "C1"]
    # C2's candidates are answered with p1 = 9/12 (mastered at θ_up = 0.5), C1's with 3/12
    cands = [candidate(r.question_id, r, agree=9) for r in c2] + [candidate(r.question_id, r, agree=3) for r in c1]
    scored = rounds.Round(store, RUN, 2).record(cands)
    assert all(s.pseudo_label == "7" for s in scored)
    assert {s.retained for s in scored if s.active_cause == "C2"} == {True}  # 0.25 <= 0.75 <= 0.75, >= 1.6 * 1/12
    assert scored.new == len(cands) and not scored.stored_before
    again = rounds.Round(store, RUN, 2).record(cands)
    assert again == scored  # a retry stores nothing new, and says so
    assert again.new == 0 and again.stored_before == {c.question_id for c in cands}
    extra = candidate("q2-extra")
    partly = rounds.Round(store, RUN, 2).record([cands[0], extra])
    assert partly.new == 1 and partly.stored_before == {cands[0].question_id}
    cands.append(extra)
    promoted = rounds.Round(store, RUN, 2).promote()
    assert [p.cause_id for p in promoted] == ["C2"] and promoted[0].n_candidates == len(c2)
    with pytest.raises(rounds.ProtocolError, match="decided already"):
        rounds.Round(store, RUN, 2).promote()
    with pytest.raises(rounds.ProtocolError, match="evidence is closed"):
        rounds.Round(store, RUN, 2).record([candidate("late")])
    done = rounds.Round(store, RUN, 2).commit({"heldout_acc": 0.6})
    assert done.questions == len(cands) and done.F == 2
    mem = load_memory(store, RUN, 2)
    assert not mem.causes["C2"].active and mem.causes["C1"].frequency == 2
    with pytest.raises(rounds.ProtocolError, match="round 2 of run 'ext' is committed"):
        rounds.Round(store, RUN, 2).record([candidate("late")])
    n = len(list(store.read(RUN)))
    with pytest.raises(rounds.ProtocolError):
        rounds.Round(store, RUN, 2).commit()
    assert len(list(store.read(RUN))) == n  # nothing partial


def test_wrong_order_is_refused(store: Recorder) -> None:
    with pytest.raises(rounds.ProtocolError, match="no run"):
        rounds.open_round(store, RUN)
    rounds.start_run(store, RUN, {"k": 0.5})
    with pytest.raises(rounds.ProtocolError, match="not open"):
        rounds.Round(store, RUN, 1).record([candidate("q")])
    with pytest.raises(rounds.ProtocolError, match="round 1 comes first"):
        rounds.open_round(store, RUN, 2)
    rounds.open_round(store, RUN)
    assert rounds.open_round(store, RUN) == 1  # idempotent
    with pytest.raises(rounds.ProtocolError, match="promotions are not decided"):
        rounds.Round(store, RUN, 1).commit()
    with pytest.raises(rounds.ProtocolError, match="exactly one of responses and answers"):
        rounds.Round(store, RUN, 1).record([rounds.Candidate("q", "free", "x?")])
    with pytest.raises(rounds.ProtocolError, match="unknown cause"):
        rounds.Round(store, RUN, 1).record([rounds.Candidate("q", "targeted", "x?", "C9", answers=("1",))])
    rounds.Round(store, RUN, 1).record([candidate("q1", agree=6)])
    failure = {"failure_id": "f", "question_id": "q1", "response": "r", "reference": "7"}
    with pytest.raises(rounds.OutOfOrder, match="cannot record failures in round 1 of run 'ext' before its promo"):
        rounds.Round(store, RUN, 1).record_failures([failure])  # the documented order: promote first
    rounds.Round(store, RUN, 1).promote()
    with pytest.raises(rounds.ProtocolError, match="not a retained question"):
        rounds.Round(store, RUN, 1).record_failures([{**failure, "question_id": "nope"}])
    rounds.Round(store, RUN, 1).record_failures([failure])
    with pytest.raises(rounds.OutOfOrder, match="1 recorded failure is not diagnosed.*allow_undiagnosed=True"):
        rounds.Round(store, RUN, 1).commit()
    assert rounds.Round(store, RUN, 1).commit(allow_undiagnosed=True).failures == 1
    with pytest.raises(ConfigError, match="config needs a positive k"):  # a config error, refused before the log
        rounds.start_run(store, "other", {"memory": {}})


def test_record_with_responses_keeps_a_reference(store: Recorder) -> None:
    rounds.start_run(store, RUN, {"k": 0.5})
    rounds.open_round(store, RUN)
    responses = [
        f"so the answer is \\boxed{{{x}}}" for x in ["5", "7", "7", "7", "7", "3", "4", "6", "8", "9", "10", "11"]
    ]
    [s] = rounds.Round(store, RUN, 1).record([rounds.Candidate("q", "free", "x?", responses=tuple(responses))])
    assert s.pseudo_label == "7" and s.p1 == pytest.approx(4 / 12) and s.retained
    assert s.reference == responses[1]  # the earliest response of the label's class
    [stored] = [e.event for e in store.read(RUN, types=(QuestionScored,), texts=True)]
    assert stored.reference == responses[1] and stored.retained


@pytest.mark.slow
def test_external_trainer_example_writes_the_log_of_diagevo_train(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """examples/external_trainer.py drives the simulator through the protocol; ``diagevo train``
    with the same seed and config writes the same log apart from wall-clock fields: one path."""
    import subprocess
    import sys

    from tests.test_cli_memory import run_cli
    from tests.test_train import ROOT, SMALL, comparable, small_args

    a, b = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    code, _, err = run_cli(capsys, *small_args(a, "r", 2, tmp_path))
    assert code == 0, err
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "external_trainer.py"),
            "--db",
            b,
            "--run",
            "r",
            "--rounds",
            "2",
            *SMALL,
            "--set",
            f'train.out_dir="{tmp_path / "ckpt-ext"}"',
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    log_a, log_b = comparable(a, "r"), comparable(b, "r")
    assert len(log_a) > 100 and {t for _, t, _ in log_a} >= {"cause.created", "question.scored", "promotions.decided"}
    assert log_a == log_b


def test_round_cli(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    import json
    import shlex

    from tests.test_cli_memory import run_cli

    db = f"sqlite:///{tmp_path / 'r.db'}"
    code, out, err = run_cli(capsys, "round", "start", "--run", "x", "--db", db, "--set", "memory.k=1.0", "--json")
    assert code == 0, err
    assert json.loads(out) == {"run": "x", "round": 1, "created": True}
    reqs = json.loads(run_cli(capsys, "round", "requests", "--n", "3", "--run", "x", "--db", db, "--json")[1])[
        "requests"
    ]
    assert [q["question_id"] for q in reqs] == ["q1-00000", "q1-00001", "q1-00002"] and reqs[0]["messages"][0][
        "role"
    ] == "system"
    lines = [
        json.dumps(q | {"text": f"what is 3+4 ({i})?", "answers": ["7"] * 6 + ["8"] * 2 + ["1", "2", "3", "4"]})
        for i, q in enumerate(reqs)
    ]
    (tmp_path / "q.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "bad.jsonl").write_text(lines[0] + '\n{"question_id": "z", "mode": "free"}\n')
    code, _, err = run_cli(capsys, "round", "record", str(tmp_path / "bad.jsonl"), "--run", "x", "--db", db)
    assert code == 1 and "line 2: text must be a non-empty string" in err
    code, out, err = run_cli(capsys, "round", "record", str(tmp_path / "q.jsonl"), "--run", "x", "--db", db, "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got["recorded"] == 3 and all(q["pseudo_label"] == "7" for q in got["retained"])
    assert got["already_stored"] == 0
    # an exact retry stores nothing: the count says so, in JSON and in the table's title
    code, out, err = run_cli(capsys, "round", "record", str(tmp_path / "q.jsonl"), "--run", "x", "--db", db, "--json")
    assert code == 0, err
    assert (json.loads(out)["recorded"], json.loads(out)["already_stored"]) == (0, 3)
    code, out, err = run_cli(capsys, "round", "record", str(tmp_path / "q.jsonl"), "--run", "x", "--db", db)
    assert code == 0, err
    assert "recorded 0 (3 already stored)" in " ".join(out.split())
    code, _, err = run_cli(capsys, "round", "commit", "--run", "x", "--db", db)
    assert code == 1 and "promotions are not decided" in err
    code, _, picked = run_cli(capsys, "round", "commit", "--db", db)  # no --run: the error names the run it picked
    assert code == 1 and "[run x: the latest run, as --run was not given]" in " ".join(picked.split())
    hint = " ".join(err.split()).split("(`", 1)[1].rsplit("`)", 1)[0]  # the command it suggests, run as printed
    assert hint == f"diagevo round promote --run x --round 1 --db {db}"
    assert json.loads(run_cli(capsys, *shlex.split(hint)[1:], "--json")[1])["promoted"] == []
    code, _, err = run_cli(capsys, "round", "promote", "--run", "x", "--db", db)
    assert code == 1 and "decided already" in err
    code, out, err = run_cli(capsys, "round", "commit", "--run", "x", "--db", db, "--metric", "acc=0.5", "--json")
    assert code == 0, err
    assert json.loads(out)["questions"] == 3
    code, _, err = run_cli(capsys, "round", "record", str(tmp_path / "q.jsonl"), "--run", "x", "--db", db)
    assert code == 1 and "no open round" in err
    with open_log(db) as s:
        assert sum(1 for _ in s.read("x", types=(QuestionGenerated,))) == 3


def test_round_record_json_lists_every_question(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """``round record --json`` lists the questions the filter drops too, each with ``retained``."""
    import json

    from tests.test_cli_memory import run_cli

    db = f"sqlite:///{tmp_path / 'r.db'}"
    assert run_cli(capsys, "round", "start", "--run", "x", "--db", db)[0] == 0
    reqs = json.loads(run_cli(capsys, "round", "requests", "--n", "2", "--run", "x", "--db", db, "--json")[1])[
        "requests"
    ]
    agreeing = ["7"] * 8 + ["8"] * 4  # a clear majority: kept by Eq. 3
    scattered = [str(i) for i in range(12)]  # no majority: dropped
    lines = [
        json.dumps(q | {"text": f"q {i}?", "answers": a}) for i, (q, a) in enumerate(zip(reqs, (agreeing, scattered)))
    ]
    (tmp_path / "q.jsonl").write_text("\n".join(lines) + "\n")
    code, out, err = run_cli(capsys, "round", "record", str(tmp_path / "q.jsonl"), "--run", "x", "--db", db, "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got["recorded"] == 2
    assert [(q["question_id"], q["retained"]) for q in got["questions"]] == [
        (reqs[0]["question_id"], True),
        (reqs[1]["question_id"], False),
    ]
    assert [q["question_id"] for q in got["retained"]] == [reqs[0]["question_id"]]
