"""Final answers of solver responses: extraction, normalisation and the cheap comparison keys.

Everything here is pure string work with bounded cost; the expensive symbolic check lives in
:mod:`diagevo.curriculum.equivalence`.
"""

from __future__ import annotations

import re
from fractions import Fraction

from diagevo.curriculum.costs import refusal

_BOXED = "\\boxed"
# a spacing command, not the second half of a row break (a matrix row ends with two backslashes)
_SPACING = re.compile(r"(?<!\\)\\[,;:> ]|\\q?quad\b|\\displaystyle\b|\\left\b|\\right\b")
# \! is a negative thin space: it glues (MATH writes 10,\!080 for ten thousand and eighty): _glue
# a number with thousands separators, optionally in dollars: 10,080  1,000,000.5  \$32,348
_THOUSANDS = re.compile(r"(?:\\\$)?([+-]?[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?)")  # 0,111 is a decimal
# one comma between two digit runs, nothing else: 1,22  0,111  1000,99 (a decimal comma, or a pair)
_COMMA_PAIR = re.compile(r"([+-]?\d{1,40}),(\d{1,40})")
_BRACED_COMMA = re.compile(r"\{\s*,\s*\}")
_WS = re.compile(r"\s+")
# Plain rationals only (no exponents: Fraction("1e999999999") would take forever).
_INT = re.compile(r"[+-]?\d{1,40}")
_DEC = re.compile(r"[+-]?\d{0,40}\.\d{1,40}")
_SLASH = re.compile(r"([+-]?\d{1,40})/(\d{1,40})")
_FRAC = re.compile(r"([+-]?)\\frac\{([+-]?\d{1,40})\}\{(\d{1,40})\}")
_FRAC_SHORT = re.compile(r"([+-]?)\\frac(\d)(\d)")
MAX_ANSWER_CHARS = 2000


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


def _glue(text: str) -> str:
    """Every run of ``\\!`` (negative thin spaces, with the whitespace around them) joins its
    neighbours, except a command name and a letter (``\\int\\!x``), which keep one space. One
    pass, each piece stripped once: a regular expression would look at a long run of blanks once
    for each of them."""
    parts = text.split("\\!")
    if len(parts) == 1:
        return text
    out: list[str] = []
    kept = parts[0].rstrip()  # the blanks before a \! belong to its run
    k = 1
    while k < len(parts):
        while k < len(parts) - 1 and not parts[k].strip():  # only blanks between two \!: one run
            k += 1
        after = parts[k].lstrip()
        out += [kept, " " if kept[-1:].isalpha() and after[:1].isalpha() else ""]
        kept = after.rstrip() if k < len(parts) - 1 else after
        k += 1
    out.append(kept)
    return "".join(out)


_DOLLARS = re.compile(r"\$+")
_BLANKS = re.compile(r"\s*")


def _without_dollars(s: str) -> str:
    """``s`` (stripped) without the ``$`` pairs around it, the blanks inside each pair stripped
    too; indices move over whole runs of ``$`` and the result is copied once (one copy per pair
    costs the square of the length)."""
    if len(s) < 2 or s[0] != "$" or s[-1] != "$":
        return s
    r = s[::-1]
    i, j = 0, len(s)  # s[i:j] is what is left
    while j - i >= 2 and s[i] == "$" and s[j - 1] == "$":
        front = _DOLLARS.match(s, i, j)
        back = _DOLLARS.match(r, len(s) - j, len(s) - i)
        assert front is not None and back is not None  # both ends are "$"
        k = min(front.end() - i, back.end() - (len(s) - j), (j - i) // 2)  # pairs with nothing between
        i, j = i + k, j - k
        i = _BLANKS.match(s, i, j).end()  # type: ignore[union-attr]
        j = len(s) - _BLANKS.match(r, len(s) - j, len(s) - i).end()  # type: ignore[union-attr]
    return s[i:j]


def normalize_answer(answer: str) -> str:
    """Light, meaning-preserving clean-up used for labels: outer ``$``, spacing commands,
    ``\\dfrac``/``\\tfrac``, whitespace runs, a trailing full stop, and thousands separators of a
    number written as MATH does (``10,\\!080``, ``10{,}080``, ``\\$32,\\!348`` -> ``10080``,
    ``10080``, ``32348``). A comma followed by a space stays a list: ``12, 345``."""
    s = _without_dollars(answer.strip())
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = _BRACED_COMMA.sub(",", _glue(s))
    s = _SPACING.sub(" ", s)
    s = _WS.sub(" ", s).strip()
    if s.endswith((".", ",")) and not s[:-1].rstrip().endswith("\\") and not s.endswith("..."):
        s = s[:-1].rstrip()  # sentence punctuation: a list never ends with a comma
    if m := _THOUSANDS.fullmatch(s):  # 10,080 is ten thousand and eighty, not the pair (10, 80)
        s = m.group(1).replace(",", "")
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


def decimal_comma(key: str) -> Fraction | None:
    """The value of a key read with a decimal comma (``1,22`` -> 1.22, ``0,111`` -> 0.111);
    None unless the key is exactly two digit runs joined by one comma. Such a key is ambiguous
    (``-2,1`` is also the pair of roots -2 and 1), so it is read this way only against an answer
    written as a decimal (see ``EquivalenceChecker.equivalent``)."""
    m = _COMMA_PAIR.fullmatch(key)
    return None if m is None else Fraction(f"{m.group(1)}.{m.group(2)}")


def is_decimal(key: str) -> bool:
    """Whether a key is a number written with a decimal point."""
    return _DEC.fullmatch(key) is not None


def plausible_final_answer(answer: str) -> bool:
    """Whether ``answer`` could be the final answer of a question of the paper's kind and be
    checked within bounds: only these go to the symbolic check.

    Refused: over :data:`MAX_ANSWER_CHARS` characters, or what :func:`~diagevo.curriculum.costs.refusal`
    reads as unbounded from its values (a limit or an integral still to be evaluated, an exponent
    of 100 or more on an expression however it is spelled, a power whose exact value passes 2^16
    bits, factorials of more than 5,000 in all, groups nested over 24 deep, a derivative of order
    over 4, a sum or product over a numeric range of more than 1,000 terms). A sum with symbolic
    bounds (``\\sum_{k=0}^{n-1} F_k F_{n-k-1}``) is checked. Refused answers still agree with
    an identical answer (keys are compared first)."""
    return len(answer) <= MAX_ANSWER_CHARS and refusal(answer) is None


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
