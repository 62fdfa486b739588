"""Training: the co-evolution loop and its backends."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable

from diagevo.config import Config, redact_url
from diagevo.events.store import EventStore
from diagevo.train.backend import Backend, ProgressFn, no_progress


class BackendUnavailable(ValueError):
    """The configured backend cannot run on this installation."""


def make_backend(config: Config) -> Backend:
    if config.train.backend == "sim":
        from diagevo.train.sim import SimBackend

        return SimBackend(config, config.train.seed)
    if config.train.backend == "hf":
        try:
            from diagevo.train.hf.backend import HFBackend
        except ImportError as exc:
            raise BackendUnavailable(f"backend \"hf\" needs the hf extra (pip install -e '.[hf]'): {exc}") from None
        return HFBackend(config, config.train.seed)
    raise BackendUnavailable(
        f"backend {config.train.backend!r} is not part of this build; use backend = \"sim\""
    )


def default_run_id(config: Config) -> str:
    return config.train.run or f"{config.train.backend}-s{config.train.seed}-{time.strftime('%Y%m%d-%H%M%S')}"


def run_id_for(store: EventStore, config: Config, resume: bool) -> str:
    """The run to train: the configured id, the latest run when resuming, else a new id.
    Resuming a run the log does not hold is an error, not a new run."""
    if config.train.run:
        exists = config.train.run in store.runs()
        if resume and not exists:
            raise ValueError(f"no run {config.train.run!r} to resume in {redact_url(store.url)}")
        if exists and not resume:
            raise ValueError(f"run {config.train.run!r} already exists in {redact_url(store.url)}; pass --resume to continue it")
        return config.train.run
    if resume:
        latest = store.latest_run()
        if latest is None:
            raise ValueError(f"nothing to resume in {redact_url(store.url)}")
        return latest
    return default_run_id(config)


def stored_config(store: EventStore, run: str) -> Config | None:
    """The resolved config recorded in the run's ``run.started``, or its latest
    ``run.configured`` (None for a new run)."""
    found = None
    for e in store.read(run, types=("run.started", "run.configured")):
        data = dict(e.data["config"])
        data.pop("k", None)
        data.pop("db", None)
        data["diagnosis"] = {k: v for k, v in data.get("diagnosis", {}).items() if k != "api_key"}
        found = Config.model_validate(data)
    return found


def reconfigure(store: EventStore, run: str, saved: Config, overrides: list[str]) -> Config:
    """``saved`` with ``overrides`` applied; a change is recorded as ``run.configured`` before
    the next round (a round already under way keeps the config it started with)."""
    from diagevo.config import apply_overrides
    from diagevo.events.schemas import new_event
    from diagevo.replay import committed_rounds

    data = apply_overrides(saved.model_dump(mode="json", exclude={"db"}), overrides)
    try:
        config = Config.model_validate(data)
    except Exception as exc:  # pydantic's message, first line
        raise ValueError(f"config: {str(exc).splitlines()[0]}") from None
    if config.redacted() == saved.redacted():
        return config
    t = max(committed_rounds(store, run), default=0) + 1
    if any(True for _ in store.read(run, round=t, limit=1)):  # round t has begun (an indexed read)
        raise ValueError(f"run {run!r} is in the middle of round {t}: finish it before changing its config")
    record = config.redacted() | {"k": config.memory.k}
    digest = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:16]
    store.append([new_event("run.configured", run, t, f"{run}/{t}/run.configured/{digest}", config=record, seed=config.train.seed)])
    return config


def train(
    config: Config,
    store: EventStore,
    *,
    resume: bool = False,
    rounds: int | None = None,
    progress: ProgressFn = no_progress,
    on_round: Callable[..., None] = lambda r: None,
    backend: Backend | None = None,
    overrides: list[str] | None = None,
    lead: Callable[[Backend], Backend] | None = None,
) -> tuple[str, list]:
    """Train (or resume) a run up to round ``rounds`` (default: the config's); returns the run id
    and the reports of the rounds it ran. ``lead`` wraps the backend, built from the run's
    config, for the rank that leads a multi-process launch."""
    from diagevo.train.loop import Trainer

    if rounds is not None and rounds < 1:
        raise ValueError(f"rounds must be at least 1, not {rounds}")
    run = run_id_for(store, config, resume)
    if run in store.runs():
        if not resume:
            raise ValueError(f"run {run!r} already exists in {redact_url(store.url)}; pass --resume to continue it")
        saved = stored_config(store, run)
        if saved is not None:
            if overrides:
                saved = reconfigure(store, run, saved, overrides)
            config = saved.model_copy(update={"db": config.db})
    progress("load", 0, None)
    models = backend or make_backend(config)
    trainer = Trainer(config, store, lead(models) if lead else models, run, progress=progress, on_round=on_round)
    return run, trainer.train(rounds)


def cause_to_audit(store: EventStore, run: str) -> str | None:
    """A cause worth ``memory why``: the last one reactivated, else the last one promoted, else
    the most recently created."""
    last: dict[str, str] = {}
    for e in store.read(run, types=("cause.reactivated", "cause.promoted", "cause.created")):
        last[e.type] = e.data["cause_id"]
    for kind in ("cause.reactivated", "cause.promoted", "cause.created"):
        if kind in last:
            return last[kind]
    return None
