"""The event classes: the catalog is derived from them, construction validates in diagevo's
words, a stored event reads back as its class (upcast from an older version), and the bytes an
event is stored as are those the wire format gives."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from diagevo.catalog import (
    CATALOG,
    EVENT_CLASSES,
    FOLDED,
    MILESTONES,
    TEXT_FIELDS,
    CauseCreated,
    CausePromoted,
    DiagnosisFailed,
    EvalRecorded,
    Event,
    FailureDiagnosed,
    InvalidEvent,
    Kind,
    LLMCalled,
    NodesMerged,
    PhaseCompleted,
    RoundCommitted,
    RunStarted,
)
from diagevo.schemas import new_event, validate_event


def test_the_catalog_is_the_classes() -> None:
    assert tuple(CATALOG) == tuple(cls.name for cls in EVENT_CLASSES)
    assert all(CATALOG[cls.name] is cls for cls in EVENT_CLASSES)
    assert CauseCreated in FOLDED and RoundCommitted in FOLDED and LLMCalled not in FOLDED
    assert {cls.kind for cls in MILESTONES} == {Kind.MILESTONE}
    assert TEXT_FIELDS[FailureDiagnosed.name] == ("raw",)


def test_the_classes_are_built_without_evaluating_a_string_or_a_fact_again() -> None:
    """Every read command builds every class: pydantic evaluates each annotation of a class and
    of its bases, so an annotation is an object (no string to compile) and a class assigns the
    facts ``Event`` declares without annotating them again."""
    facts = set(Event.__class_vars__)
    assert {"name", "kind", "folded", "texts", "keys", "counted", "class_version"} <= facts
    for cls in (Event, *EVENT_CLASSES):
        annotations = cls.__dict__.get("__annotations__", {})
        assert not [k for k, v in annotations.items() if isinstance(v, str)], cls
        assert cls is Event or not facts & set(annotations), cls


def test_construction_validates_in_diagevos_words() -> None:
    with pytest.raises(
        InvalidEvent, match=r"^cause.promoted: data.acc: Input should be less than or equal to 1 \(got 1.5\)$"
    ):
        CausePromoted(cause_id="C1", acc=1.5, n_candidates=1)
    with pytest.raises(InvalidEvent, match=r"^cause.created: data.description: not UTF-8 text"):
        CauseCreated(cause_id="C1", node_id="N1", description="a lone \ud800")


@pytest.mark.parametrize(
    ("event", "wire"),
    [
        (
            CauseCreated(cause_id="C1", node_id="N1", description="d"),
            {"cause_id": "C1", "node_id": "N1", "description": "d", "failure_id": None},
        ),
        (RunStarted(config={"k": 0.5}), {"config": {"k": 0.5}, "seed": 0}),  # trainer unset: absent, as v1 stored it
        (RunStarted(config={"k": 0.5}, trainer="mine"), {"config": {"k": 0.5}, "seed": 0, "trainer": "mine"}),
        (
            FailureDiagnosed(failure_id="f1", raw="r"),
            {"failure_id": "f1", "matched_cause": None, "error_cause": None, "model": "", "raw": "r"},
        ),
        (RoundCommitted(F=3), {"F": 3}),  # a summary's unset fields are absent
        (RoundCommitted(F=3, summary={"own": [1]}), {"F": 3, "summary": {"own": [1]}}),
    ],
)
def test_a_typed_event_is_stored_as_its_wire_form(event: object, wire: dict[str, object]) -> None:
    assert isinstance(event, CATALOG[getattr(event, "name")])  # noqa: B009
    typed = new_event(event, run="r", at_round=1, event_id="e")  # type: ignore[arg-type]
    version = CATALOG[typed.type].class_version  # a wire form names its version (none: version 1)
    spelled = validate_event(
        {"type": typed.type, "run": "r", "round": 1, "event_id": "e", "data": wire, "schema_version": version}
    )
    assert typed == spelled and typed.data == wire


def test_a_stored_event_of_an_older_version_reads_upcast() -> None:
    """run.started before ``trainer`` and the diagnoses before ``call`` (version 1): the field
    reads as None, and the event equals the one validated today."""
    assert FailureDiagnosed.class_version == DiagnosisFailed.class_version == 2
    started = RunStarted.from_stored({"config": {"k": 0.5}, "seed": 3}, 1)
    assert started == RunStarted(config={"k": 0.5}, seed=3) and started.trainer is None
    stored = {"failure_id": "f1", "matched_cause": "C1", "error_cause": None, "model": "m", "raw": ""}
    diagnosed = FailureDiagnosed.from_stored(stored, 1)
    assert diagnosed.call is None and diagnosed == FailureDiagnosed(**stored)
    assert "call" not in stored  # the stored data is left as it is


def test_the_diagevo_that_wrote_a_run_start_or_a_commit_is_absent_from_older_rows() -> None:
    """Version 3 of run.started and round.committed records the diagevo that wrote it: a row of
    version 2 reads it as None, and an event that does not set it is stored as version 2 stored it."""
    assert RunStarted.class_version == RoundCommitted.class_version == 3
    started = RunStarted.from_stored({"config": {"k": 0.5}, "seed": 3, "trainer": "mine"}, 2)
    assert started.diagevo is None and started == RunStarted(config={"k": 0.5}, seed=3, trainer="mine")
    committed = RoundCommitted.from_stored({"F": 3, "summary": {"own": 1}}, 2)
    assert committed.diagevo is None and committed == RoundCommitted(F=3, summary={"own": 1})
    assert "diagevo" not in RoundCommitted(F=3).stored_data() and "diagevo" not in started.stored_data()
    assert RoundCommitted(F=3, diagevo="0.2.0").stored_data() == {"F": 3, "diagevo": "0.2.0"}
    with pytest.raises(InvalidEvent, match=r"^run.started: data.diagevo: diagevo contains the control character"):
        RunStarted(config={"k": 0.5}, diagevo="0.2\n[bold]")


def _state(event: BaseModel) -> dict[str, object]:
    """Every instance attribute pydantic keeps (its slots), as set: what model_construct sets."""
    slots = {slot for cls in type(event).__mro__ for slot in getattr(cls, "__slots__", ())}
    return {slot: getattr(event, slot, "(unset)") for slot in sorted(slots)}


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda cls: cls.name)
def test_a_complete_stored_shape_reads_as_model_construct_builds_it(cls: type[Event]) -> None:
    """The reader's fast path for data holding every field (``_complete``) sets what
    ``model_construct`` sets, each of pydantic's attributes, no more: a pydantic that keeps
    another fails here."""
    data = {name: f"value of {name}" for name in cls.__pydantic_fields__}
    stored = dict(data)
    read, built = cls.from_stored(stored, cls.class_version), cls.model_construct(**data)
    assert _state(read) == _state(built) and read == built and read.cut == {}
    assert read.__pydantic_fields_set__ == set(data) and read.__pydantic_private__ == {"_cut": {}}
    stored["changed"] = "in the stored row's dict"  # the dict payload() hands out
    assert read == built and "changed" not in read.__dict__  # the event holds its own copy


def test_every_type_refuses_a_field_it_does_not_declare() -> None:
    """Issue 61: ten types carried any field; each now declares its own (a free-form one as a
    declared table) and refuses the others."""
    assert all(cls.model_config.get("extra") == "forbid" for cls in EVENT_CLASSES)
    with pytest.raises(InvalidEvent, match=r"^round.committed: data.own: Extra inputs are not permitted"):
        RoundCommitted(F=3, own=1)


@pytest.mark.parametrize(
    ("cls", "stored", "reads"),
    [
        (
            RoundCommitted,
            {"F": 3, "heldout_acc": 0.5, "own": [1]},
            {"F": 3, "heldout_acc": 0.5, "summary": {"own": [1]}},
        ),
        (
            PhaseCompleted,
            {"phase": "solver", "seconds": 2.0, "care": 0.5, "loss": 0.1},
            {"phase": "solver", "seconds": 2.0, "care": 0.5, "stats": {"loss": 0.1}},  # care: read, declared
        ),
        (EvalRecorded, {"heldout_acc": 0.5, "acc/C1": 1.0}, {"metrics": {"heldout_acc": 0.5, "acc/C1": 1.0}}),
        (
            EvalRecorded,
            {"benchmark": "b", "kind": "math", "n": 2},
            {"benchmark": "b", "benchmark_kind": "math", "n": 2},
        ),
    ],
)
def test_an_open_types_old_flat_figures_read_as_its_declared_field(
    cls: type[Event], stored: dict[str, object], reads: dict[str, object]
) -> None:
    """Their version 1 carried its figures flat: read through the upcaster, they are the free-form
    field's, and an export of such a line is ingested as it was written (its bytes, its version)."""
    assert cls.closed_since == 2
    assert cls.from_stored(stored, 1).stored_data() == reads == cls(**reads).stored_data()
    raw = {"type": cls.name, "run": "r", "round": 1, "event_id": "e", "data": stored, "schema_version": 1}
    kept = validate_event(raw)
    assert (kept.data, kept.schema_version) == (stored, 1)


def test_a_phases_figures_diagevo_reads_are_fields_however_handed() -> None:
    """The figures a reader names (:data:`PHASE_FIGURES`) are fields whether a trainer hands them in
    ``stats`` or a version-2 event stored them there; its other figures stay in ``stats``."""
    handed = PhaseCompleted(phase="solver", stats={"steps": 12.0, "completion_length": 5.5, "loss": 0.2})
    assert (handed.steps, handed.completion_length, handed.stats) == (12, 5.5, {"loss": 0.2})
    stored = PhaseCompleted.from_stored({"phase": "diagnose", "stats": {"dedup_truncated": 3}}, 2)
    assert (stored.dedup_truncated, stored.stats) == (3, None)
    assert PhaseCompleted(phase="x", care=0.5, stats={"care": 0.9}).care == 0.5  # the field wins


def test_a_stored_event_holds_what_was_cut_of_its_texts_apart_from_its_data() -> None:
    """Two texts that differ past the cut are stored alike: the events differ in their ``cut``,
    which no producer gives (the store cuts) and which stays out of the event's data."""
    cut = {"raw": {"bytes": 9, "sha256": "0" * 64}}
    stored = {"failure_id": "f1", "stage": "extract", "reason": "r", "model": "", "raw": "x", "cut": cut}
    failed = DiagnosisFailed.from_stored(stored, 2)
    whole = DiagnosisFailed(failure_id="f1", stage="extract", reason="r", raw="x")
    assert failed.cut == cut and whole.cut == {} and failed != whole
    assert failed.stored_data() == whole.stored_data() and stored["cut"] == cut
    assert DiagnosisFailed.from_stored(whole.stored_data(), 2) == whole  # a whole text read back
    with pytest.raises(InvalidEvent, match=r"data.cut: Extra inputs are not permitted"):
        DiagnosisFailed(failure_id="f1", stage="extract", reason="r", raw="x", cut=cut)


def test_the_merge_rule_is_the_merge_events() -> None:
    merge = NodesMerged(survivor="N1", absorbed="N2", label="both")
    assert [merge.reparent(n) for n in ("N1", "N2", "N3")] == ["N1", "N1", "N3"]
