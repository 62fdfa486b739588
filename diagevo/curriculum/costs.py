"""What an answer would cost sympy, read from the values it writes rather than its spelling.

math-verify's cost is set by values: an exponent of ``(100)``, ``{{100}}``, ``5\\cdot 20`` or
``2^{7}`` is an exponent of 100 or more however it is spelled, and ``10000!`` written eight times
is eight factorials of 10,000. :func:`refusal` reads those values with a small evaluator of integer
arithmetic (digits, ``+ - * \\cdot \\times ^``, groups) that never computes a number larger than
64 bits: beyond that it carries only an upper bound of the number's size in bits. It refuses only
what cannot be checked within bounds whatever the machine: its limits sit far above every answer
of MATH-500, GSM8K and AIME 2024/2025 and of math-verify's own test pairs. What it lets through
is still bounded per operation in the worker (a budget of calls, a CPU-time limit) and per batch
in :mod:`diagevo.curriculum.equivalence`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

MAX_SYMBOLIC_EXPONENT = 100  # |e| from here on, on anything but a number: sympy's slow case
MAX_EXPANSION_TERMS = 10_000  # terms of (a_1 + ... + a_k)^e once expanded: C(e+k-1, k-1)
MAX_NUMBER_BITS = 1 << 16  # an exact power past this size (about 19,700 digits)
MAX_FACTORIAL_SUM = 5_000  # the arguments of an answer's factorials, added
MAX_DEPTH = 24  # groups ({, (, [) nested in one another
MAX_DERIVATIVE_ORDER = 4  # \frac{d^n}{dx^n}: each order can double the expression
MAX_SUM_TERMS = 1_000  # a sum or product over a numeric range of more terms
# an operation still to be carried out whose cost no value bounds: a limit or an integral
_UNBOUNDED = re.compile(r"\\(?:lim(?:sup|inf)?|int|iint|iiint|oint)(?![A-Za-z])")
_OPERATORS = ("\\sum", "\\prod")
_TOKEN = re.compile(r"\d+|\\cdot|\\times|\\left|\\right|\\[A-Za-z]+|.")
_DERIVATIVE = re.compile(r"\\frac\{(?:d|\\partial)\^")
_EXACT_BITS = 64


@dataclass(frozen=True)
class Num:
    """A value of the evaluator: ``exact`` while it fits in 64 bits, and always an upper bound of
    its size in bits (``inf`` when not even that can be bounded)."""

    exact: int | None
    bits: float

    @classmethod
    def of(cls, value: int) -> Num:
        return cls(value, max(math.log2(abs(value)), 1.0) if value else 1.0)

    @classmethod
    def bound(cls, bits: float) -> Num:
        return cls(None, bits)


def _shrink(value: int) -> Num:
    return Num.of(value) if value.bit_length() <= _EXACT_BITS else Num.bound(float(value.bit_length()))


def _add(a: Num, b: Num, sign: int) -> Num:
    if a.exact is not None and b.exact is not None:
        return _shrink(a.exact + sign * b.exact)
    return Num.bound(max(a.bits, b.bits) + 1)


def _mul(a: Num, b: Num) -> Num:
    if a.exact is not None and b.exact is not None:
        return _shrink(a.exact * b.exact)
    return Num.bound(a.bits + b.bits)


def _pow(base: Num, expt: Num) -> Num:
    if base.exact in (0, 1, -1):
        return base if expt.exact is None or expt.exact >= 0 or base.exact else Num.bound(math.inf)
    if expt.exact is None:
        return Num.bound(math.inf)
    bits = base.bits * abs(expt.exact)  # a negative power: a denominator of that size
    if expt.exact >= 0 and base.exact is not None and bits <= _EXACT_BITS:
        return _shrink(base.exact**expt.exact)
    return Num.bound(bits)


class _Evaluator:
    """Integer arithmetic over LaTeX tokens; ``None`` for anything else (a letter, a command, a
    division), so that only what is a number by its value is read as one."""

    def __init__(self, text: str) -> None:
        self.tokens = [t for t in _TOKEN.findall(text) if t not in ("\\left", "\\right") and not t.isspace()]
        self.i = 0

    def value(self) -> Num | None:
        try:
            num = self._sum()
        except _NotANumber:
            return None
        return num if self.i == len(self.tokens) else None

    def _peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _take(self) -> str:
        tok = self._peek()
        if tok is None:
            raise _NotANumber
        self.i += 1
        return tok

    def _sum(self) -> Num:
        num = self._product()
        while self._peek() in ("+", "-"):
            sign = 1 if self._take() == "+" else -1
            num = _add(num, self._product(), sign)
        return num

    def _product(self) -> Num:
        num = self._unary()
        while self._peek() in ("*", "\\cdot", "\\times", "(", "{", "["):
            if self._peek() in ("*", "\\cdot", "\\times"):
                self._take()
            num = _mul(num, self._unary())
        return num

    def _unary(self) -> Num:
        if self._peek() in ("+", "-"):
            sign = 1 if self._take() == "+" else -1
            return _mul(Num.of(sign), self._unary())
        return self._power()

    def _power(self) -> Num:
        base = self._atom()
        while self._peek() == "!":
            self._take()
            base = factorial_size(base)
        if self._peek() == "^":
            self._take()
            return _pow(base, self._unary())
        return base

    def _atom(self) -> Num:
        tok = self._take()
        if tok.isdigit():
            return _shrink(int(tok))
        closing = {"(": ")", "{": "}", "[": "]"}.get(tok)
        if closing is None:
            raise _NotANumber
        num = self._sum()
        if self._take() != closing:
            raise _NotANumber
        return num


class _NotANumber(Exception):
    pass


def factorial_size(n: Num) -> Num:
    """``n!``: exact while small, else an upper bound of its bits (``n log2 n``)."""
    if n.exact is None or n.exact < 0:
        return Num.bound(math.inf)
    if n.exact <= 20:
        return Num.of(math.factorial(n.exact))
    return Num.bound(n.exact * math.log2(n.exact))


def number(text: str) -> Num | None:
    """The value of ``text`` read as integer arithmetic, or None when it is not a number."""
    return _Evaluator(text).value() if text else None


def _brackets(s: str) -> tuple[dict[int, int], int]:
    """Each closing bracket's opening one (unescaped ``{}``, ``()``, ``[]``), and the deepest
    nesting; unbalanced brackets are left out."""
    pairs = {"}": "{", ")": "(", "]": "["}
    opened: dict[int, int] = {}
    stack: list[int] = []
    deepest = 0
    for i, ch in enumerate(s):
        if i and s[i - 1] == "\\":
            continue
        if ch in "{([":
            stack.append(i)
            deepest = max(deepest, len(stack))
        elif ch in pairs and stack and s[stack[-1]] == pairs[ch]:
            opened[i] = stack.pop()
    return opened, deepest


def _argument(s: str, i: int) -> tuple[str, int]:
    """The argument written at ``s[i]`` (a brace group's content, a command name, one character)
    and the index after it."""
    if i >= len(s):
        return "", i
    if s[i] == "{":
        depth = 0
        for j in range(i, len(s)):
            if s[j] == "{" and s[j - 1] != "\\":
                depth += 1
            elif s[j] == "}" and s[j - 1] != "\\":
                depth -= 1
                if depth == 0:
                    return s[i + 1 : j], j + 1
        return s[i + 1 :], len(s)
    m = re.compile(r"\\[A-Za-z]+|.").match(s, i)
    assert m is not None
    return m.group(0), m.end()


def _base(s: str, i: int, opened: dict[int, int]) -> tuple[str, int]:
    """What the ``^`` or ``!`` at ``s[i]`` applies to, and where it starts: a bracket group
    (with its brackets), a run of digits, or one letter or command."""
    j = i - 1
    if j < 0:
        return "", i
    if j in opened:
        return s[opened[j] : i], opened[j]
    if s[j].isdigit():
        k = j
        while k > 0 and s[k - 1].isdigit():
            k -= 1
        return s[k:i], k
    m = re.search(r"\\[A-Za-z]+$|.$", s[:i])
    assert m is not None
    return m.group(0), m.start()


def _terms(group: str) -> int:
    """Additive terms of a bracketed group (``(x+y-z)``: 3), counted at its own level."""
    inner = group[1:-1] if group[:1] in "({[" else group
    depth, terms, previous = 0, 1, ""
    for ch in inner:
        if ch in "{([":
            depth += 1
        elif ch in "})]":
            depth -= 1
        elif ch in "+-" and depth == 0 and previous not in ("", "+", "-", "^", "_", "=", ","):
            terms += 1
        if not ch.isspace():
            previous = ch
    return terms


def _an_operator_bound(s: str, start: int) -> bool:
    """Whether the group at ``start`` is the range of a sum or product (``\\sum_{k=1}^{n}``)."""
    head = s[:start]
    return head.endswith(tuple(op + "_" for op in _OPERATORS)) or head.endswith(_OPERATORS)


def _power(s: str, i: int, opened: dict[int, int]) -> str | None:
    """Why the power at ``s[i] == "^"`` cannot be bounded, or None."""
    base, start = _base(s, i, opened)
    if not base or base in _OPERATORS or _an_operator_bound(s, start):
        return None
    expt_text, _ = _argument(s, i + 1)
    expt = number(expt_text)
    if expt is None:
        return None  # a symbolic exponent (2^{n}, 90^\circ): nothing to expand
    value = number(base)
    if value is not None:
        bits = _pow(value, expt).bits
        return f"a power of about {bits:.0f} bits" if bits > MAX_NUMBER_BITS else None
    e = expt.exact
    if e is None or abs(e) >= MAX_SYMBOLIC_EXPONENT:
        return "an exponent of 100 or more on an expression"
    k = _terms(base) if base[:1] in "({[" else 1
    if e > 0 and k > 1 and math.comb(e + k - 1, k - 1) > MAX_EXPANSION_TERMS:
        return f"a power of {k} terms that expands to {math.comb(e + k - 1, k - 1)} terms"
    return None


def _factorials(s: str, opened: dict[int, int]) -> str | None:
    total = 0.0
    for m in re.finditer(r"!(?!=)", s):
        base, _ = _base(s, m.start(), opened)
        value = number(base)
        if value is not None:
            total += math.inf if value.exact is None else abs(value.exact)
    return f"factorials of {total:.0f} in all" if total > MAX_FACTORIAL_SUM else None


def _derivatives(s: str) -> str | None:
    for m in _DERIVATIVE.finditer(s):
        order = number(_argument(s, m.end())[0])
        if order is not None and (order.exact is None or order.exact > MAX_DERIVATIVE_ORDER):
            return "a derivative of high order"
    return None


def _ranges(s: str) -> str | None:
    """A sum or product over a numeric range of more than :data:`MAX_SUM_TERMS` terms."""
    for m in re.finditer(r"\\(?:sum|prod)(?![A-Za-z])", s):
        bounds: dict[str, str] = {}
        i = m.end()
        while i < len(s) and s[i] in "_^" and len(bounds) < 2:
            mark = s[i]
            text, i = _argument(s, i + 1)
            bounds.setdefault(mark, text)
        low = number(bounds.get("_", "").rpartition("=")[2])
        high = number(bounds.get("^", ""))
        if low is not None and high is not None:
            if low.exact is None or high.exact is None or high.exact - low.exact + 1 > MAX_SUM_TERMS:
                return "a sum or product over more terms than can be checked"
    return None


def refusal(answer: str) -> str | None:
    """Why ``answer`` cannot be given to math-verify within bounds, in a few words, or None."""
    s = re.sub(r"\s+", "", answer)
    if _UNBOUNDED.search(s):
        return "a limit or an integral still to be evaluated"
    opened, deepest = _brackets(s)
    if deepest > MAX_DEPTH:
        return f"groups nested {deepest} deep"
    for m in re.finditer(r"\^", s):
        why = _power(s, m.start(), opened)
        if why:
            return why
    return _factorials(s, opened) or _derivatives(s) or _ranges(s)


def weight(answer: str) -> float:
    """How heavy an answer looks to sympy (exponents, factorials, nesting, then length): the side
    of a pair over its limit that takes the blame when neither side is known to be cheap."""
    s = re.sub(r"\s+", "", answer)
    opened, deepest = _brackets(s)
    exponents = 0
    for m in re.finditer(r"\^", s):
        expt = number(_argument(s, m.start() + 1)[0])
        if expt is not None:
            exponents += abs(expt.exact) if expt.exact is not None else 1 << 20
    return exponents * 1000 + deepest * 10 + s.count("!") * 100 + len(s) / 1000
