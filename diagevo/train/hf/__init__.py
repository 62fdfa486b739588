"""The real-model backend: transformers + TRL GRPO (vLLM on GPUs) and a tiny local model pair."""
