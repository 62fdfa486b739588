"""The shapes a reader tests rows against (:mod:`diagevo.log.registry`): the stored table equals
the catalog, and a field's bounds, bound once, say what the database's comparison says."""

from __future__ import annotations

import json
from typing import Any

import pytest

from diagevo.catalog import CATALOG
from diagevo.log import registry
from diagevo.log.registry import SHAPES, catalog_specs


def test_the_stored_shapes_are_the_catalogs() -> None:
    stored = json.loads(SHAPES.read_text(encoding="utf-8"))
    assert stored == catalog_specs(), (
        "diagevo/log/shapes.json is out of date: run "
        "python -c 'from diagevo.log.registry import write_shapes; write_shapes()'"
    )


ODD_VALUES: list[Any] = [None, True, False, 0, -1, 1, 2, 0.5, -0.0, 1.5, 1e300, -1e300, "x", [], {}, 10**400]


@pytest.mark.parametrize("type_", sorted(CATALOG))
def test_a_fields_bounds_test_says_what_the_comparison_of_its_bounds_says(type_: str) -> None:
    checker = registry._checker(type_)
    assert checker is not None
    for field, (_quick, _words, check, within) in checker[1].items():
        assert (within is None) == ("bounds" not in check), field
        if within is None:
            continue
        for value in ODD_VALUES:
            assert within(value) == registry._within(check["bounds"], value), (field, value)
