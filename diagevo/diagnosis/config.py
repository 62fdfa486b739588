"""The diagnostician's settings: how its endpoint and the embedder are reached (``[diagnosis]``).

``[diagnosis]`` is shared with the method: Table 9's θ_dup, θ_merge and K and the phrase lengths
of Appendix J are the method's (:class:`diagevo.config.DiagnosisRules`, checked by the log);
the endpoint, the model asked, the key, the timeouts and the retries are the diagnostician's,
declared here. :class:`DiagnosisConfig` is the whole section, as the pipeline reads it.
"""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator

from diagevo.config import DiagnosisRules
from diagevo.sections import Section
from diagevo.urls import endpoint_problem


class DiagnosticianConfig(Section):
    """``[diagnosis]``'s fields that say how the diagnostician and the embedder are reached."""

    llm_url: str | None = Field(
        default=None,
        description="Base URL of an OpenAI-compatible chat endpoint serving the diagnostician; unset: the backend's "
        "own (the simulator's, or a heuristic one for hf).",
    )
    model: str = Field(
        default="Qwen/Qwen3-4B-Instruct-2507",
        description="Diagnostician model name sent to llm_url (the paper's default).",
    )
    api_key: SecretStr | None = Field(
        default=None,
        description=(
            "API key of llm_url and of an embeddings endpoint; unset: $DIAGEVO_LLM_API_KEY. Never stored or printed."
        ),
    )
    concurrency: int = Field(
        default=64,
        ge=1,
        description="Most diagnostician requests in flight at once (Prompt 1 runs for every failure concurrently).",
    )
    request_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="Total deadline of one diagnostician request, in seconds: connecting and reading the whole "
        "reply (a server that drips its reply is cut off there).",
    )
    failure_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="Total deadline of one failure's requests to a stage of the diagnostician, retries and the "
        "re-ask included, in seconds: what a slow or dripping server can cost a failure. The other failures of "
        "the round go on meanwhile.",
    )
    max_retries: int = Field(
        default=3,
        ge=0,
        le=20,
        description="Retries of a request after a timeout, a connection error, an HTTP 429 or 5xx or an unusable "
        "response, with exponential backoff.",
    )
    outage_wait_s: float = Field(
        default=600.0,
        ge=0,
        le=86400,
        description="How long the training loop waits for a diagnostician that stopped answering (unreachable, or "
        "too many of a round's requests failing at the endpoint), asking again with backoff, before it stops the "
        "run with the command that resumes it (the round uncommitted). 0: stop at once.",
    )
    outage_backoff_s: float = Field(
        default=5.0,
        gt=0,
        le=3600,
        description="The first wait before the training loop asks a diagnostician that stopped answering again; each "
        "wait doubles, up to a minute.",
    )
    embedder: str = Field(
        default="static",
        description="'static': MiniLM distilled to token vectors, in every install; 'local': the full MiniLM "
        "model (the embed extra, with torch); anything else is the base URL of an OpenAI-compatible embeddings "
        "endpoint.",
    )
    embed_model: str = Field(
        default="all-MiniLM-L6-v2",
        description=(
            "Model name sent to an embeddings endpoint (the paper: text-embedding-v4); the static and local "
            "embedders are always MiniLM."
        ),
    )

    @field_validator("llm_url", "embedder")
    @classmethod
    def _an_endpoint(cls, value: str | None) -> str | None:
        """An endpoint's URL as :func:`~diagevo.urls.endpoint_problem` takes it (credentials
        refused: the key goes in the environment), ``embedder`` also ``"local"`` and ``"static"``."""
        problem = None if value is None or value in ("local", "static") else endpoint_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


class DiagnosisConfig(DiagnosisRules, DiagnosticianConfig):
    """``[diagnosis]``: the diagnostician pipeline (Sec. 2.3, Appendix J): how it is reached
    (``DiagnosticianConfig``, declared beside the pipeline) and the method's rules it follows
    (``diagevo.config.DiagnosisRules``, which the log checks)."""

    model_config = Section.model_config
