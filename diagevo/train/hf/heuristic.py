"""The hf backend's offline diagnostician lives in :mod:`diagevo.diagnosis.heuristic` (where
``diagevo diagnose --diagnostician heuristic`` uses it too); these names stay importable here."""

from diagevo.diagnosis.heuristic import (
    MODEL,
    HeuristicDiagnostician,
    cause_for,
    first_departure,
    node_label_for,
    steps_of,
)

__all__ = ["MODEL", "HeuristicDiagnostician", "cause_for", "first_departure", "node_label_for", "steps_of"]
