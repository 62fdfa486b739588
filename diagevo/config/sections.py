"""The method's configuration: the paper's hyperparameters and the ablation switches.

This is the part of a run's configuration that the log stores and checks (``run.started`` and
``run.configured``, through :func:`config_from_record`) and that the round protocol and the
deciders read: Table 7's GRPO settings and N, Table 8's batch and group sizes, steps and rounds,
Table 9's λ, p_low, p_high, τ, θ_up, k, θ_dup, θ_merge and K, the ablation switches of Tables 2
and 4, and how many rounds and questions a run takes. Defaults are the paper's (Appendix E) unless
a description says why not; every field says what it does (``diagevo config`` prints them).

The file a user writes has more: a section of each component the round protocol never reads
(``[sim]``, ``[hf]``, ``[eval]``), declared beside the component and validated by it
(:mod:`diagevo.train.sim.config`, :mod:`diagevo.train.hf.config`, :mod:`diagevo.eval.config`),
which :class:`diagevo.train.config.Config` adds. A stored config carries those as they were
written, for their owner to validate when it reads the run back. Every other section is one
class here, each field declared once: ``[train]``, ``[challenger]``, ``[solver]`` and
``[diagnosis]`` hold the loop's, the ``hf`` backend's and the diagnostician's fields (each a
:func:`~diagevo.config.base.run_setting`) beside the method's, as the round protocol, below those
components, reads them too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field, SecretStr, field_validator, model_validator

from diagevo.config.base import Count, NonNegative, Positive, Section, Share, run_setting
from diagevo.config.errors import ConfigError
from diagevo.config.limits import LimitsConfig
from diagevo.config.roles import ChallengerConfig, GRPOSettings, RoleConfig, SolverConfig
from diagevo.text.parsing import config_k, error_reason, quoted
from diagevo.text.redaction import redact_config
from diagevo.text.urls import endpoint_problem
from diagevo.text.words import close_to

Role = Literal["challenger", "solver"]


class TrainConfig(Section):
    """``[train]``: the run. How many rounds (Table 8) and questions a round takes and the seed of
    every random stream are the method's; which backend plays the roles, the run's id, where
    checkpoints and the tracker go and how many checkpoints are kept are the loop's."""

    backend: Literal["sim", "hf"] = run_setting(
        default="sim",
        description="Who plays the roles: sim, the CPU simulator world; hf, language models trained with transformers "
        "and TRL.",
    )
    rounds: Count = Field(default=5, description="Rounds of the co-evolution loop (Table 8: 5).")
    seed: int = Field(
        default=0,
        ge=0,
        le=2**32 - 1,
        description="Seed of every random stream; the same seed and config give the same log.",
    )
    run: str | None = run_setting(
        default=None,
        min_length=1,
        description="Run id in the log; unset: derived from the seed and the time of the first start.",
    )
    out_dir: Path | None = run_setting(
        default=None,
        strict=False,
        description="Directory of model checkpoints; unset: in the database's folder "
        "(dir/x.db -> dir/x.diagevo/runs/<run>/), as its vector index is, so two databases never share checkpoints. "
        "Only the command's own value counts (its option of that name too): a resume looks there, never where a run's "
        "stored config says.",
    )
    challenger_questions: int | None = Field(
        default=None,
        ge=1,
        description="|Q^chal|, challenger-update prompts per round; unset: challenger.max_steps x "
        "challenger.batch_size (Table 8: 6 x 256).",
    )
    curriculum_questions: Count = Field(
        default=8000,
        description="|Q^cur|, curriculum candidates per round. Not given in the paper; 8000 is R-Zero's (1,000 on each "
        "of 8 GPUs), which it follows.",
    )
    keep_checkpoints: int = run_setting(
        default=2,
        ge=0,
        description="Checkpoints kept per phase (after the challenger's, after the solver's): the last N, plus any "
        "a fork or a selected checkpoint still needs; older ones are deleted, each deletion logged as "
        "checkpoint.pruned. 0 keeps every checkpoint.",
    )
    report_to: Literal["none", "tensorboard", "wandb", "trackio", "mlflow"] = run_setting(
        default="none",
        description="Experiment tracker (TRL's report_to): TRL's per-step rows go there, and diagevo mirrors each "
        "GRPO step's signals (ROLE/FIELD at the role's global step) and each round's figures (round/NAME at step t) "
        "under the run id as the tracker's run name. Offline defaults: TensorBoard files beside the database, W&B "
        "offline unless WANDB_MODE is set, MLflow into a folder beside the database unless MLFLOW_TRACKING_URI is set.",
    )
    tracker_dir: Path | None = run_setting(
        default=None,
        strict=False,
        description="TensorBoard's folder (a folder per run inside); unset: beside the database (dir/x.db -> "
        "dir/x.diagevo/tb/).",
    )


class FilterConfig(Section):
    """``[filter]``: double-confidence filtering (Eq. 3) and its Table 2 ablations."""

    ordered = (("p_low", "p_high"),)

    mode: Literal["double", "absolute", "none"] = Field(
        default="double",
        description="double: p_low <= p1 <= p_high and p1 >= τ p2 (Eq. 3); absolute: the first constraint only; none: "
        "keep every labelled candidate (Table 2 ablations).",
    )
    p_low: Share = Field(
        default=0.25, description="p_low: least self-consistency p1 of a retained question (Table 9: 0.25)."
    )
    p_high: Share = Field(
        default=0.75, description="p_high: most self-consistency p1 of a retained question (Table 9: 0.75)."
    )
    tau: NonNegative = Field(
        default=1.6, description="τ: least ratio p1 / p2 of the two leading vote shares (Table 9: 1.6)."
    )
    shared_error_check: Literal["none", "variants"] = Field(
        default="none",
        description="Beyond the paper, off by default: none; variants: the solver also answers rewordings of each "
        "candidate (its trainer writes them), and the pseudo-label is the answer whose vote shares on every wording "
        "have the highest harmonic mean (a shared error of one wording loses; no answer under every wording: not "
        "retained). p1, p2 and the filter's band stay the original votes'.",
    )
    check_variants: int = Field(
        default=1, ge=1, le=8, description="With shared_error_check = variants: rewordings asked per candidate."
    )
    labeler: Literal["solver", "initial"] = Field(
        default="solver",
        description="Beyond the paper, off by default: whose votes label a candidate (its construction responses and, "
        "with the check, its rewordings' answers). solver: the round's solver (the paper); initial: the solver as the "
        "run started (its trainer keeps that model), so the labels never learn the errors the solver is trained into.",
    )


class RewardConfig(Section):
    """``[reward]``: the challenger reward (Eq. 8-10)."""

    lam: NonNegative = Field(
        default=1.0,
        description="λ: weight of the repetition penalty in the challenger reward (Eq. 10; Table 9: 1.0).",
    )
    cluster_distance_threshold: Share = Field(
        default=0.5,
        description="BLEU distance 1 - BLEU (Eq. 9) below which agglomerative clustering joins questions for the "
        "repetition penalty (R-Zero's criterion).",
    )


class MemoryConfig(Section):
    """``[memory]``: the schedule (Eq. 1-2), promotion (Eq. 5-6) and the Table 2 / Table 4 ablation switches."""

    k: Positive = Field(
        default=0.5,
        description="k: exploration-exploitation proportionality of the schedule, ε_{t+1} = F_1 / (F_1 + F_t / k) "
        "(Eq. 1; Table 9: 0.5).",
    )
    theta_up: Share = Field(
        default=0.70,
        description="θ_up: an Active cause whose mean p1 over its targeted candidates reaches this is promoted to "
        "Mastered (Eq. 6; Table 9: 0.70).",
    )
    generation: Literal["mixed", "free", "targeted", "fixed"] = Field(
        default="mixed",
        description="mixed: the frequency-driven schedule (Eq. 2); free / targeted: one mode only; fixed: the free "
        "share is fixed_free_ratio (Table 2 ablations).",
    )
    fixed_free_ratio: Share = Field(
        default=0.5, description="With generation = fixed: the share of free-exploration questions (Table 4)."
    )
    state_updates: bool = Field(
        default=True,
        description="false: the 'no state updates' ablation; causes are never promoted, so never reactivated.",
    )
    stitching: Literal["same_node", "none", "random_pair"] = Field(
        default="same_node",
        description="Cross-state stitching: a Mastered cause of the targeted cause's node (same_node), none, or any "
        "Mastered cause (random_pair) (Table 2 ablations).",
    )
    challenger_updates: bool = Field(
        default=True, description="false: the 'frozen challenger' ablation; the challenger is never updated."
    )
    frequency_power: Share = Field(
        default=1.0,
        description="q: targeting draws cause e with p_{t+1}(e) ∝ f_t(e)^q over Active causes (1: Eq. 1's f_t(e) / "
        "F_t, the paper). Below 1, a departure: a cause with few failures counted (a skill whose questions the filter "
        "seldom retains) is targeted more than its share of F_t; 0 draws every Active cause with a failure alike.",
    )


IN_PROCESS_EMBEDDERS = ("static", "local")
"""The embedders named rather than reached at a URL (diagnosis/tools.py's ``make_embedder``)."""


class DiagnosisConfig(Section):
    """``[diagnosis]``: the diagnostician pipeline (Sec. 2.3, Appendix J): how the diagnostician
    and the embedder are reached (endpoint, model, key, timeouts, retries), and the method's rules
    it follows: Table 9's θ_dup, θ_merge and K, the length of the phrases it returns (Appendix J),
    how many failures and causes it is shown, and how many failed diagnoses stop a round (which
    the round's commit checks too)."""

    ordered = (("min_words", "max_words"),)

    llm_url: str | None = run_setting(
        default=None,
        description="Base URL of an OpenAI-compatible chat endpoint serving the diagnostician; unset: the backend's "
        "own (the simulator's, or a heuristic one for hf).",
    )
    model: str = run_setting(
        default="Qwen/Qwen3-4B-Instruct-2507",
        description="Diagnostician model name sent to llm_url (the paper's default).",
    )
    api_key: SecretStr | None = run_setting(
        default=None,
        description=(
            "API key of llm_url and of an embeddings endpoint; unset: $DIAGEVO_LLM_API_KEY. Never stored or printed."
        ),
    )
    concurrency: Count = run_setting(
        default=64,
        description="Most diagnostician requests in flight at once (Prompt 1 runs for every failure concurrently).",
    )
    request_timeout_s: Positive = run_setting(
        default=60.0,
        description="Total deadline of one diagnostician request, in seconds: connecting and reading the whole "
        "reply (a server that drips its reply is cut off there).",
    )
    failure_timeout_s: Positive = run_setting(
        default=60.0,
        description="Total deadline of one failure's requests to a stage of the diagnostician, retries and the "
        "re-ask included, in seconds: what a slow or dripping server can cost a failure. The other failures of "
        "the round go on meanwhile.",
    )
    max_retries: int = run_setting(
        default=3,
        ge=0,
        le=20,
        description="Retries of a request after a timeout, a connection error, an HTTP 429 or 5xx or an unusable "
        "response, with exponential backoff.",
    )
    outage_wait_s: float = run_setting(
        default=600.0,
        ge=0,
        le=86400,
        description="How long the training loop waits for a diagnostician that stopped answering (unreachable, or "
        "too many of a round's requests failing at the endpoint), asking again with backoff, before it stops the "
        "run with the command that resumes it (the round uncommitted). 0: stop at once.",
    )
    outage_backoff_s: float = run_setting(
        default=5.0,
        gt=0,
        le=3600,
        description="The first wait before the training loop asks a diagnostician that stopped answering again; each "
        "wait doubles, up to a minute.",
    )
    embedder: str = run_setting(
        default="static",
        description="'static': MiniLM distilled to token vectors, in every install; 'local': the full MiniLM "
        "model (the embed extra, with torch); anything else is the base URL of an OpenAI-compatible embeddings "
        "endpoint.",
    )
    embed_model: str = run_setting(
        default="all-MiniLM-L6-v2",
        description=(
            "Model name sent to an embeddings endpoint (the paper: text-embedding-v4); the static and local "
            "embedders are always MiniLM."
        ),
    )

    theta_dup: float | None = Field(
        default=None,
        ge=-1,
        le=1,
        description="θ_dup: least cosine similarity of a stored cause for Prompt 2 (stage 2a; Table 9: 0.5, set for "
        "text-embedding-v4); unset: the value calibrated for the embedder in use (0.56 for the static embedder, 0.37 "
        "for the local MiniLM).",
    )
    theta_merge: float | None = Field(
        default=None,
        ge=-1,
        le=1,
        description="θ_merge: least cosine similarity of two node labels for Prompt 4 (stage 4a; Table 9: 0.5); unset: "
        "the value calibrated for the embedder in use (0.62 for the static embedder, 0.44 for the local MiniLM).",
    )
    shortlist_k: Count = Field(default=5, description="K: skill nodes shortlisted for Prompt 3 (stage 3a; Table 9: 5).")
    dedup_candidates: Count = Field(
        default=64,
        description="Most causes shown to Prompt 2, the best first: stage 2a passes every cause at or above θ_dup, "
        "this only guards the prompt's length (a cut list is counted as dedup_truncated).",
    )
    max_failures_per_question: int | None = Field(
        default=None,
        ge=1,
        description="Most failed optimization responses of one retained question sent to diagnosis; unset: all of "
        "them, "
        "as the paper (what a cap leaves out is counted as failures_capped).",
    )
    min_words: Count = Field(
        default=10,
        description="Fewest words of an error cause or node label the diagnostician may return (Appendix J: 10).",
    )
    max_words: Count = Field(default=20, description="Most words of an error cause or node label (Appendix J: 20).")
    max_failed_share: Share = Field(
        default=0.5,
        description="Most of a round's failures whose diagnosis may fail (a share, 0-1) for the round to go on; "
        "more stops diagnose and refuses the commit, and a round where every diagnosis failed (a dead or "
        "incompatible diagnostician) always stops. 0.5: a sporadic bad reply (one invented id among five "
        "failures) is recorded and the round goes on, while a server that fails most replies would leave the "
        "round without its memory, the no-memory ablation.",
    )

    def too_many_failed(self, failed: int, total: int) -> bool:
        """Whether ``failed`` of a round's ``total`` failures, their diagnoses failed, stop the
        round: more than ``max_failed_share`` of them, or every one (a dead or incompatible
        diagnostician, whatever the share)."""
        return failed > 0 and (failed > self.max_failed_share * total or failed == total)

    @field_validator("llm_url", "embedder")
    @classmethod
    def _an_endpoint(cls, value: str | None) -> str | None:
        """An endpoint's URL as :func:`~diagevo.text.urls.endpoint_problem` takes it (credentials
        refused: the key goes in the environment), ``embedder`` also an in-process one."""
        problem = None if value is None or value in IN_PROCESS_EMBEDDERS else endpoint_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


# --- the method's config, and the config a log carries -----------------------------------------

PAPER_NAMES: dict[str, str] = {
    "k": "memory.k",
    "theta_up": "memory.theta_up",
    "theta_dup": "diagnosis.theta_dup",
    "theta_merge": "diagnosis.theta_merge",
    "shortlist_k": "diagnosis.shortlist_k",
    "lam": "reward.lam",
    "p_low": "filter.p_low",
    "p_high": "filter.p_high",
    "tau": "filter.tau",
}
"""The hyperparameters of the paper's Table 9 by their flat names, and the fields they set."""

COMPONENT_TABLES = ("sim", "hf", "eval")
"""The sections of the file that are wholly a component's the round protocol never reads (the
simulator's, the ``hf`` backend's, ``diagevo eval``'s): a stored config carries them, their
owners validate them."""


class MethodConfig(Section):
    """The configuration a log carries: the sections below, and the components' own sections
    (:data:`COMPONENT_TABLES`), kept as they were written."""

    model_config = ConfigDict(extra="allow")
    flat_names: ClassVar[Mapping[str, str]] = PAPER_NAMES
    other_tables: ClassVar[tuple[str, ...]] = COMPONENT_TABLES

    train: TrainConfig = Field(default_factory=TrainConfig, description="The run.")
    grpo: GRPOSettings = Field(default_factory=GRPOSettings, description="GRPO settings of both roles (Table 7) and N.")
    challenger: ChallengerConfig = Field(
        default_factory=ChallengerConfig, description="The challenger's GRPO sizes (Table 8) and model."
    )
    solver: SolverConfig = Field(
        default_factory=SolverConfig, description="The solver's GRPO sizes (Table 8), model and reward."
    )
    filter: FilterConfig = Field(default_factory=FilterConfig, description="Double-confidence filtering (Eq. 3).")
    reward: RewardConfig = Field(default_factory=RewardConfig, description="The challenger reward (Eq. 8-10).")
    memory: MemoryConfig = Field(
        default_factory=MemoryConfig, description="Schedule, promotion and the memory ablations."
    )
    diagnosis: DiagnosisConfig = Field(
        default_factory=DiagnosisConfig, description="The diagnostician (Sec. 2.3, Appendix J)."
    )
    limits: LimitsConfig = Field(default_factory=LimitsConfig, description="Sizes of untrusted text: stored and read.")

    @model_validator(mode="after")
    def _only_component_tables(self) -> MethodConfig:
        for name, value in (self.model_extra or {}).items():
            if name not in self.other_tables:
                raise ConfigError(name, error={"type": "extra_forbidden", "loc": (name,), "msg": "", "input": value})
            if not isinstance(value, Mapping):
                error = {"type": "dict_type", "loc": (name,), "msg": "Input should be a table", "input": value}
                raise ConfigError(name, error=error)
        return self

    def role(self, name: Role) -> RoleConfig:
        """The ``[challenger]`` or ``[solver]`` section."""
        return self.challenger if name == "challenger" else self.solver

    @property
    def challenger_questions(self) -> int:
        """|Q^chal| of a round (Table 8: steps x the global batch)."""
        return self.train.challenger_questions or self.challenger.max_steps * self.challenger.batch_size

    def redacted(self) -> dict[str, Any]:
        """The config as ``run.started`` stores it: secrets never leave memory, and where the log
        itself lives (``db``) is not part of the method's configuration."""
        return redact_config(self.model_dump(mode="json", exclude={"db"}))  # type: ignore[no-any-return]


def config_from_record(record: Mapping[str, Any]) -> MethodConfig:
    """The :class:`MethodConfig` of the ``config`` of a ``run.started`` or ``run.configured``
    event: the one schema of the config a log carries (checked at ingest) and its one reader.

    ``k`` is required, as a positive number, every other field is optional (the paper's value).
    Fields are named either flat by the paper's names (:data:`PAPER_NAMES`, e.g. ``{"k": 0.5,
    "theta_up": 0.7}``) or by the sections of the config file, as diagevo's own runs store it
    (``{"memory": {"k": 0.5}, "solver": {...}, "sim": {...}, ...}``), or both; a flat name wins
    over its field. The method's fields are checked; what the components own is carried as it is,
    for them to check when they read it (a changed component never changes what a log accepts).
    ``db`` and ``diagnosis.api_key`` are ignored: where the log lives and the key are not the
    log's to say. :class:`ConfigError` names the field at fault (an unknown one too)."""
    where = non_finite(record)
    if where is not None:
        path, value = where
        loc = tuple(path.split("."))
        error = {"type": "finite_number", "loc": loc, "msg": "must be a finite number", "input": value}
        raise ConfigError(f"{path}: must be a finite number, not {value!r}", error=error)
    data = {name: value for name, value in record.items() if name not in PAPER_NAMES and name != "db"}
    diagnosis = data.get("diagnosis")
    if isinstance(diagnosis, Mapping) and "api_key" in diagnosis:
        data["diagnosis"] = {**diagnosis, "api_key": None}
    for name, path in PAPER_NAMES.items():
        section, field = path.split(".")
        if name in record and isinstance(data.setdefault(section, {}), Mapping):
            data[section] = {**data[section], field: record[name]}
    try:
        config = MethodConfig.model_validate(data)
    except ConfigError as exc:
        raise _as_stored(exc, record) from None
    if config_k(record) is None:
        error = {"type": "missing", "loc": ("memory", "k"), "msg": "Field required", "input": record}
        raise ConfigError("config needs a positive k (config.k or config.memory.k)", error=error)
    return config


def non_finite(value: Any, path: str = "") -> tuple[str, float] | None:
    """(dotted path, value) of the first infinity or NaN in a stored config, else None: what
    its owner carries is checked here too, for JSON holds no such number (stored, it becomes
    null, and a config with a null where a number was is one its reader refuses)."""
    if isinstance(value, float) and not math.isfinite(value):
        return path, value
    if isinstance(value, Mapping):
        items: Any = ((f"{path}.{k}" if path else str(k), v) for k, v in value.items())
    elif isinstance(value, list | tuple):
        items = ((f"{path}.{i}", v) for i, v in enumerate(value))
    else:
        return None
    for sub, v in items:
        found = non_finite(v, sub)
        if found is not None:
            return found
    return None


def _as_stored(exc: ConfigError, record: Mapping[str, Any]) -> ConfigError:
    """``exc`` as said of a stored config: an unknown name with the names a config may hold, a
    value given by its flat name under that name."""
    loc = tuple(str(p) for p in exc.error["loc"])
    if exc.unknown and len(loc) == 1:
        names = [*PAPER_NAMES, *MethodConfig.model_fields, *COMPONENT_TABLES]
        meant = close_to(loc[0], names)
        said = f"unknown field {quoted(loc[0], 40)}"
        if meant:
            return ConfigError(said, error=exc.error, unknown="field", meant=meant, shown=[repr(m) for m in meant])
        return ConfigError(f"{said} (known: {', '.join(names)})", error=exc.error, unknown="field")
    if exc.unknown:  # a nested name: the section's own refusal names it, with the names it likely means
        return exc
    reason = error_reason(exc.error)
    for name, path in PAPER_NAMES.items():  # a value given by its flat name is named so
        if name in record and reason.startswith(f"{path}:"):
            reason = name + reason[len(path) :]
    return ConfigError(reason, error=exc.error, unknown=exc.unknown)


def config_changes(stored: MethodConfig, given: MethodConfig) -> list[str]:
    """The fields in which ``given`` differs from ``stored``, each as ``memory.k 0.5 (given
    0.7)``, in the config's order; how many rounds to train (``train.rounds``) is left out: it
    does not change how a round is run, and a run may go on for more."""
    old, new = dotted(stored.redacted()), dotted(given.redacted())
    names = [*old, *(name for name in new if name not in old)]
    return [
        f"{name} {quoted(old.get(name), 40)} (given {quoted(new.get(name), 40)})"
        for name in names
        if name != "train.rounds" and old.get(name) != new.get(name)
    ]


def dotted(record: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested config as one level of dotted names (``memory.k``) to values, in its order: how
    two configs are compared field by field (an empty table is a value of its own)."""
    out: dict[str, Any] = {}
    for name, value in record.items():
        if isinstance(value, Mapping) and value:
            out.update(dotted(value, f"{prefix}{name}."))
        else:
            out[f"{prefix}{name}"] = value
    return out
