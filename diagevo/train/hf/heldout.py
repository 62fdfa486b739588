"""What the hf backend measures a round by, apart from the models: the held-out file it reads
(``hf.heldout``, else ``heldout.jsonl`` beside the solver), the greedy accuracy of the solver's
answers to it, overall and per skill, which challenger questions may join Figure 3(c)'s shared
set, and the labelled probe that stands in for that set where the world knows no answers
(``hf.label_probe``). The backend samples; these read and count."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from diagevo.curriculum.answers import extract_answer
from diagevo.curriculum.equivalence import agrees
from diagevo.errors import BadInput, NotFound
from diagevo.model_dirs import HELDOUT_FILE
from diagevo.text.parsing import file_lines, loads
from diagevo.train.backend import Truth

if TYPE_CHECKING:  # a type only: the composed config imports this package's config, never the reverse
    from diagevo.train.config import Config


def heldout_rows(config: Config) -> list[dict[str, str]]:
    """The held-out questions and answers (and skills, the mini world's); none without a file."""
    solver = Path(config.solver.model)
    default = next(
        (p for p in (solver / HELDOUT_FILE, solver.parent / HELDOUT_FILE) if p.is_file()), solver / HELDOUT_FILE
    )
    path = config.hf.heldout or default
    if not Path(path).is_file():
        if config.hf.heldout is not None:
            raise NotFound(f"no held-out file at {path}")
        return []
    return question_answers(Path(path))


def probe_truths(config: Config) -> dict[str, Truth]:
    """``hf.label_probe``'s questions and their answers (none unset): Figure 3(c)'s questions and
    truth for a run whose world knows no answers."""
    path = config.hf.label_probe
    if path is None:
        return {}
    if not Path(path).is_file():
        raise NotFound(f"no label probe at {path} (hf.label_probe)")
    return {r["question"]: Truth(r["answer"], r.get("skill")) for r in question_answers(Path(path))}


def question_answers(path: Path) -> list[dict[str, str]]:
    """A JSONL file's ``{question, answer}`` objects (and ``skill``, where one is named)."""
    rows = []
    for n, line in ((n, line) for n, line in enumerate(file_lines(path), 1) if line.strip(" \t\r")):
        try:
            item = loads(line, f"{path}:{n}")
            rows.append({"question": str(item["question"]), "answer": str(item["answer"])})
            if "skill" in item:  # the mini world's: accuracy per skill too
                rows[-1]["skill"] = str(item["skill"])
        except (ValueError, KeyError, TypeError):  # BadInput is a ValueError
            raise BadInput(f"{path}:{n}: expected a JSON object with question and answer") from None
    return rows


def heldout_accuracy(items: Sequence[dict[str, str]], responses: Sequence[str]) -> dict[str, float]:
    """``heldout_acc`` of one response per held-out item, and ``heldout_acc/SKILL`` where items name one."""
    right = [agrees(extract_answer(r), i["answer"]) for r, i in zip(responses, items, strict=True)]
    by_skill: dict[str, list[bool]] = defaultdict(list)
    for ok, i in zip(right, items, strict=True):
        if "skill" in i:
            by_skill[i["skill"]].append(ok)
    return {
        "heldout_acc": sum(right) / len(right),
        **{f"heldout_acc/{s}": sum(r) / len(r) for s, r in by_skill.items()},
    }


def gradable(truth: Callable[[str], Truth | None], known_only: bool) -> Callable[[str], bool]:
    """Whether a challenger question may join the shared set: the world knows its answer and, with
    ``challenger.known_questions_only``, its skill (as the loop takes a question)."""

    def known(question: str) -> bool:
        found = truth(question)
        return found is not None and (found.skill is not None or not known_only)

    return known
