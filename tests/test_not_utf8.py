"""Input that is not UTF-8 is named in diagevo's own one-line message, with where it is and the
byte offset, and nothing is stored: a command-line argument or option, an environment variable,
an event handed in through the API, a reply from a model server on loopback."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagevo.log import open_log
from diagevo.schemas import InvalidEvent
from tests.llm_server import LLMServer, Raw
from tests.logs import wire_event
from tests.test_cli_memory import assert_one_line_error, run_cli
from tests.test_diagnosis_pipeline import (  # noqa: F401  (fixtures)
    D1,
    L1,
    RUN,
    dx,
    events,
    failure,
    run_round,
    seed,
    srv,
    store,
)

BAD = b"\x9b".decode("utf-8", "surrogateescape")  # how Python holds the byte 0x9b of argv or environ


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'u.db'}"
    with open_log(url, create=True) as s:
        seed(s)
    return url


def rows(url: str) -> int:
    with open_log(url) as s:
        return s.last_seq(RUN)


def test_a_note_argument_not_utf8(capsys: pytest.CaptureFixture[str], db: str) -> None:
    before = rows(db)
    code, _, err = run_cli(capsys, "runs", "note", RUN, "ok " + BAD, "--db", db)
    assert_one_line_error(code, err, "argument 4 of the command line: not UTF-8 text (byte 0x9b at offset 3)")
    assert "pydantic" not in err and "unicode string" not in err and rows(db) == before


def test_an_option_value_not_utf8(capsys: pytest.CaptureFixture[str], db: str) -> None:
    code, _, err = run_cli(capsys, "runs", "note", RUN, "fine", f"--db={db}{BAD}")
    assert_one_line_error(code, err, f"option --db of the command line: not UTF-8 text (byte 0x9b at offset {len(db)})")


def test_an_environment_variable_not_utf8(
    capsys: pytest.CaptureFixture[str], db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIAGEVO_DB", db + BAD)
    code, _, err = run_cli(capsys, "runs", "list")
    assert_one_line_error(code, err, f"environment variable DIAGEVO_DB: not UTF-8 text (byte 0x9b at offset {len(db)})")


def test_an_event_through_the_api() -> None:
    with pytest.raises(InvalidEvent) as info:
        wire_event("run.tagged", RUN, 0, "t1", tags=["good", "é" + BAD])
    assert str(info.value) == "run.tagged: data.tags.1: not UTF-8 text (byte 0x9b at offset 2)"
    with pytest.raises(
        InvalidEvent, match=r"^run.noted: run: not UTF-8 text \(a lone surrogate U\+D800 at byte offset 1\)$"
    ):
        wire_event("run.noted", "r\ud800", 0, "n1", note="x")


def test_a_reply_not_utf8_from_a_model_server(srv: LLMServer, store) -> None:  # noqa: F811
    rnd = seed(store, {"N1": (L1, [("C1", D1)])})
    body = b'{"choices": [{"message": {"role": "assistant", "content": "caf\x9b"}}]}'
    srv.default("extract", Raw(body))
    s = run_round(srv, store, [failure("f1", ("C1",))], rnd)
    assert s.failed == 1
    ((_, failed),) = events(store, "diagnosis.failed")
    offset = body.index(b"\x9b")
    assert f"reply body: not UTF-8 text (byte 0x9b at offset {offset})" in failed["reason"]
