"""A run's whole configuration, as its TOML file holds it: each component's part composed.

The file format users write (``configs/*.toml``, ``--set section.field=value``, ``diagevo
config``) is one table per section. Each section's class lives beside the part of diagevo that
reads it and validates itself; this layer, which knows all the parts, composes them:

- the method (:mod:`diagevo.config`): ``[grpo]``, ``[filter]``, ``[reward]``, ``[memory]``, and the
  method's fields of ``[train]``, ``[challenger]``, ``[solver]`` and ``[diagnosis]``. This is what
  the log checks when a run's config is stored;
- the loop: the rest of ``[train]`` (:class:`LoopConfig`, here);
- the ``hf`` backend: ``[hf]`` and the rest of ``[challenger]`` and ``[solver]``
  (:mod:`diagevo.train.hf.config`); the simulator: ``[sim]`` (:mod:`diagevo.train.sim.config`);
- the diagnostician: the rest of ``[diagnosis]`` (:mod:`diagevo.diagnosis.config`);
- ``[eval]`` (:mod:`diagevo.eval.config`) and ``[limits]`` (:mod:`diagevo.limits`).

``diagevo train`` stores the whole config, redacted, in ``run.started`` (so ``--resume``
rebuilds it with :meth:`Config.of`); the log checks the method's part and carries the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field

from diagevo.config import ChallengerConfig, MethodConfig, Role, RunConfig, SolverConfig
from diagevo.diagnosis.config import DiagnosisConfig
from diagevo.errors import BadInput, NotFound
from diagevo.eval.config import EvalConfig
from diagevo.limits import LimitsConfig
from diagevo.parsing import read_text, toml_loads
from diagevo.sections import Section, apply_overrides, checked
from diagevo.train.hf.config import HFChallenger, HFConfig, HFSolver
from diagevo.train.sim.config import SimConfig

_WHOLE = ConfigDict(extra="forbid")  # a composed section knows every field: none is carried
_ROLE_ORDER = ("model", "batch_size", "group_size", "max_steps", "max_new_tokens")


class LoopConfig(Section):
    """``[train]``'s fields that are the loop's: which backend plays the roles, the run's id,
    where checkpoints and the tracker go, how many checkpoints are kept."""

    backend: Literal["sim", "hf"] = Field(
        default="sim",
        description="Who plays the roles: sim, the CPU simulator world; hf, language models trained with transformers "
        "and TRL.",
    )
    run: str | None = Field(
        default=None,
        min_length=1,
        description="Run id in the log; unset: derived from the seed and the time of the first start.",
    )
    out_dir: Path | None = Field(
        default=None,
        strict=False,
        description="Directory of model checkpoints; unset: in the database's folder "
        "(dir/x.db -> dir/x.diagevo/runs/<run>/), as its vector index is, so two databases never share checkpoints.",
    )
    keep_checkpoints: int = Field(
        default=2,
        ge=0,
        description="Checkpoints kept per phase (after the challenger's, after the solver's): the last N, plus any "
        "a fork or a selected checkpoint still needs; older ones are deleted, each deletion logged as "
        "checkpoint.pruned. 0 keeps every checkpoint.",
    )
    report_to: Literal["none", "tensorboard", "wandb", "trackio", "mlflow"] = Field(
        default="none",
        description="Experiment tracker (TRL's report_to): TRL's per-step rows go there, and diagevo mirrors each "
        "GRPO step's signals (ROLE/FIELD at the role's global step) and each round's figures (round/NAME at step t) "
        "under the run id as the tracker's run name. Offline defaults: TensorBoard files beside the database, W&B "
        "offline unless WANDB_MODE is set, MLflow into a folder beside the database unless MLFLOW_TRACKING_URI is set.",
    )
    tracker_dir: Path | None = Field(
        default=None,
        strict=False,
        description="TensorBoard's folder (a folder per run inside); unset: beside the database (dir/x.db -> "
        "dir/x.diagevo/tb/).",
    )


class TrainConfig(RunConfig, LoopConfig):
    """``[train]``: the run. How many rounds and questions, and the seed, are the method's
    (:class:`diagevo.config.RunConfig`); the rest is the loop's (:class:`LoopConfig`)."""

    model_config = _WHOLE
    field_order = (
        "backend",
        "rounds",
        "seed",
        "run",
        "out_dir",
        "challenger_questions",
        "curriculum_questions",
        "keep_checkpoints",
        "report_to",
        "tracker_dir",
    )


class ChallengerSection(ChallengerConfig, HFChallenger):
    """``[challenger]``: Table 8's challenger column and, on the ``hf`` backend, its model."""

    model_config = _WHOLE
    field_order = _ROLE_ORDER


class SolverSection(SolverConfig, HFSolver):
    """``[solver]``: Table 8's solver column and, on the ``hf`` backend, its model."""

    model_config = _WHOLE
    field_order = _ROLE_ORDER


class Config(MethodConfig):
    """A run's configuration: one TOML file, sections as below (the method's, composed with
    each component's)."""

    model_config = _WHOLE
    field_order = (
        "db",
        "train",
        "grpo",
        "challenger",
        "solver",
        "filter",
        "reward",
        "memory",
        "diagnosis",
        "sim",
        "hf",
        "eval",
        "limits",
    )

    db: str | None = Field(
        default=None,
        description=(
            "Database URL of the event log; unset: $DIAGEVO_DB, else sqlite:///diagevo.db. Not stored in the log."
        ),
    )
    train: TrainConfig = Field(default_factory=TrainConfig, description="The run.")
    challenger: ChallengerSection = Field(
        default_factory=ChallengerSection, description="The challenger's GRPO sizes (Table 8) and model."
    )
    solver: SolverSection = Field(
        default_factory=SolverSection, description="The solver's GRPO sizes (Table 8) and model."
    )
    diagnosis: DiagnosisConfig = Field(
        default_factory=DiagnosisConfig, description="The diagnostician (Sec. 2.3, Appendix J)."
    )
    sim: SimConfig = Field(default_factory=SimConfig, description="The CPU simulator world.")
    hf: HFConfig = Field(default_factory=HFConfig, description="The real-model backend.")
    eval: EvalConfig = Field(default_factory=EvalConfig, description="Benchmark evaluation (the eval command).")
    limits: LimitsConfig = Field(default_factory=LimitsConfig, description="Sizes of untrusted text: stored and read.")

    def role(self, name: Role) -> ChallengerSection | SolverSection:
        """The ``[challenger]`` or ``[solver]`` section."""
        return self.challenger if name == "challenger" else self.solver

    @classmethod
    def of(cls, stored: MethodConfig) -> Config:
        """A run's config as the log keeps it (``diagevo.rounds.stored_config``), read back
        whole: the method's part as the log checked it, each component's part validated now by
        its owner (a ``ConfigError`` naming the field)."""
        if isinstance(stored, cls):
            return stored
        return checked(cls, stored.model_dump(mode="json"))


def load_config(path: Path | str | None = None, overrides: list[str] | None = None) -> Config:
    """Read a TOML config (None = defaults; a packaged config by its name: ``config_file``),
    apply ``section.field=value`` overrides, validate: a refusal names the field as the file or
    the override wrote it."""
    file = config_file(Path(path)) if path is not None else None
    data = apply_overrides(_read_toml(file) if file is not None else {}, overrides or [])
    return checked(Config, data, overrides=overrides or [], path=file)


def config_file(path: Path) -> Path:
    """The config ``path`` names: the file itself wherever there is one (a real file always wins),
    else the config diagevo ships under that name: ``configs/NAME.toml``, ``NAME.toml`` or
    ``NAME``. So the pages' ``--config configs/tiny-hf.toml`` runs in a pip install as in a
    checkout. A bare ``NAME`` beside a ``NAME.toml`` of the current directory names two files and
    is refused; a name of no file lists the packaged configs."""
    from diagevo.installation import shipped, shipped_names

    if path.exists():
        return path
    packaged = shipped_names("configs/*.toml")
    name = path.as_posix().removeprefix("configs/")
    found = shipped(f"configs/{name.removesuffix('.toml')}.toml") if "/" not in name else None
    listed = ", ".join(packaged) or "none"
    if found is None:
        raise NotFound(f"no config file at {path}, and no packaged config of that name (packaged: {listed})")
    if path.suffix != ".toml" and path.with_name(f"{path.name}.toml").is_file():
        raise BadInput(
            f"--config {path} names both {path}.toml here and the packaged configs/{name}.toml: write the one "
            f"meant in full (packaged: {listed})"
        )
    return found


def _read_toml(path: Path) -> dict[str, Any]:
    import tomllib

    if path.is_dir():
        raise BadInput(f"config {path} is a directory, not a TOML file")
    if not path.is_file():
        raise NotFound(f"no config file at {path}")
    text = read_text(path, f"config {path}")  # bounded: /dev/zero as a config is one line
    try:
        return toml_loads(text, str(path))
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{path}: {exc}") from None
