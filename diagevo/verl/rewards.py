"""The two reward functions verl calls, and what the challenger's needs of verl's config.

The solver's, :func:`compute_score`, has the signature of verl's custom reward functions
(``compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs)``): one
response against one pseudo-label.

The challenger's, :func:`challenger_score`, cannot score one rollout alone: R-Zero's repetition
penalty (Eq. 9) clusters the whole update batch. It has the signature of verl's batch reward
functions (``data_sources, solution_strs, ground_truths, extra_infos``, as verl's
``BatchRewardManager`` calls them): the batch it clusters is the batch it is given. verl 0.9's
trainers score each rollout as soon as it is generated, one call each, through their reward
loop; :class:`diagevo.verl.manager.StepRewardManager` is the reward manager that gathers one
step's rollouts there, as many as :func:`step_size` reads from verl's config, and makes that one
call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from diagevo.curriculum.prompts import solver_messages
from diagevo.curriculum.reward import challenger_output_rewards, solver_scores
from diagevo.errors import BadInput
from diagevo.generation import Sampling
from diagevo.generation.endpoint import EndpointEngine
from diagevo.text.parsing import quoted
from diagevo.verl.dumps import tag_round

if TYPE_CHECKING:
    from diagevo.config.sections import MethodConfig

T = TypeVar("T")

TIMEOUT_S = 180.0
"""The default of ``reward_kwargs.timeout_s``: the longest one request to the solver server may take."""
RETRIES = 1
"""The default of ``reward_kwargs.retries``: a request that failed or timed out is sent again this often."""
ACTOR_CALLS = 1000
"""The most calls verl's reward worker (a Ray actor running coroutines) runs at once, Ray's default
``max_concurrency`` of such an actor: a step's rollouts all wait in it until the last one is in."""


REWARDS = {"solver": "compute_score", "challenger": "challenger_score"}
"""Each role's reward; it scores the rows of the role's file alone (``data_source`` ``diagevo/ROLE``,
:func:`~diagevo.verl.parquet.export_round`)."""


def own_rows(role: str, source: object) -> None:
    """Refuse, at the first call, a row of another file than ``role``'s: the reward would score its
    rollouts without a word (-1 each for the solver's; the challenger's reads its settings from a
    curriculum row as well), and the wrong role be trained a whole run."""
    if source == f"diagevo/{role}":
        return
    other = next(r for r in REWARDS if r != role)
    raise BadInput(
        f"{REWARDS[role]} is the {role}'s reward, and it was given a row of data_source {quoted(source, 40)}: train "
        f"the {role} on the round's {role}.parquet (data.train_files), whose rows are 'diagevo/{role}'"
        + (f" ({other}.parquet trains the {other}, with {REWARDS[other]})" if other in str(source) else ""),
        about="data_source",
        value=source,
    )


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str | None,
    extra_info: Mapping[str, Any] | None = None,
    **kw: Any,
) -> dict[str, float | str]:
    """The solver's reward on a retained question (Sec. 2.2): ``+1`` when the response's final
    answer agrees with the round's pseudo-label (``ground_truth``: diagevo's answer check, the one
    that counted the construction responses in the label's class), else ``-1``, a failure that
    diagnosis reads back. Returns ``score``, ``acc`` (1 or 0: verl's validation reports it as the
    accuracy against the pseudo-labels), ``checked`` (1, or 0 where the answer's check passed the
    response's own limits: scored -1 and no failure for diagnosis, whatever the batch's other
    responses cost), the ``question_id`` of ``extra_info`` and its ``export``
    tag (empty where it has none): verl's legacy trainer dumps these keys with each rollout, which
    ties the dump's lines to the export they were trained on (``diagevo diagnose --from-verl``).
    ``export`` (of ``reward_kwargs``, the tag verl.json's overrides of solver.parquet pass) refuses, at the
    first call, a row of another export: a solver.parquet of another round would otherwise train a
    whole GPU run that ``diagnose`` refuses only afterwards."""
    own_rows("solver", data_source)
    _text("solution_str", solution_str)
    _text("ground_truth", ground_truth, optional=True)
    info = _info("extra_info", extra_info)
    tag, export = info.get("export"), kw.get("export")
    if export is not None and tag != export:
        theirs = (
            f"of round {tag_round(tag)}'s export (tag {quoted(tag, 40)})" if isinstance(tag, str) else "with no tag"
        )
        raise BadInput(
            f"compute_score was given a row {theirs}, not of the export reward_kwargs.export names "
            f"({quoted(export, 40)}, verl.json's): train on the solver.parquet beside that verl.json",
            about="export",
            value=tag,
        )
    [scored] = solver_scores([solution_str], ground_truth)
    return {
        "score": scored.score,
        "acc": float(scored.score > 0),
        "checked": float(scored.checked),
        "question_id": _question_id(info),
        "export": tag if isinstance(tag, str) else "",
    }


REWARD_KWARGS = ("solver_url", "solver_model", "max_tokens", "timeout_s", "retries")
"""The keywords :func:`challenger_score` takes from ``reward.custom_reward_function.reward_kwargs``."""

MANAGER = (
    "reward.reward_manager.source=importlib reward.reward_manager.name=StepRewardManager "
    "reward.reward_manager.module.path=pkg://diagevo.verl.manager"
)
"""What selects the step reward manager (configs/verl/challenger.yaml's ``reward_manager`` block)."""


def challenger_score(
    data_sources: Sequence[str] | None = None,
    solution_strs: Sequence[str] | None = None,
    ground_truths: Sequence[str | None] | None = None,
    extra_infos: Sequence[Mapping[str, Any] | None] | None = None,
    *,
    solver_url: str,
    solver_model: str,
    max_tokens: int = 1024,
    timeout_s: float = TIMEOUT_S,
    retries: int = RETRIES,
    **unknown: Any,
) -> list[dict[str, float | str]]:
    """The challenger's reward (Appendix C, Eq. 8-10, R-Zero's) of each output of one update
    batch: ``max(0, r_unc - λ r_rep)`` of the question in the output (0 when it holds no
    ``<question>`` block). ``r_unc`` comes from the majority vote share of the frozen solver's N
    answers, sampled from the OpenAI-compatible server at ``solver_url`` serving ``solver_model``;
    ``r_rep`` from the BLEU clusters of the batch, B = ``len(solution_strs)``. N, λ, the clustering
    threshold and the sampling are the run's, carried by each row's ``extra_info`` (``diagevo
    export verl`` writes them there). Set as ``reward.custom_reward_function.reward_kwargs``:
    ``max_tokens`` bounds each answer; ``timeout_s`` each request to the server and ``retries``
    how often a failed one is sent again, so a hung server fails the step within
    ``timeout_s x (retries + 1)`` with one line naming it. Any other keyword is refused; so is a
    call for one rollout (``solution_str``: verl's default reward manager, the yaml's
    ``reward_manager`` block left out), naming the settings that select the step's manager (the
    four batch arguments default to None for that reason only: Python's own ``TypeError`` would
    name none of it), and so is a row of another file than challenger.parquet (``own_rows``)."""
    if "solution_str" in unknown or "data_source" in unknown:
        raise BadInput(
            "challenger_score was called for one rollout (solution_str), as verl's default reward manager calls a "
            f"reward function: it scores a whole step, gathered by diagevo's reward manager: set {MANAGER}"
        )
    check_reward_kwargs(unknown)
    texts = _sequence("solution_strs", solution_strs, None)
    sources = _sequence("data_sources", data_sources, len(texts))
    _sequence("ground_truths", ground_truths, len(texts))
    for i, text in enumerate(texts):
        _text(f"solution_strs[{i}]", text)
    infos = [_info(f"extra_infos[{i}]", x) for i, x in enumerate(_sequence("extra_infos", extra_infos, len(texts)))]
    _text("solver_url", solver_url)
    _text("solver_model", solver_model)
    _whole("max_tokens", max_tokens, 1)
    _whole("retries", retries, 0)
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not timeout_s > 0:
        raise BadInput(f"timeout_s must be a number of seconds above 0, not {timeout_s!r}")
    if not texts:
        return []
    for source in sources:
        own_rows("challenger", source)
    s = ChallengerSettings.of(infos)
    engine = EndpointEngine(solver_model, url=solver_url, timeout_s=float(timeout_s), max_retries=retries)
    sampling = Sampling(n=s.votes, temperature=s.temperature, top_p=s.top_p, max_new_tokens=max_tokens)

    def answer(questions: list[str]) -> list[list[str]]:
        return engine.generate([solver_messages(q) for q in questions], sampling)

    rewards = challenger_output_rewards(list(texts), answer, lam=s.lam, threshold=s.cluster_distance_threshold)
    return [{"score": float(r), "question_id": _question_id(x)} for r, x in zip(rewards, infos, strict=True)]


def check_reward_kwargs(given: Mapping[str, Any]) -> None:
    """Refuse, in one line, a keyword of ``reward_kwargs`` that :func:`challenger_score` does not take."""
    stray = [k for k in given if k not in REWARD_KWARGS]
    if stray:
        raise BadInput(
            f"challenger_score takes no {', '.join(stray)}: its reward_kwargs are {', '.join(REWARD_KWARGS[:-1])} and "
            f"{REWARD_KWARGS[-1]} (B is the batch verl passes)"
        )


def setting(config: Any, path: str) -> Any:
    """The value at the dotted ``path`` of verl's composed config (a mapping or an OmegaConf
    node), None where any part is missing."""
    node: Any = config
    for key in path.split("."):
        node = node.get(key) if hasattr(node, "get") else None
    return node


def step_size(config: Mapping[str, Any]) -> int:
    """B, the rollouts of one step of verl's trainer (``data.train_batch_size`` x
    ``actor_rollout_ref.rollout.n``), from verl's composed config; refuses, one line naming the
    setting, a config under which the rollouts verl scores are not whole steps gathered in one
    place: more than one reward worker, validation (its batches have other sizes), a trainer mode
    other than ``sync`` (steps overlap), groups generated again (a step of no fixed size), or a B
    that verl's reward worker cannot hold at once."""

    get = partial(setting, config)
    workers = get("reward.num_workers")
    if workers != 1:
        raise BadInput(
            f"reward.num_workers is {workers!r}: the challenger reward clusters a whole step's rollouts, "
            "which reach one reward worker only with reward.num_workers=1"
        )
    test_freq = get("trainer.test_freq")
    if get("trainer.val_before_train") or (isinstance(test_freq, int) and test_freq > 0):
        raise BadInput(
            "the challenger's trainer validates (trainer.val_before_train or trainer.test_freq > 0), and the "
            "challenger reward scores training steps only: set trainer.val_before_train=false trainer.test_freq=-1"
        )
    mode = get("trainer.v1.trainer_mode")
    if get("trainer.use_v1") is not False and mode not in (None, "sync"):
        raise BadInput(
            f"trainer.v1.trainer_mode is {mode!r}: the challenger reward clusters one step's rollouts, which "
            "only the sync mode keeps apart from the next step's: set trainer.v1.trainer_mode=sync"
        )
    if get("algorithm.filter_groups.enable") or get("trainer.v1.sampler.sync_refill_failed_groups"):
        raise BadInput(
            "algorithm.filter_groups.enable or trainer.v1.sampler.sync_refill_failed_groups generates more rollouts "
            "for a step, and the challenger reward clusters a step of a known size: set both to false"
        )
    batch, n = get("data.train_batch_size"), get("actor_rollout_ref.rollout.n")
    for name, value in (("data.train_batch_size", batch), ("actor_rollout_ref.rollout.n", n)):
        _whole(name, value, 1)
    size = int(batch) * int(n)
    if size > ACTOR_CALLS:
        raise BadInput(
            f"a step of {batch} prompts x {n} rollouts is {size}, and verl's reward worker holds at most "
            f"{ACTOR_CALLS} rollouts at once: lower data.train_batch_size to {ACTOR_CALLS // int(n)} or less"
        )
    return size


def _text(name: str, value: Any, *, optional: bool = False) -> None:
    if not isinstance(value, str) and not (optional and value is None):
        raise BadInput(f"{name} must be a string{' or None' if optional else ''}, not {type(value).__name__}")


def _info(name: str, value: Any) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise BadInput(f"{name} must be a mapping (the row's extra_info) or None, not {type(value).__name__}")
    return value


def _sequence(name: str, value: Sequence[T] | None, n: int | None) -> Sequence[T]:
    """``value``, a sequence of one item per rollout (``n`` of them where given)."""
    if (
        value is None
        or isinstance(value, str | bytes | Mapping)
        or not hasattr(value, "__len__")
        or not hasattr(value, "__getitem__")
    ):
        raise BadInput(f"{name} must be a sequence, one item per rollout, not {type(value).__name__}")
    if n is not None and len(value) != n:
        raise BadInput(f"{name} has {len(value)} items for {n} solution_strs: one per rollout")
    return value


def _whole(name: str, value: Any, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise BadInput(f"{name} must be a whole number of at least {least}, not {value!r}")


def _question_id(extra_info: Mapping[str, Any]) -> str:
    qid = extra_info.get("question_id")
    return qid if isinstance(qid, str) else ""


@dataclass(frozen=True, slots=True)
class ChallengerSettings:
    """What the challenger reward takes from the run's config (``extra_info`` of a challenger row):
    N answers per question, their sampling, λ and the clustering's distance threshold; the
    export writes these fields, in this order, and the reward reads them back."""

    votes: int
    temperature: float
    top_p: float
    lam: float
    cluster_distance_threshold: float

    @classmethod
    def from_config(cls, cfg: MethodConfig) -> ChallengerSettings:
        """The settings of the run's config, as the export writes them into each challenger row."""
        grpo, reward = cfg.grpo, cfg.reward
        return cls(
            grpo.construction_responses, grpo.temperature, grpo.top_p, reward.lam, reward.cluster_distance_threshold
        )

    @classmethod
    def of(cls, infos: Sequence[Mapping[str, Any]]) -> ChallengerSettings:
        """The settings every row of the batch carries; rows that lack some, or carry others
        (rows of two runs in one batch), are named in one line."""
        names = [f.name for f in fields(cls)]
        missing = sorted({n for info in infos for n in names if info.get(n) is None}, key=names.index)
        if missing:
            raise BadInput(
                f"a challenger row's extra_info has no {', '.join(missing)}: the challenger reward reads N, the "
                "sampling, lam and the clustering threshold from the rows that diagevo's verl export writes"
            )
        seen = {tuple(info[n] for n in names) for info in infos}
        if len(seen) > 1:
            raise BadInput(
                f"the batch's rows carry {len(seen)} different reward settings: one batch is one run's export"
            )
        info = infos[0]
        try:
            return cls(int(info["votes"]), *(float(info[n]) for n in names[1:]))
        except (TypeError, ValueError):
            raise BadInput(f"a challenger row's reward settings are not numbers: {dict(info)!r:.200}") from None
