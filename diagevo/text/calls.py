"""A public function's arguments checked by pydantic (``validate_call``) against its annotations,
strictly (a string is no path, bytes are no string, ``"5"`` is no number): a wrong value is a
:class:`~diagevo.errors.BadInput` in one line naming the function, the argument (and the item in
it) and the value, not an ``AttributeError`` from deep inside. The check is built on the first
call, so importing a module stays cheap.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import ConfigDict, ValidationError, validate_call

from diagevo.errors import BadInput
from diagevo.text.parsing import quoted

F = TypeVar("F", bound=Callable[..., Any])

_OPENING = "Input should be "
_CONFIG = ConfigDict(strict=True, arbitrary_types_allowed=True, defer_build=True)


def validated(func: F) -> F:
    """``func`` with its arguments validated; what pydantic refuses is :class:`BadInput`."""
    check = validate_call(config=_CONFIG)(func)
    names = tuple(inspect.signature(func).parameters)

    @functools.wraps(func)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return check(*args, **kwargs)
        except ValidationError as exc:
            if exc.title != func.__qualname__:  # a refusal of the function's own, not of its arguments
                raise
            raise BadInput(f"{func.__qualname__}: {refused(exc, names)}") from None

    return call  # type: ignore[return-value]


def refused(exc: ValidationError, names: Sequence[str]) -> str:
    """The first argument ``exc`` refuses, as ``ARGUMENT: reason (got VALUE, of type T)``: the
    item in it named where one item is wrong, every reason where the argument fits no member of
    a union (pydantic reports one error a member)."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    argument = _name(first["loc"][0], names)
    alike = [e for e in errors if e["loc"][:1] == first["loc"][:1]]
    if len(alike) > 1:  # a union: the argument as given, each member's reason
        said = list(dict.fromkeys(str(e["msg"]) for e in alike))
        reasons = ", or ".join([said[0], *(m.removeprefix(_OPENING) for m in said[1:])])
        return f"{argument}: {reasons} (got {_given(alike[0]['input'])})"
    return f"{argument}{_where(first['loc'][1:])}: {first['msg']} (got {_given(first['input'])})"


def _name(part: int | str, names: Sequence[str]) -> str:
    """An argument by its name, also where it was given by position."""
    return names[part] if isinstance(part, int) and part < len(names) else str(part)


def _where(loc: Sequence[int | str]) -> str:
    """The place of an item inside an argument: ``[0]``, ``['key']``, or `` key 5`` for a key."""
    out = ""
    for i, part in enumerate(loc):
        if part == "[key]":
            continue
        if i + 1 < len(loc) and loc[i + 1] == "[key]":
            out += f" key {quoted(part, 40)}"
        else:
            out += f"[{part}]" if isinstance(part, int) else f"[{quoted(part, 40)}]"
    return out


def _given(value: Any) -> str:
    return f"{quoted(value, 40)}, of type {type(value).__name__}"
