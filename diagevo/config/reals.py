"""What counts as a real number where a trainer hands diagevo one (a metric, a weight).

A trainer's figures come from numpy and torch as often as from Python: a numpy scalar, a 0-d
array or a one-element tensor is the number it holds. Booleans, strings, NaN, infinities and
integers too large for a float are not numbers a log can store and fold (a JSON reader would
turn them into ``null`` or refuse them), so they are refused here, as :class:`BadInput` naming
what was given.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from diagevo.errors import BadInput
from diagevo.text.parsing import quoted


def _shown(value: Any) -> str:
    """``value`` as a message shows it: its repr, shortened (a 400-digit integer is not a line)."""
    try:
        return quoted(value, 60)
    except ValueError:  # an int over Python's digit limit for repr()
        return f"an integer of {value.bit_length()} bits"


def _unwrapped(value: Any) -> Any:
    """The Python number a numpy scalar, a 0-d array or a one-element tensor holds; anything
    else as it is."""
    if isinstance(value, bool | int | float | str | bytes) or not callable(getattr(value, "item", None)):
        return value
    try:
        return value.item()
    except (ValueError, RuntimeError, TypeError):  # an array or tensor of several numbers
        return value


def real_number(value: Any, what: str) -> int | float:
    """``value`` as a finite int or float (a numpy or torch scalar unwrapped), else
    :class:`BadInput` saying that ``what`` (``metric 'acc'``) must be a finite number."""
    number = _unwrapped(value)
    if isinstance(number, bool) or not isinstance(number, numbers.Real):
        raise BadInput(f"{what} must be a number, not {_shown(value)}")
    if isinstance(number, numbers.Integral):
        try:
            float(number)
        except OverflowError:
            raise BadInput(f"{what} is too large to store as a number: {_shown(value)}") from None
        return int(number)
    as_float = float(number)
    if not math.isfinite(as_float):
        raise BadInput(f"{what} must be a finite number, not {_shown(value)}")
    return as_float
