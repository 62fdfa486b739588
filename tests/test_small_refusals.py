"""The smaller refusals of issue 47, item 7: each one line, nothing stored.

Numbers are ASCII decimal (``--metric a=1_000`` and full-width digits were taken by Python's
``float``; TOML's ``rounds = true`` by pydantic's lax ints); tags hold no newline or control
character; a redirect of the diagnostician's POST (the failures' texts and the key in it) is
followed only to the same origin, for chat and embeddings alike; ``-o`` onto a symbolic link (to
``/proc/self/fd/1``, say) or a device is refused rather than the link replaced, and ``-o -`` is
standard output, not a file named ``-``. (A FIFO as the lease file or the database:
``tests/test_confined.py``.)"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from diagevo.catalog import Event, RoundCommitted, RunTagged
from diagevo.generation.openai_client import OpenAIClient, TransportError, first_message
from diagevo.log import open_log
from diagevo.rounds import Round
from tests.input_cases import cli
from tests.llm_server import LLMServer
from tests.test_cli_memory import case_study
from tests.test_rounds import candidate


def one_line(code: int, err: str, *needles: str) -> None:
    assert code == 1 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, err


@pytest.fixture
def open_round(tmp_path: Path) -> str:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    code, _, err = cli("round", "start", "--run", "r", "--db", db)
    assert code == 0, err
    with open_log(db) as store:  # a question, for the promotions the tests decide
        Round(store, "r", 1).record([candidate("own-1")])
    return db


def _events(db: str, run: str, event_class: type[Event]) -> int:
    with open_log(db) as s:
        return s.count(run, types=(event_class,))


@pytest.mark.parametrize("value", ["1_000", "\uff11\uff12", "٣", "inf", "nan", "1e999", "0x10", " "])
def test_a_metric_is_an_ascii_decimal_number(open_round: str, value: str) -> None:
    assert cli("round", "promote", "--run", "r", "--db", open_round)[0] == 0  # the commit would go through
    code, _, err = cli("round", "commit", "--run", "r", "--db", open_round, "--metric", f"a={value}")
    one_line(code, err, "metric 'a'", "is not a finite number in ASCII decimal")
    assert _events(open_round, "r", RoundCommitted) == 0


def test_a_plain_metric_still_commits(open_round: str) -> None:
    assert cli("round", "promote", "--run", "r", "--db", open_round)[0] == 0
    code, out, err = cli("round", "commit", "--run", "r", "--db", open_round, "--metric", "a=-1.5e-3", "--json")
    assert code == 0, err
    assert _events(open_round, "r", RoundCommitted) == 1


@pytest.mark.parametrize(
    ("toml", "field"),
    [
        ("[train]\nrounds = true\n", "train.rounds"),
        ('[train]\nrounds = "3"\n', "train.rounds"),
        ("[train]\nrounds = 3.0\n", "train.rounds"),
        ("[memory]\nk = true\n", "memory.k"),
        ('[filter]\ntau = "0.5"\n', "filter.tau"),
        ('[memory]\nchallenger_updates = "yes"\n', "memory.challenger_updates"),
    ],
)
def test_a_number_or_a_flag_in_the_config_is_one_of_its_type(tmp_path: Path, toml: str, field: str) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(toml, encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'c.db'}"
    code, _, err = cli("train", "--config", str(cfg), "--db", db, "--run", "x", "--dry-run")
    one_line(code, err, field)
    key, _, value = toml.split("\n")[1].partition(" = ")
    section = toml.split("]")[0][1:]
    code, _, err = cli("train", "--set", f"{section}.{key}={value}", "--db", db, "--run", "x", "--dry-run")
    one_line(code, err, field)
    assert not (tmp_path / "c.db").exists()


def test_numbers_the_config_takes_as_they_are(tmp_path: Path) -> None:
    """An integer where a float goes, and paths given as strings, are what a config holds."""
    code, out, err = cli(
        "train", "--set", "memory.k=1", "--set", 'train.out_dir="ck"', "--db", f"sqlite:///{tmp_path / 'd.db'}",
        "--run", "x", "--dry-run", "--json",
    )  # fmt: skip
    assert code == 0, err


@pytest.mark.parametrize("tag", ["a\nb", "a\tb", "a\x1b[2Jb", "a\x00b", "a\u2028b"])
def test_a_tag_is_one_line_without_control_characters(open_round: str, tag: str) -> None:
    code, _, err = cli("runs", "tag", "r", tag, "--db", open_round)
    one_line(code, err, "tag contains the control character")
    assert _events(open_round, "r", RunTagged) == 0
    code, _, err = cli("runs", "tag", "r", "fine-tag", "--db", open_round)
    assert code == 0, err
    assert _events(open_round, "r", RunTagged) == 1


# --- redirects ----------------------------------------------------------------------------------


class Redirector:
    """A server that answers every POST with ``status`` and ``Location: target(path)``, except
    ``/v1/moved``, which it answers with a chat completion (the same origin's new place)."""

    def __init__(self, status: int, target: str) -> None:
        self.status, self.target, self.hits = status, target, 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.hits += 1
                if self.path.endswith("/moved"):
                    body = json.dumps({"choices": [{"message": {"content": "same origin"}}], "usage": {}}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.send_response(outer.status)
                self.send_header("Location", outer.target.format(port=self.server.server_address[1]))
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def elsewhere() -> Iterator[LLMServer]:
    with LLMServer() as srv:
        srv.default("other", "the texts arrived elsewhere")
        yield srv


def _chat(url: str) -> str:
    client = OpenAIClient(url, max_retries=0, timeout_s=10)
    body = {"model": "m", "messages": [{"role": "user", "content": "the failure's texts"}]}
    return asyncio.run(client.post("/chat/completions", body, lambda d: first_message(d)[0]))[0]


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_to_another_origin_is_not_followed(elsewhere: LLMServer, status: int) -> None:
    server = Redirector(status, elsewhere.url + "/chat/completions")
    try:
        with pytest.raises(TransportError, match=f"HTTP {status}: a redirect to another origin"):
            _chat(server.url)
    finally:
        server.close()
    assert elsewhere.calls() == [] and server.hits == 1


def test_a_redirect_on_the_same_origin_keeps_the_post() -> None:
    server = Redirector(307, "http://127.0.0.1:{port}/v1/moved")
    try:
        assert _chat(server.url) == "same origin" and server.hits == 2
    finally:
        server.close()


def test_the_embedder_does_not_follow_a_redirect_elsewhere(elsewhere: LLMServer) -> None:
    from diagevo.diagnosis.embedder import APIEmbedder

    server = Redirector(307, elsewhere.url + "/embeddings")
    try:
        with pytest.raises(Exception, match="(?i)connection|redirect"):
            APIEmbedder(server.url, "m")._compute(["a cause's text"])
    finally:
        server.close()
    assert elsewhere.calls() == []


# --- -o ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("o")
    db = f"sqlite:///{root / 'o.db'}"
    (root / "case.jsonl").write_text(case_study().jsonl(), encoding="utf-8")
    code, _, err = cli("memory", "ingest", str(root / "case.jsonl"), "--db", db)
    assert code == 0, err
    return db


@pytest.mark.parametrize(
    ("args", "name"), [(["memory", "export"], "out.jsonl"), (["report"], "out.html"), (["memory", "plot"], "out.svg")]
)
def test_an_output_onto_a_link_is_refused_and_the_link_kept(
    logged: str, tmp_path: Path, args: list[str], name: str
) -> None:
    target = tmp_path / "target.txt"
    target.write_text("kept", encoding="utf-8")
    out = tmp_path / name
    out.symlink_to(target)
    code, _, err = cli(*args, "-o", str(out), "--db", logged)
    one_line(code, err, f"{out} is a symbolic link")
    assert out.is_symlink() and os.readlink(out) == str(target) and target.read_text(encoding="utf-8") == "kept"
    proc = tmp_path / "stdout.jsonl"
    proc.symlink_to("/proc/self/fd/1")
    code, _, err = cli(*args[:2], "-o", str(proc), "--db", logged)
    assert code == 1 and proc.is_symlink(), err


def test_an_output_onto_a_fifo_is_refused(logged: str, tmp_path: Path) -> None:
    """Anything but a regular file (a FIFO here; ``/dev/null`` alike, which the earlier code, run
    as root, replaced by a regular file) is refused, and stays what it was."""
    fifo = tmp_path / "out.jsonl"
    os.mkfifo(fifo)
    code, _, err = cli("memory", "export", "-o", str(fifo), "--db", logged)
    one_line(code, err, f"{fifo} is not a regular file")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_dash_is_standard_output(logged: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("memory", "export", "-o", "-", "--db", logged)
    assert code == 0, err
    assert [json.loads(line)["type"] for line in out.splitlines()][0] == "run.started"
    code, out, err = cli("report", "-o", "-", "--db", logged)
    assert code == 0, err
    assert out.lstrip().lower().startswith("<!doctype html") and out.rstrip().endswith("</html>")
    assert not (tmp_path / "-").exists()
    code, _, err = cli("report", "-o", "-", "--json", "--db", logged)
    one_line(code, err, "give --json or -o -")
