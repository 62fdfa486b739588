"""A stand-in for the ``vllm`` package on a CPU (tests only; put ``tests/standins`` on the path).

vLLM needs a GPU; this package keeps its Python API (``LLM``, ``SamplingParams``, request
outputs with token ids and log-probabilities, sleep mode, ``collective_rpc("reload_weights")`` and
``load_weights`` through ``llm_engine.model_executor.driver_worker.model_runner.model``, a CUDA
``vllm.platforms.current_platform``) over a real transformers model
on the CPU, and is strict where vLLM is: generating while asleep, or after a level-2 sleep
before weights were pushed again, raises; so does pushing weights into sleeping weight memory.
Every engine, sleep, wake-up, weight push and generation is recorded (``EVENTS``, and one JSON
line each in the file named by ``VLLM_STANDIN_LOG``), with a fingerprint of the weights each
generation used, so a test can tell which policy was sampled.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any

import torch

from vllm.sampling_params import SamplingParams, StructuredOutputsParams  # noqa: F401  (vLLM exports it here too)

__version__ = "0.31.0"

EVENTS: list[dict[str, Any]] = []


def record(event: str, **data: Any) -> None:
    row = {"event": event, "pid": os.getpid(), **data}
    EVENTS.append(row)
    path = os.environ.get("VLLM_STANDIN_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")


def fingerprint(model: torch.nn.Module) -> str:
    """A hash of a model's weights (float32 bytes, parameters in name order)."""
    h = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().to(torch.float32).contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


@dataclass
class Logprob:
    logprob: float
    rank: int = 1
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    logprobs: list[dict[int, Logprob]] | None = None
    finish_reason: str = "stop"


@dataclass
class RequestOutput:
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput] = field(default_factory=list)
    prompt: str | None = None


class _Model:
    """What ``model_runner.model`` is in vLLM: takes HF-named weights."""

    def __init__(self, engine: LLM) -> None:
        self.engine = engine

    def load_weights(self, weights: Any) -> set[str]:
        e = self.engine
        if not e.weights_awake:
            raise RuntimeError("load_weights into sleeping weight memory: wake_up(tags=['weights']) first")
        params = dict(e.hf.named_parameters())
        names = set()
        with torch.no_grad():
            for name, tensor in weights:
                if name not in params:
                    raise KeyError(f"no parameter {name!r} in the engine's model")
                params[name].copy_(tensor.detach().to(params[name].dtype))
                names.add(name)
        e.loaded |= names
        if e.loaded >= set(params):
            e.weights_valid = True
            e.loaded = set()
        record("load_weights", n=len(names))
        return names


class _Namespace:
    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


class LLM:
    """One engine: a transformers model on the CPU behind vLLM's offline API."""

    def __init__(self, model: str, **kwargs: Any) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.hf = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.kwargs = kwargs
        self.weights_awake = self.kv_awake = True
        self.weights_valid = True
        self.loaded: set[str] = set()
        self.generator = torch.Generator().manual_seed(int(kwargs.get("seed") or 0))
        runner = _Namespace(model=_Model(self))
        max_len = kwargs.get("max_model_len") or getattr(self.hf.config, "max_position_embeddings", 2048)
        self.llm_engine = _Namespace(
            model_executor=_Namespace(driver_worker=_Namespace(model_runner=runner)),
            model_config=_Namespace(max_model_len=max_len),
        )
        record("engine", model=str(model), kwargs={k: str(v) for k, v in kwargs.items()})

    def get_tokenizer(self) -> Any:
        return self.tokenizer

    def sleep(self, level: int = 1) -> None:
        if not (self.weights_awake or self.kv_awake):
            raise RuntimeError("sleep while asleep")
        self.weights_awake = self.kv_awake = False
        if level >= 2:
            self.weights_valid = False
        record("sleep", level=level)

    def wake_up(self, tags: list[str] | None = None) -> None:
        tags = tags or ["weights", "kv_cache"]
        for tag in tags:
            if tag == "weights":
                self.weights_awake = True
            elif tag == "kv_cache":
                self.kv_awake = True
            else:
                raise ValueError(f"unknown wake-up tag {tag!r}")
        record("wake_up", tags=tags)

    def reset_prefix_cache(self) -> bool:
        return True

    def collective_rpc(
        self, method: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> list[Any]:
        """vLLM's worker RPC; the stand-in knows ``reload_weights`` (in place, checkpoint names),
        which refuses sleeping weight memory as the model runner's ``load_weights`` does."""
        if callable(method):  # a function run on each worker: the stand-in has no worker layers to process
            return [None]
        if method != "reload_weights":
            raise NotImplementedError(f"stand-in collective_rpc: {method}")
        weights = (kwargs or {}).get("weights_iterator")
        if weights is None:
            raise NotImplementedError("stand-in reload_weights: from disk")
        self.llm_engine.model_executor.driver_worker.model_runner.model.load_weights(weights)
        return [None]

    # --------------------------------------------------------------- generation
    def _check(self) -> None:
        if not (self.weights_awake and self.kv_awake):
            raise RuntimeError("generate while asleep: wake_up() first")
        if not self.weights_valid:
            raise RuntimeError("generate after a level-2 sleep before the weights were pushed again")

    def _one(self, ids: list[int], params: SamplingParams) -> RequestOutput:
        """``params.n`` completions of one prompt (transformers ``generate``, processed
        log-probabilities of the sampled tokens, as ``logprobs_mode="processed_logprobs"``)."""
        greedy = params.temperature == 0
        if params.seed is not None:
            torch.manual_seed(params.seed)
        else:
            torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=self.generator)))
        eos = self.tokenizer.eos_token_id
        kwargs: dict[str, Any] = (
            {"do_sample": False}
            if greedy
            else {
                "do_sample": True,
                "temperature": params.temperature,
                "top_p": params.top_p,
                "top_k": 0,
            }
        )
        with torch.no_grad():
            out = self.hf.generate(
                torch.tensor([ids]),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                max_new_tokens=params.max_tokens,
                num_return_sequences=params.n,
                eos_token_id=eos,
                pad_token_id=self.tokenizer.pad_token_id or eos,
                output_scores=True,
                return_dict_in_generate=True,
                **kwargs,
            )
        new = out.sequences[:, len(ids) :]
        steps = [torch.log_softmax(score.float(), -1) for score in out.scores]
        outs = []
        for k in range(params.n):
            tokens: list[int] = []
            lps: list[dict[int, Logprob]] = []
            for pos, tok in enumerate(new[k].tolist()):
                tokens.append(tok)
                lps.append({tok: Logprob(float(steps[pos][k, tok]))})
                if tok == eos:
                    break
            text = self.tokenizer.decode(tokens, skip_special_tokens=True)
            outs.append(
                CompletionOutput(
                    index=k, text=text, token_ids=tokens, logprobs=lps if params.logprobs is not None else None
                )
            )
        return RequestOutput(prompt_token_ids=list(ids), outputs=outs)

    @staticmethod
    def _per_prompt(sampling_params: Any, n: int) -> list[SamplingParams]:
        """One ``SamplingParams`` for all prompts, or a list of one per prompt (as vLLM takes)."""
        if isinstance(sampling_params, list):
            if len(sampling_params) != n:
                raise ValueError("the number of sampling params must equal the number of prompts")
            return sampling_params
        return [sampling_params or SamplingParams()] * n

    def generate(
        self, prompts: Any, sampling_params: Any = None, use_tqdm: bool = True, **_: Any
    ) -> list[RequestOutput]:
        self._check()
        if not isinstance(prompts, list):
            prompts = [prompts]
        ids = [
            p["prompt_token_ids"] if isinstance(p, dict) else self.tokenizer(p, add_special_tokens=False)["input_ids"]
            for p in prompts
        ]
        params = self._per_prompt(sampling_params, len(ids))
        record("generate", prompts=len(ids), n=params[0].n if params else 0, weights=fingerprint(self.hf))
        return [self._one(list(i), p) for i, p in zip(ids, params, strict=True)]

    def chat(self, messages: Any, sampling_params: Any = None, use_tqdm: bool = True, **_: Any) -> list[RequestOutput]:
        self._check()
        convs = messages if messages and isinstance(messages[0], list) else [messages]
        ids = [
            self.tokenizer.apply_chat_template(c, tokenize=True, add_generation_prompt=True, return_dict=True)[
                "input_ids"
            ]
            for c in convs
        ]
        params = self._per_prompt(sampling_params, len(ids))
        record("chat", prompts=len(ids), n=params[0].n if params else 0, weights=fingerprint(self.hf))
        return [self._one(list(i), p) for i, p in zip(ids, params, strict=True)]


__all__ = ["EVENTS", "LLM", "RequestOutput", "SamplingParams", "fingerprint", "record"]
