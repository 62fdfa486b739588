"""A run's whole configuration, as its TOML file holds it: one class per section.

The file format users write (``configs/*.toml``, ``--set section.field=value``, ``diagevo
config``) is one table per section, each declared once, beside the lowest part of diagevo that
reads it:

- :mod:`diagevo.config.sections`: every section the round protocol reads (``[train]``, ``[grpo]``,
  ``[challenger]``, ``[solver]``, ``[filter]``, ``[reward]``, ``[memory]``, ``[diagnosis]``,
  with :mod:`diagevo.config.limits`'s ``[limits]``). This is what the log checks when a run's config
  is stored;
- the components': ``[sim]`` (:mod:`diagevo.train.sim.config`), ``[hf]``
  (:mod:`diagevo.train.hf.config`) and ``[eval]`` (:mod:`diagevo.eval.config`), added here.

``diagevo train`` stores the whole config, redacted, in ``run.started`` (so ``--resume``
rebuilds it with :meth:`Config.of`); the log checks its sections and carries the components'.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field

from diagevo.config.base import apply_overrides, checked, toml_loads
from diagevo.config.sections import MethodConfig
from diagevo.errors import BadInput, NotFound
from diagevo.errors.installation import shipped, shipped_names
from diagevo.eval.config import EvalConfig
from diagevo.text.calls import validated
from diagevo.text.parsing import read_text
from diagevo.text.words import close_to, you_mean
from diagevo.train.hf.config import HFConfig
from diagevo.train.sim.config import SimConfig


class Config(MethodConfig):
    """A run's configuration: one TOML file, the sections a log checks (``MethodConfig``)
    and the components'."""

    model_config = ConfigDict(extra="forbid")  # the whole file: no table is carried

    db: str | None = Field(
        default=None,
        description=(
            "Database URL of the event log; unset: $DIAGEVO_DB, else sqlite:///diagevo.db. Not stored in the log."
        ),
    )
    sim: SimConfig = Field(default_factory=SimConfig, description="The CPU simulator world.")
    hf: HFConfig = Field(default_factory=HFConfig, description="The real-model backend.")
    eval: EvalConfig = Field(default_factory=EvalConfig, description="Benchmark evaluation (the eval command).")

    @classmethod
    def of(cls, stored: MethodConfig) -> Config:
        """A run's config as the log keeps it (``diagevo.rounds.stored_config``), read back
        whole: the sections as the log checked them, each component's carried table validated
        now by its owner (a ``ConfigError`` naming the field)."""
        if isinstance(stored, cls):
            return stored
        return checked(cls, dict(stored))  # the checked sections pass as they are


@validated
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
    packaged = shipped_names("configs/*.toml")
    listed = ", ".join(packaged) or "none"
    if path.suffix in (".yaml", ".yml"):  # verl's and accelerate's configs ship beside diagevo's
        theirs = [f for f in shipped_names("configs/*/*.yaml") if path.as_posix().endswith(f.removeprefix("configs/"))]
        whose = f"{theirs[0].split('/')[1]}'s config that diagevo ships" if theirs else "a config of another program"
        raise BadInput(
            f"{path} is YAML, {whose}: diagevo's configs are TOML"
            f"{you_mean([repr(n) for n in nearest_configs(path)])} (packaged: {listed})"
        )
    if path.exists():
        return path
    name = path.as_posix().removeprefix("configs/")
    found = shipped(f"configs/{name.removesuffix('.toml')}.toml") if "/" not in name else None
    if found is None:
        raise NotFound(
            f"no config file at {path}, and no packaged config of that name"
            f"{you_mean([repr(n) for n in nearest_configs(path)])} (packaged: {listed})"
        )
    if path.suffix != ".toml" and path.with_name(f"{path.name}.toml").is_file():
        raise BadInput(
            f"--config {path} names both {path}.toml here and the packaged configs/{name}.toml: write the one "
            f"meant in full (packaged: {listed})"
        )
    return found


def nearest_configs(path: Path) -> list[str]:
    """The packaged configs ``path`` most likely means, each by the name that loads it: its whole
    spelling, its name or its stem held against every shipped config file's (``/tmp/configs/sim.toml``,
    ``sim.yaml`` and ``configs/sim`` all mean ``configs/sim.toml``; ``configs/verl/solver.yaml``
    means a config of verl's, so the TOML ones of the same stem)."""
    by_spelling: dict[str, str] = {}
    for file in shipped_names("configs/*.toml"):
        for spelling in (file, file.removeprefix("configs/"), Path(file).stem):
            by_spelling.setdefault(spelling, file)
    for spelling in (path.as_posix(), path.name, path.stem):  # one the same but for the folder or suffix
        if spelling.casefold() in {s.casefold() for s in by_spelling}:
            return [by_spelling[close_to(spelling, by_spelling)[0]]]
    found: list[str] = []
    for spelling in (path.name, path.stem):
        for match in close_to(spelling, by_spelling, n=2):
            if by_spelling[match] not in found:
                found.append(by_spelling[match])
    return found[:2]


def _read_toml(path: Path) -> dict[str, Any]:
    if path.is_dir():
        raise BadInput(f"config {path} is a directory, not a TOML file")
    if not path.is_file():
        raise NotFound(f"no config file at {path}")
    text = read_text(path, f"config {path}")  # bounded: /dev/zero as a config is one line
    try:
        return toml_loads(text, str(path))
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{path}: {exc}") from None
