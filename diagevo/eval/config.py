"""``diagevo eval``'s settings (``[eval]``): how benchmarks are sampled and batched."""

from __future__ import annotations

from pydantic import Field

from diagevo.config.base import Count, PositiveShare, Section


class EvalConfig(Section):
    """``[eval]``: ``diagevo eval`` (Sec. 3.1, Appendix E): greedy pass@1 on every benchmark;
    mean@k on AMC and AIME, sampled at the rollout settings of Table 7."""

    samples: Count = Field(default=32, le=1024, description="k of mean@k on AMC and AIME (the paper: AMC mean@32).")
    temperature: float = Field(
        default=1.0, gt=0.0, le=2.0, description="Sampling temperature of mean@k (Table 7: 1.0)."
    )
    top_p: PositiveShare = Field(default=0.99, description="Top-p of mean@k (Table 7: 0.99).")
    max_new_tokens: Count = Field(default=4096, le=131072, description="Longest response in tokens.")
    batch_size: Count = Field(
        default=64, le=100000, description="Questions per generate call; outputs are saved after each."
    )
    seed: int = Field(default=0, ge=0, description="Seed of the sampled responses.")
