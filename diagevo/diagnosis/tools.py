"""What :func:`diagevo.diagnose` runs with, built in one place for the CLI and for Python: the
diagnostician (the paper's LLM one, or the offline heuristic), the embedder (the local MiniLM
model by default) and the vector index kept beside the database.

A trainer that passes its own objects builds them with these constructors; one that passes
names (``diagnostician="heuristic"``, ``llm_url=...``) gets the same objects built here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from diagevo.config.base import config_error
from diagevo.config.errors import ConfigError
from diagevo.config.sections import IN_PROCESS_EMBEDDERS, DiagnosisConfig
from diagevo.diagnosis import embedder
from diagevo.diagnosis.calibration import thresholds_for
from diagevo.diagnosis.heuristic import HeuristicDiagnostician
from diagevo.diagnosis.interface import Diagnostician, Embedder
from diagevo.diagnosis.llm import LLMDiagnostician
from diagevo.diagnosis.static import StaticEmbedder
from diagevo.errors import BadInput
from diagevo.generation.openai_client import OpenAIClient, check_endpoint
from diagevo.log import EventReader
from diagevo.text.calls import validated
from diagevo.views.index import VectorIndex, kept_index_path

DIAGNOSTICIANS = ("llm", "heuristic")
"""The diagnosticians by name: ``llm`` (the paper's, Prompts 1-4 sent to an OpenAI-compatible
endpoint) and ``heuristic`` (offline rules on the final answer, not the paper's diagnostician)."""


def diagnosis_config(cfg: DiagnosisConfig | None = None, **overrides: Any) -> DiagnosisConfig:
    """``cfg`` (default: the built-in diagnosis config) with the ``overrides`` that are not None
    (``llm_url``, ``model``, ``embedder``, ``embed_model``, ``concurrency`` ...)."""
    base = cfg if cfg is not None else DiagnosisConfig()
    values = {k: v for k, v in overrides.items() if v is not None}
    if not values:
        return base
    out = base.model_copy()
    try:
        for name, value in values.items():
            setattr(out, name, value)  # checked on assignment, as the config file's value is
    except ConfigError as exc:
        raise config_error({**exc.error, "loc": ("diagnosis", *exc.error["loc"])}, type(base)) from None
    return out


def _api_key(cfg: DiagnosisConfig) -> str | None:
    return cfg.api_key.get_secret_value() if cfg.api_key else None


@validated
def make_embedder(spec: str = "static", model: str | None = None, api_key: str | None = None) -> Embedder:
    """The embedder: ``"static"`` (MiniLM distilled to token vectors, in every install; the
    default), ``"local"`` (the full MiniLM, the ``embed`` extra) or an OpenAI-compatible
    embeddings base URL serving ``model``."""
    if spec == "static":
        return StaticEmbedder()
    if spec == "local":
        return embedder.LocalEmbedder()
    return embedder.APIEmbedder(spec, model or embedder.LOCAL_MODEL_NAME, api_key)


def embedder_for(cfg: DiagnosisConfig) -> Embedder:
    """The embedder ``cfg`` names (``diagnosis.embedder``, ``diagnosis.embed_model``)."""
    return make_embedder(cfg.embedder, cfg.embed_model, _api_key(cfg))


@validated
def llm_diagnostician(
    cfg: DiagnosisConfig | None = None, *, llm_url: str | None = None, model: str | None = None, **client: Any
) -> LLMDiagnostician:
    """The paper's diagnostician: Prompts 1-4 sent to ``llm_url`` (default: ``diagnosis.llm_url``)
    as ``model``, with the retries, timeouts and concurrency of ``cfg``; ``client``: the
    OpenAI client's other options (``backoff_s`` ...)."""
    cfg = diagnosis_config(cfg, llm_url=llm_url, model=model)
    check_name("llm", cfg)
    options = {"concurrency": cfg.concurrency, "timeout_s": cfg.request_timeout_s, "max_retries": cfg.max_retries}
    return LLMDiagnostician(
        OpenAIClient(cfg.llm_url or "", api_key=_api_key(cfg), **{**options, **client}),
        cfg.model,
        min_words=cfg.min_words,
        max_words=cfg.max_words,
        failure_timeout_s=cfg.failure_timeout_s,
    )


@validated
def heuristic_diagnostician(embedder: Embedder, cfg: DiagnosisConfig | None = None) -> Diagnostician:
    """The offline rule-based stand-in (not the paper's LLM diagnostician), at the calibrated
    thresholds of ``embedder``."""
    cfg = cfg if cfg is not None else DiagnosisConfig()
    th = thresholds_for(cfg, embedder.name)
    return HeuristicDiagnostician(embedder, th.dup, th.merge, cfg.min_words, cfg.max_words, answers=True)


def check_name(name: str, cfg: DiagnosisConfig) -> None:
    """Refuse, before anything is built, a diagnostician's name not in :data:`DIAGNOSTICIANS`,
    and ``llm`` without an endpoint."""
    if name not in DIAGNOSTICIANS:
        raise BadInput(f"diagnostician {name[:40]!r}: use 'llm' (the paper's) or 'heuristic' (offline rules)")
    if name == "llm" and not cfg.llm_url:
        raise BadInput(
            "no diagnostician endpoint: give llm_url (diagnosis.llm_url), or diagnostician='heuristic' to try "
            "things offline"
        )


def diagnostician_for(name: str, cfg: DiagnosisConfig, embedder: Embedder) -> Diagnostician:
    """The diagnostician called ``name`` (:data:`DIAGNOSTICIANS`), built from ``cfg``."""
    check_name(name, cfg)
    return heuristic_diagnostician(embedder, cfg) if name == "heuristic" else llm_diagnostician(cfg)


def check_endpoints(
    cfg: DiagnosisConfig, diagnostician: Diagnostician, *, embedder: bool = True, timeout_s: float | None = None
) -> bool:
    """Ask the endpoints a call uses once, before anything is appended (``GET /models``, within
    ``timeout_s``, by default ``diagnosis.request_timeout_s`` up to 10 s): an endpoint that is
    down fails the call, not every failure of the round one by one. The LLM diagnostician's
    server must list its model when it lists any (:class:`~diagevo.generation.openai_client.ModelNotServed`);
    with ``embedder``, the embeddings endpoint ``cfg`` names is asked too. True when the
    diagnostician's server lists no model at all (its name could not be checked: the caller says so)."""
    timeout = timeout_s or min(cfg.request_timeout_s, 10.0)
    unlisted = False
    if isinstance(diagnostician, LLMDiagnostician):
        client, model = diagnostician.client, diagnostician.model_name
        listed = check_endpoint(
            client.base_url, api_key=client.api_key, timeout_s=timeout, what="diagnostician", model=model
        )
        unlisted = listed is None
    if embedder and cfg.embedder not in IN_PROCESS_EMBEDDERS:
        check_endpoint(cfg.embedder, api_key=_api_key(cfg), timeout_s=timeout, what="embedder")
    return unlisted


@validated
def vector_index(store: EventReader, run: str, embedder: Embedder, path: Path | str | None = None) -> VectorIndex:
    """The run's vector index, kept in step with the log across rounds so that a round embeds only
    its new texts; on disk (LanceDB, the ``index`` extra) at ``path``, by default in the database's
    folder (``dir/x.db`` -> ``dir/x.diagevo/index.lance``; else ``./diagevo-DB-KEY.diagevo/index.lance``)
    for an embedder whose vectors cost a model or an endpoint (the static vectors stay in memory:
    they cost less to compute again than to read)."""
    return VectorIndex(embedder, Path(path) if path is not None else kept_index_path(store.url, embedder), run)
