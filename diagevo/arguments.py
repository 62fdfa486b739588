"""The public functions' arguments checked against their annotations at the one boundary a
caller crosses (``diagevo.NAME``): a value of the wrong type is a
:class:`~diagevo.errors.BadInput` naming the argument, not an ``AttributeError`` from deep
inside. By the annotation's outer type, and one level in: the items of a list, tuple or set and
the keys and values of a dict given for ``list[str]`` or ``Mapping[str, X]`` (``load_config(None,
[5])`` names the item, not an ``AttributeError`` of ``int``); an iterator is not consumed to check
it. A path may be given as a string. What cannot be checked at run time (a protocol, a type
variable) is left to the function. A public class's entry points take the same check where they
are defined (``Round.open``).
"""

from __future__ import annotations

import collections.abc as abc
import functools
import inspect
import numbers
import os
import types
import typing
from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import Any, TypeVar

from diagevo import _EXPORTS
from diagevo.errors import BadInput
from diagevo.text.parsing import quoted

F = TypeVar("F", bound=Callable[..., Any])

# names a public module imports only for type checkers: where to find them at run time (the
# public names' modules, and these)
_ELSEWHERE = {
    **_EXPORTS,
    "MethodConfig": "diagevo.config.sections",
    "DiagnosisConfig": "diagevo.config.sections",
    "Embedder": "diagevo.diagnosis.tools",
}
_STRINGS = (str, bytes)
_ONE_BY_ONE = (abc.Iterable, abc.Sequence, abc.Collection, list, tuple, set, frozenset)


def checked(func: F) -> F:
    """``func`` with its arguments checked (the hints resolved on its first call)."""
    signature = inspect.signature(func)
    hints: dict[str, Any] = {}
    resolved = False

    @functools.wraps(func)
    def call(*args: Any, **kwargs: Any) -> Any:
        nonlocal resolved
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return func(*args, **kwargs)  # a call of the wrong shape: Python's own error
        if not resolved:
            hints.update(_hints(func, signature))
            resolved = True
        for name, value in bound.arguments.items():
            hint = hints.get(name)
            if hint is None or _fits(value, hint):
                wrong = _wrong_item(value, hint) if hint is not None else None
                if wrong is not None:
                    where, item, wanted = wrong
                    raise BadInput(
                        f"{func.__qualname__}: {name}{where} must be {_said(wanted)}, "
                        f"not {quoted(item, 40)} ({type(item).__name__})"
                    )
                continue
            if _is_path(hint) and isinstance(value, str | os.PathLike):
                bound.arguments[name] = Path(value)
                continue
            raise BadInput(
                f"{func.__qualname__}: {name} must be {_said(hint)}, not {quoted(value, 40)} ({type(value).__name__})"
            )
        return func(*bound.args, **bound.kwargs)

    return call  # type: ignore[return-value]


def _hints(func: Callable[..., Any], signature: inspect.Signature) -> dict[str, Any]:
    """Each parameter's annotation as a type, those that resolve."""
    out: dict[str, Any] = {}
    space = dict(vars(typing)) | dict(func.__globals__)
    for name, param in signature.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or param.annotation is param.empty:
            continue
        hint = _resolve(param.annotation, space)
        if hint is not None:
            out[name] = hint
    return out


def _resolve(annotation: Any, space: dict[str, Any]) -> Any:
    if not isinstance(annotation, str):
        return annotation
    for _ in range(len(_ELSEWHERE) + 1):
        try:
            return eval(annotation, space)  # noqa: S307 - a public function's own annotation
        except NameError as exc:
            module = _ELSEWHERE.get(str(exc.name))
            if module is None or exc.name in space:
                return None
            space[str(exc.name)] = getattr(import_module(module), str(exc.name))
        except Exception:  # noqa: BLE001 - an annotation that does not evaluate is not checked
            return None
    return None


def _fits(value: Any, hint: Any) -> bool:
    if hint is Any or hint is object or isinstance(hint, TypeVar | typing.ForwardRef):
        return True
    if hint is None or hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        return any(_fits(value, arg) for arg in typing.get_args(hint))
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if origin is typing.Annotated:
        return _fits(value, typing.get_args(hint)[0])
    if origin is abc.Callable:
        return callable(value)
    kind = origin if origin is not None else hint
    if not isinstance(kind, type):
        return True
    if kind in _ONE_BY_ONE and isinstance(value, _STRINGS):
        return False  # a string is no list of strings
    if kind is float:  # numpy's numbers too
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    try:
        return isinstance(value, kind)
    except TypeError:  # a protocol that is not runtime-checkable
        return True


def _wrong_item(value: Any, hint: Any) -> tuple[str, Any, Any] | None:
    """The first item of a concrete list, tuple, set or dict ``value`` that does not fit the item
    type ``hint`` declares: (where, as ``[3]`` or ``['key']``, the item, the type wanted)."""
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        fitting = [arg for arg in typing.get_args(hint) if _fits(value, arg)]
        return _wrong_item(value, fitting[0]) if len(fitting) == 1 else None
    args = typing.get_args(hint)
    if not args or origin is None or not isinstance(origin, type):
        return None
    if isinstance(value, dict) and issubclass(origin, abc.Mapping) and len(args) == 2:
        for key, item in value.items():
            if _plain(args[0]) and not _fits(key, args[0]):
                return f" key {quoted(key, 40)}", key, args[0]
            if _plain(args[1]) and not _fits(item, args[1]):
                return f"[{quoted(key, 40)}]", item, args[1]
        return None
    if isinstance(value, list | tuple | set | frozenset) and not issubclass(origin, abc.Mapping):
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            return None  # a fixed-length tuple's items each their own type: left to the function
        if not _plain(args[0]):
            return None
        for i, item in enumerate(value):
            if not _fits(item, args[0]):
                return f"[{i}]", item, args[0]
    return None


def _plain(hint: Any) -> bool:
    """An item type checked in place: a class, or a union of classes and None. A nested generic
    (``Sequence[float]`` as an item) is not: an array a trainer passes as a row is no Sequence,
    yet the function takes it."""
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        return all(_plain(arg) for arg in typing.get_args(hint))
    return hint is type(None) or (origin is None and isinstance(hint, type))


def _is_path(hint: Any) -> bool:
    return hint is Path or any(arg is Path for arg in typing.get_args(hint))


_SAID = {
    str: "a string",
    int: "a whole number",
    float: "a number",
    bool: "True or False",
    Path: "a path",
    dict: "a dict",
    list: "a list",
    tuple: "a tuple",
    abc.Mapping: "a mapping",
    abc.Sequence: "a sequence (not a string)",
    abc.Iterable: "an iterable (not a string)",
    abc.Collection: "a collection (not a string)",
    abc.Callable: "a function",
}


def _said(hint: Any) -> str:
    """What ``hint`` asks for, in words."""
    if hint is None or hint is type(None):
        return "None"
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        return " or ".join(_said(arg) for arg in typing.get_args(hint))
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(hint))
    if origin is typing.Annotated:
        return _said(typing.get_args(hint)[0])
    kind = origin if origin is not None else hint
    name = str(getattr(kind, "__name__", kind))
    return _SAID.get(kind, f"{'an' if name[:1] in 'AEIOU' else 'a'} {name}")
