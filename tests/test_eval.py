"""``diagevo eval``: loaders on the shared benchmark files and on fixtures in the public format of
the others, grading rules, mean@k, resumable outputs, run checkpoints recorded as events, and the
choice of a checkpoint by validation accuracy. Generation goes through the endpoint engine to a
real HTTP server on loopback that answers from a script."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from diagevo.catalog import CheckpointSelected, EvalRecorded
from diagevo.curriculum.prompts import SOLVER_SYSTEM
from diagevo.errors import BadInput
from diagevo.eval.benchmarks import BenchmarkError, BenchmarkQuestion, kind_of, load_benchmark
from diagevo.eval.config import EvalConfig
from diagevo.eval.grading import grade, read_choice, text_equal
from diagevo.eval.runner import OutputsMismatch, evaluate
from diagevo.eval.runs import solver_models
from diagevo.generation import GenerationError
from diagevo.generation.endpoint import EndpointEngine
from diagevo.log import Recorder, open_log
from diagevo.log.paths import beside_database
from diagevo.views.memory import load_memory
from tests.llm_server import Fail, LLMServer
from tests.logs import wire_event
from tests.shared import BENCHMARKS, needs_benchmarks
from tests.test_cli_memory import assert_one_line_error, run_cli

SHARED = BENCHMARKS
FIXTURES = Path(__file__).resolve().parent / "data" / "benchmarks"


@pytest.fixture
def srv() -> Any:
    with LLMServer() as server:
        yield server


def boxed(answer: str) -> str:
    return f"Some reasoning.\n\nThe answer is $\\boxed{{{answer}}}$."


def answering(answers: Callable[[str, dict[str, Any]], str | list[str]]) -> Callable[[dict[str, Any]], list[str]]:
    """A server reply: ``answers(question, body)`` for each of the ``n`` choices asked for."""

    def reply(body: dict[str, Any]) -> list[str]:
        question = body["messages"][-1]["content"]
        out = answers(question, body)
        return out if isinstance(out, list) else [out] * body.get("n", 1)

    return reply


# --- loaders ----------------------------------------------------------------------------------


@needs_benchmarks
def test_the_shared_files_load_as_they_are() -> None:
    math500 = load_benchmark("math500", SHARED / "math500.jsonl")
    assert len(math500.questions) == 500 and math500.kind.name == "math500"
    q = math500.questions[0]
    assert q.gold == "\\left( 3, \\frac{\\pi}{2} \\right)" and q.source_id == "test/precalculus/807.json"
    assert q.grader == "math" and q.extra == {"subject": "Precalculus", "level": 2}
    assert q.text.startswith("Convert the point $(0,3)$")
    gsm = load_benchmark("gsm8k", SHARED / "gsm8k_test.jsonl")
    assert len(gsm.questions) == 1319 and gsm.questions[0].gold == "18"
    for name, n, first in (("aime2024", 30, "204"), ("aime2025", 30, "70")):
        b = load_benchmark(name, SHARED / f"{name}.jsonl")
        assert b.kind.name == "aime" and b.kind.mean_at_k and len(b.questions) == n and b.questions[0].gold == first
    assert len(load_benchmark("math500", SHARED / "math500.jsonl", limit=20).questions) == 20


@pytest.mark.parametrize(
    ("name", "file", "golds", "grader"),
    [
        ("gsm8k", "gsm8k_main_test.parquet", ["3600", "3", "240"], "math"),  # "#### 3,600"
        ("olympiadbench", "olympiadbench_oe_to_maths_en_comp.parquet", ["24", "-3, 3", "\\frac{1}{32}"], "math"),
        ("minerva", "minerva_math.jsonl", ["60", "1024"], "math"),  # the last \boxed of the solution
        ("minervamath", "minervamath_hf.jsonl", ["81"], "math"),
        ("amc", "amc_aimo_validation.parquet", ["55", "56"], "math"),  # floats 55.0 in the file
        ("amc23", "amc23.jsonl", ["7.0"], "math"),
        ("mmlu_pro", "mmlu_pro_test.parquet", ["D", "B", "C"], "choice"),
        ("supergpqa", "supergpqa.jsonl", ["B", "B"], "choice"),
        ("bbeh", "bbeh.jsonl", ["14", "True", "(c)"], "text"),
        ("bbeh", "bbeh_task.json", ["apple pear"], "text"),  # the repository's task.json
        ("val:mixed", "validation_mixed.jsonl", ["5", "\\frac{3}{4}", "B", "B"], None),
    ],
)
def test_fixtures_in_each_public_format(name: str, file: str, golds: list[str], grader: str | None) -> None:
    b = load_benchmark(name, FIXTURES / file)
    assert [q.gold for q in b.questions] == golds
    assert [q.index for q in b.questions] == list(range(len(golds)))
    if grader:
        assert {q.grader for q in b.questions} == {grader}
    else:
        assert [q.grader for q in b.questions] == ["math", "math", "choice", "choice"]


def test_olympiadbench_context_precedes_the_question() -> None:
    q = load_benchmark("olympiadbench", FIXTURES / "olympiadbench_oe_to_maths_en_comp.parquet").questions[2]
    assert q.text == "Let $a_1 = 1/2$ and $a_{n+1} = a_n / 2$.\n\nFind $a_5$."


def test_multiple_choice_prompts_list_lettered_options() -> None:
    q = load_benchmark("mmlu_pro", FIXTURES / "mmlu_pro_test.parquet").questions[2]
    assert q.text == "Which is a prime number?\n\nA. 21\nB. 27\nC. 29\nD. 33"
    assert q.options == ("21", "27", "29", "33") and q.extra == {"category": "math"}


def test_gpqa_options_are_shuffled_the_same_way_every_time() -> None:
    a = load_benchmark("gpqa_diamond", FIXTURES / "gpqa_diamond.csv")
    b = load_benchmark("gpqa", FIXTURES / "gpqa_diamond.csv")
    assert [q.options for q in a.questions] == [q.options for q in b.questions]
    for q, correct in zip(a.questions, ["-1", "Thymine", "7"], strict=True):
        assert sorted(q.options) == sorted(q.options) and len(q.options) == 4
        assert q.options["ABCD".index(q.gold)] == correct
    assert {q.gold for q in a.questions} != {"A"}  # the correct answer does not always come first


def test_field_mapping_reads_other_columns(tmp_path: Path) -> None:
    f = tmp_path / "mine.jsonl"
    f.write_text('{"prompt": "What is 1+1?", "solution_value": "2"}\n', encoding="utf-8")
    b = load_benchmark("math", f, {"question": "prompt", "answer": "solution_value"})
    assert (b.questions[0].text, b.questions[0].gold, b.kind.name) == ("What is 1+1?", "2", "mixed")
    with pytest.raises(
        BenchmarkError,
        match=(
            r"line 1: no answer \(tried answer, answer_letter, answer_index, label\); map a column with "
            r"fields=\{'answer': COLUMN\}$"
        ),
    ):
        load_benchmark("math", f, {"question": "prompt"})


def test_cli_names_the_option_that_maps_a_column(
    srv: LLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "mine.jsonl"
    f.write_text('{"question": "What is 1+1?"}\n', encoding="utf-8")
    code, _, err = run_cli(
        capsys, "eval", "--model", "m", "--url", srv.url, "--out", str(tmp_path / "o"), "--bench", f"gsm8k={f}"
    )
    assert_one_line_error(
        code, err, "line 1: no answer (tried answer); map a column with `--field gsm8k.answer=COLUMN`"
    )


@pytest.mark.parametrize(
    ("content", "name", "message"),
    [
        ("", "gsm8k", "has no questions"),
        ('{"question": "x", "answer": "1"}\n{oops\n', "gsm8k", "line 2: malformed JSON"),
        ('["a list"]\n', "gsm8k", "line 1: not a JSON object"),
        (
            '{"question": "x", "options": ["1", "2"], "answer": "E"}\n',
            "mmlu_pro",
            "line 1: answer 'E' names none of the 2 options",
        ),
        ('{"question": "x"}\n', "mmlu_pro", "line 1: no options (tried options, choices)"),
    ],
)
def test_bad_files_name_the_file_and_line(tmp_path: Path, content: str, name: str, message: str) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_text(content, encoding="utf-8")
    with pytest.raises(BenchmarkError, match="bad.jsonl") as info:
        load_benchmark(name, f)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_benchmark_names_resolve_to_kinds() -> None:
    assert [
        kind_of(n).name
        for n in (
            "aime2024",
            "AIME-25",
            "gsm8k_test",
            "math500",
            "math-val",
            "amc23",
            "MMLU-Pro",
            "supergpqa",
            "gpqa",
            "my:bbeh",
        )
    ] == [
        "aime",
        "aime",
        "gsm8k",
        "math500",
        "mixed",
        "amc",
        "mmlu_pro",
        "supergpqa",
        "gpqa_diamond",
        "bbeh",
    ]
    with pytest.raises(BenchmarkError, match="unknown benchmark 'trivia'"):
        kind_of("trivia")
    with pytest.raises(BenchmarkError, match="unknown benchmark"):
        kind_of("x:nosuchkind")


# --- grading ----------------------------------------------------------------------------------

OPTS = ("12", "42", "x + 1", "none of these")


@pytest.mark.parametrize(
    ("boxed_text", "letter"),
    [
        ("B", "B"),
        ("b", "B"),
        ("(C)", "C"),
        ("\\text{D}", "D"),
        ("\\textbf{(A)}", "A"),
        ("B. 42", "B"),
        ("C) x + 1", "C"),
        ("42", "B"),
        ("x+1", None),
        ("None of these.", "D"),
        ("E", None),
        ("7", None),
        ("AB", None),
    ],
)
def test_a_choice_is_read_by_its_letter_or_its_exact_text(boxed_text: str, letter: str | None) -> None:
    assert read_choice(boxed_text, OPTS) == letter


def test_unparsable_choice_replies_are_wrong_and_have_no_answer() -> None:
    q = BenchmarkQuestion(0, "", "q", "B", "choice", OPTS)
    assert grade(q, boxed("B")).correct and grade(q, boxed("B")).answer == "B"
    assert grade(q, "I think it is B.") == grade(q, boxed("E")) == grade(q, boxed("")) == grade(q, "")
    assert grade(q, "no box").answer is None and not grade(q, "no box").correct


def test_math_is_graded_by_the_answer_checker_with_the_gold_first() -> None:
    q = BenchmarkQuestion(0, "", "q", "\\frac{14}{3}", "math")
    assert grade(q, boxed("\\dfrac{14}{3}")).correct and grade(q, boxed("14/3")).correct
    assert not grade(q, boxed("4.6")).correct and grade(q, "no box").answer is None
    interval = BenchmarkQuestion(0, "", "q", "\\left( 3, \\frac{\\pi}{2} \\right)", "math")
    assert grade(interval, boxed("(3, \\pi/2)")).correct


def test_the_last_box_is_the_answer() -> None:
    q = BenchmarkQuestion(0, "", "q", "18", "math")
    assert grade(q, "First \\boxed{16}, then correcting: \\boxed{18}").correct
    assert not grade(q, "First \\boxed{18}, then \\boxed{16}").correct


@pytest.mark.parametrize(
    ("answer", "gold", "same"),
    [
        ("(C)", "(c)", True),
        ("\\text{True}", "True", True),
        ("1,000", "1000", True),
        ("apple  pear", "apple pear", True),
        ("pear apple", "apple pear", False),
        ("0.5", "1/2", True),
        ("14.", "14", True),
        ("15", "14", False),
    ],
)
def test_bbeh_answers_match_after_normalisation(answer: str, gold: str, same: bool) -> None:
    assert text_equal(answer, gold) is same


# --- the runner -------------------------------------------------------------------------------


def gsm_answers(wrong: set[int]) -> Callable[[str, dict[str, Any]], str]:
    golds = {
        q.text: (q.index, q.gold) for q in load_benchmark("gsm8k", SHARED / "gsm8k_test.jsonl", limit=40).questions
    }

    def answer(question: str, body: dict[str, Any]) -> str:
        index, gold = golds[question]
        return boxed("-1" if index in wrong else gold)

    return answer


@needs_benchmarks
def test_greedy_accuracy_and_per_question_outputs(srv: LLMServer, tmp_path: Path) -> None:
    srv.default("other", answering(gsm_answers(wrong={1, 4, 7})))
    bench = load_benchmark("gsm8k", SHARED / "gsm8k_test.jsonl", limit=10)
    out = tmp_path / "out" / "gsm8k.jsonl"
    seen: list[tuple[str, int, int | None]] = []
    result = evaluate(
        EndpointEngine("m", url=srv.url), "m", bench, EvalConfig(batch_size=4), out, progress=lambda *a: seen.append(a)
    )
    assert (result.n, result.correct, result.accuracy, result.unparsed, result.k, result.mean_at_k) == (
        10,
        7,
        0.7,
        0,
        None,
        None,
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["index"] for r in rows] == list(range(10))
    assert [r["correct"] for r in rows] == [i not in {1, 4, 7} for i in range(10)]
    assert (
        rows[1]["answer"] == "-1"
        and rows[1]["gold"] == bench.questions[1].gold
        and rows[0]["question"] == bench.questions[0].text
    )
    bodies = [c["body"] for c in srv.calls("other")]
    assert all(b["temperature"] == 0.0 and b["n"] == 1 and b["messages"][0]["content"] == SOLVER_SYSTEM for b in bodies)
    assert seen[-1] == ("gsm8k", 10, 10)


@needs_benchmarks
def test_mean_at_k_samples_at_the_rollout_settings(srv: LLMServer, tmp_path: Path) -> None:
    golds = {q.text: q.gold for q in load_benchmark("aime2024", SHARED / "aime2024.jsonl").questions}

    def answer(question: str, body: dict[str, Any]) -> str | list[str]:
        if body["temperature"] == 0.0:
            return boxed(golds[question])
        # sampled: the first question right in 3 of 4 samples, every other question in 1 of 4
        right = 3 if question == next(iter(golds)) else 1
        return [boxed(golds[question] if j < right else "0") for j in range(body["n"])]

    srv.default("other", answering(answer))
    bench = load_benchmark("aime2024", SHARED / "aime2024.jsonl", limit=4)
    result = evaluate(EndpointEngine("m", url=srv.url), "m", bench, EvalConfig(samples=4), tmp_path / "aime.jsonl")
    assert result.accuracy == 1.0 and result.k == 4
    assert result.mean_at_k == pytest.approx((0.75 + 0.25 * 3) / 4)
    sampled = [c["body"] for c in srv.calls("other") if c["body"]["temperature"] > 0]
    assert {(b["n"], b["temperature"], b["top_p"]) for b in sampled} == {(4, 1.0, 0.99)}
    row = json.loads((tmp_path / "aime.jsonl").read_text().splitlines()[0])
    assert len(row["samples"]) == 4 and row["mean_correct"] == 0.75
    assert (
        evaluate(EndpointEngine("m", url=srv.url), "m", bench, EvalConfig(), tmp_path / "g.jsonl", samples=0).mean_at_k
        is None
    )


@needs_benchmarks
def test_an_interrupted_evaluation_resumes_where_it_stopped(srv: LLMServer, tmp_path: Path) -> None:
    bench = load_benchmark("gsm8k", SHARED / "gsm8k_test.jsonl", limit=10)
    out = tmp_path / "gsm8k.jsonl"
    cfg = EvalConfig(batch_size=4)
    answers = answering(gsm_answers(wrong={2}))
    calls = [0]

    def flaky(body: dict[str, Any]) -> Any:
        calls[0] += 1
        return Fail(400, "the server went away") if calls[0] > 6 else answers(body)

    srv.default("other", flaky)
    engine = EndpointEngine("m", url=srv.url, concurrency=1)
    with pytest.raises(GenerationError, match="the server went away"):
        evaluate(engine, "m", bench, cfg, out)
    assert len(out.read_text().splitlines()) == 4  # the first batch was saved, the second lost
    with out.open("a") as fh:
        fh.write('{"index": 4, "sett')  # and a line torn by a crash
    srv.default("other", answers)
    # the resume's requests are tagged: one the first try still had in flight when it failed
    # may reach the server after it returned (a loaded machine), and is not the resume's
    engine = EndpointEngine("m", url=srv.url, concurrency=1, extra_body={"try": "resume"})

    def resumed() -> int:
        return sum(c["body"].get("try") == "resume" for c in srv.calls("other"))

    result = evaluate(engine, "m", bench, cfg, out)
    assert resumed() == 6 and result.resumed == 4
    assert (result.n, result.correct) == (10, 9)
    assert [json.loads(line)["index"] for line in out.read_text().splitlines()] == list(range(10))
    again = evaluate(engine, "m", bench, cfg, out)
    assert again.resumed == 10 and again.correct == 9 and resumed() == 6
    with pytest.raises(
        OutputsMismatch, match=r"other settings .*; remove it, or write the outputs elsewhere \(the outputs argument\)$"
    ):
        evaluate(engine, "other-model", bench, cfg, out)


# --- the CLI ----------------------------------------------------------------------------------


def test_cli_evaluates_a_model_on_several_benchmarks(
    srv: LLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    srv.default("other", answering(lambda q, b: boxed("B") if "A. " in q else boxed("3600")))
    args = [
        "eval",
        "--model",
        "served",
        "--url",
        srv.url,
        "--out",
        str(tmp_path / "o"),
        "--bench",
        f"gsm8k={FIXTURES / 'gsm8k_main_test.parquet'}",
        "--bench",
        f"mmlu_pro={FIXTURES / 'mmlu_pro_test.parquet'}",
    ]
    code, out, err = run_cli(capsys, *args, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert [(r["benchmark"], r["n"], r["correct"]) for r in report["results"]] == [("gsm8k", 3, 1), ("mmlu_pro", 3, 1)]
    assert report["engine"] == "endpoint" and (tmp_path / "o" / "served" / "gsm8k.jsonl").is_file()
    code, out, err = run_cli(capsys, *args)
    assert code == 0 and "gsm8k" in out and "0.333" in out and "3 resumed" in out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"nonsense\n", "line 1 is not an evaluation output; write the outputs elsewhere (`--out DIR`)"),
        (b"\xff\xfe\n", "is not UTF-8 text, not an evaluation output; write the outputs elsewhere (`--out DIR`)"),
        (b'{"index": 0, "settings": "x"}\n', "other settings (model, file, prompt or sampling); remove it, or write"),
    ],
)
def test_cli_an_outputs_file_not_ours_names_the_option(
    srv: LLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
) -> None:
    outputs = tmp_path / "o" / "m" / "gsm8k.jsonl"
    outputs.parent.mkdir(parents=True)
    outputs.write_bytes(content)
    bench = f"gsm8k={FIXTURES / 'gsm8k_main_test.parquet'}"
    code, _, err = run_cli(
        capsys, "eval", "--model", "m", "--url", srv.url, "--out", str(tmp_path / "o"), "--bench", bench
    )
    assert_one_line_error(code, err, message, "(`--out DIR`)")
    assert outputs.read_bytes() == content  # nothing written over a file that is not ours


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bench", "trivia=x.jsonl"], "unknown benchmark 'trivia'"),
        (["--bench", "gsm8k"], "--bench 'gsm8k' is not of the form NAME=PATH"),
        (["--bench", "gsm8k=/nonexistent/g.jsonl"], "no such file: /nonexistent/g.jsonl"),
        (
            ["--bench", f"gsm8k={FIXTURES / 'gsm8k_main_test.parquet'}", "--field", "gsm8k.nonsense=x"],
            "unknown field role 'nonsense'",
        ),
        (
            ["--bench", f"gsm8k={FIXTURES / 'gsm8k_main_test.parquet'}", "--field", "math.question=x"],
            "no --bench named math",
        ),
        (["--bench", f"gsm8k={FIXTURES / 'gsm8k_main_test.parquet'}", "--max-new-tokens", "0"], "--max-new-tokens"),
        ([], "nothing to evaluate"),
    ],
)
def test_cli_bad_input_is_one_line(
    srv: LLMServer, capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], message: str
) -> None:
    code, _, err = run_cli(capsys, "eval", "--model", "m", "--url", srv.url, "--out", str(tmp_path), *args)
    assert_one_line_error(code, err, message)
    assert not srv.calls()
    assert not any(tmp_path.iterdir())


def test_cli_unreachable_server_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, _, err = run_cli(
        capsys,
        "eval",
        "--model",
        "m",
        "--url",
        f"http://127.0.0.1:{port}/v1",
        "--out",
        str(tmp_path),
        "--bench",
        f"gsm8k={FIXTURES / 'gsm8k_main_test.parquet'}",
    )
    # piped, the evaluation's progress comes as plain lines on stderr before the error's one line
    progress = [ln for ln in err.splitlines() if ln.startswith("[")]
    assert progress and all(re.fullmatch(r"\[\s*\d+s\] gsm8k \d+/3.*", ln) for ln in progress), err
    assert_one_line_error(
        code, "".join(ln + "\n" for ln in err.splitlines() if ln not in progress), "connection refused"
    )


# --- runs -------------------------------------------------------------------------------------


def hf_run(store: Recorder, run: str = "hf1", rounds: int = 3) -> None:
    """A run of the hf backend as its log records it: base solver in the config, a solver
    checkpoint written in every round (a folder in the run's folder, by its name)."""
    config = {"k": 0.5, "train": {"backend": "hf"}, "solver": {"model": "base-solver"}}
    events = [wire_event("run.started", run, 0, f"{run}/0/run.started", config=config, seed=0)]
    for t in range(1, rounds + 1):
        (beside_database(store.url, ".runs") / run / f"round{t:03d}-solver").mkdir(parents=True)
        events += [
            wire_event("round.started", run, t, f"{run}/{t}/round.started"),
            wire_event("checkpoint.written", run, t, f"{run}/{t}/ckpt", path=f"round{t:03d}-solver", phase="solver"),
            wire_event("round.committed", run, t, f"{run}/{t}/commit"),
        ]
    store.append(events)


# round -> which validation questions its solver gets right (of 4), and gsm8k fixture questions
SKILL = {"base-solver": 1, "round001-solver": 2, "round002-solver": 4, "round003-solver": 3}  # by folder name


def skilled(question: str, body: dict[str, Any]) -> str:
    """A model answers the first SKILL[model] questions of the validation file right."""
    val = load_benchmark("val:mixed", FIXTURES / "validation_mixed.jsonl").questions
    gsm = load_benchmark("gsm8k", FIXTURES / "gsm8k_main_test.parquet").questions
    by_text = {q.text: (i, q.gold) for i, q in enumerate(val)} | {q.text: (i, q.gold) for i, q in enumerate(gsm)}
    i, gold = by_text[question]
    return boxed(gold if i < SKILL[Path(body["model"]).name] else "0")


def test_eval_run_records_one_event_per_round_and_benchmark(
    srv: LLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # the stats table is wide
    db = f"sqlite:///{tmp_path / 'r.db'}"
    with open_log(db) as store:
        hf_run(store)
        before = load_memory(store, "hf1")
    srv.default("other", answering(skilled))
    args = [
        "eval",
        "--db",
        db,
        "--run",
        "hf1",
        "--url",
        srv.url,
        "--out",
        str(tmp_path / "o"),
        "--bench",
        f"gsm8k={FIXTURES / 'gsm8k_main_test.parquet'}",
    ]
    code, out, err = run_cli(capsys, *args, "--rounds", "0,2-3", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert [(r["round"], Path(r["model"]).name, r["correct"]) for r in report["results"]] == [
        (0, "base-solver", 1),
        (2, "round002-solver", 3),
        (3, "round003-solver", 3),
    ]
    with open_log(db) as store:
        evals = list(store.read("hf1", types=(EvalRecorded,)))
        assert [(e.round, e.event.benchmark, e.event.accuracy) for e in evals] == [
            (0, "gsm8k", 1 / 3),
            (2, "gsm8k", 1.0),
            (3, "gsm8k", 1.0),
        ]
        after = load_memory(store, "hf1")  # bookkeeping: the memory is unchanged (read up to the log's head)
        assert replace(after, last_seq=before.last_seq) == before and after.last_seq > before.last_seq
        from diagevo.views.verify import verify_run

        assert verify_run(store, "hf1") == []
    stats = json.loads(run_cli(capsys, "memory", "stats", "--db", db, "--run", "hf1", "--json")[1])["rounds"]
    assert [r.get("bench/gsm8k") for r in stats] == [None, 1.0, 1.0]  # round 0 (the base model) has no row
    code, out, _ = run_cli(capsys, "memory", "stats", "--db", db, "--run", "hf1")
    assert code == 0 and "gsm8k" in out and "1.000" in out
    code, out, _ = run_cli(capsys, *args, "--rounds", "2", "--json")  # the same evaluation again: nothing new
    with open_log(db) as store:
        assert len(list(store.read("hf1", types=(EvalRecorded,)))) == 3
    code, _, err = run_cli(capsys, *args, "--rounds", "7")
    assert_one_line_error(code, err, "round 7 has no solver to evaluate (rounds with one: 0, 1, 2, 3)")


def test_select_picks_the_best_round_on_the_validation_file(
    srv: LLMServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    with open_log(db) as store:
        hf_run(store)
    srv.default("other", answering(skilled))
    code, out, err = run_cli(
        capsys,
        "eval",
        "--db",
        db,
        "--run",
        "hf1",
        "--url",
        srv.url,
        "--out",
        str(tmp_path / "o"),
        "--select",
        str(FIXTURES / "validation_mixed.jsonl"),
        "--bench",
        f"gsm8k={FIXTURES / 'gsm8k_main_test.parquet'}",
        "--json",
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["selected"] == 2
    assert {t: v["accuracy"] for t, v in report["validation"].items()} == {"0": 0.25, "1": 0.5, "2": 1.0, "3": 0.75}
    assert [(r["round"], r["benchmark"]) for r in report["results"]] == [
        (2, "gsm8k")
    ]  # test benchmarks on the chosen round only
    with open_log(db) as store:
        (sel,) = store.read("hf1", types=(CheckpointSelected,))
        assert sel.round == 2 and sel.event.scores == {"0": 0.25, "1": 0.5, "2": 1.0, "3": 0.75}
        assert Path(sel.event.model) == beside_database(db, ".runs") / "hf1" / "round002-solver"
        assert len(list(store.read("hf1", types=(EvalRecorded,)))) == 5  # 4 validation scores + gsm8k on round 2
    code, out, err = run_cli(
        capsys,
        "eval",
        "--db",
        db,
        "--run",
        "hf1",
        "--url",
        srv.url,
        "--out",
        str(tmp_path / "o"),
        "--select",
        str(FIXTURES / "validation_mixed.jsonl"),
    )
    assert code == 0 and "selected round 2" in out
    # scores recorded after their round travel through export and ingest like any event
    exported = tmp_path / "log.jsonl"
    assert run_cli(capsys, "memory", "export", "--db", db, "--run", "hf1", "-o", str(exported))[0] == 0
    other = f"sqlite:///{tmp_path / 'copy.db'}"
    code, _, err = run_cli(capsys, "memory", "ingest", str(exported), "--db", other)
    assert code == 0, err
    with open_log(db) as a, open_log(other) as b:
        assert [(e.event_id, e.round, e.event) for e in a.read("hf1")] == [
            (e.event_id, e.round, e.event) for e in b.read("hf1")
        ]


def test_a_simulator_run_has_no_model_checkpoints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    with open_log(db) as store:
        store.append([wire_event("run.started", "s", 0, "s/0", config={"k": 0.5, "train": {"backend": "sim"}}, seed=0)])
    code, _, err = run_cli(
        capsys,
        "eval",
        "--db",
        db,
        "--run",
        "s",
        "--url",
        "http://127.0.0.1:9/v1",
        "--bench",
        f"gsm8k={FIXTURES / 'gsm8k_main_test.parquet'}",
    )
    assert_one_line_error(code, err, "trained with the sim backend", "a model directory instead (`--model DIR`)")
    with open_log(db) as store, pytest.raises(BadInput, match=r"instead \(`diagevo.eval.runs.evaluate_model`\), or"):
        solver_models(store, "s")
    code, _, err = run_cli(capsys, "eval", "--model", "m", "--url", "http://127.0.0.1:9/v1", "--select", "v.jsonl")
    assert_one_line_error(code, err, "--select picks a round of a run")


def test_only_retrospective_bookkeeping_may_name_a_committed_round() -> None:
    from diagevo.catalog import FailureAttributed, PhaseCompleted
    from diagevo.memory.fold import InvariantError, evolve, fold
    from tests.logs import Log

    mem = fold(Log().node("N1").cause("C1", "N1").commit().commit().rows(), "r1")
    assert mem.committed == 2
    for note in (
        EvalRecorded(**{"benchmark": "b", "accuracy": 0.5}),
        CheckpointSelected(benchmark="b", accuracy=0.5, scores={}),
    ):
        for rnd in (0, 1, 2):
            assert evolve(mem, note, rnd) is mem
    for event in (PhaseCompleted(phase="x"), FailureAttributed(failure_id="f", cause_id="C1", via="recurrence")):
        with pytest.raises(InvariantError, match="goes backwards"):
            evolve(mem, event, 1)
    with pytest.raises(InvariantError, match="starts before round 3 was committed"):
        evolve(mem, EvalRecorded(), 4)
