"""A role's optimizer and learning-rate schedule when the backend, not TRL, owns them.

TRL builds a fresh AdamW and schedule for every GRPO phase: the paper's recipe (a constant 1e-6,
each round a fresh run). On a small model trained at 1e-4, a fresh Adam makes a full-size step on
every weight at each phase's start, and a constant rate never settles: measured on the mini world,
600 steps so split ended at 0.45 held-out accuracy where one TRL run of the same steps reached
0.64 (``docs/how-to/mini-world.md``). With ``keep_optimizer`` or ``lr_span = "run"`` the backend
builds the optimizer as TRL's ``Trainer.create_optimizer`` would (AdamW, no decay on biases and
norms), keeps it across phases when asked, and gives TRL a schedule that goes on from the role's
steps so far. Both survive a resume: the state goes into the role's checkpoint directory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diagevo.train.hf.args import lr_factor

STATE_FILE = "optimizer.pt"  # beside the role's weights in a checkpoint
STEPS_FILE = "optimizer.json"


@dataclass
class RoleOptimizer:
    """A role's optimizer (None until its first phase builds it) and the optimizer steps the
    role took in the run, which is where its schedule stands."""

    optimizer: Any = None
    steps: int = 0
    pending: dict[str, Any] | None = None  # a checkpoint's state, loaded once the optimizer is built


def build_adamw(model: Any, args: Any) -> Any:
    """AdamW over ``model`` exactly as TRL's trainer builds it from ``args``: weight decay on
    every weight but biases and norms, the args' learning rate, betas and epsilon."""
    from transformers import Trainer

    decay = set(Trainer.get_decay_parameter_names(None, model))  # type: ignore[arg-type]  # self is unused
    groups: list[dict[str, Any]] = [
        {"params": [p for n, p in model.named_parameters() if n in decay and p.requires_grad]},
        {"params": [p for n, p in model.named_parameters() if n not in decay and p.requires_grad]},
    ]
    groups[0]["weight_decay"], groups[1]["weight_decay"] = args.weight_decay, 0.0
    cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(args, model)
    return cls(groups, **kwargs)


def optimizers(
    held: RoleOptimizer, model: Any, args: Any, kind: str, horizon: int, keep: bool, warmup: int = 0
) -> tuple[Any, Any]:
    """The (optimizer, schedule) pair a phase's trainer takes: the kept optimizer (built on first
    use, a checkpoint's state loaded into it), or a fresh one; a schedule of ``kind`` over
    ``horizon`` steps that starts at the role's steps so far."""
    from torch.optim.lr_scheduler import LambdaLR

    optimizer = held.optimizer if keep and held.optimizer is not None else build_adamw(model, args)
    if keep and held.pending is not None:
        optimizer.load_state_dict(held.pending)
        held.pending = None
    if keep:
        held.optimizer = optimizer
    start = held.steps
    for group in optimizer.param_groups:
        group["lr"] = group["initial_lr"] = args.learning_rate  # the schedule's base, whatever the last phase left
    return optimizer, LambdaLR(optimizer, lambda s: lr_factor(kind, start + s, horizon, warmup))


def save_state(held: RoleOptimizer, directory: Path) -> None:
    """The role's steps, and its kept optimizer's state, beside its weights."""
    import torch

    (directory / STEPS_FILE).write_text(json.dumps({"steps": held.steps}), encoding="utf-8")
    if held.optimizer is not None:
        torch.save(held.optimizer.state_dict(), directory / STATE_FILE)


def load_state(directory: Path) -> RoleOptimizer:
    """What a checkpoint kept of a role's optimizer (nothing: a fresh one at step 0), its state
    loaded into the optimizer when the next phase builds it (over the weights loaded with it)."""
    import torch

    held = RoleOptimizer()
    steps = directory / STEPS_FILE
    if steps.is_file():
        held.steps = int(json.loads(steps.read_text(encoding="utf-8"))["steps"])
    if (directory / STATE_FILE).is_file():
        held.pending = torch.load(directory / STATE_FILE, map_location="cpu", weights_only=True)
    return held
