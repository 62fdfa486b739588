"""The question writers of the simulator's trap variants, one module per knowledge area.

A writer is code: it draws the numbers of one question of its variant at a difficulty level
(0-3), its true answer and the answer of a solver that falls into the variant's trap. How the
question and its solution steps are worded around them, what a variant is called and how its
cause is worded are data, in ``families.toml``. ``WRITERS`` joins the two: a variant's key
``"family.variant"`` names its writer.
"""

from __future__ import annotations

from collections.abc import Mapping

from diagevo.train.sim.questions import algebra, combinatorics, number_theory, percentages, probability
from diagevo.train.sim.questions.common import Draw, Writer, worded

WRITERS: Mapping[str, Writer] = {
    "extraneous_roots.radical_sign": algebra.radical_sign,
    "extraneous_roots.rational_pole": algebra.rational_pole,
    "extraneous_roots.abs_of_square": algebra.abs_of_square,
    "extraneous_roots.plus_minus_root": algebra.plus_minus_root,
    "sign_flip_inequality.divide_negative": algebra.divide_negative,
    "sign_flip_inequality.reciprocal": algebra.reciprocal,
    "sign_flip_inequality.square_bound": algebra.square_bound,
    "sign_flip_inequality.abs_bound": algebra.abs_bound,
    "amgm_equality.endpoint_lower": algebra.amgm_lower,
    "amgm_equality.endpoint_upper": algebra.amgm_upper,
    "amgm_equality.integer_equality": algebra.amgm_integer,
    "amgm_equality.negative_terms": algebra.amgm_negative,
    "log_domain.argument_positive": algebra.log_argument,
    "log_domain.base_domain": algebra.log_base,
    "log_domain.power_rule": algebra.log_power,
    "negative_remainder.negated_residue": number_theory.negated_residue,
    "negative_remainder.floor_quotient": number_theory.floor_quotient,
    "negative_remainder.negative_congruence": number_theory.negative_congruence,
    "units_digit_cycle.cycle_index": number_theory.cycle_index,
    "units_digit_cycle.zero_remainder": number_theory.zero_remainder,
    "units_digit_cycle.exponent_mod_ten": number_theory.exponent_mod_ten,
    "inclusive_counting.inclusive_range": number_theory.inclusive_range,
    "inclusive_counting.exclusive_range": number_theory.exclusive_range,
    "inclusive_counting.closed_loop": number_theory.closed_loop,
    "inclusion_exclusion.union_two": combinatorics.union_two,
    "inclusion_exclusion.neither_complement": combinatorics.neither,
    "inclusion_exclusion.three_sets": combinatorics.three_sets,
    "inclusion_exclusion.exactly_one": combinatorics.exactly_one,
    "circular_arrangements.round_table": combinatorics.round_table,
    "circular_arrangements.adjacent_block": combinatorics.adjacent_block,
    "circular_arrangements.necklace_reflection": combinatorics.necklace,
    "circular_arrangements.numbered_seats": combinatorics.numbered_seats,
    "polygon_diagonals.sides_excluded": combinatorics.sides_excluded,
    "polygon_diagonals.one_vertex": combinatorics.one_vertex,
    "polygon_diagonals.double_count": combinatorics.ordered_ends,
    "sampling_without_replacement.both_same": probability.both_same,
    "sampling_without_replacement.one_of_each": probability.one_of_each,
    "sampling_without_replacement.at_least_one": probability.at_least_one,
    "sampling_without_replacement.second_draw": probability.second_draw,
    "harmonic_average_speed.round_trip": probability.round_trip,
    "harmonic_average_speed.equal_times": probability.equal_times,
    "harmonic_average_speed.unequal_legs": probability.unequal_legs,
    "harmonic_average_speed.work_rate": probability.work_rate,
    "successive_percentages.up_then_down": percentages.up_then_down,
    "successive_percentages.compound_years": percentages.compound_years,
    "successive_percentages.points_vs_percent": percentages.points_vs_percent,
    "reverse_percentage.undo_discount": percentages.undo_discount,
    "reverse_percentage.undo_raise": percentages.undo_raise,
    "reverse_percentage.tax_inclusive": percentages.tax_inclusive,
    "reverse_percentage.percent_less": percentages.percent_less,
}

__all__ = ["WRITERS", "Draw", "Writer", "worded"]
