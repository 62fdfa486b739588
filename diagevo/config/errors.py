"""How a refused config is named: :class:`ConfigError`.

Its own module, beneath the config's models: the CLI spells a refusal's fix (``cli/fixes.py``)
and the memory's rules refuse a config value, and neither should load pydantic's models to know
the class.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from diagevo.errors import BadInput, Call
from diagevo.text.words import you_mean


class ConfigError(BadInput):
    """A config diagevo refuses, named as data: ``key``, the dotted section or field at fault;
    ``unknown``, ``"section"`` or ``"field"`` when no such name exists (empty for a bad value);
    ``meant``, the dotted names it most likely means; ``value``, what an override
    (``section.field=value``) gave the key, where one did; ``said``, the message without the
    names meant. ``error`` is pydantic's account (type, loc, msg, input), from which a caller that
    knows where the config came from names it again (:func:`checked`)."""

    def __init__(
        self,
        said: str,
        *,
        error: Mapping[str, Any] | None = None,
        unknown: str = "",
        meant: Sequence[str] = (),
        shown: Sequence[str] = (),
        value: str | None = None,
        fix: Call | None = None,
        then: str = "",
    ) -> None:
        super().__init__(said + you_mean(shown), fix, then=then, value=value)
        self.said = said
        self.error = dict(error or {"type": "value_error", "loc": (), "msg": said, "input": None})
        self.key = self.about = ".".join(str(part) for part in self.error["loc"])
        self.unknown = unknown
        self.meant = tuple(meant)
