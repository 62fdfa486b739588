"""Where retained votes go wrong (``benchmarks/measure_retained_shapes.py``): a question of the
mini world's shapes or one outside them, each retained question's vote against the true answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scripts import load_script


@pytest.fixture(scope="module")
def shapes():  # noqa: ANN201 (the script, imported from its path)
    return load_script("benchmarks/measure_retained_shapes.py", "measure_retained_shapes")


def test_the_worlds_edge(shapes) -> None:  # noqa: ANN001
    assert shapes.in_world("47+38=") and shapes.in_world("7*38=") and shapes.in_world("83%7=")
    assert not shapes.in_world("29+3=")  # a one-digit addend: no skill's question
    assert not shapes.in_world("38*7=") and not shapes.in_world("9-12=") and not shapes.in_world("hello")


def test_retained_votes_are_counted_on_each_side_of_the_edge(shapes, tmp_path: Path) -> None:  # noqa: ANN001
    import diagevo

    url = f"sqlite:///{tmp_path / 'p.db'}"
    with diagevo.open_store(url) as store:
        for run in ("ablate/w/a/s0", "other"):
            diagevo.start_run(store, run, diagevo.Config(), seed=0)
            rnd = diagevo.Round.open(store, run)
            reqs = rnd.requests(3)
            texts = ["47+38=", "29+3=", "7*38="]
            votes = [("85",) * 5 + ("75",) * 3, ("130",) * 5 + ("22",) * 3, ("266",) * 8]  # right, wrong, not kept
            boxed = [tuple(f"\\boxed{{{a}}}" for a in v) for v in votes]
            asked = zip(reqs, texts, boxed, strict=True)
            rnd.record([diagevo.Candidate(q.question_id, q.mode, x, responses=b) for q, x, b in asked])
            rnd.promote()
    counted = shapes.tally(url, None)
    assert list(counted) == [("ablate/w/a/s0", 1)]  # an ablation cell's rounds alone
    inside, outside = counted[("ablate/w/a/s0", 1)][True], counted[("ablate/w/a/s0", 1)][False]
    assert (inside.retained, inside.right, outside.retained, outside.right) == (1, 1, 1, 0)
    assert shapes.tally(url, {"b"}) == {}
