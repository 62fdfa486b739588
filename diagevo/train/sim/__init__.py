"""The CPU simulator world (``backend = "sim"``): a procedural math world standing in for the
challenger, solver and diagnostician LLMs so ``diagevo train`` runs end to end without a GPU."""

from diagevo.train.sim.backend import SimBackend
from diagevo.train.sim.config import SimParams
from diagevo.train.sim.diagnostician import SimDiagnostician

__all__ = ["SimBackend", "SimDiagnostician", "SimParams"]
