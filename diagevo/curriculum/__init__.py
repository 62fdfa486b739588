"""Curriculum signals between the models and the memory: answers and votes (Sec. 2.2),
double-confidence filtering (Eq. 3), the challenger reward (Eq. 8-10), generation prompts
(Appendix J) and question statistics."""

from diagevo.curriculum.answers import answer_key, extract_answer, normalize_answer
from diagevo.curriculum.bleu import bleu, pairwise_bleu, pairwise_bleu_distance
from diagevo.curriculum.equivalence import (
    CheckStats,
    EquivalenceChecker,
    agrees,
    answers_equivalent,
    check_stats,
    default_checker,
)
from diagevo.curriculum.filtering import absolute_confidence, double_confidence, keep
from diagevo.curriculum.prompts import (
    CHALLENGER_SYSTEM,
    SOLVER_SYSTEM,
    challenger_messages,
    challenger_user_message,
    parse_question,
    solver_messages,
)
from diagevo.curriculum.reward import (
    challenger_output_rewards,
    challenger_rewards,
    repetition_penalties,
    solver_rewards,
    uncertainty_reward,
)
from diagevo.curriculum.stats import question_stats
from diagevo.curriculum.votes import AnswerClass, Votes, reference_index, votes

__all__ = [
    "CHALLENGER_SYSTEM",
    "SOLVER_SYSTEM",
    "AnswerClass",
    "CheckStats",
    "EquivalenceChecker",
    "Votes",
    "absolute_confidence",
    "agrees",
    "answer_key",
    "answers_equivalent",
    "bleu",
    "challenger_messages",
    "challenger_output_rewards",
    "challenger_rewards",
    "challenger_user_message",
    "check_stats",
    "default_checker",
    "double_confidence",
    "extract_answer",
    "keep",
    "normalize_answer",
    "pairwise_bleu",
    "pairwise_bleu_distance",
    "parse_question",
    "question_stats",
    "reference_index",
    "repetition_penalties",
    "solver_rewards",
    "solver_messages",
    "uncertainty_reward",
    "votes",
]
