"""The question writers of the simulator's trap variants, one module per knowledge area.

A writer is code: it draws the numbers of a question, its answer and its trap. How the question
and its solution steps are worded around them, what a variant is called and how its cause is
worded are data, in ``families.toml``. ``WRITERS`` joins the two: a variant's key
``"family.variant"`` names its writer.
"""

from __future__ import annotations

from collections.abc import Mapping

from diagevo.train.sim.questions import algebra, combinatorics, number_theory, percentages, probability
from diagevo.train.sim.questions.common import Draw, Writer, worded

WRITERS: Mapping[str, Writer] = {
    **algebra.WRITERS,
    **number_theory.WRITERS,
    **combinatorics.WRITERS,
    **probability.WRITERS,
    **percentages.WRITERS,
}

__all__ = ["WRITERS", "Draw", "Writer", "worded"]
