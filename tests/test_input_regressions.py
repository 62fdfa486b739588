"""One deterministic test per hostile input reported in issue 21 (items 1, 7 and 8, input side):
each is refused with one short line and a non-zero exit, and stores nothing; and what
``memory export`` writes, ``memory ingest`` reads back identically, odd characters included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diagevo.diagnosis.parsing import ReplyError, extract_json
from diagevo.errors import BadInput
from diagevo.eval.benchmarks import load_benchmark
from diagevo.interchange import export_lines, parse_lines
from diagevo.log import open_log
from diagevo.schemas import validate_event
from diagevo.text.parsing import MAX_DEPTH, loads, split_lines
from tests.conftest import Backend
from tests.input_cases import COMMANDS, cli, command, db_state, dumps, make_db, nested, valid_objects
from tests.logs import Log, wire_event

MAX_ERR = 400


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    root = tmp_path_factory.mktemp("regress")
    return make_db(root), root


def refused(world: tuple[str, Path], kind: str, content: bytes, *needles: str) -> str:
    """Run ``kind`` on ``content``: one line naming ``needles``, exit 1, nothing stored."""
    db, root = world
    before = db_state(db)
    path = root / f"in-{kind}.jsonl"
    path.write_bytes(content)
    code, _, err = cli(*command(kind, path, db, root / "eval-out"))
    assert "Traceback" not in err, err[-2000:]
    assert code == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) <= MAX_ERR, err[:1000]
    for n in needles:
        assert n in lines[0], lines[0]
    assert db_state(db) == before
    return lines[0]


def good_line(kind: str, i: int = 0) -> bytes:
    return dumps(valid_objects(kind)[i])


# --- 1. RecursionError on deep JSON; TypeError on "active_cause": {} -------------------------


@pytest.mark.parametrize("kind", COMMANDS)
@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 990, 100_000])
def test_deep_json_is_one_line_in_every_command(world: tuple[str, Path], kind: str, levels: int) -> None:
    deep = nested(levels)
    refused(world, kind, good_line(kind) + b"\n" + deep + b"\n", "line 2", f"nested deeper than {MAX_DEPTH} levels")
    inside = good_line(kind)[:-1] + b',"zz":' + nested(levels, as_object=True) + b"}"
    refused(world, kind, inside + b"\n", "line 1", "nested deeper")


def test_depth_up_to_the_limit_is_accepted() -> None:
    assert loads(nested(MAX_DEPTH - 1, {})) is not None
    with pytest.raises(BadInput, match="nested deeper"):
        loads(nested(MAX_DEPTH, {}))


@pytest.mark.parametrize("field", ["active_cause", "mastered_cause", "node"])
def test_a_cause_of_the_wrong_type_in_round_record_is_a_validation_error(world: tuple[str, Path], field: str) -> None:
    obj = {"question_id": "t1", "mode": "targeted", "text": "x?", "active_cause": "C1", "answers": ["1"] * 8, field: {}}
    refused(world, "record", dumps(obj) + b"\n", "line 1", field, "valid string")


def test_wrong_types_name_line_and_field(world: tuple[str, Path]) -> None:
    ev = valid_objects("ingest")[1]
    refused(world, "ingest", dumps({**ev, "round": {}}) + b"\n", "line 1", "round")
    refused(world, "ingest", dumps({**ev, "round": 2**40}) + b"\n", "line 1", "round")
    fail = valid_objects("diagnose")[0]
    refused(
        world,
        "diagnose",
        good_line("diagnose", 1) + b"\n" + dumps({**fail, "known_causes": "C1"}) + b"\n",
        "line 2",
        "known_causes",
    )


# --- 8. long echoes, bad encodings, control characters, NUL in ids -----------------------------


@pytest.mark.parametrize("kind", COMMANDS)
def test_a_10mb_bad_line_is_not_echoed(world: tuple[str, Path], kind: str) -> None:
    big = b"x" * 10_000_000
    line = refused(world, kind, good_line(kind) + b"\n" + big + b"\n", "line 2", "malformed JSON")
    assert "x" * 100 not in line
    if kind != "eval":  # an unknown field with a 10 MB name
        line = refused(world, kind, good_line(kind)[:-1] + b',"' + big + b'":1}\n', "line 1", "10,000,000 characters")
        assert "x" * 100 not in line


@pytest.mark.parametrize("kind", ["ingest", "record", "diagnose"])
def test_a_huge_id_is_refused_shortened(world: tuple[str, Path], kind: str) -> None:
    field = {"ingest": "event_id", "record": "question_id", "diagnose": "failure_id"}[kind]
    obj = {**valid_objects(kind)[0], field: "y" * 5_000_000}
    line = refused(world, kind, dumps(obj) + b"\n", "line 1", "characters long")
    assert "y" * 100 not in line


@pytest.mark.parametrize("kind", COMMANDS)
def test_bad_utf8_names_the_line(world: tuple[str, Path], kind: str) -> None:
    refused(
        world,
        kind,
        good_line(kind) + b"\n" + good_line(kind, 1)[:5] + b"\xff\xfe" + good_line(kind, 1)[5:] + b"\n",
        "line 2",
        "not UTF-8",
    )


@pytest.mark.parametrize("kind", ["ingest", "record", "diagnose"])
@pytest.mark.parametrize("char", ["\x00", "\x01", "\t", "\n", "\r", "\x1b", "\x7f", "\x85", "\u2028"])
def test_ids_with_control_characters_are_refused(world: tuple[str, Path], kind: str, char: str) -> None:
    field = {"ingest": "run", "record": "question_id", "diagnose": "failure_id"}[kind]
    obj = {**valid_objects(kind)[0], field: f"a{char}b"}
    refused(world, kind, dumps(obj) + b"\n", "line 1", f"U+{ord(char):04X}")


@pytest.mark.parametrize("kind", COMMANDS)
def test_a_raw_control_character_in_a_string_is_not_json(world: tuple[str, Path], kind: str) -> None:
    line = dumps({**valid_objects(kind)[0], "zz": "ab"}).replace(b'"ab"', b'"a\x01b"')
    refused(world, kind, line + b"\n", "line 1", "malformed JSON")


@pytest.mark.parametrize("kind", COMMANDS)
def test_a_truncated_last_line_is_refused(world: tuple[str, Path], kind: str) -> None:
    refused(world, kind, good_line(kind) + b"\n" + good_line(kind, 1)[:-3], "line 2", "malformed JSON")


def _event(**over: object) -> dict[str, object]:
    base: dict[str, object] = {
        "type": "failure.recorded",
        "run": "r",
        "round": 1,
        "event_id": "e1",
        "data": {"failure_id": "f1", "question_id": "q1", "response": "x", "reference": "y"},
    }
    return {**base, **over}


@pytest.mark.parametrize(
    "raw, needle",
    [
        (_event(run="r\x00"), "run id contains the control character U+0000"),
        (_event(event_id="e\x00"), "event id contains the control character U+0000"),
        (
            _event(data={"failure_id": "f\x00", "question_id": "q1"}),
            "data.failure_id contains the control character U+0000",
        ),
        (_event(data={"failure_id": "f1", "question_id": "q1", "response": "a\x00b"}), "data.response contains a NUL"),
    ],
)
def test_nul_is_refused_before_any_backend(raw: dict[str, object], needle: str) -> None:
    with pytest.raises(BadInput, match=needle.replace(".", r"\.").replace("+", r"\+")):
        validate_event(raw)


def test_nul_in_an_id_is_refused_the_same_on_every_backend(backend: Backend, tmp_path: Path) -> None:
    url = backend.fresh_url()
    log = Log(run="nul")
    p = tmp_path / "nul.jsonl"
    for bad in ('"run": "nul"', '"event_id": "nul-0"'):
        text = log.jsonl().replace(bad, bad[:-1] + '\\u0000"', 1)
        assert text != log.jsonl()
        p.write_text(text, encoding="utf-8")
        code, _, err = cli("memory", "ingest", str(p), "--db", url)
        assert code == 1 and "U+0000" in err and len(err.strip().splitlines()) == 1, err
    store = open_log(url)
    try:
        assert store.runs() == []
        with pytest.raises(BadInput, match="U\\+0000"):
            store.append([wire_event("run.started", "nul\x00", 0, "x", config={"k": 1})])
    finally:
        store.close()


def test_llm_replies_nested_too_deep_are_reply_errors() -> None:
    for reply in (
        nested(5000).decode(),
        "Here: " + nested(5000, as_object=True).decode(),
        '{"a": ' + nested(200).decode() + "}",
    ):
        with pytest.raises(ReplyError, match="nested deeper"):
            extract_json(reply)
    assert extract_json('prose {"matched_cause_id": "C1"} more') == {"matched_cause_id": "C1"}


def test_an_endpoint_response_nested_too_deep_is_a_bad_response() -> None:
    from diagevo.generation.openai_client import BadResponse, _parse_json

    with pytest.raises(BadResponse, match="nested deeper"):
        _parse_json(nested(10_000).decode())


def test_a_deep_json_benchmark_file_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "b.json"
    p.write_bytes(b'[{"question": "q", "answer": ' + nested(3000) + b"}]")
    with pytest.raises(BadInput, match="nested deeper"):
        load_benchmark("gsm8k", p)


# --- 7. export -> ingest round trip with U+2028, U+2029, U+0085 and control characters -------

ODD = "a\u2028b\u2029c\x85d\x01e\x1ff\x7fg\th\ri\x0bj\x0ck\u00a0l\ufeffm\U0001f600n"


def _odd_log() -> Log:
    log = Log(run="odd")
    log.add("question.generated", question_id="q1", mode="free", text=f"line one{ODD}\nline two")
    log.add("failure.recorded", failure_id="f1", question_id="q1", response=ODD * 3, reference=f"\u2028{ODD}\u2029")
    log.node("N1", f"label {ODD}").cause("C1", "N1", f"description {ODD}", failure="f1")
    log.commit(note=ODD)
    return log


def test_export_ingest_round_trips_odd_characters(backend: Backend, tmp_path: Path) -> None:
    src, dst = backend.fresh_url(), backend.fresh_url()
    log = _odd_log()
    with open_log(src) as store:
        store.append(log.events())
        exported = "".join(export_lines(store, "odd"))
    # one event a line for any reader: no raw U+2028, U+2029, U+0085 in the file
    assert len(exported.splitlines()) == len(log.events()) == len(exported.split("\n")) - 1
    p = tmp_path / "odd.jsonl"
    p.write_bytes(exported.encode("utf-8"))
    code, _, err = cli("memory", "ingest", str(p), "--db", dst)
    assert code == 0, err
    with open_log(dst) as a, open_log(src) as b:
        got = [(e.event_id, e.type, e.event, e.hash) for e in a.read("odd", texts=True)]
        want = [(e.event_id, e.type, e.event, e.hash) for e in b.read("odd", texts=True)]
        again = "".join(export_lines(a, "odd"))
    texts = [v for _, _, ev, _ in got for v in ev.model_dump().values() if isinstance(v, str)]
    assert got == want and sum(ODD in t for t in texts) >= 5
    strip = [{k: v for k, v in json.loads(x).items() if k != "recorded_at"} for x in again.split("\n")[:-1]]
    assert strip == [{k: v for k, v in json.loads(x).items() if k != "recorded_at"} for x in exported.split("\n")[:-1]]


def test_raw_line_breakers_inside_strings_are_read_as_text() -> None:
    """A writer that leaves U+2028, U+2029, U+0085 raw (json.dumps with ensure_ascii=False)."""
    log = _odd_log()
    text = "".join(json.dumps(e.line(), ensure_ascii=False) + "\n" for e in log.events())
    assert "\u2028" in text and len(text.splitlines()) > len(log.events())  # what used to break
    parsed = parse_lines(text)
    assert [ev for _, ev in parsed] == log.events()
    assert [no for no, _ in split_lines("a\r\n\n b\u2028c\n")] == [1, 3]


def test_a_corrupt_eval_outputs_file_is_refused_in_one_line(tmp_path: Path) -> None:
    from diagevo.eval.runner import OutputsMismatch, _read_done

    p = tmp_path / "out.jsonl"
    for content in (nested(5000) + b"\n", b'{"index": 0, "settings": "s"}\n\xff\xfe\n'):
        p.write_bytes(content)
        with pytest.raises(OutputsMismatch, match="not (an evaluation output|UTF-8)"):
            _read_done(p, "s")
    p.write_bytes(b'{"index": 0, "settings": "s", "response": "a\xe2\x80\xa8b"}\n')  # a raw U+2028 in a text
    assert _read_done(p, "s")[0]["response"] == "a\u2028b"


def test_deep_toml_in_a_config_or_an_override_is_one_line(tmp_path: Path) -> None:
    from diagevo.train.config import load_config

    deep = "[" * 3000 + "]" * 3000
    p = tmp_path / "deep.toml"
    p.write_text(f"a = {deep}\n", encoding="utf-8")
    with pytest.raises(BadInput, match="TOML nested deeper than 64 levels"):
        load_config(p)
    with pytest.raises(BadInput, match="TOML nested deeper"):
        load_config(None, [f"memory.k={deep}"])
    assert load_config(None, ["memory.k=2.0"]).memory.k == 2.0


@pytest.mark.parametrize(
    "args, content, needle",
    [
        (["memory", "ingest", "-"], nested(100_000) + b"\n", "line 1: JSON nested deeper"),
        (["memory", "ingest", "-"], b"\n\xff\n", "stdin line 2: not UTF-8"),  # read in order: line 2 is the first
        (
            ["round", "record", "-", "--run", "x"],
            b'{"question_id": "q", "mode": "free", "active_cause": {}}\n',
            "active_cause",
        ),
    ],
)
def test_stdin_through_the_real_entry_point(tmp_path: Path, args: list[str], content: bytes, needle: str) -> None:
    """The installed entry point, in its own process, reading stdin: one line, no traceback."""
    import os
    import subprocess
    import sys

    db = tmp_path / "s.db"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run(
        [sys.executable, "-m", "diagevo.cli.app", *args, "--db", f"sqlite:///{db}"],
        input=content,
        capture_output=True,
        env=env,
        timeout=120,
    )
    err = out.stderr.decode()
    assert out.returncode == 1 and "Traceback" not in err, err[-2000:]
    assert len(err.strip().splitlines()) == 1 and len(err) <= MAX_ERR and needle in err, err
    assert not db.exists()
