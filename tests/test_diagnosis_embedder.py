"""The local MiniLM embedder: a text's vector depends on the text alone."""

from __future__ import annotations

import numpy as np

from diagevo.diagnosis.embedder import LocalEmbedder, local_model

X = "fails to check candidate solutions against the original domain after a transformation"
LONG = "a much longer text that pads every other member of its batch to its own length " * 4


def test_a_vector_does_not_depend_on_its_batch_or_on_what_was_cached() -> None:
    """In a batch, padding and the product shapes move a vector by ~1e-7: enough to reorder two
    causes with the same text between an interrupted and an uninterrupted run."""
    alone = LocalEmbedder().embed([X])[0]
    batched = LocalEmbedder().embed(["short", LONG, X])[2]
    warm = LocalEmbedder()
    warm.embed([LONG])  # cached: the next call embeds a different batch
    mixed = warm.embed([LONG, X, "short"])[1]
    assert np.array_equal(alone, batched) and np.array_equal(alone, mixed)
    assert np.allclose(alone, local_model().encode([X], normalize_embeddings=True)[0], atol=1e-6)
    assert abs(float(np.linalg.norm(alone)) - 1.0) < 1e-6
