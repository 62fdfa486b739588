"""A trainer that is not diagevo's: a plain TRL ``GRPOTrainer`` script that uses diagevo as its memory.

Written as a user of another RL stack would: its own model loading (transformers), its own
generation (``model.generate``), its own GRPO step (TRL), its own reward function; diagevo is
asked, through ``import diagevo`` alone, for what the round protocol offers: generation requests
with their prompts, the votes and the Eq. 3 filter, promotions, the solver's reward against the
pseudo-label, diagnosis, the commit. The run declares this script as its trainer, so ``diagevo
runs`` / ``report`` name it and ``diagevo train --resume`` refuses it. On the SmolLM2 model that
``diagevo models smollm2 --out models/smollm2`` builds, on a CPU:

    python examples/trl_grpo_trainer.py --model models/smollm2 --db sqlite:///trl.db --run trl --rounds 2

Each round: Q^cur questions generated from the requests' challenger prompts, N construction
responses each, recorded (votes, Eq. 3); promotions; GRPO steps of the solver on the retained
questions, TRL sampling G responses each and the reward function scoring them with
``diagevo.solver_rewards`` (agreement with the pseudo-label); the responses with reward -1 are
the round's failures, recorded and diagnosed (``--llm-url`` for the paper's diagnostician, else
the offline heuristic); the commit with the GRPO step's figures.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.trainer_callback import PrinterCallback, ProgressCallback
from trl import GRPOConfig, GRPOTrainer

import diagevo
from diagevo.catalog import failure_id  # a failure id, named by its question
from diagevo.catalog.failure import Failure  # the failure record the round takes

TRAINER = "examples/trl_grpo_trainer.py (TRL GRPOTrainer)"


def generate(
    model: Any, tok: Any, chats: Sequence[list[dict[str, str]]], n: int, max_new_tokens: int
) -> list[list[str]]:
    """``n`` sampled completions of each chat (T = 1.0, top-p 0.99, the paper's sampling)."""
    if not chats:
        return []
    prompts = [tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in chats]
    tok.padding_side = "left"
    enc = tok(prompts, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(
            **enc,
            do_sample=True,
            temperature=1.0,
            top_p=0.99,
            max_new_tokens=max_new_tokens,
            num_return_sequences=n,
            pad_token_id=tok.pad_token_id,
        )
    texts = tok.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    return [texts[i * n : (i + 1) * n] for i in range(len(prompts))]


def completion_text(completion: Any) -> str:
    """TRL hands a conversational completion as a list of messages."""
    if isinstance(completion, list):
        return "".join(str(m.get("content", "")) for m in completion)
    return str(completion)


def round_of(args: argparse.Namespace, store: diagevo.Recorder, model: Any, tok: Any) -> tuple[Any, diagevo.Committed]:
    rnd = diagevo.Round.open(store, args.run)
    t = rnd.t
    seconds: dict[str, float] = {}

    # Q^cur: the challenger's questions from the schedule's requests, N construction responses each
    started = time.perf_counter()
    reqs = rnd.requests(args.questions)
    outputs = generate(model, tok, [q.messages() for q in reqs], 1, args.question_tokens)
    drafted = [(q, text) for q, [o] in zip(reqs, outputs, strict=True) if (text := diagevo.parse_question(o))]
    constructions = generate(model, tok, [diagevo.solver_messages(text) for _, text in drafted], args.n, args.tokens)
    scored = rnd.record(
        [
            diagevo.Candidate(
                q.question_id, q.mode, text, q.active_cause, q.mastered_cause, q.node, responses=tuple(responses)
            )
            for (q, text), responses in zip(drafted, constructions, strict=True)
        ]
    )
    retained = [s for s in scored if s.retained]
    seconds["construct"] = time.perf_counter() - started
    rnd.promote()  # Eq. 5-6, decided by the memory

    # the solver's GRPO steps on the retained questions: TRL samples, our reward scores
    started = time.perf_counter()
    failures: list[Failure] = []
    rewards_seen: list[float] = []
    figures: dict[str, float] = {}
    if retained:
        by_id = {s.question_id: s for s in retained}
        sampled: dict[str, int] = {}

        def solver_reward(prompts: list[Any], completions: list[Any], question_id: list[str], **_: Any) -> list[float]:
            out: list[float] = []
            for qid, completion in zip(question_id, completions, strict=True):
                s, text = by_id[qid], completion_text(completion)
                [reward] = diagevo.solver_rewards([text], s.pseudo_label)
                k = sampled[qid] = sampled.get(qid, -1) + 1
                if reward < 0 and text.strip():  # a failed optimization response: diagnosed below
                    failures.append(
                        Failure(failure_id=failure_id(qid, k), question_id=qid, response=text, reference=s.reference)
                    )
                out.append(reward)
            rewards_seen.extend(out)
            return out

        rows = [{"prompt": diagevo.solver_messages(s.text), "question_id": s.question_id} for s in retained]
        with tempfile.TemporaryDirectory(prefix="trl-grpo-") as tmp:
            config = GRPOConfig(
                output_dir=tmp,
                use_cpu=True,
                bf16=False,
                learning_rate=1e-6,
                lr_scheduler_type="constant",
                beta=0.01,
                temperature=1.0,
                top_p=0.99,
                num_generations=args.group,
                per_device_train_batch_size=args.group,
                max_steps=min(args.steps, len(rows)),
                max_completion_length=args.tokens,
                gradient_checkpointing=False,
                logging_steps=1,
                save_strategy="no",
                report_to="none",
                disable_tqdm=True,
                seed=args.seed + t,
            )
            trainer = GRPOTrainer(
                model=model,
                reward_funcs=solver_reward,
                args=config,
                train_dataset=Dataset.from_list(rows),
                processing_class=tok,
            )
            for quiet in (PrinterCallback, ProgressCallback):
                trainer.remove_callback(quiet)
            trainer.train()
            losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
            figures = {
                "grpo_steps": float(trainer.state.global_step),
                "grpo_loss": float(statistics.fmean(losses or [0])),
            }
            model = trainer.model
    seconds["solver"] = time.perf_counter() - started
    rnd.record_failures(failures)

    # diagnosis (Sec. 2.3): the paper's LLM diagnostician at --llm-url, else the offline heuristic
    started = time.perf_counter()
    if failures:
        if args.llm_url:
            diagevo.diagnose(rnd, llm_url=args.llm_url, model=args.llm_model)
        else:
            diagevo.diagnose(rnd, diagnostician="heuristic")
    seconds["diagnose"] = time.perf_counter() - started
    metrics = {
        "solver_reward": statistics.fmean(rewards_seen) if rewards_seen else 0.0,
        "retained": float(len(retained)),
        **figures,
    }
    done = rnd.commit(metrics, summary={"timing": seconds})
    return model, done


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="A transformers model directory (diagevo models smollm2).")
    parser.add_argument("--db", required=True)
    parser.add_argument("--run", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--k", type=float, default=1.0, help="The memory's k (Eq. 1).")
    parser.add_argument("--questions", type=int, default=4, help="Q^cur per round.")
    parser.add_argument("--n", type=int, default=4, help="Construction responses per question (N).")
    parser.add_argument("--group", type=int, default=4, help="GRPO group size (G).")
    parser.add_argument("--steps", type=int, default=1, help="GRPO steps per round (one prompt each).")
    parser.add_argument("--tokens", type=int, default=64, help="Most new tokens of a solver response.")
    parser.add_argument("--question-tokens", type=int, default=64, help="Most new tokens of a question.")
    parser.add_argument("--llm-url", default=None, help="The diagnostician's OpenAI-compatible URL.")
    parser.add_argument("--llm-model", default=None)
    args = parser.parse_args(argv)

    torch.manual_seed(args.seed)
    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    config = {"k": args.k, "train": {"rounds": args.rounds, "seed": args.seed}}
    with diagevo.open_store(args.db) as store:
        diagevo.start_run(store, args.run, config, seed=args.seed, trainer=TRAINER)
        for _ in range(args.rounds):
            model, done = round_of(args, store, model, tok)
            print(f"round: kept {done.retained}/{done.questions}, failures {done.failures}, F={done.F}")


if __name__ == "__main__":
    main()
