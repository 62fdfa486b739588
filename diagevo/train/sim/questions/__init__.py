"""The question writers of the simulator's trap variants, one module per knowledge area.

A writer is code: it draws the numbers of one question of its variant at a difficulty level
(0-3), its true answer and the answer of a solver that falls into the variant's trap. How the
question and its solution steps are worded around them, what a variant is called and how its
cause is worded are data, in ``families.toml``. ``WRITERS`` joins the two: a variant's key
``"family.variant"`` names its writer, the function of that variant's name in its area's module,
listed under its family there (``FAMILIES``).
"""

from __future__ import annotations

from collections.abc import Mapping

from diagevo.train.sim.questions import algebra, combinatorics, number_theory, percentages, probability
from diagevo.train.sim.questions.common import Draw, Writer, worded

WRITERS: Mapping[str, Writer] = {
    f"{family}.{writer.__name__}": writer
    for area in (algebra, number_theory, combinatorics, probability, percentages)
    for family, writers in area.FAMILIES.items()
    for writer in writers
}

__all__ = ["WRITERS", "Draw", "Writer", "worded"]
