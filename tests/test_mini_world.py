"""The mini world (``diagevo models mini``): its questions, split, tokenizer and named errors."""

from __future__ import annotations

import asyncio
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from diagevo.curriculum.prompts import challenger_messages, parse_question, solver_messages
from diagevo.diagnosis.heuristic import NAMED_MODEL, HeuristicDiagnostician
from diagevo.diagnosis.interface import ExtractionInput, NodeView
from diagevo.diagnosis.static import StaticEmbedder
from diagevo.memory.sampler import GenerationRequest
from diagevo.train.backend import Truth
from diagevo.train.mini import world as w

SKILLS = ("add_nc", "add_c", "sub_nb", "sub_b", "mul", "mod")


@pytest.mark.parametrize(
    ("question", "skill", "answer"),
    [
        ("23+45=", "add_nc", "68"),
        ("47+38=", "add_c", "85"),
        ("83-41=", "sub_nb", "42"),
        ("83-47=", "sub_b", "36"),
        ("7*38=", "mul", "266"),
        ("83%7=", "mod", "6"),
    ],
)
def test_a_question_s_skill_and_answer_come_from_its_digits(question: str, skill: str, answer: str) -> None:
    assert w.skill_of(question) == skill
    assert w.answer(question) == answer
    assert question in w.pool(skill)


@pytest.mark.parametrize("text", ["47-83=", "47+38", "7*8=", "what is 2+2?", "83%1=", ""])
def test_anything_else_is_no_question_of_the_world(text: str) -> None:
    assert w.skill_of(text) is None


@pytest.mark.parametrize(
    ("question", "answer", "skill", "shared"),
    [
        ("47+38=", "85", "add_c", "75"),  # the weak skill's shared error: the carry dropped
        ("51+66=", "117", None, None),  # no carry in the units, a sum over 100: none of the world's skills
        ("79-86=", "-7", None, None),  # below zero: none of the world's skills
        ("83%7=", "6", "mod", None),  # no shared error named for remainders
    ],
)
def test_the_truth_of_a_question_is_its_answer_and_skill(
    question: str, answer: str, skill: str | None, shared: str | None
) -> None:
    assert w.truth(question) == Truth(answer, skill, shared)


@pytest.mark.parametrize("text", ["what is 2+2?", "47+38", "47/38=", "83%0=", ""])
def test_a_text_that_is_no_question_has_no_truth(text: str) -> None:
    assert w.truth(text) is None


def test_a_sum_carried_into_the_hundreds_only_is_no_skill_of_the_world() -> None:
    assert w.skill_of("51+66=") is None and w.skill_of("41+58=") == "add_nc"  # 99: still add_nc
    assert "51+66=" not in w.pool("add_nc") and "51+66=" not in w.pool("add_c")


def test_every_pool_holds_its_own_skill_only_and_the_skills_do_not_share_questions() -> None:
    seen: set[str] = set()
    for skill in SKILLS:
        pool = w.pool(skill)
        assert len(pool) >= 700 and all(w.skill_of(q) == skill for q in pool)
        assert not seen & set(pool)
        seen |= set(pool)


def test_warm_up_validation_and_held_out_questions_never_meet_and_the_split_is_fixed_by_the_seed() -> None:
    for skill in SKILLS:
        warm, val, held = w.split(skill, 100, seed=3, validation=80)
        assert len(held) == 100 and len(val) == 80
        assert not set(warm) & set(held) and not set(warm) & set(val) and not set(val) & set(held)
        assert sorted(warm + val + held) == sorted(w.pool(skill))
        assert w.split(skill, 100, seed=3, validation=80) == (warm, val, held)
        assert w.split(skill, 100, seed=3).heldout == held  # the held-out part does not move with the validation size
        assert w.split(skill, 100, seed=4, validation=80).heldout != held
        assert w.split(skill, 100, seed=4, validation=80).validation != val


@pytest.mark.parametrize(
    ("question", "response", "label", "cause"),
    [
        ("47+38=", "\\boxed{75}", "85", "carry_dropped"),
        ("47+38=", "\\boxed{86}", "85", "sum_slip_carry"),
        ("23+45=", "\\boxed{78}", "68", "carry_invented"),
        ("23+45=", "\\boxed{69}", "68", "sum_slip"),
        ("83-47=", "\\boxed{46}", "36", "borrow_forgotten"),
        ("83-47=", "\\boxed{34}", "36", "difference_slip_borrow"),
        ("83-41=", "\\boxed{32}", "42", "borrow_invented"),
        ("83-41=", "\\boxed{43}", "42", "difference_slip"),
        ("7*38=", "\\boxed{259}", "266", "times_table_off_one_row"),  # 7 short: one row of 7 too few
        ("7*38=", "\\boxed{228}", "266", "times_table_off_one_row"),  # 38 short
        ("7*38=", "\\boxed{246}", "266", "product_tens_slip"),
        ("7*38=", "\\boxed{267}", "266", "product_slip"),
        ("83%7=", "\\boxed{11}", "6", "quotient_for_remainder"),
        ("83%7=", "\\boxed{5}", "6", "remainder_off_by_one"),
        ("83%7=", "\\boxed{3}", "6", "remainder_slip"),
        ("83%7=", "6", "6", "no_answer"),  # no boxed answer
        ("83%7=", "\\boxed{x}", "6", "remainder_slip"),  # not a number: a wrong remainder all the same
    ],
)
def test_a_failure_is_named_from_its_question_and_answer(question: str, response: str, label: str, cause: str) -> None:
    named = w.name_failure(question, response, label)
    assert named is not None and named.key == cause
    assert named.skill in (w.skill_of(question), "")


def test_an_agreeing_answer_or_a_foreign_question_is_not_named() -> None:
    assert w.name_failure("47+38=", "\\boxed{85}", "85") is None
    assert w.name_failure("What is 2+2?", "\\boxed{5}", "4") is None


def test_every_cause_and_label_has_appendix_j_s_length() -> None:
    wd = w.world()
    for text, label in w.MiniErrors().rules().values():
        assert 10 <= len(text.split()) <= 20 and 10 <= len(label.split()) <= 20
    assert {c.skill for c in wd.causes.values()} == set(SKILLS)
    assert len({wd.label_of(c) for c in wd.causes.values()}) == 4  # one node per family


def test_the_tokenizer_is_one_token_per_character_and_the_markers_decode_as_written() -> None:
    pytest.importorskip("transformers")
    from diagevo.train.mini.tokenizer import MARKERS, build_tokenizer

    tok = build_tokenizer()
    text = "<question>47+38=</question>\\boxed{85}"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len("47+38=") + len("85}") + len(MARKERS)
    assert tok.decode(ids + [tok.eos_token_id], skip_special_tokens=True) == text
    assert build_tokenizer().get_vocab() == tok.get_vocab()  # the same ids every time


def test_the_chat_template_keeps_what_a_prompt_says() -> None:
    pytest.importorskip("transformers")
    from diagevo.train.mini.tokenizer import build_tokenizer

    tok = build_tokenizer()

    def render(messages: list[dict[str, str]], completion: str | None = None) -> str:
        if completion is not None:
            messages = [*messages, {"role": "assistant", "content": completion}]
        return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=completion is None)

    cause = w.world().causes["carry_dropped"].text
    assert render(solver_messages("47+38=")) == "47+38="
    assert render(solver_messages("47+38="), "\\boxed{85}") == "47+38=\\boxed{85}<|im_end|>"
    assert render(challenger_messages(GenerationRequest(mode="free"))) == "@:"
    targeted = GenerationRequest(mode="targeted", active_cause="c", active_text=cause, node="n", node_label="L")
    assert render(challenger_messages(targeted)) == f"@{cause}:"
    stitched = GenerationRequest(
        mode="stitched",
        active_cause="c",
        active_text=cause,
        mastered_cause="m",
        mastered_text="B",
        node="n",
        node_label="L",
    )
    assert render(challenger_messages(stitched)) == f"@{cause}:"
    out = render(challenger_messages(targeted), "<question>47+38=</question>")
    assert parse_question(out) == "47+38="


def test_the_heuristic_diagnostician_names_failures_by_the_world_s_errors_and_nodes_by_family() -> None:
    d = HeuristicDiagnostician(StaticEmbedder(), 0.9, 0.9, named=w.MiniErrors())
    assert d.model_name == NAMED_MODEL

    def extract(q: str, response: str, label: str) -> str | None:
        item = ExtractionInput(
            failure_id="f",
            question_id="q",
            question=q,
            pseudo_label=label,
            response=response,
            reference=f"\\boxed{{{label}}}",
        )
        return asyncio.run(d.extract(item)).value.error_cause

    dropped = extract("47+38=", "\\boxed{75}", "85")
    assert dropped == w.world().causes["carry_dropped"].text
    assert extract("83%7=", "\\boxed{11}", "6") == w.world().causes["quotient_for_remainder"].text
    assert extract("What is 2+2?", "\\boxed{5}", "4") is None  # a slip no rule names
    slip = w.world().causes["sum_slip_carry"].text
    node = NodeView("n1", w.world().labels["add"], (dropped,))
    joined = asyncio.run(d.assign_node(slip, [node])).value
    assert joined.assigned_node == "n1"  # one family, one node
    other = asyncio.run(d.assign_node(w.world().causes["remainder_slip"].text, [node])).value
    assert other.create_new_node and other.new_node_label == w.world().labels["mod"]


def test_a_build_s_mix_replaces_the_world_s_weights_only_where_given() -> None:
    from diagevo.train.mini.build import MiniSpec

    world_weights = [w.world().skills[s][1] for s in MiniSpec().skills]
    assert MiniSpec().weights() == world_weights
    spec = MiniSpec(mix=(("add_c", 3.0), ("sub_b", 1.75)))
    by_skill = dict(zip(spec.skills, spec.weights(), strict=True))
    assert (by_skill["add_c"], by_skill["sub_b"], by_skill["mul"]) == (3.0, 1.75, w.world().skills["mul"][1])
    for bad in ((("div", 1.0),), (("add_c", 0.0),), (("add_c", -1.0),)):
        with pytest.raises(ValueError, match="a mix weight is SKILL=W"):
            MiniSpec(mix=bad)
    with pytest.raises(ValueError, match="the device is cpu, cuda or cuda:N"):
        MiniSpec(device="tpu")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--mix", "add_c"], "--mix: expected SKILL=WEIGHT, not 'add_c'"),
        (["--mix", "div=2"], "--mix: a mix weight is SKILL=W"),
        (["--device", "tpu"], "--device: the device is cpu, cuda or cuda:N, not 'tpu'"),
        (["--kernels", "sse"], "--kernels: kernels are avx2 or native, not 'sse'"),
    ],
)
def test_a_bad_mix_or_device_is_one_line_and_builds_nothing(args: list[str], said: str, tmp_path, capsys) -> None:  # noqa: ANN001
    from tests.test_cli_memory import run_cli

    code, _, err = run_cli(capsys, "models", "mini", "--out", str(tmp_path / "pair"), *args)
    assert code == 1 and said in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "pair").exists()


def _built(out: Path, env: dict[str, str]) -> tuple[dict[str, bytes], dict[str, object]]:
    """A 20-step one-skill pair built by ``diagevo models mini`` in a fresh process: its weight
    files' bytes and what mini.json measured."""
    cmd = [sys.executable, "-m", "diagevo.cli.app", "models", "mini", "--out", str(out), "--steps", "20"]
    done = subprocess.run([*cmd, "--skill", "add_c", "--json"], capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    weights = {p.name: p.read_bytes() for p in sorted((out / "solver").glob("*.safetensors"))}
    return weights, json.loads((out / "mini.json").read_text())["measured"]


@pytest.mark.slow
@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="AVX2 kernels are x86's")
def test_the_pinned_kernels_are_set_before_the_builds_first_operation(tmp_path: Path) -> None:
    """The build pins torch's and MKL's kernels itself: the same bytes as a build whose process
    started with them pinned (the settings an AVX2 machine's native build matched)."""
    from diagevo.train.mini.kernels import PINNED

    plain = {k: v for k, v in os.environ.items() if k not in PINNED}
    pinned, measured = _built(tmp_path / "pinned", plain)
    assert measured["kernels"] == "AVX2"
    at_start, _ = _built(tmp_path / "at-start", {**plain, **PINNED})
    assert pinned and pinned == at_start


def test_pinned_kernels_are_refused_once_torch_chose_others(tmp_path: Path) -> None:
    """A process whose torch already ran on other kernels cannot pin them: one line, nothing built."""
    import torch

    from diagevo.errors import BadInput
    from diagevo.train.mini.build import MiniSpec, build_mini

    torch.ones(2) + 1  # noqa: B018  (torch's first operation in this process, if none ran yet)
    running = str(torch.backends.cpu.get_cpu_capability())
    if running == "AVX2":
        pytest.skip("this process runs the AVX2 kernels: pinning them is no change")
    with pytest.raises(BadInput, match=rf"^kernels 'avx2': this process runs torch's {running} kernels"):
        build_mini(tmp_path / "pair", MiniSpec(skills=("add_c",), steps=1))
    assert not (tmp_path / "pair").exists()
