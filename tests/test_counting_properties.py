"""One rule for what counts, wherever a log comes from: a valid log (a short simulated run, three
rounds, every event type the loop writes) with one corruption applied is refused by ingest,
naming the line, and, stored any other way, named by ``memory verify``.

The corruptions are those of issue 47: a failure recorded, a failure attributed, a question
scored or generated again under a new event id; an attribution repeated in a later round; a
failure diagnosed twice; a line's data edited under its exported hash; a round committed before
its promotions are decided; two lines with one event id and different content.
``DIAGEVO_COUNTING_EXAMPLES`` sets how many cases Hypothesis tries (40 by default)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diagevo.interchange import EXPORT_ONLY_FIELDS, IngestError, export_lines, ingest
from diagevo.log import Recorder, open_log
from diagevo.schemas import validate_event
from diagevo.train.config import load_config
from diagevo.train.run import TrainOptions, train
from diagevo.views.verify import verify_run

RUN = "m"
EXAMPLES = int(os.environ.get("DIAGEVO_COUNTING_EXAMPLES", "40"))
Line = dict[str, Any]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> list[Line]:
    """The export of a valid three-round run of the simulator (about 500 events)."""
    tmp = tmp_path_factory.mktemp("counting")
    small = ["train.curriculum_questions=24", "train.challenger_questions=8", "sim.shared_label_questions=20"]
    cfg = load_config("configs/sim.toml", [*small, f'train.out_dir="{tmp / "out"}"', f'train.run="{RUN}"'])
    with open_log(f"sqlite:///{tmp / 'm.db'}") as store:
        train(cfg, store, TrainOptions(rounds=3))
        assert verify_run(store, RUN) == []
        return [json.loads(line) for line in export_lines(store, RUN)]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Recorder, Recorder]]:
    """A store that ingest must leave empty, and one the corrupted logs are appended to raw."""
    tmp = tmp_path_factory.mktemp("counting-stores")
    with open_log(f"sqlite:///{tmp / 'ingest.db'}") as ingested, open_log(f"sqlite:///{tmp / 'raw.db'}") as raw:
        yield ingested, raw


def _where(lines: list[Line], pick: int, test: Callable[[Line], bool]) -> int:
    """The index of the ``pick``-th line (modulo their number) that passes ``test``."""
    found = [i for i, line in enumerate(lines) if test(line)]
    assert found, "the valid log holds no such line"
    return found[pick % len(found)]


def _copied(line: Line, **changes: Any) -> Line:
    return {k: v for k, v in line.items() if k != "hash"} | changes


def _end_of_round(lines: list[Line], rnd: int) -> int:
    """Where a line of round ``rnd`` goes last: just before the round's commit."""
    return next(i for i, line in enumerate(lines) if line["type"] == "round.committed" and line["round"] == rnd)


def duplicate(etype: str) -> Callable[[list[Line], int], list[Line]]:
    """A line of ``etype`` copied under a new event id, right after it."""

    def corrupt(lines: list[Line], pick: int) -> list[Line]:
        i = _where(lines, pick, lambda line: line["type"] == etype)
        return [*lines[: i + 1], _copied(lines[i], event_id=lines[i]["event_id"] + "/again"), *lines[i + 1 :]]

    return corrupt


def repeated_later(etype: str) -> Callable[[list[Line], int], list[Line]]:
    """A line of ``etype`` of round 1 or 2 copied into the last round (a new id)."""

    def corrupt(lines: list[Line], pick: int) -> list[Line]:
        i = _where(lines, pick, lambda line: line["type"] == etype and line["round"] < 3)
        j = _end_of_round(lines, 3)
        return [*lines[:j], _copied(lines[i], event_id=f"later/{pick}", round=3), *lines[j:]]

    return corrupt


def edited(lines: list[Line], pick: int) -> list[Line]:
    """A promotion's accuracy changed, its exported hash kept (the forged ``cause.promoted``)."""
    i = _where(lines, pick, lambda line: line["type"] == "cause.promoted")
    forged = {**lines[i], "data": {**lines[i]["data"], "acc": 0.01}}
    return [*lines[:i], forged, *lines[i + 1 :]]


def commit_first(lines: list[Line], pick: int) -> list[Line]:
    """A round's commit moved before its promotions are decided."""
    rnd = 1 + pick % 3
    j = _end_of_round(lines, rnd)
    i = next(k for k, line in enumerate(lines) if line["type"] == "promotions.decided" and line["round"] == rnd)
    return [*lines[:i], lines[j], *lines[i:j], *lines[j + 1 :]]


def id_clash(lines: list[Line], pick: int) -> list[Line]:
    """A failure's line again, later in the file, under the same id with another response."""
    i = _where(lines, pick, lambda line: line["type"] == "failure.recorded")
    other = _copied(lines[i], data={**lines[i]["data"], "response": "another response"})
    return [*lines, other]


def unrecorded_attribution(lines: list[Line], pick: int) -> list[Line]:
    """An attribution of a failure the run never recorded, beside a real one."""
    i = _where(lines, pick, lambda line: line["type"] == "failure.attributed")
    ghost = _copied(lines[i], event_id=f"ghost/{pick}", data={**lines[i]["data"], "failure_id": f"ghost-{pick}"})
    return [*lines[: i + 1], ghost, *lines[i + 1 :]]


def cause_of_no_failure(lines: list[Line], pick: int) -> list[Line]:
    """A new cause that names no failure that revealed it."""
    i = _where(lines, pick, lambda line: line["type"] == "cause.created")
    return [*lines[:i], _copied(lines[i], data={**lines[i]["data"], "failure_id": None}), *lines[i + 1 :]]


def promotion_left_out(lines: list[Line], pick: int) -> list[Line]:
    """A promotion its round's scores decide, left out (with its name in the decision)."""
    i = _where(lines, pick, lambda line: line["type"] == "cause.promoted")
    cause, rnd = lines[i]["data"]["cause_id"], lines[i]["round"]
    out = [line for k, line in enumerate(lines) if k != i]
    for k, line in enumerate(out):
        if line["type"] == "promotions.decided" and line["round"] == rnd:
            kept = [c for c in line["data"]["promoted"] if c != cause]
            out[k] = _copied(line, data={**line["data"], "promoted": kept})
    return out


def scored_first(lines: list[Line], pick: int) -> list[Line]:
    """A question's votes moved before the question."""
    j = _where(lines, pick, lambda line: line["type"] == "question.scored")
    qid = lines[j]["data"]["question_id"]
    i = next(
        k for k, line in enumerate(lines) if line["type"] == "question.generated" and line["data"]["question_id"] == qid
    )
    return [*lines[:i], lines[j], *[line for k, line in enumerate(lines[i:], i) if k != j]]


Corrupt = Callable[[list[Line], int], list[Line]]
CORRUPTIONS: dict[str, tuple[Corrupt, str, str | None]] = {
    # name: (the corruption, what ingest says of a file without hashes (with them: the hash),
    #        what verify names when it is stored raw; None: only a file can hold it)
    "failure recorded again": (duplicate("failure.recorded"), "failure recorded once", "failure recorded once"),
    "failure attributed again": (duplicate("failure.attributed"), "failure counted once", "failure counted once"),
    "question scored again": (duplicate("question.scored"), "question scored once", "question scored once"),
    "question generated again": (duplicate("question.generated"), "question generated once", "question generated once"),
    "attribution in a later round": (repeated_later("failure.attributed"), "failure", "failure"),
    "failure diagnosed again later": (
        repeated_later("failure.diagnosed"),
        "failure diagnosed once",
        "failure diagnosed once",
    ),
    "failure diagnosed twice in its round": (
        duplicate("failure.diagnosed"),
        "failure diagnosed once",
        "failure diagnosed once",
    ),
    "promotion edited under its hash": (edited, "hash mismatch", None),
    "commit before promotions": (commit_first, "goes backwards", "goes backwards"),
    "event id clash": (id_clash, "as another event", None),
    # decisions that no evidence stands behind
    "attribution of a failure never recorded": (
        unrecorded_attribution,
        "failure attributed from its diagnosis",
        "failure attributed from its diagnosis",
    ),
    "cause created from no failure": (
        cause_of_no_failure,
        "cause created from its failure",
        "cause created from its failure",
    ),
    "promotion left out": (promotion_left_out, "promotion decided from the evidence", "promotion decided from"),
    "question scored before generated": (
        scored_first,
        "question scored after generated",
        "question scored after generated",
    ),
}


def _jsonl(lines: list[Line], hashes: bool) -> str:
    drop = () if hashes else ("hash",)
    return "".join(json.dumps({k: v for k, v in line.items() if k not in drop}) + "\n" for line in lines)


def test_the_valid_log_ingests_and_verifies(exported: list[Line], tmp_path: Path) -> None:
    """The baseline the corruptions start from: with and without its hashes, all of it stored."""
    for hashes in (True, False):
        with open_log(f"sqlite:///{tmp_path / f'{hashes}.db'}") as store:
            assert ingest(store, _jsonl(exported, hashes)).appended == len(exported)
            assert verify_run(store, RUN) == []


@pytest.fixture(scope="module")
def tried() -> Iterator[list[str]]:
    """The corruptions the property tried, printed when the module is done (``-s`` shows it)."""
    names: list[str] = []
    yield names
    counts = {name: names.count(name) for name in sorted(CORRUPTIONS)}
    print(f"\ncounting property: {len(names)} cases: {counts}")


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(sorted(CORRUPTIONS)), pick=st.integers(0, 10_000), hashes=st.booleans())
def test_one_corruption_is_refused_by_ingest_or_named_by_verify(
    exported: list[Line],
    stores: tuple[Recorder, Recorder],
    tried: list[str],
    name: str,
    pick: int,
    hashes: bool,
) -> None:
    corrupt, says, rule = CORRUPTIONS[name]
    lines = corrupt(exported, pick)
    ingested, raw = stores
    tried.append(name)
    if name == "promotion edited under its hash":
        hashes = True  # the case is the hash
    with pytest.raises(IngestError, match=r"^line \d+: ") as refused:
        ingest(ingested, _jsonl(lines, hashes))
    assert ("hash" if hashes else says) in str(refused.value), refused.value
    assert ingested.runs() == []  # all or nothing
    if rule is None:
        return
    run = f"{RUN}-{len(tried)}"  # stored raw, as a writer other than ingest could
    raw.append([validate_event(_raw(line, run)) for line in lines])
    problems = verify_run(raw, run)
    assert any(rule in p for p in problems), problems


def _raw(line: Line, run: str) -> Line:
    return {k: v for k, v in line.items() if k not in EXPORT_ONLY_FIELDS} | {"run": run}
