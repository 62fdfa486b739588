"""The typed results of the public API: what a read command or a round step returns.

Each result has attributes for a Python caller and ``to_dict()`` for JSON: ``to_dict()`` gives
exactly what the matching ``--json`` command prints (its keys in that order: a JSON document, typed
as such), so the CLI formats these values and computes nothing of its own. A row whose columns
partly depend on the run holds the fixed ones as fields and the rest (a metric per name) as a
mapping of JSON values (:data:`Json`: ``figures``): those columns are data, not fields.

One module per family of results (:mod:`~diagevo.results.memory`, ``stats``, ``stories``,
``runs``): a read command imports the classes of its own result only (a frozen
dataclass is code generated when its module loads).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any, TypeAlias

from typing_extensions import TypeAliasType

Json = TypeAliasType("Json", "str | int | float | bool | None | Sequence[Json] | Mapping[str, Json]")
"""A JSON value: what a row of a run-dependent table holds (read-only containers, so that a
``dict[str, float]`` is one); a named alias, which pydantic follows where a public function takes
one (:func:`~diagevo.text.calls.validated`)."""

JsonRow: TypeAlias = "Mapping[str, Json]"


class Result:
    """A result whose ``to_dict()`` is its fields, in order, as JSON (a dataclass's)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]
