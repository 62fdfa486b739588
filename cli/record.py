"""``diagevo round record``: a round's generated questions, from a JSONL file or from verl's output.

Apart from the other commands of the round protocol (:mod:`diagevo.cli.rounds`), which do not
load :mod:`diagevo.verl` (its reward functions' HTTP client, numpy, BLEU).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from diagevo import rounds
from diagevo.cli.common import CLIError, DbOpt, JsonOpt, RunOpt, console, emit_json
from diagevo.cli.rounds import RoundOpt, picked
from diagevo.cli.safe import text
from diagevo.text.formats import CandidateLine, read_lines
from diagevo.text.parsing import file_lines
from diagevo.verl import generated_candidates


def read_candidates(path: Path) -> list[Any]:
    """Every line of the file as a candidate; the first bad line is ``line N: reason``."""
    out = [rounds.Candidate.from_line(line) for _, _, line in read_lines(file_lines(path), CandidateLine)]
    if not out:
        raise CLIError(f"{path}: no questions")
    return out


def record(
    questions: Annotated[
        Path | None,
        typer.Argument(help="JSONL: question_id, mode, text, causes, node, and responses or answers ('-': stdin)."),
    ] = None,
    from_verl: Annotated[
        Path | None,
        typer.Option(
            "--from-verl",
            help="Instead of QUESTIONS: verl's generation output of construct.parquet (the solver's construction "
            "responses to each question; diagevo docs how-to/verl).",
        ),
    ] = None,
    run: RunOpt = None,
    db: DbOpt = None,
    open_round: RoundOpt = None,
    json: JsonOpt = False,
) -> None:
    if (questions is None) == (from_verl is None):
        raise CLIError("name the questions: a JSONL file, or verl's generation output with --from-verl FILE (not both)")
    candidates = read_candidates(questions) if questions is not None else []
    with picked(db, run, open_round) as rnd:
        if from_verl is not None:
            candidates = generated_candidates(
                from_verl, rnd.run, rnd.t, responses=rnd.config.grpo.construction_responses
            )
        scored = rnd.record(candidates)
    if json:
        emit_json(scored.to_dict())
        return
    kept, new, old = scored.retained, scored.new, len(scored) - scored.new
    batch = f", batch {scored.batch}" if scored.batch else ""
    title = (
        f"run {rnd.run}, round {rnd.t}: {len(kept)}/{len(scored)} retained; recorded {new} ({old} already stored"
        f"{batch})"
    )
    table = Table("question_id", "mode", "p1", "p2", "pseudo-label", title=text(title), title_justify="left")
    for s in kept:
        table.add_row(text(s.question_id), s.mode, f"{s.p1:.3f}", f"{s.p2:.3f}", text(s.pseudo_label or ""))
    console.print(table)
