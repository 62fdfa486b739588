"""Benchmark evaluation on local files (``diagevo eval``): loaders for every benchmark of
Table 1 in its public format, grading, greedy pass@1 and mean@k, resumable per-question
outputs, and scores of a run's checkpoints recorded as ``eval.recorded`` events."""
