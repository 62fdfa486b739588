"""Prompt texts (Appendix J) and reply validation."""

from __future__ import annotations

import pytest

from diagevo.diagnosis import parsing, prompts
from diagevo.diagnosis.interface import ExtractionInput, KnownCause, NodeView
from diagevo.diagnosis.parsing import ReplyError

PHRASE = "fails to check candidate solutions against the original domain after a transformation"


def all_messages() -> list[list[dict[str, str]]]:
    item = ExtractionInput(
        failure_id="f",
        question_id="q",
        question="P {x} {{problem}}",
        pseudo_label="6",
        response="bad",
        reference="good",
        known=(KnownCause("C1", "mastered", PHRASE),),
    )
    node = NodeView("N1", "label", (PHRASE, "other cause"))
    return [
        prompts.extract_messages(item),
        prompts.extract_messages(
            ExtractionInput(
                failure_id="f", question_id="q", question="P", pseudo_label="6", response="bad", reference="good"
            )
        ),
        prompts.dedup_messages(PHRASE, [KnownCause("C1", "active", PHRASE)]),
        prompts.assign_messages(PHRASE, [node]),
        prompts.assign_messages(PHRASE, []),
        prompts.consolidate_messages(node, NodeView("N2", "label two", (PHRASE,))),
    ]


def test_prompts_are_plain_text_with_every_slot_filled() -> None:
    for msgs in all_messages():
        assert [m["role"] for m in msgs] == ["system", "user"]
        for m in msgs:
            text = m["content"]
            for latex in ("\\", "$", "~", "``", "texttt", "textit", "{{"):
                if latex == "{{" and "{{problem}}" in text:  # the question's own text, kept verbatim
                    continue
                assert latex not in text, (latex, text[:80])


def test_prompt_texts_follow_the_paper() -> None:
    p1, p1_free, p2, p3, p3_empty, p4 = all_messages()
    assert p1[0]["content"].startswith("You are a diagnostician analyzing why a math solver's reasoning went wrong.")
    assert (
        "phrased as a single verb–object phrase (e.g., “misapplies triangle inequality to algebraic side lengths”)"
        in p1[0]["content"]
    )
    assert "diagnose that step specifically—do not summarize" in p1[0]["content"]
    user = p1[1]["content"]
    assert user.startswith(
        "# Problem\nP {x} {{problem}}\n\n# Working Reference Answer\n6\n\n# Attempt That Agrees With the "
        "Reference\ngood\n\n# Attempt That Disagrees With the Reference\nbad\n"
    )
    assert (
        f"# Known Causes Used for Generation\n- ID: C1 | State: Mastered | Cause: {PHRASE}\n\nEach entry contains "
        "a cause ID, its current state, and its cause description.\n"
    ) in user
    assert user.endswith("unless the failure is unrelated to any identifiable skill, in which case it is also null.")
    assert '{\n  "matched_cause_id": null,\n  "error_cause": null\n}' in user
    assert "Known Causes" not in p1_free[1]["content"]
    assert "contributes one count to Δ_t(e) in Equation 7; no new cause is created." in p2[1]["content"]
    assert (
        "Err toward keeping mechanistically distinct causes apart whenever the match is not clearly correct."
        in p2[0]["content"]
    )
    assert "- Semantic distinctness: is the new cause's underlying skill clearly different" in p3[0]["content"]
    assert "its top-K most relevant existing skill nodes" in p3[0]["content"]
    assert f"- ID: N1 | Label: label | Representative error cause: {PHRASE}" in p3[1]["content"]
    assert "# Top-K Candidate Skill Nodes\n(none)\n" in p3_empty[1]["content"]
    assert p4[0]["content"].startswith(
        "You are a diagnostician checking skill nodes for redundancy as the memory grows. Prompt 3 assigns"
    )
    assert p4[1]["content"].startswith(
        f"# Skill Node A\nlabel: \n- {PHRASE}\n- other cause\n\n# Skill Node B\nlabel two: \n- {PHRASE}\n"
    )


@pytest.mark.parametrize(
    "raw",
    [
        '{"matched_cause_id": "C1", "error_cause": null}',
        '```json\n{"matched_cause_id": "C1", "error_cause": null}\n```',
        'Here you go:\n{"matched_cause_id": "C1"}\nThat is my answer.',
        (
            '<think>\nhmm {"matched_cause_id": "C2"}\n</think>\n{"matched_cause_id": " C1 ", "error_cause": "ignored '
            'when a match is given"}'
        ),
    ],
)
def test_lenient_json(raw: str) -> None:
    assert parsing.parse_extraction(raw, {"C1"}).matched_cause_id == "C1"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("", "the reply is empty"),
        ("no json here", "contains no JSON object"),
        ("[1, 2]", "contains no JSON object"),
        ('{"other": 1}', "neither matched_cause_id nor error_cause"),
        ('{"matched_cause_id": "C2"}', "'C2' is not one of the known cause ids supplied (C1)"),
        ('{"matched_cause_id": null, "error_cause": "too short to be a cause"}', "10-20 word phrase, got 6 words"),
        ('{"matched_cause_id": null, "error_cause": "' + " ".join(["word"] * 21) + '"}', "got 21 words"),
        ('{"matched_cause_id": ["C1"]}', "matched_cause_id: Value error, must be a string or null"),
    ],
)
def test_extraction_violations(raw: str, message: str) -> None:
    with pytest.raises(ReplyError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parsing.parse_extraction(raw, {"C1"})


def test_a_phrase_is_bounded_as_the_log_stores_it() -> None:
    """The bound is the store's (``limits.phrase_bytes``, the run's own inside ``text_limits``):
    a 15-word phrase of 1,499 bytes passes by default and is refused under 1,024."""
    from diagevo.config.limits import LimitsConfig
    from diagevo.schemas import text_limits

    long = " ".join(["z" * 99] * 15)
    raw = f'{{"matched_cause_id": null, "error_cause": "{long}"}}'
    assert parsing.parse_extraction(raw, set()).error_cause == long
    with text_limits(LimitsConfig(phrase_bytes=1024)), pytest.raises(ReplyError) as exc:
        parsing.parse_extraction(raw, set())
    assert str(exc.value) == "error_cause is 1,499 bytes long: a phrase is at most 1,024 (limits.phrase_bytes)"
    huge = '{"merge": true, "merged_label": "' + " ".join(["m" * 60_000] * 15) + '"}'
    with pytest.raises(ReplyError, match="merged_label is 900,014 bytes long"):
        parsing.parse_consolidation(huge)


def test_extraction_non_skill_and_new_cause() -> None:
    assert parsing.parse_extraction('{"matched_cause_id": "null", "error_cause": ""}', {"C1"}).error_cause is None
    assert (
        parsing.parse_extraction(f'{{"matched_cause_id": null, "error_cause": "  {PHRASE} "}}', set()).error_cause
        == PHRASE
    )


def test_dedup_validation() -> None:
    assert parsing.parse_dedup('{"duplicate": true, "matched_cause_id": "C3"}', {"C3"}).matched_cause_id == "C3"
    assert parsing.parse_dedup('{"duplicate": false, "matched_cause_id": "C3"}', {"C3"}).matched_cause_id is None
    with pytest.raises(ReplyError, match="not one of the candidate cause ids"):
        parsing.parse_dedup('{"duplicate": true, "matched_cause_id": "C4"}', {"C3"})
    with pytest.raises(ReplyError, match="matched_cause_id is null"):
        parsing.parse_dedup('{"duplicate": true, "matched_cause_id": null}', {"C3"})
    with pytest.raises(ReplyError, match="duplicate: field is missing"):
        parsing.parse_dedup('{"matched_cause_id": "C3"}', {"C3"})


def test_assignment_validation() -> None:
    a = parsing.parse_assignment(
        f'{{"create_new_node": true, "new_node_label": "{PHRASE}", "assigned_node": null}}', {"N1"}
    )
    assert (a.create_new_node, a.new_node_label, a.assigned_node) == (True, PHRASE, None)
    b = parsing.parse_assignment('{"create_new_node": false, "new_node_label": null, "assigned_node": "N1"}', {"N1"})
    assert (b.create_new_node, b.assigned_node) == (False, "N1")
    for raw, msg in [
        (f'{{"create_new_node": true, "new_node_label": "{PHRASE}", "assigned_node": "N1"}}', "exactly one of"),
        ('{"create_new_node": true, "new_node_label": null, "assigned_node": null}', "exactly one of"),
        (
            '{"create_new_node": false, "new_node_label": null, "assigned_node": "N9"}',
            "not one of the shortlisted node ids supplied",
        ),
        (
            '{"create_new_node": true, "new_node_label": null, "assigned_node": "N1"}',
            "create_new_node is true but assigned_node is set",
        ),
        (
            f'{{"create_new_node": false, "new_node_label": "{PHRASE}"}}',
            "create_new_node is false but new_node_label is set",
        ),
        (
            '{"create_new_node": true, "new_node_label": "a label", "assigned_node": null}',
            "new_node_label must be a 10-20 word phrase",
        ),
    ]:
        with pytest.raises(ReplyError, match=msg):
            parsing.parse_assignment(raw, {"N1"})
    with pytest.raises(ReplyError, match="shortlisted node ids supplied \\(none\\)"):
        parsing.parse_assignment('{"create_new_node": false, "assigned_node": "N1"}', set())


def test_consolidation_validation() -> None:
    assert parsing.parse_consolidation(f'{{"merge": true, "merged_label": "{PHRASE}"}}').merged_label == PHRASE
    assert parsing.parse_consolidation('{"merge": false, "merged_label": "whatever"}').merged_label is None
    with pytest.raises(ReplyError, match="merged_label is null"):
        parsing.parse_consolidation('{"merge": true}')
    with pytest.raises(ReplyError, match="got 3 words"):
        parsing.parse_consolidation('{"merge": true, "merged_label": "A and B"}')
