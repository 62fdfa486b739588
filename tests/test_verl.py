"""``diagevo.verl`` without verl: the export's layout, its manifest and its refusals, verl's generation
output read back into the round's candidates, the two reward functions (the challenger's on a
batch against a loopback solver server) and the step size read from verl's config, verl's rollout
dumps read back into failures, ``diagevo export verl``, ``round record --from-verl`` and ``diagnose
--from-verl`` through a whole round, and the example's simulated round trip. ``make verl-contracts``
(tests/verl_contracts.py) holds the same files and functions against verl itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import diagevo
from diagevo.curriculum.prompts import SOLVER_SYSTEM, challenger_messages, solver_messages
from diagevo.errors import BadInput, NotFound, Unavailable
from diagevo.generation import GenerationError
from diagevo.verl import challenger_score, compute_score, export_round, generated_candidates, rollout_failures
from diagevo.verl.rewards import step_size
from tests.llm_server import Hang, LLMServer
from tests.test_cli_memory import assert_one_line_error, run_cli
from tests.verl_contracts import CHALLENGER_OUTPUTS, CHALLENGER_REWARDS, QUESTIONS, solver_answers

ROOT = Path(__file__).resolve().parent.parent
RUN = "v"
SIZES = ["train.challenger_questions=6", "train.curriculum_questions=5", "grpo.construction_responses=4"]


def recorded_round(store: diagevo.Recorder, *, promote: bool = True) -> diagevo.Round:
    """Round 1 of ``v``: three questions retained (one text inside another), one not."""
    diagevo.start_run(store, RUN, diagevo.load_config(None, SIZES), trainer="verl")
    rnd = diagevo.Round.open(store, RUN)
    reqs = rnd.requests(len(QUESTIONS) + 1)
    texts = [*QUESTIONS.items(), ("What is 1 / 0?", "")]
    candidates = [
        diagevo.Candidate(
            q.question_id,
            q.mode,
            text,
            q.active_cause,
            q.mastered_cause,
            q.node,
            responses=(*[f"\\boxed{{{label}}}"] * 9, "\\boxed{1001}", "\\boxed{1002}", "\\boxed{1003}")
            if label
            else tuple(f"\\boxed{{{k}}}" for k in range(12)),  # no majority: not retained
        )
        for q, (text, label) in zip(reqs, texts, strict=True)
    ]
    rnd.record(candidates)
    if promote:
        rnd.promote()
    return rnd


def retained(store: diagevo.Recorder, t: int = 1) -> dict[str, tuple[str, str]]:
    """question id -> (text, pseudo-label) of round ``t``'s retained questions, from the log."""
    from diagevo.rounds import logged_questions

    return {q.question_id: (q.text, q.pseudo_label) for q in logged_questions(store, RUN, t=t, retained=True)}


def test_the_verl_extra_forces_no_torch_and_pins_nothing() -> None:
    """``pip install "diagevo[verl]"`` takes verl from the version ``make verl-contracts`` checks
    (a lower bound, never an exact pin) and names no torch: verl's dependencies bring theirs."""
    import re
    import tomllib

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    names = {re.split(r"[<>=!~\[ ;]", req, maxsplit=1)[0].lower(): req for req in extra["verl"]}
    assert "verl" in names and "torch" not in names
    assert all(">=" in req and "==" not in req and "<" not in req for req in names.values()), names
    lowest = names["verl"].split(">=")[1]
    plan = subprocess.run(["make", "-n", "-B", "verl-contracts"], cwd=ROOT, capture_output=True, text=True, check=True)
    installs = [line for line in plan.stdout.splitlines() if "pip install" in line and "torch==" in line]
    assert len(installs) == 2 and f"verl=={lowest} " in installs[1], plan.stdout  # torch first, then held


# --- the export ---------------------------------------------------------------------------------


def test_the_export_is_the_round_in_verls_layout(store: diagevo.Recorder, tmp_path: Path) -> None:
    rnd = recorded_round(store)
    done = export_round(store, RUN, tmp_path / "r1")
    names = [f.name for f in done.files]
    assert done.open and done.round == 1 and names == ["solver.parquet", "challenger.parquet", "curriculum.parquet"]
    solver = pq.read_table(tmp_path / "r1" / "solver.parquet").to_pylist()
    assert [r["extra_info"]["question_id"] for r in solver] == list(retained(store)) and len(solver) == 3
    for i, r in enumerate(solver):
        text, label = retained(store)[r["extra_info"]["question_id"]]
        assert r["prompt"] == solver_messages(text) and r["reward_model"] == {"style": "rule", "ground_truth": label}
        tag = json.loads((tmp_path / "r1" / "verl.json").read_text())["exports"]["solver.parquet"]
        assert r["extra_info"] == {
            "run": RUN,
            "round": 1,
            "question_id": r["extra_info"]["question_id"],
            "index": i,
            "export": tag,
        }
        assert tag.startswith("r1-") and len(tag) == 15
        assert r["data_source"] == "diagevo/solver" and r["ability"] == "math"
    challenger = pq.read_table(tmp_path / "r1" / "challenger.parquet").to_pylist()
    reqs = rnd.requests(6, purpose="challenger")
    assert [r["prompt"] for r in challenger] == [challenger_messages(q.generation_request()) for q in reqs]
    info = challenger[0]["extra_info"]
    assert info["question_id"] == reqs[0].question_id and info["mode"] == reqs[0].mode
    assert (info["votes"], info["lam"], info["cluster_distance_threshold"], info["top_p"]) == (4, 1.0, 0.5, 0.99)
    curriculum = pq.read_table(tmp_path / "r1" / "curriculum.parquet").to_pylist()
    assert [r["extra_info"]["question_id"] for r in curriculum] == [q.question_id for q in rnd.requests(5)]
    # committed, the round has no requests to draw: its questions alone, when it is named; unnamed,
    # the export is refused (the next step's files are the open round's), naming the round to open
    rnd.commit({})
    with pytest.raises(BadInput, match=r"has no open round: round 1 is committed .* open round 2 first with"):
        export_round(store, RUN, tmp_path / "r1")
    again = export_round(store, RUN, tmp_path / "r1", t=1)
    assert not again.open and [f.name for f in again.files] == ["solver.parquet"]


def test_before_any_question_only_the_requests_and_no_solver_file(store: diagevo.Recorder, tmp_path: Path) -> None:
    diagevo.start_run(store, RUN, diagevo.load_config(None, SIZES))
    diagevo.Round.open(store, RUN)
    done = export_round(store, RUN, tmp_path / "r1")
    assert [f.name for f in done.files] == ["challenger.parquet", "curriculum.parquet"]
    assert not (tmp_path / "r1" / "solver.parquet").exists()
    with pytest.raises(BadInput, match="neither committed nor open"):
        export_round(store, RUN, tmp_path / "r2", t=2)
    with pytest.raises(NotFound, match="no run 'w'"):
        export_round(store, "w", tmp_path / "r3")


def test_the_export_replaces_only_its_own_files(store: diagevo.Recorder, tmp_path: Path) -> None:
    recorded_round(store)
    out = tmp_path / "r1"
    out.mkdir()
    precious = out / "solver.parquet"
    precious.write_text("someone else's file\n", encoding="utf-8")
    with pytest.raises(BadInput, match="not written by diagevo's verl export"):
        export_round(store, RUN, out)
    assert precious.read_text(encoding="utf-8") == "someone else's file\n"
    assert sorted(p.name for p in out.iterdir()) == ["solver.parquet"]  # nothing else written either
    precious.unlink()
    victim = tmp_path / "victim.parquet"
    victim.write_bytes(b"PAR1")
    precious.symlink_to(victim)
    with pytest.raises(BadInput, match="not written by"):
        export_round(store, RUN, out)
    assert victim.read_bytes() == b"PAR1" and precious.is_symlink()
    precious.unlink()
    (out / "verl.json").write_text('{"mine": true}\n', encoding="utf-8")  # someone's manifest of that name
    with pytest.raises(BadInput, match="verl.json exists and was not written by diagevo's verl export"):
        export_round(store, RUN, out)
    assert (out / "verl.json").read_text(encoding="utf-8") == '{"mine": true}\n'
    (out / "verl.json").unlink()
    first = export_round(store, RUN, out)
    assert export_round(store, RUN, out) == first  # its own files: replaced
    diagevo.Round.open(store, RUN).commit({})
    diagevo.Round.open(store, RUN)  # round 2: into round 1's directory, refused
    with pytest.raises(BadInput, match="holds round 1 of run 'v', not round 2"):
        export_round(store, RUN, out)


def test_without_pyarrow_the_export_says_what_to_install(
    store: diagevo.Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded_round(store)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    with pytest.raises(Unavailable, match="needs pyarrow"):
        export_round(store, RUN, tmp_path / "r1")
    db = f"sqlite:///{tmp_path / 'e.db'}"
    with diagevo.open_store(db) as other:
        recorded_round(other)
    code, _, err = run_cli(capsys, "export", "verl", "--run", RUN, "--db", db, "-o", str(tmp_path / "r1"))
    assert_one_line_error(code, err, "needs pyarrow", "pip install", "[data]")
    assert not (tmp_path / "r1").exists()


# --- the reward functions -----------------------------------------------------------------------


def test_compute_score_is_the_solver_reward_against_the_pseudo_label() -> None:
    info = {"question_id": "q1-00002", "run": RUN}
    assert compute_score("diagevo/solver", "so \\boxed{\\frac{1}{2}}", "0.5", {**info, "export": "r1-x"}) == {
        "score": 1.0,
        "acc": 1.0,
        "checked": 1.0,
        "question_id": "q1-00002",
        "export": "r1-x",
    }
    assert compute_score("diagevo/solver", "so \\boxed{3}", "0.5", info)["score"] == -1.0
    assert compute_score("diagevo/solver", "no answer at all", "0.5", None) == {
        "score": -1.0,
        "acc": 0.0,
        "checked": 1.0,
        "question_id": "",
        "export": "",
    }


def settings(**kw: Any) -> dict[str, Any]:
    return {"votes": 4, "temperature": 1.0, "top_p": 0.99, "lam": 1.0, "cluster_distance_threshold": 0.5, **kw}


def scores(url: str, outputs: list[str], **kw: Any) -> list[dict[str, Any]]:
    """The challenger reward of a batch, called as verl's batch reward managers call it."""
    infos = [{**settings(), "question_id": f"c1-{i:05d}"} for i in range(len(outputs))]
    return challenger_score(
        ["diagevo/challenger"] * len(outputs),
        outputs,
        [""] * len(outputs),
        infos,
        solver_url=url,
        solver_model="solver",
        **kw,
    )


def test_the_challenger_reward_of_a_batch_by_hand() -> None:
    """Eq. 8-10 over one batch of B = 5: uncertainty from the served solver's N = 4 answers, the
    repetition penalty |C_k| / B of the BLEU clusters (a question twice), 0 without a question."""
    with LLMServer() as server:
        server.default("other", solver_answers)
        got = scores(server.url, CHALLENGER_OUTPUTS)
        asked = [c["body"] for c in server.calls("other")]
    assert [round(g["score"], 9) for g in got] == [round(x, 9) for x in CHALLENGER_REWARDS]
    assert [g["question_id"] for g in got] == [f"c1-{i:05d}" for i in range(5)]
    assert len(asked) == 4 and {m["content"] for b in asked for m in b["messages"]} >= {SOLVER_SYSTEM}
    assert all((b["n"], b["temperature"], b["top_p"], b["max_tokens"]) == (4, 1.0, 0.99, 1024) for b in asked)
    assert scores("http://127.0.0.1:9/v1", []) == []  # an empty batch asks nothing


def test_the_challenger_reward_refuses_what_it_cannot_score() -> None:
    own = "diagevo/challenger"
    with pytest.raises(BadInput, match="extra_info has no votes, temperature"):
        challenger_score([own], ["x"], [""], [{}], solver_url="http://127.0.0.1:9/v1", solver_model="m")
    with pytest.raises(BadInput, match="2 different reward settings"):
        challenger_score(
            [own] * 2, ["x", "y"], [""] * 2, [settings(), settings(votes=8)], solver_url="u", solver_model="m"
        )
    with LLMServer() as server:  # taken down: the batch fails with the one-line error
        url = server.url
    with pytest.raises(GenerationError, match="connection refused"):
        scores(url, CHALLENGER_OUTPUTS[:2])


def test_the_challenger_reward_names_a_stale_batch_size() -> None:
    """B is the batch verl passes (a step's rollouts, :func:`step_size`): the setting that kept it
    apart, and its 30-minute wait, are gone, and naming them is refused, not ignored."""
    with pytest.raises(BadInput, match="takes no batch_size, wait_s: its reward_kwargs are solver_url"):
        scores("http://127.0.0.1:9/v1", CHALLENGER_OUTPUTS, batch_size=2048, wait_s=1800)


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda: compute_score("diagevo/solver", None, "1"), "solution_str must be a string, not NoneType"),
        (lambda: compute_score("diagevo/solver", "\\boxed{1}", 1), "ground_truth must be a string or None, not int"),
        (lambda: compute_score("diagevo/solver", "\\boxed{1}", "1", ["q1"]), "extra_info must be a mapping"),
        (
            lambda: challenger_score("s", ["x"], [""], [settings()], solver_url="u", solver_model="m"),
            "data_sources must",
        ),
        (
            lambda: challenger_score(["s"], "x", [""], [settings()], solver_url="u", solver_model="m"),
            "solution_strs must",
        ),
        (
            lambda: challenger_score(["s"], ["x"], [""], [settings()] * 2, solver_url="u", solver_model="m"),
            "extra_infos has 2",
        ),
        (
            lambda: challenger_score(["s"], [7], [""], [settings()], solver_url="u", solver_model="m"),
            "solution_strs\\[0\\]",
        ),
        (
            lambda: challenger_score(["s"], ["x"], [""], ["v"], solver_url="u", solver_model="m"),
            "extra_infos\\[0\\] must",
        ),
        (
            lambda: challenger_score(["s"], ["x"], [""], [settings()], solver_url=None, solver_model="m"),
            "solver_url must",
        ),
        (
            lambda: challenger_score(["s"], ["x"], [""], [settings()], solver_url="u", solver_model="m", timeout_s="9"),
            "timeout_s",
        ),
        (
            lambda: challenger_score(["s"], ["x"], [""], [settings()], solver_url="u", solver_model="m", retries=-1),
            "retries",
        ),
        (
            lambda: challenger_score(
                ["diagevo/challenger"], ["x"], [""], [settings(votes="four")], solver_url="u", solver_model="m"
            ),
            "not numbers",
        ),
    ],
)
def test_the_reward_functions_name_a_wrong_argument_type(call: Any, named: str) -> None:
    with pytest.raises(BadInput, match=named) as err:
        call()
    assert "\n" not in str(err.value)


def test_a_hung_solver_server_is_given_up_as_reward_kwargs_say() -> None:
    """``timeout_s`` bounds each request to the solver server and ``retries`` how often it is
    sent again: with 0.2 s and 2 retries, a server that never answers is asked 3 times, and the
    batch fails with one line naming it (the defaults: 180 s, 1 retry)."""
    with LLMServer() as server:
        server.default("other", Hang(30.0))
        with pytest.raises(GenerationError, match=server.url.split("//")[1]):
            scores(server.url, CHALLENGER_OUTPUTS[:1], timeout_s=0.2, retries=2)
        assert len(server.calls("other")) == 3


def verl_config(**kw: Any) -> dict[str, Any]:
    """The parts of verl's composed config that :func:`step_size` reads (challenger.yaml's values)."""
    cfg: dict[str, Any] = {
        "data": {"train_batch_size": 125},
        "actor_rollout_ref": {"rollout": {"n": 8}},
        "reward": {"num_workers": 1},
        "trainer": {"test_freq": -1, "val_before_train": False, "use_v1": True, "v1": {"trainer_mode": "sync"}},
    }
    for path, value in kw.items():
        *parents, last = path.split("__")
        node = cfg
        for key in parents:
            node = node[key]
        node[last] = value
    return cfg


def test_the_step_size_comes_from_verls_config_and_a_mismatch_is_named() -> None:
    """B = data.train_batch_size x rollout.n, the rollouts the step reward manager gathers; a
    config under which they would not all reach it, or not at once, is named in one line when
    verl builds the manager, before anything is generated."""
    assert step_size(verl_config()) == 1000
    assert step_size(verl_config(data__train_batch_size=20)) == 160
    refused = {
        "reward.num_workers is 8": verl_config(reward__num_workers=8),
        "trainer.val_before_train=false trainer.test_freq=-1": verl_config(trainer__test_freq=5),
        "set trainer.v1.trainer_mode=sync": verl_config(trainer__v1__trainer_mode="async"),
        "sync_refill_failed_groups generates more rollouts": verl_config(algorithm={"filter_groups": {"enable": True}}),
        "holds at most 1000 rollouts at once: lower data.train_batch_size to 125": verl_config(
            data__train_batch_size=256
        ),
        "actor_rollout_ref.rollout.n must be a whole number": verl_config(actor_rollout_ref__rollout__n=None),
    }
    for named, cfg in refused.items():
        with pytest.raises(BadInput, match=named):
            step_size(cfg)


def test_the_step_reward_manager_is_built_only_to_score_whole_steps() -> None:
    """verl builds the manager with its config and the batch reward function it loaded: without a
    function, or with a config whose steps it could not gather, it is refused there, in one line."""
    from diagevo.verl.manager import StepRewardManager

    with pytest.raises(BadInput, match="set reward.custom_reward_function.path=pkg://diagevo.verl"):
        StepRewardManager(config=verl_config(), tokenizer=None, compute_score=None)
    with pytest.raises(BadInput, match="reward.num_workers is 2"):
        StepRewardManager(config=verl_config(reward__num_workers=2), tokenizer=None, compute_score=challenger_score)
    assert StepRewardManager(config=verl_config(), tokenizer=None, compute_score=challenger_score).size == 1000


# --- rollout dumps back into failures -----------------------------------------------------------


def chat_text(question: str) -> str:
    """A solver prompt as verl's dump holds it: a ChatML template decoded without special tokens."""
    return "".join(f"{m['role']}\n{m['content']}\n" for m in solver_messages(question)) + "assistant\n"


def write_dump(folder: Path, step: int, lines: list[dict[str, Any]]) -> None:
    """A ``{step}.jsonl`` as verl's ``_write_generations`` writes it (its keys, in its order)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{step}.jsonl", "w") as f:
        for i, x in enumerate(lines):
            f.write(json.dumps({**x, "step": step, "uid": f"u{i}_0_{i}"}, ensure_ascii=False) + "\n")


def dump_lines(
    store: diagevo.Recorder, *, with_ids: Path | None = None, t: int = 1, wrong: str = "it is "
) -> list[dict[str, Any]]:
    """A right and a wrong response to each retained question of round ``t`` (the v1 trainer's
    lines; with ``with_ids``, the folder of the export trained on, the legacy trainer's, which
    carry the question id and the export tag compute_score returned)."""
    out = []
    tag = json.loads((with_ids / "verl.json").read_text())["exports"]["solver.parquet"] if with_ids else ""
    for qid, (text, label) in retained(store, t).items():
        for response in (f"\\boxed{{{label}}}", f"{wrong}\\boxed{{{label}0}}"):
            scored = compute_score("diagevo/solver", response, label, {"question_id": qid, "export": tag})
            line = {"input": chat_text(text), "output": response, "gts": label, "score": scored["score"]}
            extras = {"question_id": qid, "acc": scored["acc"], "export": scored["export"]}
            out.append({**line, **(extras if with_ids else {})})
    return out


def test_a_dump_gives_the_wrong_responses_once(store: diagevo.Recorder, tmp_path: Path) -> None:
    rnd = recorded_round(store)
    export_round(store, RUN, tmp_path)  # the manifest the dump is read beside
    dump = tmp_path / "rollouts"
    write_dump(dump, 1, dump_lines(store))
    write_dump(dump, 2, dump_lines(store, with_ids=tmp_path))
    (dump / "notes.txt").write_text("not a step\n")
    failures = rollout_failures(store, RUN, dump)
    want = [(qid, f"it is \\boxed{{{label}0}}") for qid, (_t, label) in retained(store).items()]
    assert [(f.question_id, f.response) for f in failures] == want * 2
    assert [f.failure_id for f in failures[:3]] == [f"{qid}-s1-0" for qid in retained(store)]
    f = failures[0]
    assert (f.question, f.pseudo_label) == retained(store)[f.question_id] and f.reference == "\\boxed{5}"
    assert rnd.record_failures(failures) == 6
    assert rollout_failures(store, RUN, dump) == failures and rnd.record_failures(failures) == 0


def test_a_dump_of_another_round_or_reward_is_refused_by_line(store: diagevo.Recorder, tmp_path: Path) -> None:
    recorded_round(store)
    export_round(store, RUN, tmp_path)
    lines = dump_lines(store)
    other = tmp_path / "other"
    write_dump(other, 3, [*lines[:2], {**lines[0], "input": chat_text("What is 40 + 2?")}])
    with pytest.raises(BadInput, match=r"3\.jsonl line 3: its prompt asks none of the round's retained questions"):
        rollout_failures(store, RUN, other)
    write_dump(other, 3, [{**lines[1], "score": 1.0}])
    with pytest.raises(BadInput, match="line 1: score 1, but the solver's reward .* is -1"):
        rollout_failures(store, RUN, other)
    write_dump(other, 3, [{**lines[1], "gts": "77"}])
    with pytest.raises(BadInput, match="ground truth '77' is not the pseudo-label"):
        rollout_failures(store, RUN, other)
    tag = json.loads((tmp_path / "verl.json").read_text())["exports"]["solver.parquet"]
    write_dump(other, 3, [{**lines[1], "question_id": "q9-00000", "export": tag}])
    with pytest.raises(BadInput, match="'q9-00000' is not a retained question"):
        rollout_failures(store, RUN, other)
    write_dump(other, 3, [{"input": "x", "output": "y", "gts": None, "step": 3}])
    with pytest.raises(BadInput, match="line 1: no score: a line of verl's dump holds"):
        rollout_failures(store, RUN, other)
    with pytest.raises(NotFound, match="holds no rollout dump"):
        rollout_failures(store, RUN, tmp_path)
    with pytest.raises(NotFound, match="no directory"):
        rollout_failures(store, RUN, tmp_path / "missing")


def same_questions_in_round_2(store: diagevo.Recorder) -> diagevo.Round:
    """Round 2 of ``v`` (round 1 committed), retaining round 1's texts with round 1's labels under its own ids."""
    rnd = diagevo.Round.open(store, RUN)
    reqs = rnd.requests(len(QUESTIONS))
    rnd.record(
        [
            diagevo.Candidate(q.question_id, q.mode, text, responses=(f"\\boxed{{{label}}}",) * 3 + ("\\boxed{1}",))
            for q, (text, label) in zip(reqs, QUESTIONS.items(), strict=True)
        ]
    )
    return rnd


def test_round_1s_dump_copied_into_round_2_is_refused_and_round_2s_own_records(
    store: diagevo.Recorder, tmp_path: Path
) -> None:
    """Round 2 retains round 1's texts with round 1's labels, and round 1's dump is copied into
    round 2's rollout folder (beside round 2's manifest): the v1 trainer's lines, which carry no
    reward extra, are refused as round 1's failures (same question, place and response); the
    legacy trainer's by the export tag compute_score returned. Round 2's own dump records."""
    first = recorded_round(store)
    export_round(store, RUN, tmp_path / "r1")
    write_dump(tmp_path / "r1" / "rollouts", 1, dump_lines(store))
    write_dump(tmp_path / "r1" / "rollouts", 2, dump_lines(store, with_ids=tmp_path / "r1"))
    assert first.record_failures(rollout_failures(store, RUN, tmp_path / "r1" / "rollouts")) == 6
    first.commit({}, allow_undiagnosed=True)
    second = same_questions_in_round_2(store)
    second.promote()
    export_round(store, RUN, tmp_path / "r2")
    copied = tmp_path / "r2" / "rollouts"
    copied.mkdir()
    (copied / "1.jsonl").write_bytes((tmp_path / "r1" / "rollouts" / "1.jsonl").read_bytes())
    with pytest.raises(BadInput, match=r"1\.jsonl line 2 belongs to round 1: its question and response are a failure"):
        rollout_failures(store, RUN, copied)
    (copied / "1.jsonl").unlink()
    (copied / "2.jsonl").write_bytes((tmp_path / "r1" / "rollouts" / "2.jsonl").read_bytes())
    with pytest.raises(
        BadInput, match=r"2\.jsonl line 1 belongs to round 1's export \(tag 'r1-[0-9a-f]{12}'\), not round 2"
    ):
        rollout_failures(store, RUN, copied)
    write_dump(copied, 1, dump_lines(store, t=2, wrong="so "))
    write_dump(copied, 2, dump_lines(store, t=2, wrong="now ", with_ids=tmp_path / "r2"))
    own = rollout_failures(store, RUN, copied)
    assert [f.question_id for f in own] == list(retained(store, 2)) * 2
    assert second.record_failures(own) == 6


def test_a_legacy_line_without_an_export_tag_is_refused(store: diagevo.Recorder, tmp_path: Path) -> None:
    """A line with the reward's extras and no export tag was trained on an export by an older
    diagevo: it cannot be told from another round's, and is refused in one line."""
    recorded_round(store)
    export_round(store, RUN, tmp_path)
    lines = [{k: v for k, v in x.items() if k != "export"} for x in dump_lines(store, with_ids=tmp_path)]
    write_dump(tmp_path / "rollouts", 1, lines)
    with pytest.raises(BadInput, match=r"1\.jsonl line 1 carries no export tag: trained on an export by an older"):
        rollout_failures(store, RUN, tmp_path / "rollouts")


def test_the_cap_of_failures_per_question_holds(store: diagevo.Recorder, tmp_path: Path) -> None:
    diagevo.start_run(store, RUN, diagevo.load_config(None, [*SIZES, "diagnosis.max_failures_per_question=1"]))
    rnd = diagevo.Round.open(store, RUN)
    [q] = rnd.requests(1)
    rnd.record(
        [diagevo.Candidate(q.question_id, q.mode, "What is 6 * 7?", responses=("\\boxed{42}",) * 3 + ("\\boxed{1}",))]
    )
    lines = [
        {"input": chat_text("What is 6 * 7?"), "output": f"\\boxed{{{k}}}", "gts": "42", "score": -1.0} for k in (1, 2)
    ]
    export_round(store, RUN, tmp_path)
    write_dump(tmp_path / "d", 1, lines)
    assert [f.response for f in rollout_failures(store, RUN, tmp_path / "d")] == ["\\boxed{1}"]


def test_a_dump_line_names_every_missing_key(store: diagevo.Recorder, tmp_path: Path) -> None:
    """verl's dump keys are input, output, gts, score and step (and uid or the reward's extra
    keys); a line without several of them names them all in one line."""
    recorded_round(store)
    export_round(store, RUN, tmp_path)
    (tmp_path / "rollouts").mkdir()
    (tmp_path / "rollouts" / "1.jsonl").write_text(json.dumps({"output": "y", "uid": "u"}) + "\n")
    with pytest.raises(
        BadInput, match=r"1\.jsonl line 1: no input, gts, score, step: a line of verl's dump holds"
    ) as err:
        rollout_failures(store, RUN, tmp_path / "rollouts")
    assert "\n" not in str(err.value)


def test_a_stale_dump_is_refused_even_where_its_questions_match(store: diagevo.Recorder, tmp_path: Path) -> None:
    """The export's manifest (verl.json) names the run, the round and a digest of the retained
    questions; a dump read for another round, run or question set is refused in one line, though
    its prompts ask the same texts with the same labels."""
    recorded_round(store).commit({})
    export_round(store, RUN, tmp_path / "r1", t=1)
    write_dump(tmp_path / "r1" / "rollouts", 1, dump_lines(store))
    manifest = json.loads((tmp_path / "r1" / "verl.json").read_text())
    assert (manifest["run"], manifest["round"], len(manifest["questions"])) == (RUN, 1, 64)
    # round 2 retains the same texts with the same labels, under its own ids
    rnd = diagevo.Round.open(store, RUN)
    reqs = rnd.requests(len(QUESTIONS))
    rnd.record(
        [
            diagevo.Candidate(q.question_id, q.mode, text, responses=(f"\\boxed{{{label}}}",) * 3 + ("\\boxed{1}",))
            for q, (text, label) in zip(reqs, QUESTIONS.items(), strict=True)
        ]
    )
    with pytest.raises(BadInput, match="was trained on round 1 of run 'v' .*, not round 2 of run 'v'"):
        rollout_failures(store, RUN, tmp_path / "r1" / "rollouts")
    export_round(store, RUN, tmp_path / "r2")
    (tmp_path / "r1" / "rollouts").rename(tmp_path / "r2" / "rollouts")
    assert len(rollout_failures(store, RUN, tmp_path / "r2" / "rollouts")) == 3  # beside its own export: read
    extra = rnd.requests(len(QUESTIONS) + 1)[-1]
    rnd.record(
        [diagevo.Candidate(extra.question_id, extra.mode, "What is 9 + 9?", responses=("\\boxed{18}",) * 3 + ("1",))]
    )
    with pytest.raises(BadInput, match="trained on other questions than round 2's retained ones"):
        rollout_failures(store, RUN, tmp_path / "r2" / "rollouts")
    (tmp_path / "r2" / "verl.json").unlink()
    with pytest.raises(BadInput, match="no verl.json in .* or the directory above it"):
        rollout_failures(store, RUN, tmp_path / "r2" / "rollouts")


# --- verl's generation output back into the round -----------------------------------------------


def generated(source: Path, out: Path, answer: Any) -> Path:
    """``out``: verl's ``main_generation_server`` run on ``source``, as it writes its output (the
    input's columns through pandas, and ``responses``: the n outputs of each row's prompt)."""
    import pandas as pd

    frame = pd.read_parquet(source)
    frame["responses"] = [answer(row) for row in frame.itertuples()]
    frame.to_parquet(out)
    return out


def test_verls_generation_becomes_the_rounds_candidates(store: diagevo.Recorder, tmp_path: Path) -> None:
    """The glue between verl's two generations: the challenger's outputs (one per request of
    curriculum.parquet) become construct.parquet, each question as a solver prompt (an output with
    no question left out, counted); the solver's N outputs to each become the round's candidates."""
    diagevo.start_run(store, RUN, diagevo.load_config(None, SIZES))
    rnd = diagevo.Round.open(store, RUN)
    out = tmp_path / "r1"
    export_round(store, RUN, out)
    texts = ["What is 2 + 3?", "What is 12 + 3?", "", "What is 7 * 6?", "What is 1 + 1?"]
    asked = generated(
        out / "curriculum.parquet",
        tmp_path / "questions.parquet",
        lambda row: [f"<question>{texts[row.Index]}</question>" if texts[row.Index] else "no block"],
    )
    done = export_round(store, RUN, out, questions=asked)
    [construct] = [f for f in done.files if f.name == "construct.parquet"]
    assert (construct.rows, construct.left_out, construct.overrides) == (4, 1, ["actor_rollout_ref.rollout.n=4"])
    rows = pq.read_table(out / "construct.parquet").to_pylist()
    requests = [q for i, q in enumerate(rnd.requests(5)) if texts[i]]
    assert [r["prompt"] for r in rows] == [solver_messages(t) for t in texts if t]
    assert [r["extra_info"]["question_id"] for r in rows] == [q.question_id for q in requests]
    assert rows[0]["extra_info"]["mode"] == requests[0].mode and rows[0]["data_source"] == "diagevo/construct"
    votes = ["\\boxed{5}"] * 3 + ["\\boxed{6}"]  # p1 = 3/4: retained (Eq. 3)
    answers = generated(out / "construct.parquet", tmp_path / "constructed.parquet", lambda row: votes)
    candidates = generated_candidates(answers, RUN, 1)
    assert [c.text for c in candidates] == [t for t in texts if t]
    assert [c.question_id for c in candidates] == [q.question_id for q in requests]
    assert all(c.responses == tuple(votes) and c.mode == q.mode for c, q in zip(candidates, requests, strict=True))
    assert sum(s.retained for s in rnd.record(candidates)) == 4


def test_a_construction_generation_of_another_n_is_refused(
    store: diagevo.Recorder, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """verl.json sets construct.parquet's rollout.n to the run's N: a generation made with another
    n (3 responses a question for N = 4) is refused naming both numbers, beside the export or
    anywhere else (the run's N), from the command too, and nothing is recorded: the right file is
    then taken (it was refused as a second answer to the same questions)."""
    diagevo.start_run(store, RUN, diagevo.load_config(None, SIZES))
    rnd = diagevo.Round.open(store, RUN)
    out = tmp_path / "r1"
    export_round(store, RUN, out)
    asked = generated(
        out / "curriculum.parquet",
        tmp_path / "q.parquet",
        lambda row: [f"<question>What is {row.Index} + 1?</question>"],
    )
    export_round(store, RUN, out, questions=asked)
    three = generated(out / "construct.parquet", out / "three.parquet", lambda row: ["\\boxed{1}"] * 3)
    with pytest.raises(
        BadInput, match=r"row 1: 3 responses to its question, and .*verl.json's actor_rollout_ref.rollout.n is 4"
    ):
        generated_candidates(three, RUN, 1)
    elsewhere = three.rename(tmp_path / "three.parquet")
    assert len(generated_candidates(elsewhere, RUN, 1)) == 5  # no manifest, no N given: as verl wrote it
    with pytest.raises(BadInput, match="3 responses to its question, and the run's grpo.construction_responses is 4"):
        generated_candidates(elsewhere, RUN, 1, responses=4)
    db = store.url
    code, _, err = run_cli(capsys, "round", "record", "--from-verl", str(elsewhere), "--run", RUN, "--db", db)
    assert_one_line_error(code, err, "3 responses to its question", "is 4", "actor_rollout_ref.rollout.n=4")
    assert rnd.questions().new == 0 and len(rnd.questions()) == 0
    four = generated(out / "construct.parquet", out / "four.parquet", lambda row: ["\\boxed{1}"] * 4)
    code, _, err = run_cli(capsys, "round", "record", "--from-verl", str(four), "--run", RUN, "--db", db)
    assert code == 0, err
    assert len(rnd.questions()) == 5


def test_a_generation_of_another_export_is_refused(store: diagevo.Recorder, tmp_path: Path) -> None:
    """construct.parquet exported again with other questions: a generation of the first one,
    beside the manifest that names the second, is refused naming the tag; a row with no tag too."""
    diagevo.start_run(store, RUN, diagevo.load_config(None, SIZES))
    diagevo.Round.open(store, RUN)
    out = tmp_path / "r1"
    export_round(store, RUN, out)
    for k in (1, 2):
        block = [f"<question>{k}?</question>"]
        asked = generated(out / "curriculum.parquet", tmp_path / f"q{k}.parquet", lambda r, b=block: b)
        export_round(store, RUN, out, questions=asked)
        if k == 1:
            old = generated(out / "construct.parquet", out / "old.parquet", lambda row: ["\\boxed{1}"] * 4)
    with pytest.raises(BadInput, match=r"old\.parquet row 1 belongs to round 1's export of construct\.parquet \(tag"):
        generated_candidates(old, RUN, 1)
    table = pq.read_table(old).to_pylist()
    for row in table:
        del row["extra_info"]["export"]
    pq.write_table(pa.Table.from_pylist(table), out / "untagged.parquet")
    with pytest.raises(BadInput, match="row 1: its extra_info has no export tag: a generation of construct.parquet"):
        generated_candidates(out / "untagged.parquet", RUN, 1)


def test_verls_generation_of_another_round_or_shape_is_refused(store: diagevo.Recorder, tmp_path: Path) -> None:
    diagevo.start_run(store, RUN, diagevo.load_config(None, SIZES))
    diagevo.Round.open(store, RUN)
    out = tmp_path / "r1"
    export_round(store, RUN, out)
    two = generated(out / "curriculum.parquet", tmp_path / "two.parquet", lambda row: ["<question>a</question>"] * 2)
    with pytest.raises(BadInput, match="row 1: 2 responses to one request: generate Q\\^cur with actor_rollout_ref"):
        export_round(store, RUN, out, questions=two)
    with pytest.raises(BadInput, match="row 1 is of round 1 of run 'v', not round 2 of run 'v'"):
        generated_candidates(two, RUN, 2)
    with pytest.raises(BadInput, match="has no column responses: verl's generation of curriculum.parquet"):
        export_round(store, RUN, out, questions=out / "curriculum.parquet")
    with pytest.raises(BadInput, match="its extra_info has no question: a generation of construct.parquet"):
        generated_candidates(two, RUN, 1)
    (tmp_path / "junk.parquet").write_text("not parquet")
    with pytest.raises(BadInput, match="is not a Parquet file verl's generation wrote"):
        generated_candidates(tmp_path / "junk.parquet", RUN, 1)
    with pytest.raises(NotFound, match="no file .*missing.parquet: name the Parquet file verl's generation wrote"):
        generated_candidates(tmp_path / "missing.parquet", RUN, 1)


def test_export_verl_writes_the_batch_settings_of_the_rounds_size(store: diagevo.Recorder, tmp_path: Path) -> None:
    """verl takes no step from fewer rows than data.train_batch_size (the shipped 256 gave a small
    round steps_per_epoch = 0): the manifest's overrides train on the rows there are, the
    challenger's at most the 1000 rollouts a step verl's reward worker holds (in more steps)."""
    recorded_round(store)
    done = export_round(store, RUN, tmp_path)
    sizes = {f.name: f.overrides for f in done.files}
    tag = json.loads((tmp_path / "verl.json").read_text())["exports"]["solver.parquet"]
    assert sizes["solver.parquet"] == [
        "data.train_batch_size=3",
        "actor_rollout_ref.actor.ppo_mini_batch_size=3",
        "actor_rollout_ref.rollout.n=8",
        "trainer.total_training_steps=12",
        "trainer.save_freq=12",
        f"++reward.custom_reward_function.reward_kwargs.export={tag}",  # the solver's reward checks each row's
    ]
    assert sizes["challenger.parquet"][0] == "data.train_batch_size=6" and sizes["curriculum.parquet"] == [
        "actor_rollout_ref.rollout.n=1"
    ]
    assert json.loads((tmp_path / "verl.json").read_text())["overrides"] == sizes
    diagevo.start_run(store, "paper", diagevo.load_config(None, []))  # the paper's |Q^chal| = 6 x 256
    diagevo.Round.open(store, "paper")
    [challenger] = [f for f in export_round(store, "paper", tmp_path / "paper").files if f.name == "challenger.parquet"]
    assert challenger.rows == 1536 and challenger.overrides[:4] == [
        "data.train_batch_size=125",
        "actor_rollout_ref.actor.ppo_mini_batch_size=125",
        "actor_rollout_ref.rollout.n=8",
        "trainer.total_training_steps=12",
    ]
    assert step_size(verl_config(data__train_batch_size=125)) == 1000


# --- the commands, a whole round ----------------------------------------------------------------


def test_export_then_diagnose_from_verl_then_commit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'c.db'}"
    with diagevo.open_store(db) as store:
        recorded_round(store)
    common = ("--run", RUN, "--db", db)
    code, out, err = run_cli(capsys, "export", "verl", *common, "-o", str(tmp_path / "r1"), "--json")
    assert code == 0, err
    assert [f["name"] for f in json.loads(out)["files"]] == [
        "solver.parquet",
        "challenger.parquet",
        "curriculum.parquet",
    ]
    with diagevo.open_store(db) as store:
        write_dump(tmp_path / "r1" / "rollouts", 1, dump_lines(store))
    args = ("diagnose", "--from-verl", str(tmp_path / "r1" / "rollouts"), *common, "--round", "1")
    code, out, err = run_cli(capsys, *args, "--diagnostician", "heuristic", "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["failures"] == summary["recorded"] == 3 and summary["failed"] == 0
    # the same dump again, the round not named: the run's open round
    code, out, err = run_cli(capsys, *args[:-2], "--diagnostician", "heuristic", "--json")
    assert code == 0, err
    assert json.loads(out)["recorded"] == 0 and json.loads(out)["already_recorded"] == 3
    code, out, err = run_cli(capsys, "round", "commit", *common, "--json")
    assert code == 0, err
    assert json.loads(out)["failures"] == 3
    code, out, err = run_cli(capsys, *args[:-2], "--diagnostician", "heuristic")
    assert_one_line_error(code, err, f"run {RUN!r} has no open round (last committed: 1)")


def test_a_manifest_nested_100000_deep_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A ``verl.json`` nested 100,000 deep (was ``internal error: RecursionError``) is refused in
    one line naming the file, where the dump is read and where the export would replace it."""
    db = f"sqlite:///{tmp_path / 'd.db'}"
    with diagevo.open_store(db) as store:
        recorded_round(store)
        export_round(store, RUN, tmp_path / "r1")
        write_dump(tmp_path / "r1" / "rollouts", 1, dump_lines(store))
    manifest = tmp_path / "r1" / "verl.json"
    manifest.write_bytes(b"[" * 100_000 + b"]" * 100_000)
    common = ("--run", RUN, "--db", db)
    args = ("diagnose", "--from-verl", str(tmp_path / "r1" / "rollouts"), *common, "--round", "1")
    code, _, err = run_cli(capsys, *args, "--diagnostician", "heuristic")
    assert_one_line_error(code, err, f"{manifest}: JSON nested deeper than")
    code, _, err = run_cli(capsys, "export", "verl", *common, "-o", str(tmp_path / "r1"))
    assert_one_line_error(code, err, f"{manifest} exists and was not written by diagevo's verl export")


def test_diagnose_takes_one_source_of_failures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = ("--run", RUN, "--round", "1", "--diagnostician", "heuristic", "--db", f"sqlite:///{tmp_path / 'n.db'}")
    (tmp_path / "f.jsonl").write_text("{}\n")
    for given in ((), (str(tmp_path / "f.jsonl"), "--from-verl", str(tmp_path))):
        code, _, err = run_cli(capsys, "diagnose", *given, *common)
        assert_one_line_error(code, err, "a FAILURES.jsonl file, or verl's rollout dump with --from-verl")


def test_the_glue_is_two_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``export verl --questions`` turns the challenger's generation into construct.parquet and
    ``round record --from-verl`` records the solver's generation of it; the questions come from
    one source, a JSONL file or verl's output."""
    db = f"sqlite:///{tmp_path / 'g.db'}"
    common = ("--run", RUN, "--db", db)
    with diagevo.open_store(db) as store:
        diagevo.start_run(store, RUN, diagevo.load_config(None, SIZES))
        diagevo.Round.open(store, RUN)
        export_round(store, RUN, tmp_path / "r1")
    asked = generated(
        tmp_path / "r1" / "curriculum.parquet",
        tmp_path / "q.parquet",
        lambda r: ["<question>What is 2 + 3?</question>"],
    )
    code, out, err = run_cli(
        capsys, "export", "verl", *common, "-o", str(tmp_path / "r1"), "--questions", str(asked), "--json"
    )
    assert code == 0, err
    [construct] = [f for f in json.loads(out)["files"] if f["name"] == "construct.parquet"]
    assert construct["rows"] == 5 and construct["overrides"] == ["actor_rollout_ref.rollout.n=4"]
    answers = generated(
        tmp_path / "r1" / "construct.parquet", tmp_path / "a.parquet", lambda r: ["\\boxed{5}"] * 3 + ["7"]
    )
    code, out, err = run_cli(capsys, "round", "record", "--from-verl", str(answers), *common, "--json")
    assert code == 0, err
    assert json.loads(out)["recorded"] == 5
    for given in ((), (str(tmp_path / "x.jsonl"), "--from-verl", str(answers))):
        code, _, err = run_cli(capsys, "round", "record", *given, *common)
        assert_one_line_error(code, err, "a JSONL file, or verl's generation output with --from-verl FILE")
    code, _, err = run_cli(capsys, "round", "record", "--from-verl", str(asked), *common)
    assert_one_line_error(code, err, "its extra_info has no question")


@pytest.mark.slow
def test_the_example_round_trip_runs(tmp_path: Path) -> None:
    """examples/verl_round_trip.py: two rounds, each exported, trained (simulated), dumped, its
    failures read back, diagnosed and committed; the log verifies and names the trainer."""
    db = f"sqlite:///{tmp_path / 'x.db'}"
    args = ["--db", db, "--run", "x", "--out", str(tmp_path / "rounds"), "--rounds", "2"]
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "verl_round_trip.py"), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("round ") == 2
    assert sorted(p.name for p in (tmp_path / "rounds" / "round2" / "rollouts").iterdir())[:1] == ["1.jsonl"]
    with diagevo.open_store(db) as store:
        stats = diagevo.stats(store, "x").rounds
        assert [r.failures > 0 for r in stats] == [True, True]
        assert diagevo.verify_run(store, "x") == []
        [summary] = diagevo.runs(store)
        assert "verl" in summary.trainer


def test_a_manifest_whose_construction_n_is_no_number_is_refused_naming_it(
    store: diagevo.Recorder, tmp_path: Path
) -> None:
    """Issue 83: ``verl.json`` with ``actor_rollout_ref.rollout.n=²`` (a digit to ``str.isdigit``,
    none to ``int``) is refused naming the file and the field; it raised Python's ValueError."""
    out, _ = _constructed(store, tmp_path)
    four = generated(out / "construct.parquet", out / "four.parquet", lambda row: ["\\boxed{1}"] * 4)
    manifest = json.loads((out / "verl.json").read_text())
    manifest["overrides"]["construct.parquet"] = ["actor_rollout_ref.rollout.n=²"]
    (out / "verl.json").write_text(json.dumps(manifest))
    with pytest.raises(
        BadInput, match=r"verl.json: its actor_rollout_ref.rollout.n of construct.parquet, '²', is no whole"
    ):
        generated_candidates(four, RUN, 1)


def test_the_rounds_export_folder_named_for_its_dump_points_at_rollouts(
    store: diagevo.Recorder, tmp_path: Path
) -> None:
    """Issue 83: ``--from-verl ROUND`` (the export's folder, beside its ``rollouts/``) is refused
    naming ``ROUND/rollouts``; it said only that the folder holds no dump."""
    recorded_round(store)
    export_round(store, RUN, tmp_path)
    write_dump(tmp_path / "rollouts", 1, dump_lines(store))
    with pytest.raises(NotFound, match=rf"is the round's export, not its dump: name {tmp_path / 'rollouts'}"):
        rollout_failures(store, RUN, tmp_path)


def test_a_response_of_none_is_refused_by_its_index(store: diagevo.Recorder, tmp_path: Path) -> None:
    """Issue 83: a generation whose row holds a null response is refused naming the row and the
    response's place; it said only that the responses are not a list of texts."""
    out, _ = _constructed(store, tmp_path)
    holed = generated(out / "construct.parquet", out / "holed.parquet", lambda row: ["\\boxed{1}", None, "1", "2"])
    with pytest.raises(BadInput, match=r"row 1: response 1 of 4 is None, not a text"):
        generated_candidates(holed, RUN, 1)


def _constructed(store: diagevo.Recorder, tmp_path: Path) -> tuple[Path, Path]:
    """Round 1 exported with the challenger's questions: (the export folder, the curriculum's generation)."""
    diagevo.start_run(store, RUN, diagevo.load_config(None, SIZES))
    diagevo.Round.open(store, RUN)
    out = tmp_path / "r1"
    export_round(store, RUN, out)
    asked = generated(
        out / "curriculum.parquet",
        out / "questions.parquet",
        lambda row: [f"<question>What is {row.Index}?</question>"],
    )
    export_round(store, RUN, out, questions=asked)
    return out, asked


def test_a_second_chunk_of_the_generation_records_after_a_plain_export(store: diagevo.Recorder, tmp_path: Path) -> None:
    """Issue 83: ``export verl`` without ``--questions`` (the script's step after each promote)
    keeps construct.parquet's tag in verl.json, so a second chunk of its generation records (it
    was refused as "written by an older diagevo")."""
    import pandas as pd

    out, _ = _constructed(store, tmp_path)
    whole = generated(out / "construct.parquet", out / "constructed.parquet", lambda row: ["\\boxed{1}"] * 4)
    frame = pd.read_parquet(whole)
    frame.iloc[:2].to_parquet(out / "chunk1.parquet")
    frame.iloc[2:].to_parquet(out / "chunk2.parquet")
    rnd = diagevo.Round(store, RUN, 1)
    assert rnd.record(generated_candidates(out / "chunk1.parquet", RUN, 1)).new == 2
    tags = json.loads((out / "verl.json").read_text())["exports"]
    export_round(store, RUN, out)  # no --questions: construct.parquet is not written again
    assert json.loads((out / "verl.json").read_text())["exports"]["construct.parquet"] == tags["construct.parquet"]
    assert rnd.record(generated_candidates(out / "chunk2.parquet", RUN, 1)).new == len(frame) - 2


def test_a_refusal_of_a_generation_names_the_real_cause_first(
    store: diagevo.Recorder, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 83: the curriculum's generation given for construct.parquet's is named as such (its
    tag was named as construct's); a generation recorded into a committed round is refused as one
    (it was "written by an older diagevo")."""
    out, asked = _constructed(store, tmp_path)
    with pytest.raises(BadInput, match=r"is a generation of curriculum.parquet, not of construct.parquet"):
        generated_candidates(asked, RUN, 1)
    whole = generated(out / "construct.parquet", out / "constructed.parquet", lambda row: ["\\boxed{1}"] * 4)
    rnd = diagevo.Round(store, RUN, 1)
    rnd.promote(allow_empty=True)
    rnd.commit({})
    export_round(store, RUN, out, t=1)
    code, _, err = run_cli(
        capsys, "round", "record", "--from-verl", str(whole), "--run", RUN, "--round", "1", "--db", store.url
    )
    assert code == 1 and "committed" in err and "older diagevo" not in err, err


@pytest.mark.parametrize("source", ["diagevo/challenger", "diagevo/curriculum", "openai/gsm8k"])
def test_the_solvers_reward_refuses_a_row_of_another_file(source: str) -> None:
    """Issue 83: the solver's config pointed at challenger.parquet scored every rollout -1 with no
    word; a row of a ``data_source`` compute_score does not own is refused at the first call,
    naming the file to train on."""
    with pytest.raises(BadInput, match=r"compute_score is the solver's reward.*solver\.parquet") as refused:
        compute_score(source, "\\boxed{1}", None, {"question_id": "q1"})
    assert ("with challenger_score" in str(refused.value)) == ("challenger" in source)


# --- issue 93: no silent wrong file ------------------------------------------------------------


@pytest.mark.parametrize("source", ["diagevo/curriculum", "diagevo/solver", "openai/gsm8k"])
def test_the_challengers_reward_refuses_a_row_of_another_file(source: str) -> None:
    """Issue 93: the challenger's config given curriculum.parquet (whose rows carry the reward's
    settings too) trained on it without a word; a row of a ``data_source`` challenger_score does not
    own is refused at the first call, before the solver server is asked, naming the file to train on."""
    with pytest.raises(BadInput, match=r"challenger_score is the challenger's reward.*challenger\.parquet") as refused:
        challenger_score([source], ["<question>1?</question>"], [""], [settings()], solver_url="u", solver_model="m")
    assert ("with compute_score" in str(refused.value)) == ("solver" in source)


def test_the_solvers_reward_refuses_a_solver_file_of_another_round(store: diagevo.Recorder, tmp_path: Path) -> None:
    """Issue 93: a solver trained on round 1's solver.parquet in round 2 was caught only at
    ``diagnose``, after the GPU run. verl.json's overrides of solver.parquet give the solver's reward
    the export's tag, and a row of another export is refused at the first call, naming its round."""
    first = recorded_round(store)
    export_round(store, RUN, tmp_path / "r1")
    first.commit({}, allow_undiagnosed=True)
    same_questions_in_round_2(store).promote()
    export_round(store, RUN, tmp_path / "r2")
    manifest = json.loads((tmp_path / "r2" / "verl.json").read_text())
    kwarg = "++reward.custom_reward_function.reward_kwargs.export="
    [given] = [o.removeprefix(kwarg) for o in manifest["overrides"]["solver.parquet"] if o.startswith(kwarg)]
    assert given == manifest["exports"]["solver.parquet"]
    for r, tag in ((2, given), (1, None)):  # the round's own row is scored; round 1's refused
        row = pq.read_table(tmp_path / f"r{r}" / "solver.parquet").to_pylist()[0]
        args = (row["data_source"], "\\boxed{1}", row["reward_model"]["ground_truth"], row["extra_info"])
        if tag is not None:
            assert compute_score(*args, export=given)["export"] == given
            continue
        with pytest.raises(BadInput, match=r"compute_score was given a row of round 1's export \(tag 'r1-"):
            compute_score(*args, export=given)


def test_a_manifest_whose_n_differs_from_the_runs_config_is_refused(
    store: diagevo.Recorder, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 93: verl.json's construct n edited by hand (4 -> 3, as 12 -> 8) recorded a round of
    N = 3 in a run of N = 4: the manifest was trusted over the run's config. Where the run's N is
    known (round record --from-verl), it decides, and the manifest is refused naming both, even
    for a generation that matches the manifest; nothing is recorded."""
    out, _ = _constructed(store, tmp_path)
    three = generated(out / "construct.parquet", out / "three.parquet", lambda row: ["\\boxed{1}"] * 3)
    manifest = json.loads((out / "verl.json").read_text())
    manifest["overrides"]["construct.parquet"] = ["actor_rollout_ref.rollout.n=3"]
    (out / "verl.json").write_text(json.dumps(manifest))
    with pytest.raises(BadInput, match=r"verl.json's actor_rollout_ref.rollout.n is 3, and the run's grpo.constr"):
        generated_candidates(three, RUN, 1, responses=4)
    code, _, err = run_cli(capsys, "round", "record", "--from-verl", str(three), "--run", RUN, "--db", store.url)
    assert_one_line_error(code, err, "rollout.n is 3, and the run's grpo.construction_responses is 4")
    assert len(diagevo.Round(store, RUN, 1).questions()) == 0


def test_a_generation_of_an_earlier_chunk_is_told_to_export_that_chunk_again(
    store: diagevo.Recorder, tmp_path: Path
) -> None:
    """Issue 93: Q^cur generated in two chunks, construct.parquet exported for the second before
    the first chunk's construction was recorded: the refusal said to generate again (a GPU run);
    exporting that chunk again is enough (the same questions give the same tag), and then it records."""
    import pandas as pd

    out, asked = _constructed(store, tmp_path)
    frame = pd.read_parquet(asked)
    frame.iloc[:2].to_parquet(out / "chunk1.parquet")
    frame.iloc[2:].to_parquet(out / "chunk2.parquet")
    export_round(store, RUN, out, questions=out / "chunk1.parquet")
    first = generated(out / "construct.parquet", out / "constructed1.parquet", lambda row: ["\\boxed{1}"] * 4)
    export_round(store, RUN, out, questions=out / "chunk2.parquet")
    with pytest.raises(BadInput, match=r"export the round again with the questions it was generated from") as refused:
        generated_candidates(first, RUN, 1)
    assert "generate from" not in str(refused.value)
    export_round(store, RUN, out, questions=out / "chunk1.parquet")
    assert diagevo.Round(store, RUN, 1).record(generated_candidates(first, RUN, 1)).new == 2


def test_a_genuine_dump_that_repeats_round_1s_answers_has_a_way_past(
    store: diagevo.Recorder, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 93: round 2's own dump whose short answers repeat round 1's failures at the same place
    (same question text, step and response) was refused as a copy with no way past: the refusal
    names ``allow_repeats`` (``--allow-repeats``), which reads it."""
    first = recorded_round(store)
    export_round(store, RUN, tmp_path / "r1")
    write_dump(tmp_path / "r1" / "rollouts", 1, dump_lines(store))
    assert first.record_failures(rollout_failures(store, RUN, tmp_path / "r1" / "rollouts")) == 3
    first.commit({}, allow_undiagnosed=True)
    same_questions_in_round_2(store).promote()
    export_round(store, RUN, tmp_path / "r2")
    dump = tmp_path / "r2" / "rollouts"
    write_dump(dump, 1, dump_lines(store, t=2))  # the same short wrong answers, at the same place
    with pytest.raises(BadInput, match=r"belongs to round 1: .* read with allow_repeats=True"):
        rollout_failures(store, RUN, dump)
    assert len(rollout_failures(store, RUN, dump, allow_repeats=True)) == 3
    args = ("diagnose", "--from-verl", str(dump), "--run", RUN, "--db", store.url, "--diagnostician", "heuristic")
    code, _, err = run_cli(capsys, *args)
    assert_one_line_error(code, err, "--allow-repeats")
    code, out, err = run_cli(capsys, *args, "--allow-repeats", "--json")
    assert code == 0 and json.loads(out)["recorded"] == 3, err
