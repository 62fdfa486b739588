"""Counts in words, and the names a mistyped one most likely means, for messages the user reads."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``1 cause``, ``2 causes`` (``many`` for an irregular plural)."""
    return f"{n} {noun if n == 1 else (many or noun + 's')}"


def times(n: int) -> str:
    """``once``, ``twice``, ``3 times``."""
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def close_to(word: str, known: Iterable[str], n: int = 3) -> list[str]:
    """The ``known`` names ``word`` most likely means: those equal to it but for case, else the
    closest by :func:`difflib.get_close_matches`, case aside (none for a word over 200 characters)."""
    if len(word) > 200:
        return []
    folded: dict[str, str] = {}
    for name in known:
        folded.setdefault(name.casefold(), name)
    if word.casefold() in folded:
        return [folded[word.casefold()]]
    return [folded[m] for m in difflib.get_close_matches(word.casefold(), list(folded), n=n, cutoff=0.6)]


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` (did you mean 'demo'?)`` naming what :func:`close_to` finds (quoted: ids are free text),
    or nothing."""
    return you_mean([repr(name) for name in close_to(word, known) if name != word])


def you_mean(shown: Sequence[str]) -> str:
    """`` (did you mean A or B?)`` of names already written as the message shows them, or nothing."""
    return f" (did you mean {' or '.join(shown)}?)" if shown else ""
