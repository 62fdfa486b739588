"""The CPU simulator world (``backend = "sim"``): a procedural math world standing in for the
challenger, solver and diagnostician LLMs so ``diagevo train`` runs end to end without a GPU."""
