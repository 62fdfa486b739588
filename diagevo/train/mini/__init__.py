"""The mini world: arithmetic a tiny character-level model learns on a CPU, and its model pair."""
