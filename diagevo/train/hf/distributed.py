"""The ``hf`` backend on several processes (``accelerate launch``): rank 0 leads, the rest follow.

Rank 0 owns the loop and the store: it runs :class:`~diagevo.train.loop.Trainer` as in one
process, on its backend made to :func:`lead`. The other ranks are model workers: they never
open the database; :func:`follow` receives rank 0's phase commands (GRPO on the challenger or
the solver, loading a checkpoint, stop) through ``broadcast_object_list`` and runs them on their
own copy of the models, so every rank steps the same ``GRPOTrainer`` together.

Rewards are batch-level: TRL calls a reward function on each process with that process's shard
of completions. :func:`global_rewards` gathers every shard to rank 0, where the loop's reward
(frozen-solver votes and the repetition penalty over the whole batch, Eq. 8-10; the ±1 solver
reward) is computed once, and scatters the rewards back, so the penalty clusters the global
batch, never a shard. Sampling (Q^cur, votes, held-out accuracy), checkpoints and events stay
on rank 0 alone.
"""

from __future__ import annotations

import gc
import os
import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from diagevo.errors import BadInput

if TYPE_CHECKING:  # types only: the composed config imports this package's config, never the reverse
    from diagevo.memory.sampler import GenerationRequest
    from diagevo.train.config import Config

T = TypeVar("T")

STOP = "stop"


def world_size() -> int:
    """Processes of this launch (``WORLD_SIZE``, set by ``accelerate launch``/``torchrun``)."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def rank() -> int:
    """This process's global rank (0 outside a launch)."""
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return 0


def init(cpu: bool = False) -> tuple[int, int]:
    """Start the process group (gloo on a CPU, NCCL on GPUs); (rank, world size)."""
    from accelerate import PartialState

    state = PartialState(cpu=cpu)
    return state.process_index, state.num_processes


def with_processes(cfg: Config) -> Config:
    """``cfg`` with ``hf.num_processes`` = this launch's processes (a stored config may hold
    another count)."""
    return cfg.model_copy(update={"hf": cfg.hf.model_copy(update={"num_processes": world_size()})})


def for_this_rank(cfg: Config) -> tuple[Config, bool]:
    """The config this rank trains with (``hf.num_processes`` = the launch's processes) and
    whether it leads; one process leads alone and starts nothing."""
    if world_size() == 1:
        return cfg, True
    if cfg.train.backend != "hf":
        raise BadInput(f"backend {cfg.train.backend!r} runs in one process: start it without accelerate launch")
    cfg = with_processes(cfg)
    index, _ = init(cpu=cfg.hf.device == "cpu")
    return cfg, index == 0


def finish() -> None:
    """Wait for every rank, then close the process group (a clean exit on every rank). The
    phases' trainers leave reference cycles; they are collected first, while the interpreter is
    whole: freed in its teardown, a gloo work's tensor that needs the GIL can abort the process."""
    if world_size() == 1:
        return
    from accelerate import PartialState

    gc.collect()
    state = PartialState()
    state.wait_for_everyone()
    state.destroy_process_group()


def broadcast(obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank."""
    from accelerate.utils import broadcast_object_list

    box = [obj]
    broadcast_object_list(box, from_process=0)
    return box[0]


def is_zero3(trainer: Any) -> bool:
    """Whether ``trainer`` runs under DeepSpeed ZeRO-3, where each rank holds only a shard of the
    policy once GRPO is over."""
    plugin = getattr(trainer.accelerator.state, "deepspeed_plugin", None)
    return bool(getattr(trainer, "is_deepspeed_enabled", False) and plugin is not None and plugin.zero_stage == 3)


@contextmanager
def whole_weights() -> Iterator[None]:
    """Models loaded inside it are whole on this rank. While a phase's ``GRPOConfig`` lives under
    ZeRO-3, transformers builds every ``from_pretrained`` model inside DeepSpeed's ``zero.Init``,
    its weights partitioned across the ranks; the policies diagevo samples itself with
    ``generate`` (the solver, inside the challenger's phase, for its reward; a policy loaded back
    after its phase) must be whole, or ``generate`` fails on the empty shards."""
    from transformers.integrations import deepspeed as hf_deepspeed  # the hf backend's: transformers is there

    held = hf_deepspeed._hf_deepspeed_config_weak_ref  # a weak reference to the live config, or None
    hf_deepspeed.unset_hf_deepspeed_config()
    try:
        yield
    finally:
        live = held() if held is not None else None
        if live is not None:
            hf_deepspeed.set_hf_deepspeed_config(live)


def gather_policy(trainer: Any, staging: Path) -> Path:
    """The whole policy of a ZeRO-3 ``trainer`` written to rank 0's ``staging`` directory; every
    rank must call it (``save_model`` gathers the shards, a collective; rank 0 writes the 16-bit
    weights, ``zero3_save_16bit_model: true`` in the accelerate config). Returns rank 0's path on
    every rank, for each to load the whole weights back."""
    trainer.save_model(str(staging))
    trainer.accelerator.wait_for_everyone()
    return Path(broadcast(str(staging)))


def global_rewards(local: Sequence[T], compute: Callable[[list[T]], list[float]]) -> list[float]:
    """Rewards of this rank's ``local`` items, computed once on rank 0 over all ranks' items.

    Every rank calls this together (it is a collective); ``compute`` runs on rank 0 only, on the
    global batch in rank order, and each rank gets back the slice of its own items."""
    if world_size() == 1:
        return list(compute(list(local)))
    from accelerate import PartialState
    from accelerate.utils import gather_object

    state = PartialState()
    tagged = list(gather_object([(state.process_index, item) for item in local]))  # every rank's, in rank order
    rewards: list[float] | None = None
    if state.process_index == 0:
        rewards = [float(x) for x in compute([item for _, item in tagged])]
        if len(rewards) != len(tagged):
            raise ValueError(f"reward function returned {len(rewards)} rewards for {len(tagged)} completions")
    everything = broadcast(rewards)
    return [r for (who, _), r in zip(tagged, everything, strict=True) if who == state.process_index]


@dataclass(frozen=True)
class Command:
    """One phase command from rank 0 to the followers: the method of the backend to run and its
    arguments (a follower computes no rewards: rank 0 does, over the global batch)."""

    op: str  # "train_challenger" | "train_solver" | "load" | STOP
    config: Config | None = None  # the config rank 0 runs with (a resumed run's stored one)
    requests: tuple[GenerationRequest, ...] = ()
    questions: tuple[str, ...] = ()
    group_size: int = 0
    rng: random.Random | None = None  # a copy of rank 0's stream, as the phase starts
    path: str = ""


def lead(backend: Any) -> Any:
    """Rank 0's backend, built from the run's (stored) config: with the launch's processes, and
    announcing each collective phase to the followers before it runs it (``HFBackend.leading``).
    Everything else (sampling, evaluation, diagnosis, checkpoints) is rank 0's alone."""
    backend.config = with_processes(backend.config)
    backend.leading = True
    return backend


def stop() -> None:
    """Rank 0: release the followers (after the last round, or when rank 0 fails)."""
    broadcast(Command(STOP))


def _never(*_: Any) -> list[float]:
    raise RuntimeError("a follower computes no rewards: rank 0 does")


def follow(make_backend: Callable[[Config], Any]) -> int:
    """Run rank 0's phase commands until it stops; the number run. This rank's backend is built
    from the config of rank 0's first command (for a resumed run, the run's stored config)."""
    done = 0
    backend: Any = None
    while True:
        cmd: Command = broadcast(None)
        if cmd.op == STOP:
            return done
        if cmd.config is None:
            raise ValueError(f"phase command {cmd.op!r} without the leader's config")
        if backend is None or cmd.config != backend.config:
            backend = make_backend(cmd.config)
        if cmd.op == "train_challenger":
            backend.train_challenger(list(cmd.requests), _never, cmd.rng)
        elif cmd.op == "train_solver":
            backend.train_solver(list(cmd.questions), _never, cmd.group_size, cmd.rng)
        elif cmd.op == "load":
            backend.load(Path(cmd.path))
        else:
            raise ValueError(f"unknown phase command {cmd.op!r}")
        done += 1
