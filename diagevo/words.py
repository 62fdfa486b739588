"""Counts in words, for messages the user reads."""

from __future__ import annotations


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``1 cause``, ``2 causes`` (``many`` for an irregular plural)."""
    return f"{n} {noun if n == 1 else (many or noun + 's')}"


def times(n: int) -> str:
    """``once``, ``twice``, ``3 times``."""
    return {1: "once", 2: "twice"}.get(n, f"{n} times")
