"""Canonical JSON: orjson's fast path writes the standard library's bytes, or is not taken."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from datetime import date

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagevo.catalog import FailureAttributed
from diagevo.log import StoreError, open_log
from diagevo.log.canonical import canonical_bytes, canonical_json, stdlib_canonical
from diagevo.schemas import EventIn

finite = st.floats(allow_nan=False, allow_infinity=False)
scalars = st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | finite | st.text()
json_values = st.recursive(
    scalars,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=5),
    max_leaves=25,
)


@settings(max_examples=600, deadline=None)
@given(json_values)
def test_same_bytes_as_the_standard_library(value: object) -> None:
    try:
        want = stdlib_canonical(value).encode()
    except ValueError:  # a lone surrogate the stdlib writes but UTF-8 cannot hold
        with pytest.raises(ValueError):
            canonical_bytes(value)
        return
    assert canonical_bytes(value) == want


@pytest.mark.parametrize(
    "x",
    [1e-5, 2.150075639121711e-05, 9.999999999999999e-05, 3.8e-9, 5e-324, -1e-7, 1e16, 1.5e300, -0.0, 0.0001],
)
def test_floats_repr_writes_with_an_exponent(x: float) -> None:
    data = {"similarity": x, "text": "re-ran 2e-3 checks", "cause": None}
    assert canonical_json(data) == stdlib_canonical(data)
    assert canonical_json([x]) == stdlib_canonical([x])


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize(
    "shape",
    [
        lambda v: {"p": v},
        lambda v: {"p": v, "a": None, "b": None},
        lambda v: {"a": None, "nested": {"p": v}},
        lambda v: {"a": "null null", "list": [1.0, v]},  # strings holding "null" do not hide it
        lambda v: [None, v],
        lambda v: v,
    ],
)
def test_nan_and_infinities_are_refused(bad: float, shape) -> None:  # noqa: ANN001
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        canonical_bytes(shape(bad))


def test_subclasses_and_objects_go_through_the_standard_library() -> None:
    class Label(str):
        pass

    class Level(enum.IntEnum):
        HIGH = 3

    data = {"label": Label("x"), "level": Level.HIGH, "big": 2**80, "k": {"v": [Label("y")]}}
    assert (
        canonical_json(data)
        == stdlib_canonical(data)
        == '{"big":1208925819614629174706176,"k":{"v":["y"]},"label":"x","level":3}'
    )

    @dataclass
    class Point:
        x: int

    assert (
        canonical_json({1: "int key", 2: 0.5}) == stdlib_canonical({1: "int key", 2: 0.5}) == '{"1":"int key","2":0.5}'
    )
    for value in (Point(1), date(2026, 1, 1), {"s": {1, 2}}):
        with pytest.raises(TypeError):
            canonical_bytes(value)


def test_store_refuses_nan_in_a_flat_event_with_none(tmp_path) -> None:  # noqa: ANN001
    # the class refuses NaN; an event forged past it (model_construct) still meets the store's own check
    forged = FailureAttributed.model_construct(failure_id="f", cause_id=None, via="dedup", similarity=math.nan)
    ev = EventIn(run="r", round=1, event_id="e1", event=forged, schema_version=1)
    with open_log(f"sqlite:///{tmp_path / 'x.db'}") as store:
        with pytest.raises(StoreError, match="event e1: data is not JSON-serialisable"):
            store.append([ev])
        assert store.last_seq("r") == 0
