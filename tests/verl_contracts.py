"""``make verl-contracts``: diagevo's verl integration checked against verl itself, on a CPU.

verl wants ``transformers<5.11``, so this runs in a virtual environment of its own (``.venv-verl``:
the CPU torch, the ``verl`` extra's lower bound, diagevo). A round is made here through the public
API (SQLite, a tiny local tokenizer from ``diagevo models tiny``), then:

- ``dataset``: verl's ``RLHFDataset``, configured by the recipe's ``data`` section, loads each file
  ``diagevo export verl`` wrote; every row's prompt, ground truth and ``extra_info`` are the round's;
- ``solver reward``: verl's reward-function loader (``get_custom_reward_fn``) takes
  ``diagevo.verl.compute_score`` from the composed ``configs/verl/solver.yaml`` (``pkg://``) and from
  the module's file path; verl's ``RewardLoopWorker`` scores tokenized right and wrong responses
  (+1, -1) and carries the question id;
- ``challenger reward``: the same worker, configured by ``configs/verl/challenger.yaml``, loads the
  step reward manager (``diagevo.verl.manager``) by importlib, and scores a step's challenger
  outputs, one ``run_single`` each as verl calls it, in one call of the batch function against a
  loopback solver server (``tests/llm_server.py``) to the rewards Eq. 8-10 give by hand; a config
  whose step could not be gathered (two reward workers, a step over what the worker holds) is
  refused naming the setting when verl builds the worker;
- ``dumps``: verl's own writers dump those rollouts (the v1 trainer's ``_write_generations`` with
  prompts decoded as its ``_log_rollout_data`` decodes them, and the legacy trainer's
  ``_log_rollout_data`` with the reward extras), read back into exactly the wrong responses, which
  ``Round.record_failures`` accepts; read and recorded again, nothing is added;
- ``configs``: ``configs/verl/*.yaml`` with the overrides of ``examples/verl_round.sh`` (the
  recipe's script), alone and with the batch settings the export wrote for the round's size
  (``verl.json``), compose with verl's ``ppo_trainer`` config and pass its ``validate_config``.

Each failure is one line; exit code 1 when any.
"""

from __future__ import annotations

import asyncio
import re
import shlex
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs" / "verl"
SCRIPT = ROOT / "examples" / "verl_round.sh"
RUN = "verl-contracts"
QUESTIONS = {  # text -> the answer most construction responses give (one text inside another)
    "What is 2 + 3?": "5",
    "What is 12 + 3?": "15",
    "What is the remainder when 17 is divided by 5?": "2",
}
VOTES = 4  # grpo.construction_responses of the round: N answers per question for the challenger reward


@dataclass
class Result:
    """One contract: what it checks and the failures (one line each)."""

    name: str
    failures: list[str] = field(default_factory=list)

    def expect(self, ok: bool, line: str) -> None:
        if not ok:
            self.failures.append(line)


@dataclass
class World:
    """The round, its export and the tokenizer every check uses."""

    tmp: Path
    db: str
    export: Path
    tokenizer_dir: Path
    labels: dict[str, str]  # retained question id -> pseudo-label
    texts: dict[str, str]  # retained question id -> text


def make_world(tmp: Path) -> World:
    """Round 1 of a run: its questions recorded (all retained), exported for verl."""
    import diagevo
    from diagevo.verl import export_round

    tiny = tmp / "tiny"
    diagevo_cli = Path(sys.executable).parent / "diagevo"
    subprocess.run([str(diagevo_cli), "models", "tiny", "--steps", "1", "--out", str(tiny), "--json"], check=True)
    db = f"sqlite:///{tmp / 'verl.db'}"
    sizes = ["train.challenger_questions=8", "train.curriculum_questions=8", f"grpo.construction_responses={VOTES}"]
    with diagevo.open_store(db) as store:
        diagevo.start_run(store, RUN, diagevo.load_config(None, sizes), trainer="verl")
        rnd = diagevo.Round.open(store, RUN)
        reqs = rnd.requests(len(QUESTIONS))
        candidates = [
            diagevo.Candidate(
                q.question_id,
                q.mode,
                text,
                q.active_cause,
                q.mastered_cause,
                q.node,
                responses=(*[f"so it is \\boxed{{{label}}}"] * 9, "\\boxed{1001}", "\\boxed{1002}", "\\boxed{1003}"),
            )
            for q, (text, label) in zip(reqs, QUESTIONS.items(), strict=True)
        ]
        scored = rnd.record(candidates)
        rnd.promote()
        export_round(store, RUN, tmp / "round1")
    kept = [s for s in scored if s.retained]
    return World(
        tmp,
        db,
        tmp / "round1",
        tiny / "solver",
        {s.question_id: s.pseudo_label or "" for s in kept},
        {s.question_id: s.text for s in kept},
    )


def compose(name: str, overrides: list[str]) -> Any:
    """``configs/verl/NAME.yaml`` with ``overrides``, composed with verl's config by Hydra, as
    ``main_ppo --config-path configs/verl --config-name NAME`` composes it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(CONFIGS), version_base=None):
        return hydra_compose(config_name=name, overrides=overrides)


def validate(cfg: Any) -> None:
    """What ``verl.trainer.main_ppo.main`` does with the composed config before training."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    auto_set_device(cfg)
    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))


def _paths(w: World, name: str) -> list[str]:
    return [f"data.train_files={w.export / f'{name}.parquet'}", f"actor_rollout_ref.model.path={w.tokenizer_dir}"]


def _dataset(w: World, name: str, cfg: Any) -> Any:
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    tokenizer = AutoTokenizer.from_pretrained(w.tokenizer_dir)
    return RLHFDataset(str(w.export / f"{name}.parquet"), tokenizer, cfg.data), tokenizer


def check_dataset(w: World) -> Result:
    """verl's RLHFDataset reads the three files with the recipe's data settings."""
    import pyarrow.parquet as pq

    from diagevo.curriculum.prompts import solver_messages

    r = Result("RLHFDataset loads solver.parquet, challenger.parquet and curriculum.parquet")
    for name, config in (("solver", "solver"), ("challenger", "challenger"), ("curriculum", "challenger")):
        cfg = compose(config, _paths(w, name))
        ds, _ = _dataset(w, name, cfg)
        rows = pq.read_table(w.export / f"{name}.parquet").num_rows
        r.expect(len(ds) == rows > 0, f"{name}: RLHFDataset holds {len(ds)} rows of {rows}")
        for i in range(len(ds)):
            item = ds[i]
            info, reward_model = item["extra_info"], item["reward_model"]
            qid = info.get("question_id")
            r.expect(info.get("index") == item["index"] == i, f"{name} row {i}: index {item['index']}")
            r.expect(info.get("run") == RUN and info.get("round") == 1, f"{name} row {i}: extra_info {info}")
            r.expect(item["data_source"] == f"diagevo/{name}", f"{name} row {i}: data_source {item['data_source']}")
            if name == "solver":
                r.expect(item["raw_prompt"] == solver_messages(w.texts.get(qid, "")), f"{name} {qid}: prompt")
                r.expect(reward_model == {"style": "rule", "ground_truth": w.labels.get(qid)}, f"{qid}: {reward_model}")
            else:
                r.expect(item["raw_prompt"][0]["role"] == "system", f"{name} {qid}: not a challenger prompt")
                r.expect(info.get("votes") == VOTES and info.get("lam") == 1.0, f"{name} {qid}: reward settings {info}")
    return r


def rollout_batch(tokenizer: Any, items: list[dict[str, Any]], responses: list[str]) -> Any:
    """A DataProto of prompts and responses as verl's agent loop hands them to the reward worker:
    the chat-templated prompt left-padded, the response (with its end token) right-padded."""
    import numpy as np
    import torch
    from verl import DataProto

    prompts = [tokenizer.apply_chat_template(i["raw_prompt"], add_generation_prompt=True, tokenize=True) for i in items]
    prompts = [list(p["input_ids"] if isinstance(p, dict) or hasattr(p, "keys") else p) for p in prompts]
    answers = [tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for text in responses]
    plen, rlen, pad = max(map(len, prompts)), max(map(len, answers)), tokenizer.pad_token_id
    prompt_ids = torch.tensor([[pad] * (plen - len(p)) + p for p in prompts])
    response_ids = torch.tensor([a + [pad] * (rlen - len(a)) for a in answers])
    mask = torch.tensor(
        [
            [0] * (plen - len(p)) + [1] * len(p) + [1] * len(a) + [0] * (rlen - len(a))
            for p, a in zip(prompts, answers, strict=True)
        ]
    )
    non_tensors = {
        k: np.array([i[k] for i in items], dtype=object) for k in ("data_source", "reward_model", "extra_info")
    }
    tensors = {
        "prompts": prompt_ids,
        "responses": response_ids,
        "attention_mask": mask,
        "input_ids": torch.cat([prompt_ids, response_ids], 1),
    }
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors)


def worker_scores(cfg: Any, batch: Any) -> list[dict[str, Any]]:
    """verl's RewardLoopWorker (the class its Ray actor runs) on ``batch``, one event loop."""
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    async def score() -> list[dict[str, Any]]:
        worker = RewardLoopWorker(cfg)  # its loop is the running one, as in the actor
        return await worker.compute_score_batch(batch) if batch is not None else []

    return asyncio.run(score())


@dataclass
class Rollouts:
    """The solver's rollouts of the round: what the reward worker made of them."""

    batch: Any
    items: list[dict[str, Any]]
    responses: list[str]
    wrong: set[tuple[str, str]]  # (question id, response) of each failure
    scores: list[dict[str, Any]]


def solver_rollouts(w: World) -> tuple[Rollouts, Any, Any]:
    """A right and a wrong response to each retained question, scored by verl's worker."""
    cfg = compose("solver", _paths(w, "solver"))
    ds, tokenizer = _dataset(w, "solver", cfg)
    items, responses, wrong = [], [], set()
    for i in range(len(ds)):
        item = ds[i]
        label = item["reward_model"]["ground_truth"]
        for text in (
            f"Step 1: add.\nThe final answer is \\boxed{{{label}}}.",
            f"I think it is \\boxed{{{int(label) + 7}}}",
        ):
            items.append(item)
            responses.append(text)
        wrong.add((item["extra_info"]["question_id"], responses[-1]))
    batch = rollout_batch(tokenizer, items, responses)
    return Rollouts(batch, items, responses, wrong, worker_scores(cfg, batch)), cfg, tokenizer


def check_solver_reward(w: World, rollouts: Rollouts) -> Result:
    """compute_score through verl's loader and reward worker: +1 right, -1 wrong, the question id."""
    from verl.trainer.ppo.reward import get_custom_reward_fn

    import diagevo.verl

    r = Result("verl's loader and reward worker: diagevo.verl.compute_score by pkg:// and by path")
    for out, item, response in zip(rollouts.scores, rollouts.items, rollouts.responses, strict=True):
        qid = item["extra_info"]["question_id"]
        want = -1.0 if (qid, response) in rollouts.wrong else 1.0
        r.expect(out["reward_score"] == want, f"{qid}: reward {out['reward_score']} for {response!r}, not {want}")
        r.expect(out["reward_extra_info"].get("question_id") == qid, f"{qid}: extras {out['reward_extra_info']}")
    by_path = compose("solver", [*_paths(w, "solver"), f"reward.custom_reward_function.path={diagevo.verl.__file__}"])
    fn = get_custom_reward_fn(by_path)
    qid, label = next(iter(w.labels.items()))
    right = fn(
        data_source="diagevo/solver",
        solution_str=f"\\boxed{{{label}}}",
        ground_truth=label,
        extra_info={"question_id": qid},
    )
    r.expect(
        right == {"score": 1.0, "acc": 1.0, "checked": 1.0, "question_id": qid, "export": ""},
        f"loaded by file path: {right}",
    )
    return r


def check_solver_reward_on_challenger_rows(w: World) -> Result:
    """The solver's config pointed at challenger.parquet (data.train_files): verl's reward worker
    fails on the first step, with diagevo's line naming solver.parquet (every rollout scored -1
    with no word before)."""
    paths = [o for o in _paths(w, "solver") if not o.startswith("data.train_files=")]
    cfg = compose("solver", [*paths, f"data.train_files={w.export / 'challenger.parquet'}"])
    ds, tokenizer = _dataset(w, "challenger", compose("challenger", _paths(w, "challenger")))
    item = ds[0]
    r = Result("verl's reward worker: compute_score refuses a challenger row, naming solver.parquet")
    try:
        worker_scores(cfg, rollout_batch(tokenizer, [item], ["\\boxed{1}"]))
    except Exception as exc:  # noqa: BLE001 - verl's worker may wrap it: the line is what a user reads
        said = str(exc)
        r.expect("solver.parquet" in said and "challenger_score" in said, f"refused, but says: {said[-300:]}")
    else:
        r.expect(False, "the worker scored a challenger row with the solver's reward")
    return r


CHALLENGER_OUTPUTS = [
    "<question>Half of these apples are red: how many apples are there?</question>",  # p1 = 1/2, alone
    "<question>A sure thing: what is seven?</question>",  # p1 = 1
    "<question>Gamma grapes grow in groups of nine: count them all.</question>",  # p1 = 1/2, twice
    "<question>Gamma grapes grow in groups of nine: count them all.</question>",
    "no question block at all",  # invalid
]
CHALLENGER_REWARDS = [1 - 1 / 5, 0.0, 1 - 2 / 5, 1 - 2 / 5, 0.0]  # max(0, r_unc - r_rep), B = 5 (Eq. 8-10)


def solver_answers(body: dict[str, Any]) -> list[str]:
    """The loopback solver: half its answers agree on questions of halves and of grapes, all on the others."""
    question = body["messages"][-1]["content"]
    n = int(body.get("n", 1))
    if "Half" in question or "grapes" in question:
        return [f"\\boxed{{{k % 2}}}" for k in range(n)]
    return ["\\boxed{7}"] * n


def check_challenger_reward(w: World) -> Result:
    """challenger_score through verl's reward worker and the step reward manager: one step of
    B = 5 rollouts, one batch call, Eq. 8-10 against the served solver; a step that could not be
    gathered is refused, in one line naming the setting, when verl builds the worker."""
    from verl.experimental.reward_loop.reward_manager import NaiveRewardManager

    from diagevo.errors import BadInput
    from diagevo.verl.manager import StepRewardManager
    from tests.llm_server import LLMServer

    r = Result("verl's reward worker: the step reward manager hands challenger_score a step, a loopback solver")
    with LLMServer() as server:
        server.default("other", solver_answers)
        step = [f"data.train_batch_size={len(CHALLENGER_OUTPUTS)}", "actor_rollout_ref.rollout.n=1"]
        kwargs = [f"reward.custom_reward_function.reward_kwargs.solver_url={server.url}"]
        cfg = compose("challenger", [*_paths(w, "challenger"), *kwargs, *step])
        ds, tokenizer = _dataset(w, "challenger", cfg)
        items = [ds[i % len(ds)] for i in range(len(CHALLENGER_OUTPUTS))]
        batch = rollout_batch(tokenizer, items, CHALLENGER_OUTPUTS)
        outs = worker_scores(cfg, batch)
        asked = [c["body"] for c in server.calls("other")]
    rewards = [o["reward_score"] for o in outs]
    ours, verls = (
        StepRewardManager.assemble_rm_scores(batch, rewards),
        NaiveRewardManager.assemble_rm_scores(batch, rewards),
    )
    r.expect(bool((ours == verls).all()), "assemble_rm_scores differs from verl's own managers'")
    got = [round(o["reward_score"], 9) for o in outs]
    r.expect(got == [round(x, 9) for x in CHALLENGER_REWARDS], f"rewards {got}, not {CHALLENGER_REWARDS}")
    r.expect(len(asked) == 4 and all(b["n"] == VOTES and b["top_p"] == 0.99 for b in asked), f"solver asked {asked}")
    r.expect(
        all(b["max_tokens"] == cfg.data.max_response_length for b in asked), "max_tokens is not the response length"
    )
    r.expect(
        [o["reward_extra_info"]["question_id"] for o in outs] == [i["extra_info"]["question_id"] for i in items],
        "question ids",
    )
    for wrong, named in (
        (["reward.num_workers=2"], "reward.num_workers is 2"),
        (["data.train_batch_size=256", "actor_rollout_ref.rollout.n=8"], "holds at most 1000 rollouts at once"),
    ):
        try:
            worker_scores(compose("challenger", [*_paths(w, "challenger"), *step, *wrong]), None)
            r.failures.append(f"{wrong}: the worker was built")
        except BadInput as exc:
            r.expect(named in str(exc) and "\n" not in str(exc), f"{wrong}: {exc}")
    return r


def check_dumps(w: World, rollouts: Rollouts, tokenizer: Any) -> Result:
    """verl's own dump writers, read back into the round's failures, recorded once."""
    import numpy as np
    import torch
    from verl import DataProto
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    import diagevo
    from diagevo.verl import rollout_failures

    r = Result("verl's rollout dumps (v1 and legacy trainers) read back into failures record_failures takes")
    dump = w.export / "rollouts"  # beside the export's manifest, as the recipe dumps
    batch, scores = rollouts.batch, [o["reward_score"] for o in rollouts.scores]
    # the v1 trainer (trainer.use_v1, the default): _log_rollout_data decodes each prompt and response, then writes
    inputs = [tokenizer.decode(ids, skip_special_tokens=True) for ids in batch.batch["prompts"]]
    outputs = [tokenizer.decode(ids, skip_special_tokens=True) for ids in batch.batch["responses"]]
    gts = [i["reward_model"]["ground_truth"] for i in rollouts.items]
    uids = [f"uid{k // 2}_0_{k % 2}" for k in range(len(inputs))]
    for step in (1, 2):
        PPOTrainer._write_generations(inputs, outputs, gts, scores, {"uid": uids}, str(dump), step)
    # the legacy trainer (trainer.use_v1=false): its _log_rollout_data, reward extras included
    legacy = RayPPOTrainer.__new__(RayPPOTrainer)
    legacy.tokenizer, legacy.global_steps = tokenizer, 3
    legacy._init_dump_executor()
    valid = batch.batch["attention_mask"][:, batch.batch["prompts"].shape[1] :].sum(-1)
    token_scores = torch.zeros(batch.batch["responses"].shape)
    token_scores[torch.arange(len(scores)), valid - 1] = torch.tensor(scores)
    dumped = DataProto.from_dict(
        tensors={
            "prompts": batch.batch["prompts"],
            "responses": batch.batch["responses"],
            "token_level_scores": token_scores,
        },
        non_tensors={"reward_model": np.array([i["reward_model"] for i in rollouts.items], dtype=object)},
    )
    extras = {
        k: np.array([o["reward_extra_info"][k] for o in rollouts.scores])
        for k in rollouts.scores[0]["reward_extra_info"]
    }
    legacy._log_rollout_data(dumped, extras, {}, str(dump))
    legacy._shutdown_dump_executor()
    r.expect(
        sorted(p.name for p in dump.iterdir()) == ["1.jsonl", "2.jsonl", "3.jsonl"], f"dumped {list(dump.iterdir())}"
    )
    with diagevo.open_store(w.db) as store:
        failures = rollout_failures(store, RUN, dump)
        got = sorted((f.question_id, f.response) for f in failures)
        want = sorted((qid, response.strip()) for qid, response in rollouts.wrong for _ in range(3))
        r.expect([(q, x.strip()) for q, x in got] == want, f"failures {got}, not {want}")
        r.expect(len({f.failure_id for f in failures}) == len(failures), "failure ids repeat")
        rnd = diagevo.Round(store, RUN, 1)
        r.expect(rnd.record_failures(failures) == len(failures), "record_failures did not take every failure")
        again = rollout_failures(store, RUN, dump)
        r.expect(again == failures, "a second read of the same dump gave other failures")
        r.expect(rnd.record_failures(again) == 0, "recording the same dump again added failures")
    return r


def script_overrides() -> Iterator[tuple[str, list[str]]]:
    """(config name, overrides) of each ``main_ppo`` call of the recipe's script, its shell
    variables given placeholder values."""
    text = SCRIPT.read_text(encoding="utf-8").replace("\\\n", " ")
    for line in text.splitlines():
        if "verl.trainer.main_ppo" not in line:
            continue
        words = shlex.split(re.sub(r"\$\{?(\w+)\}?", r"/placeholder/\1", line), comments=True)
        name = words[words.index("--config-name") + 1]
        yield name, [w for w in words if "=" in w and not w.startswith("-") and "/placeholder/VERL_ARGS" not in w]


def check_configs(w: World) -> Result:
    """Each main_ppo call of the recipe's script composes with verl's config and validates, alone
    and with the batch settings the export wrote for the round's rows."""
    import json

    from verl.trainer.ppo.reward import get_custom_reward_fn, resolve_reward_manager_cls

    from diagevo.verl.manager import StepRewardManager
    from diagevo.verl.rewards import step_size

    r = Result("configs/verl/*.yaml with the recipe's and the export's overrides: verl's compose and validate_config")
    calls = list(script_overrides())
    r.expect(
        sorted({name for name, _ in calls}) == ["challenger", "solver"], f"main_ppo calls in {SCRIPT.name}: {calls}"
    )
    sizes = json.loads((w.export / "verl.json").read_text(encoding="utf-8"))["overrides"]
    for name, overrides in calls:
        for size in ([], sizes[f"{name}.parquet"]):
            try:
                cfg = compose(name, [*overrides, *size, f"actor_rollout_ref.model.path={w.tokenizer_dir}"])
                validate(cfg)
            except Exception as exc:  # one line, naming the call
                r.failures.append(f"{name} {size}: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
                continue
            fn = get_custom_reward_fn(cfg)
            r.expect(fn is not None and fn.args[0].__module__ == "diagevo.verl.rewards", f"{name}: reward {fn}")
            if name == "challenger":
                r.expect(resolve_reward_manager_cls(cfg) is StepRewardManager, f"challenger {size}: reward manager")
                r.expect(step_size(cfg) <= 1000, f"challenger {size}: a step of {step_size(cfg)}")
    return r


def run(tmp: Path) -> list[Result]:
    w = make_world(tmp)
    results: list[Result] = []

    def guarded(name: str, check: Callable[[], Result]) -> None:
        try:
            results.append(check())
        except Exception:
            results.append(Result(name, [traceback.format_exc().strip().splitlines()[-1]]))
            traceback.print_exc()

    guarded("dataset", lambda: check_dataset(w))
    rollouts, _cfg, tokenizer = solver_rollouts(w)
    guarded("solver reward", lambda: check_solver_reward(w, rollouts))
    guarded("solver reward on challenger rows", lambda: check_solver_reward_on_challenger_rows(w))
    guarded("challenger reward", lambda: check_challenger_reward(w))
    guarded("dumps", lambda: check_dumps(w, rollouts, tokenizer))
    guarded("configs", lambda: check_configs(w))
    return results


def main() -> int:
    import verl

    with tempfile.TemporaryDirectory(prefix="verl-contracts-") as tmp:
        results = run(Path(tmp))
    print(f"verl {verl.__version__}")
    for r in results:
        print(f"{'ok  ' if not r.failures else 'FAIL'} {r.name}")
        for line in r.failures:
            print(f"     {line}")
    return 1 if any(r.failures for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
