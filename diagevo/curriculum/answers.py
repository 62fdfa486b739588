"""Final answers of solver responses: extraction, normalisation and the cheap comparison keys.

Everything here is pure string work with bounded cost; the expensive symbolic check lives in
:mod:`diagevo.curriculum.equivalence`.
"""

from __future__ import annotations

import re
from fractions import Fraction

_BOXED = "\\boxed"
_SPACING = re.compile(r"\\[,!;:> ]|\\q?quad\b|\\displaystyle\b|\\left\b|\\right\b")
_WS = re.compile(r"\s+")
# Plain rationals only (no exponents: Fraction("1e999999999") would take forever).
_INT = re.compile(r"[+-]?\d{1,40}")
_DEC = re.compile(r"[+-]?\d{0,40}\.\d{1,40}")
_SLASH = re.compile(r"([+-]?\d{1,40})/(\d{1,40})")
_FRAC = re.compile(r"([+-]?)\\frac\{([+-]?\d{1,40})\}\{(\d{1,40})\}")
_FRAC_SHORT = re.compile(r"([+-]?)\\frac(\d)(\d)")


def _braced(text: str, start: int) -> tuple[str, int] | None:
    """Content of the brace group opening at ``text[start] == "{"`` and the index after it;
    None when the group never closes (a truncated response)."""
    depth = 0
    for i in range(start, len(text)):
        ch = text[i]
        if ch == "{" and text[i - 1] != "\\":
            depth += 1
        elif ch == "}" and text[i - 1] != "\\":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i], i + 1
    return None


def _boxed_content(text: str, pos: int) -> str | None:
    """Argument of the ``\\boxed`` command at ``pos``: ``\\boxed{...}`` or ``\\boxed x``."""
    i = pos + len(_BOXED)
    if i < len(text) and (text[i].isalpha()):
        return None  # a longer command such as \boxedx; not an answer box
    while i < len(text) and text[i] in " \t":
        i += 1
    if i >= len(text):
        return None
    if text[i] == "{":
        group = _braced(text, i)
        return None if group is None else group[0]
    if i == pos + len(_BOXED):
        return None  # "\boxed5": not valid LaTeX for an argument without a space
    # "\boxed 5" takes the rest of the token, up to whitespace or "$"
    m = re.match(r"[^\s$]+", text[i:])
    return m.group(0) if m else None


def normalize_answer(answer: str) -> str:
    """Light, meaning-preserving clean-up used for labels: outer ``$``, spacing commands,
    ``\\dfrac``/``\\tfrac``, whitespace runs and a trailing full stop."""
    s = answer.strip()
    while len(s) >= 2 and s.startswith("$") and s.endswith("$"):
        s = s[1:-1].strip()
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = _SPACING.sub(" ", s)
    s = _WS.sub(" ", s).strip()
    if s.endswith(".") and not s[:-1].rstrip().endswith("\\"):
        s = s[:-1].rstrip()
    return s


def extract_answer(response: str | None) -> str | None:
    """The normalised content of the last ``\\boxed`` in ``response``.

    Only the last box counts: when it is unclosed (a truncated response) or empty, the response
    has no answer, rather than falling back to an earlier, possibly intermediate, box.
    """
    if not response:
        return None
    pos = response.rfind(_BOXED)
    while pos != -1:
        nxt = pos + len(_BOXED)
        if nxt < len(response) and response[nxt].isalpha():
            pos = response.rfind(_BOXED, 0, pos)  # \boxedfoo is another command
            continue
        content = _boxed_content(response, pos)
        if content is None:
            return None
        content = normalize_answer(content)
        return content or None
    return None


def answer_key(answer: str) -> str:
    """Key for the exact-string fast path: normalised and without any whitespace (LaTeX math
    ignores spaces), so ``x + 1`` and ``x+1`` share a key."""
    return _WS.sub("", normalize_answer(answer))


def simple_number(key: str) -> Fraction | None:
    """The exact value of a key that is a plain integer, decimal or fraction (``3``, ``-0.25``,
    ``7/2``, ``\\frac{7}{2}``, ``-\\frac{7}{2}``); None for anything else.

    Two simple numbers are equivalent iff their values are equal, with no call to math-verify.
    """
    if _INT.fullmatch(key) or _DEC.fullmatch(key):
        return Fraction(key)
    m = _SLASH.fullmatch(key)
    sign = ""
    if m:
        num, den = m.group(1), m.group(2)
    else:
        m = _FRAC.fullmatch(key) or _FRAC_SHORT.fullmatch(key)
        if not m:
            return None
        sign, num, den = m.group(1), m.group(2), m.group(3)
    if int(den) == 0:
        return None
    value = Fraction(int(num), int(den))
    return -value if sign == "-" else value
