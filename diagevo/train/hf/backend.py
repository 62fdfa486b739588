"""``HFBackend``: the :class:`~diagevo.train.backend.Backend` protocol with transformers + TRL.

Challenger phase: TRL ``GRPOTrainer`` on the Appendix J challenger prompts of Q^chal (free,
targeted, stitched), rewarded by the loop's batch reward (frozen-solver votes, Eq. 8-10).
Solver phase: ``GRPOTrainer`` on the retained questions with the loop's ±1 reward; every
completion of every draw of a question and its reward are returned (failed ones go to diagnosis).
Both phases follow Table 8 per step (``diagevo/train/hf/args.py``).
Sampling (Q^cur, construction votes, the frozen solver) goes through an engine: ``local``
(``generate`` in this process, on the models being trained) or ``vllm`` (GPUs, or vLLM's CPU build).

GPU memory between phases: each phase builds its trainer, trains, and drops it (trainer,
optimizer state, reference model and vLLM engine are deleted, then ``gc.collect()`` and
``torch.cuda.empty_cache()``), so only the two policies stay resident between phases. The KL
reference of a phase is the model directory the role was last loaded from (the base model, or
the checkpoint a resumed run reloaded).
"""

from __future__ import annotations

import gc
import random
import tempfile
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diagevo.config.sections import Role
from diagevo.curriculum.prompts import challenger_messages, parse_question, reword_messages, solver_messages
from diagevo.diagnosis.calibration import thresholds_for
from diagevo.diagnosis.heuristic import HeuristicDiagnostician, NamedErrors
from diagevo.diagnosis.interface import Diagnostician, Embedder
from diagevo.diagnosis.tools import embedder_for, llm_diagnostician
from diagevo.errors import BadInput
from diagevo.generation import Sampling, model_text
from diagevo.generation.endpoint import EndpointEngine
from diagevo.generation.local import LocalEngine, check_local_model
from diagevo.generation.vllm_engine import VLLMEngine
from diagevo.generation.vllm_platform import current_platform
from diagevo.memory.sampler import FREE, GenerationRequest
from diagevo.runtime.progress import ProgressFn, no_progress, quiet_libraries
from diagevo.train.backend import ChallengerRewardFn, SolverRewardFn, SolverRound, Truth, numbers
from diagevo.train.hf.args import (
    PhasePlan,
    attention,
    engine_decisions,
    grpo_kwargs,
    own_optimizer,
    phase_plan,
    schedule_horizon,
    step_order,
    vllm_kwargs,
)
from diagevo.train.hf.distributed import (
    Command,
    broadcast,
    gather_policy,
    global_rewards,
    is_zero3,
    rank,
    whole_weights,
)
from diagevo.train.hf.heldout import gradable, heldout_accuracy, heldout_rows, probe_truths
from diagevo.train.hf.loading import check_flash_attention, check_one_architecture, weight_dtype
from diagevo.train.hf.optim import RoleOptimizer, load_state, optimizers, save_state
from diagevo.train.hf.vllm_share import ServerClient, shared_with_trl
from diagevo.train.labels import SHARED_LABEL_VOTES, draw_shared_questions, shared_label_accuracy

# torch, transformers and TRL load in the methods that use them: every module of the package
# imports without the hf extra (make_backend refuses in one line where it is missing)

if TYPE_CHECKING:  # a type only: the composed config imports this package's config, never the reverse
    from diagevo.train.config import Config

STAT_KEYS = {
    "loss": "loss",
    "kl": "kl",
    "reward": "reward",
    "reward_std": "reward_std",
    "completions/mean_length": "completion_length",
    "frac_reward_zero_std": "frac_reward_zero_std",
    # vLLM rollouts: |log-prob the engine sampled with - the trainer's| per token (mean, and each step's max)
    "sampling/sampling_logp_difference/mean": "sampling_logp_diff",
    "sampling/sampling_logp_difference/max": "sampling_logp_diff_max",
}


STEP_KEYS = (
    "loss",
    "reward",
    "reward_std",
    "kl",
    "entropy",
    "clip_ratio/region_mean",
    "clip_ratio/low_mean",
    "clip_ratio/high_mean",
    "completions/mean_length",
    "completions/clipped_ratio",
    "frac_reward_zero_std",
    "learning_rate",
    "grad_norm",
    "sampling/sampling_logp_difference/mean",
)
"""The fields of TRL's per-step log row kept in the log (``train.step``), as TRL names them."""


def step_row(logs: dict[str, Any]) -> dict[str, float]:
    """The finite numbers of :data:`STEP_KEYS` in one of TRL's log rows."""
    return numbers({k: logs[k] for k in STEP_KEYS if k in logs})


def completion_text(completion: Any) -> str:
    """TRL passes a conversational completion as a list of messages."""
    if isinstance(completion, list):
        return model_text("".join(str(m.get("content", "")) for m in completion))
    return model_text(str(completion))


def grpo_stats(log_history: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Mean over the training steps of loss, KL, reward and completion length."""
    sums: dict[str, list[float]] = defaultdict(list)
    for row in log_history:
        for key, value in numbers({k: row[k] for k in STAT_KEYS if k in row}).items():
            sums[STAT_KEYS[key]].append(value)
    return {name: sum(v) / len(v) for name, v in sums.items()}


class HFBackend:
    """Challenger and solver as transformers models, trained with TRL GRPO."""

    name = "hf"
    checkpoints_are_models = True  # model weights: train.keep_checkpoints prunes them

    def __init__(
        self,
        config: Config,
        embedder: Embedder | None = None,
        named_errors: NamedErrors | None = None,
        truth: Callable[[str], Truth | None] | None = None,
        rewrite: Callable[[str, int, random.Random], list[str]] | None = None,
    ) -> None:
        """``named_errors``: the world's named errors the heuristic diagnostician words failures
        by (:func:`diagevo.train.run.make_backend` gives the mini world's for ``hf.named_errors =
        "mini"``); None: by where a failure departs from its reference. ``truth``: the world's
        answers to its questions, where it knows them (the mini world's); None: unknown. ``rewrite``:
        the world's answer-preserving rewordings of a question (the shared-error check's); None: none."""
        quiet_libraries()
        self.named_errors = named_errors
        self._truth = truth
        self._rewrite = rewrite
        if config.hf.torch_threads is not None:
            import torch

            torch.set_num_threads(config.hf.torch_threads)
        self.config = config
        self.seed = config.train.seed
        self.sources: dict[Role, Path] = {
            "challenger": check_local_model(config.challenger.model),
            "solver": check_local_model(config.solver.model),
        }
        self._models: dict[Role, Any] = {}
        self._tokenizers: dict[Role, Any] = {}
        self._emb = embedder
        self._diag: Diagnostician | None = None
        self._local: dict[Role, LocalEngine] = {}  # transformers generate on each policy (no vLLM)
        self._vllm: Any = None  # colocate: the process's one VLLMEngine, built on first use
        self._server: Any = None  # server: the process's one ServerClient
        self._version: dict[Role, int] = {"challenger": 0, "solver": 0}  # bumped whenever a policy changes
        self._in_phase = False  # inside a GRPO phase the optimizer owns the GPU between rollouts
        self._steps: list[tuple[int, dict[str, float]]] = []  # the last phase's TRL rows (step, row)
        # each role's optimizer steps in the run, and its optimizer where one is kept across rounds
        self._optim: dict[Role, RoleOptimizer] = {"challenger": RoleOptimizer(), "solver": RoleOptimizer()}
        if any(config.role(r).keep_optimizer for r in self._optim) and config.hf.num_processes > 1:
            raise BadInput("keep_optimizer keeps one process's AdamW state: set hf.num_processes = 1 or leave it off")
        self._shared: list[str] | None = None  # Figure 3(c)'s questions, drawn on first use
        self._probe = probe_truths(config)  # or a labelled probe's (read before the run starts)
        self._initial: LocalEngine | None = None  # filter.labeler = "initial": the run's first solver
        self.leading = False  # rank 0 of a launch: each collective phase is announced to the followers

    # ------------------------------------------------------------------ models

    def model(self, role: Role) -> Any:
        if role not in self._models:
            self._load_role(role, self.sources[role])
        return self._models[role]

    def tokenizer(self, role: Role) -> Any:
        self.model(role)
        return self._tokenizers[role]

    def _load_role(self, role: Role, path: Path, device: str | None = None) -> None:
        self._models[role], self._tokenizers[role] = self._load(path, device)
        self._changed(role)

    def _load(self, path: Path, device: str | None = None) -> tuple[Any, Any]:
        """A model and its tokenizer from ``path``, in the run's precision and attention."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        dtype = getattr(torch, weight_dtype(self.config))
        attn = attention(self.config)
        if attn == "flash_attention_2":
            check_flash_attention()
        with whole_weights():  # sampled with generate here: never ZeRO-3's shards
            model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation=attn).to(
                device or self.config.hf.device  # type: ignore[arg-type]
            )
        tok = AutoTokenizer.from_pretrained(path)
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        return model, tok

    def _changed(self, role: Role) -> None:
        """The role's policy has new weights: the next sample of it pushes them first."""
        self._version[role] += 1
        self._local.pop(role, None)

    def engine(self, role: Role) -> Any:
        """The sampling engine, holding the role's current weights. Without vLLM: transformers
        ``generate`` on the policy itself. With vLLM, one engine (colocate) or one server (server
        mode) per process, for both roles: the policy's weights are pushed in memory when the
        engine holds other ones (the other role's, or a GRPO step's)."""
        h = self.config.hf
        if not h.use_vllm:
            if role not in self._local:
                self._local[role] = LocalEngine(
                    self.model(role), tokenizer=self.tokenizer(role), device=h.device, batch_size=h.generation_batch
                )
            return self._local[role]
        key = (role, self._version[role])
        if h.vllm_mode == "server":
            server = self._server_client()
            if server.holding != key:
                server.push(key, self.model(role))
            return EndpointEngine(server.model, url=f"{server.url}/v1")
        engine = self._vllm_engine()
        if engine.llm.holding != key:
            engine.llm.load_weights(key, self.model(role).named_parameters())
        return engine

    def _vllm_engine(self) -> Any:
        if self._vllm is None:
            check_one_architecture(self.sources)
            platform, sleep_ok = current_platform()  # what vLLM runs on here, not only what the config says
            decisions = engine_decisions(self.config, platform, sleep_ok)
            kwargs = vllm_kwargs(self.config, str(self.sources["solver"]), decisions)
            kwargs["seed"] = self.config.train.seed + rank()  # as TRL: each process samples its own
            self._vllm = VLLMEngine(**kwargs)
        return self._vllm

    def _server_client(self) -> Any:
        if self._server is None:
            if not self.config.hf.vllm_server_url:
                raise BadInput('hf.vllm_mode = "server" needs hf.vllm_server_url')
            self._server = ServerClient(self.config.hf.vllm_server_url, device=self.config.hf.device)
        return self._server

    def _generate(self, role: Role, prompts: list[Any], sampling: Sampling) -> list[list[str]]:
        out: list[list[str]] = self.engine(role).generate(prompts, sampling)
        if self._in_phase and self._vllm is not None:  # a reward's votes: the optimizer steps next
            self._vllm.sleep()
        return out

    def _sampling(self, n: int, rng: random.Random, max_new_tokens: int, greedy: bool = False) -> Sampling:
        g = self.config.grpo
        return Sampling(
            n=n,
            temperature=0.0 if greedy else g.temperature,
            top_p=g.top_p,
            max_new_tokens=max_new_tokens,
            seed=rng.getrandbits(31),
        )

    # ------------------------------------------------------------------ challenger

    def generate(self, requests: Sequence[GenerationRequest], rng: random.Random) -> list[str]:
        if not requests:
            return []
        prompts = [challenger_messages(r) for r in requests]
        outs = self._generate("challenger", prompts, self._sampling(1, rng, self.config.challenger.max_new_tokens))
        return [o[0] for o in outs]

    def train_challenger(
        self,
        requests: Sequence[GenerationRequest],
        reward_fn: ChallengerRewardFn,
        rng: random.Random,
        progress: ProgressFn = no_progress,
    ) -> dict[str, float]:
        self._announce(Command("train_challenger", self.config, requests=tuple(requests), rng=rng))
        reqs = list(requests)
        plan = phase_plan(self.config, "challenger", len(reqs))
        rows = [{"prompt": challenger_messages(reqs[i]), "request": i} for i in step_order(plan, rng)]

        def batch_reward(batch: list[tuple[int, str]]) -> list[float]:  # on rank 0, the global batch
            return list(reward_fn([reqs[i] for i, _ in batch], [text for _, text in batch]))

        def reward(prompts: list[Any], completions: list[Any], request: list[int], **_: Any) -> list[float]:
            return global_rewards(
                [(i, completion_text(c)) for i, c in zip(request, completions, strict=True)], batch_reward
            )

        return self._grpo(plan, rows, reward, rng, progress)

    # ------------------------------------------------------------------ solver

    def sample(self, questions: Sequence[str], n: int, rng: random.Random, *, initial: bool = False) -> list[list[str]]:
        if not questions:
            return []
        prompts = [solver_messages(q) for q in questions]
        sampling = self._sampling(n, rng, self.config.solver.max_new_tokens)
        if initial:  # the run's first solver: transformers generate on a copy loaded once, never trained
            return self._initial_engine().generate(prompts, sampling)  # type: ignore[no-any-return]
        return self._generate("solver", prompts, sampling)

    def _initial_engine(self) -> LocalEngine:
        if self._initial is None:
            model, tok = self._load(check_local_model(self.config.solver.model))
            h = self.config.hf
            self._initial = LocalEngine(model, tokenizer=tok, device=h.device, batch_size=h.generation_batch)
        return self._initial

    def train_solver(
        self,
        questions: Sequence[str],
        reward_fn: SolverRewardFn,
        group_size: int,
        rng: random.Random,
        progress: ProgressFn = no_progress,
    ) -> SolverRound:
        self._announce(Command("train_solver", self.config, questions=tuple(questions), group_size=group_size, rng=rng))
        n = len(questions)
        out = SolverRound.over(n)
        if not n:
            return out
        plan = phase_plan(self.config, "solver", n)
        rows = [{"prompt": solver_messages(questions[i]), "question": i} for i in step_order(plan, rng)]

        def batch_reward(batch: list[tuple[int, str]]) -> list[float]:  # on rank 0, the global batch
            scores = [0.0] * len(batch)
            groups: dict[int, list[int]] = defaultdict(list)
            for j, (i, _) in enumerate(batch):
                groups[i].append(j)
            for i, js in groups.items():
                # every draw of the question in the phase: its G optimization responses each time
                for j, r in zip(js, out.score(i, [batch[j][1] for j in js], reward_fn), strict=True):
                    scores[j] = r
            return scores

        def reward(prompts: list[Any], completions: list[Any], question: list[int], **_: Any) -> list[float]:
            return global_rewards(
                [(i, completion_text(c)) for i, c in zip(question, completions, strict=True)], batch_reward
            )

        stats = self._grpo(plan, rows, reward, rng, progress)
        if rank() != 0:  # a follower: rank 0 recorded the responses and rewards
            return SolverRound([], [], stats)
        # a question the phase's steps did not draw has no optimization responses: none are sampled
        # for diagnosis (Appendix J: "No extra responses are sampled for diagnosis")
        stats["questions_trained"] = float(sum(1 for rs in out.responses if rs))
        stats["failed_fraction"] = out.failed_fraction()
        return replace(out, stats=stats)

    # ------------------------------------------------------------------ GRPO

    def _grpo(
        self, plan: PhasePlan, rows: list[dict[str, Any]], reward: Any, rng: random.Random, progress: ProgressFn
    ) -> dict[str, float]:
        from accelerate import PartialState
        from datasets import Dataset
        from transformers import TrainerCallback
        from transformers.trainer_callback import PrinterCallback, ProgressCallback
        from trl import GRPOConfig, GRPOTrainer

        role = plan.role
        h = self.config.hf
        engine = self._vllm_engine() if h.use_vllm and h.vllm_mode == "colocate" else None
        server = self._server_client() if h.use_vllm and h.vllm_mode == "server" and rank() == 0 else None
        if engine is not None:
            engine.sleep()  # the optimizer's turn: TRL wakes it for each step's rollouts
        model, tok = self.model(role), self.tokenizer(role)
        model.config._name_or_path = str(self.sources[role])  # the KL reference TRL loads
        seed = rng.getrandbits(31)
        with tempfile.TemporaryDirectory(prefix=f"diagevo-trl-{role}-") as tmp:
            kwargs = grpo_kwargs(self.config, plan, tmp, seed)
            if engine is not None:  # TRL sleeps and wakes the shared engine only if it was built to
                kwargs["vllm_enable_sleep_mode"] = engine.llm.sleep_mode
            args = GRPOConfig(**kwargs)
            total = args.max_steps

            steps: list[tuple[int, dict[str, float]]] = []

            class Tick(TrainerCallback):
                def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                    progress(role, state.global_step, total)

                def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
                    # a training step's row (logging_steps = 1), not the summary row of train()
                    if logs and "train_runtime" not in logs:
                        row = step_row(logs)
                        if row:
                            steps.append((int(state.global_step), row))

            reward.__name__ = f"{role}_reward"
            held = self._optim[role]
            with shared_with_trl(engine, server):  # TRL takes this process's engine, builds none
                trainer = GRPOTrainer(
                    model=model,
                    reward_funcs=reward,
                    args=args,
                    train_dataset=Dataset.from_list(rows),
                    processing_class=tok,
                    callbacks=[Tick()],
                    optimizers=self._optimizers(plan, model, args),
                )
            for quiet in (PrinterCallback, ProgressCallback):  # nothing below cli/ prints
                trainer.remove_callback(quiet)
            progress(role, 0, total)
            self._in_phase = True
            try:
                trainer.train()
            finally:
                self._in_phase = False
            stats = grpo_stats(trainer.state.log_history)
            held.steps += int(trainer.state.global_step)
            self._steps = steps
            stats["steps"] = float(trainer.state.global_step)
            stats["prompts_per_step"] = float(plan.prompts_per_step)
            stats["completions_per_step"] = float(plan.completions_per_step)
            stats["processes"] = float(trainer.accelerator.num_processes)
            if is_zero3(trainer):  # the policy is sharded across the ranks: gather it, load it whole
                gathered, device = gather_policy(trainer, Path(tmp) / "policy"), trainer.accelerator.device
                del trainer
                self._free()
                self._load_role(role, gathered, device=str(device))
                PartialState().wait_for_everyone()  # rank 0's staging directory is read by all
            else:
                self._models[role] = trainer.accelerator.unwrap_model(trainer.model)
                del trainer
        self._changed(role)
        self._free()
        return stats

    def _optimizers(self, plan: PhasePlan, model: Any, args: Any) -> tuple[Any, Any]:
        """The (optimizer, schedule) a phase's trainer takes: TRL's own (None, None), unless the
        role's section departs from a fresh TRL run per phase (:mod:`diagevo.train.hf.optim`)."""
        role = plan.role
        if not own_optimizer(self.config, role):
            return None, None
        r = self.config.role(role)
        horizon = schedule_horizon(self.config, plan)
        return optimizers(self._optim[role], model, args, r.lr_scheduler, horizon, r.keep_optimizer, r.lr_warmup)

    def _announce(self, command: Command) -> None:
        """Leading a launch: the followers run ``command`` too, with this rank, before it runs."""
        if self.leading:
            broadcast(command)

    def take_steps(self) -> list[tuple[int, dict[str, float]]]:
        """The per-step rows of the GRPO phase that last ran (step in the phase, TRL's row), once."""
        out, self._steps = self._steps, []
        return out

    def _free(self) -> None:
        gc.collect()
        if self.config.hf.device.startswith("cuda"):
            import torch

            torch.cuda.empty_cache()

    # ------------------------------------------------------------------ evaluation

    def heldout(self) -> list[dict[str, str]]:
        return heldout_rows(self.config)

    def evaluate(self, rng: random.Random) -> dict[str, float]:
        """Greedy pass@1 on the held-out questions (none: no such metrics), then Figure 3(c)'s accuracy
        (drawn after, held-out unchanged): on ``hf.label_probe``'s questions against its answers where
        one is named, else on the shared questions where the world knows the answers; else none."""
        items = self.heldout()
        out = self._heldout_accuracy(items, rng) if items else {}
        probe = self._probe
        questions, truth = (list(probe), probe.get) if probe else (self.shared_questions(), self.truth)
        if questions:
            out.update(shared_label_accuracy(questions, self.sample(questions, SHARED_LABEL_VOTES, rng), truth))
        return out

    def _heldout_accuracy(self, items: list[dict[str, str]], rng: random.Random) -> dict[str, float]:
        max_new = self.config.hf.heldout_max_new_tokens or self.config.solver.max_new_tokens
        prompts = [solver_messages(i["question"]) for i in items]
        outs = self._generate("solver", prompts, self._sampling(1, rng, max_new, greedy=True))
        return heldout_accuracy(items, [o[0] for o in outs])

    def shared_questions(self) -> list[str]:
        """Figure 3(c)'s shared questions: ``hf.shared_label_questions`` free-exploration questions
        of the challenger as the run started (``challenger.model``, not the round's checkpoint),
        drawn once per seed, so every arm and every round of one seed answers the same ones. None
        where the world does not know the answers (a world of real models) or the key is 0."""
        if self._shared is None:
            n = self.config.hf.shared_label_questions
            self._shared = self._draw_shared(n) if self._truth is not None and n > 0 else []
            self._free()  # the untrained challenger's copy is gone once drawn
        return self._shared

    def _draw_shared(self, n: int) -> list[str]:
        h, c = self.config.hf, self.config.challenger
        model, tok = self._load(check_local_model(c.model))
        engine = LocalEngine(model, tokenizer=tok, device=h.device, batch_size=h.generation_batch)
        prompts = [challenger_messages(FREE)] * n

        def outputs(rng: random.Random) -> list[str]:
            return [o[0] for o in engine.generate(prompts, self._sampling(1, rng, c.max_new_tokens))]

        return draw_shared_questions(outputs, gradable(self.truth, c.known_questions_only), n, self.seed)

    def truth(self, question: str) -> Truth | None:
        return self._truth(question) if self._truth is not None else None

    def recall(self, requests: Sequence[GenerationRequest], rng: random.Random) -> None:
        """Nothing to do: a question's truth and skill are read from its text."""

    def rewordings(self, questions: Sequence[str], count: int, rng: random.Random) -> list[list[str]]:
        """The world's rewordings where it writes them (the mini world's answer-preserving
        rewrites); else the challenger's: ``count`` samples of the [reword] prompt a question, each
        its ``<question>`` block, those that fail to parse or repeat the question left out."""
        if self._rewrite is not None:
            return [self._rewrite(q, count, rng) for q in questions]
        if not questions:
            return []
        prompts = [reword_messages(q) for q in questions]
        outs = self._generate("challenger", prompts, self._sampling(count, rng, self.config.challenger.max_new_tokens))
        return [
            list(dict.fromkeys(t for o in out if (t := parse_question(o)) is not None and t.strip() != q.strip()))
            for q, out in zip(questions, outs, strict=True)
        ]

    # ------------------------------------------------------------------ diagnosis

    def embedder(self) -> Embedder:
        if self._emb is None:
            self._emb = embedder_for(self.config.diagnosis)
        return self._emb

    def diagnostician(self) -> Diagnostician:
        if self._diag is None:
            d = self.config.diagnosis
            if d.llm_url:
                self._diag = llm_diagnostician(d)
            else:
                th = thresholds_for(d, self.embedder().name)
                self._diag = HeuristicDiagnostician(
                    self.embedder(), th.dup, th.merge, d.min_words, d.max_words, named=self.named_errors
                )
        return self._diag

    # ------------------------------------------------------------------ checkpoints

    def save(self, path: Path) -> None:
        """``path/challenger`` and ``path/solver``: weights, config and tokenizer each."""
        path = Path(path)
        for role in ("challenger", "solver"):
            self.model(role).save_pretrained(path / role)
            tok = self._tokenizers[role]
            # the fast tokenizer keeps its last call's padding and writes it into its files: a
            # checkpoint saved after a padded generation would differ from the same checkpoint saved
            # by a resumed process that has generated nothing yet; every call sets its own anyway
            backend = getattr(tok, "_tokenizer", None)
            if backend is not None:
                backend.no_padding()
                backend.no_truncation()
            tok.save_pretrained(path / role)
            if own_optimizer(self.config, role):  # where the backend owns it: its steps, its kept state
                save_state(self._optim[role], path / role)

    def load(self, path: Path) -> None:
        self._announce(Command("load", self.config, path=str(path)))
        for role in ("challenger", "solver"):
            d = Path(path) / role
            if not (d / "config.json").is_file():
                raise BadInput(f"{path}: not an hf checkpoint (no {role}/config.json)")
            self.sources[role] = d
            self._load_role(role, d)
            self._optim[role] = load_state(d)
