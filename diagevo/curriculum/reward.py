"""Challenger reward (Appendix C, Eq. 8-10), following R-Zero.

Invalid questions (None, or blank) get reward 0 and do not take part in the clustering, but
they do count in B: B is the size of the challenger-update batch as generated, as in R-Zero,
where an invalid output enters the BLEU clustering as an empty string. Empty text has BLEU 0
against everything (distance 1), so it could never join a cluster; leaving it out of the
clustering is the same partition of the valid questions. With B = all questions, a lone valid
question among invalid ones is penalised 1/B rather than 1.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from diagevo.curriculum.answers import extract_answer
from diagevo.curriculum.bleu import pairwise_bleu_distance
from diagevo.curriculum.clustering import average_linkage_clusters
from diagevo.curriculum.equivalence import RESPONSE, verdict
from diagevo.curriculum.prompts import parse_question
from diagevo.curriculum.votes import votes
from diagevo.text.calls import validated


def uncertainty_reward(p1: float) -> float:
    """Eq. 8: ``1 - 2 |p1 - 1/2|``; 1 at 50% self-consistency, 0 at 0% and 100%."""
    return 1.0 - 2.0 * abs(p1 - 0.5)


def _valid(question: str | None) -> bool:
    return question is not None and question.strip() != ""


def repetition_penalties(questions: list[str | None], threshold: float = 0.5) -> list[float]:
    """``r_rep(x_i) = |C_k| / B`` for valid questions (B counts invalid ones too); 0 for invalid."""
    batch = len(questions)
    valid = [i for i, q in enumerate(questions) if _valid(q)]
    out = [0.0] * batch
    # average-linkage clusters on BLEU distances, merged while below the threshold
    labels = average_linkage_clusters(pairwise_bleu_distance([questions[i] or "" for i in valid]), threshold)
    sizes = Counter(labels.tolist())
    for i, label in zip(valid, labels.tolist()):
        out[i] = sizes[label] / batch
    return out


def challenger_rewards(
    questions: list[str | None], p1: list[float], lam: float = 1.0, threshold: float = 0.5
) -> list[float]:
    """Eq. 10: ``max(0, r_unc - lam * r_rep)`` per question; 0 for format-invalid ones.

    ``p1[i]`` is the frozen solver's majority vote share on ``questions[i]`` (ignored when the
    question is invalid).
    """
    if len(questions) != len(p1):
        raise ValueError(f"{len(questions)} questions but {len(p1)} vote shares")
    rep = repetition_penalties(questions, threshold)
    return [max(0.0, uncertainty_reward(p) - lam * r) if _valid(q) else 0.0 for q, p, r in zip(questions, p1, rep)]


@validated
def challenger_output_rewards(
    outputs: Sequence[str],
    answer: Callable[[list[str]], list[list[str]]],
    lam: float = 1.0,
    threshold: float = 0.5,
    parse: Callable[[str], str | None] = parse_question,
) -> list[float]:
    """Eq. 8-10 for a batch of raw challenger outputs: each is parsed into a question (``parse``:
    None for an invalid output), the frozen solver answers the valid ones (``answer``: questions
    -> responses per question), and each gets ``challenger_rewards`` from its majority vote share."""
    questions = [parse(o) for o in outputs]
    valid = {i: q for i, q in enumerate(questions) if q is not None}
    p1 = [0.0] * len(questions)
    for i, responses in zip(valid, answer(list(valid.values())), strict=True):
        p1[i] = votes([extract_answer(x) for x in responses]).p1
    return challenger_rewards(questions, p1, lam=lam, threshold=threshold)


@dataclass(frozen=True, slots=True)
class SolverScore:
    """One response's reward, and whether its answer was checked against the label.

    An answer whose check passed the response's own limits (:data:`~diagevo.curriculum.equivalence.RESPONSE`)
    is unchecked: it earns -1, since nothing showed it agrees (0 would pay a policy for answers too
    heavy to check), and it is no failure known, so it is not recorded for diagnosis."""

    score: float
    checked: bool


@validated
def solver_scores(responses: Sequence[str], pseudo_label: str | None) -> list[SolverScore]:
    """The solver's reward on a retained question (Sec. 2.2): +1 for a response whose final
    answer agrees with the pseudo-label (the agreement that counted it in the label's class),
    else -1 (a failure, recorded for diagnosis, where its answer was checked). Each response's
    check spends its own limits, never another's, and its score is a function of the response and
    the label: the same in any batch, order or company, at any load (issue 92)."""
    found = [verdict(extract_answer(x), pseudo_label, limits=RESPONSE) for x in responses]
    return [SolverScore(1.0 if v else -1.0, v is not None) for v in found]


@validated
def solver_rewards(responses: Sequence[str], pseudo_label: str | None) -> list[float]:
    """The rewards alone of ``solver_scores`` (whose answers past their limits are unchecked)."""
    return [s.score for s in solver_scores(responses, pseudo_label)]
