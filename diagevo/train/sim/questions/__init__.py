"""The question writers of the simulator's trap variants, one module per knowledge area.

A writer is code (it draws numbers and words the question, its answers and its solution steps
around them); what a variant is called and how its cause is worded is data, in ``families.toml``.
``WRITERS`` joins the two: a variant's key ``"family.variant"`` names its writer.
"""

from __future__ import annotations

from collections.abc import Mapping

from diagevo.train.sim.questions import algebra, combinatorics, number_theory, percentages, probability
from diagevo.train.sim.questions.common import Raw, Writer

WRITERS: Mapping[str, Writer] = {
    **algebra.WRITERS,
    **number_theory.WRITERS,
    **combinatorics.WRITERS,
    **probability.WRITERS,
    **percentages.WRITERS,
}

__all__ = ["WRITERS", "Raw", "Writer"]
