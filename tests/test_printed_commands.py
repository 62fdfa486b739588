"""Every command diagevo prints does what it says, ``--db`` and ``--rounds`` included (issue 31).

Each test triggers one printed command (an error's hint, the line after Ctrl-C, the fork's
"continue with", the empty database's "start one with"), parses it with :mod:`shlex`, checks
that it begins with the entry point the user ran, runs it as printed and checks its effect on
the database it names: the runs and rounds there, and nothing written anywhere else.
``tests/test_cli_suggestions.py`` covers the round protocol's hints and ``db upgrade``.
"""

from __future__ import annotations

import json
import queue
import re
import shlex
import signal
import subprocess
import threading
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from diagevo.catalog import RoundCommitted
from diagevo.log import open_log
from tests.shared import needs_benchmarks
from tests.test_cli_suggestions import ENTRY, ENV, diagevo, run_as_printed, suggestions
from tests.test_train import SMALL

pytestmark = pytest.mark.skipif(
    not ENTRY.is_file(), reason="the diagevo entry point is not installed next to this Python"
)


def printed(text: str) -> list[str]:
    """The one command in ``text``, as the words a shell would pass (the entry point first)."""
    (command,) = suggestions(text)
    words = shlex.split(command)
    assert words[0] == str(ENTRY), command
    return words


def committed(db: str, run: str) -> list[int]:
    with open_log(db, create=False) as store:
        return [e.round for e in store.read(run, types=(RoundCommitted,))]


@pytest.mark.postgres
def test_an_empty_database_suggests_train_on_that_database(tmp_path: Path, postgres_backend: object) -> None:
    """``memory stats --db postgresql://...`` of an empty (migrated) database suggests ``train``
    with the same ``--db`` and no password; run as printed, it trains there, not into
    ``./diagevo.db``."""
    url = make_url(postgres_backend.fresh_url()).set(password="s3cret-pw")  # type: ignore[attr-defined]
    db = url.render_as_string(hide_password=False)  # the server trusts 127.0.0.1: any password works
    open_log(db).close()  # migrated, no runs
    refused = diagevo(tmp_path, "memory", "stats", "--db", db)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1 and "s3cret" not in refused.stderr
    words = printed(refused.stderr)
    assert words[1:3] == ["train", "--db"] and make_url(words[3]).database == url.database and len(words) == 4
    listed = diagevo(tmp_path, "runs", "--db", db)  # `runs` says the same, with exit code 0
    assert listed.returncode == 0 and shlex.split(suggestions(listed.stdout)[0]) == words  # then the round protocol's
    # as printed, with a smaller round so the test stays short
    run_as_printed(tmp_path, shlex.join([*words, "--rounds", "1", "--quiet", *SMALL]))
    with open_log(db, create=False) as store:
        (run,) = store.runs()
    assert committed(db, run) == [1]
    assert not (tmp_path / "diagevo.db").exists()
    missing = diagevo(tmp_path, "memory", "stats", "--db", db, "--run", "nope")
    assert printed(missing.stderr)[1:3] == ["runs", "--db"]
    assert run.encode() in run_as_printed(tmp_path, missing.stderr.split("`")[1]).stdout.encode()


def test_a_missing_sqlite_file_suggests_train_on_that_file(tmp_path: Path) -> None:
    """A read command on a SQLite file that does not exist creates nothing and suggests the
    ``train`` that creates it; run as printed, the run lands in that file."""
    refused = diagevo(tmp_path, "memory", "stats", "--db", "sqlite:///elsewhere.db")
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1
    assert refused.stderr.startswith("error: no database at elsewhere.db: start one with `")
    words = printed(refused.stderr)
    assert words[1:] == ["train", "--db", "sqlite:///elsewhere.db"] and list(tmp_path.iterdir()) == []
    run_as_printed(tmp_path, shlex.join([*words, "--run", "r", "--rounds", "1", "--quiet", *SMALL]))
    assert committed(f"sqlite:///{tmp_path / 'elsewhere.db'}", "r") == [1]
    assert not (tmp_path / "diagevo.db").exists()


def _lines(stream: object, out: queue.Queue[str | None]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        out.put(line.rstrip("\n"))
    out.put(None)


def piped(cwd: Path, args: list[str]) -> subprocess.Popen[str]:
    """``diagevo ARGS`` with its stderr piped to the test, Ctrl-C as a user's terminal delivers it."""
    return subprocess.Popen(
        [str(ENTRY), *args],
        cwd=cwd,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def interrupt_at(cwd: Path, args: list[str], pattern: str, nth: int) -> str:
    """Run ``diagevo ARGS`` piped, send Ctrl-C when ``pattern`` has shown ``nth`` times on stderr;
    the line it ends with."""
    proc = piped(cwd, args)
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stderr, lines), daemon=True).start()
    seen, matches, sent = [], 0, False
    try:
        while (line := lines.get(timeout=300)) is not None:
            seen.append(line)
            matches += not sent and re.search(pattern, line) is not None
            if not sent and matches == nth:
                proc.send_signal(signal.SIGINT)
                sent = True
        assert proc.wait(timeout=120) == 130, seen[-5:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert sent and seen[-1].startswith("interrupted"), seen[-5:]
    return seen[-1]


@pytest.mark.slow
def test_ctrl_c_of_train_rounds_3_resumes_to_round_3(tmp_path: Path) -> None:
    """The issue's case: Ctrl-C in round 2 of ``train --rounds 3``; the printed command trains
    rounds 2 and 3 and stops there (the run's stored target), not at the config's 5."""
    db = "sqlite:///cut.db"  # relative, not the default
    line = interrupt_at(
        tmp_path, ["train", "--db", db, "--run", "r", "--rounds", "3", *SMALL], r"\] challenger GRPO 0/", 2
    )
    assert line.startswith("interrupted in round 2: continue with `")
    words = printed(line)
    assert words[1:] == ["train", "--resume", "--run", "r", "--db", db]
    assert committed(f"sqlite:///{tmp_path / 'cut.db'}", "r") == [1]
    run_as_printed(tmp_path, shlex.join(words))
    assert committed(f"sqlite:///{tmp_path / 'cut.db'}", "r") == [1, 2, 3]


@pytest.mark.slow
def test_the_fork_hint_continues_the_fork(tmp_path: Path) -> None:
    db = "sqlite:///f.db"
    done = diagevo(tmp_path, "train", "--db", db, "--run", "src", "--rounds", "2", "--quiet", *SMALL)
    assert done.returncode == 0, done.stderr
    for line in [ln for ln in done.stdout.splitlines() if ln.strip().startswith(str(ENTRY))]:  # the `try:` lines
        assert shlex.split(line)[-4:-2] == ["--db", db]
        run_as_printed(tmp_path, line.strip())
    forked = diagevo(tmp_path, "memory", "fork", "--db", db, "--run", "src", "--round", "1", "--to", "f")
    assert forked.returncode == 0, forked.stderr
    words = printed(forked.stdout)
    assert words[1:5] == ["train", "--run", "f", "--resume"] and words[-2:] == ["--db", db]
    run_as_printed(tmp_path, shlex.join(words))
    assert committed(f"sqlite:///{tmp_path / 'f.db'}", "f") == [1, 2]  # the source's target, from round 1 on
    stats = json.loads(diagevo(tmp_path, "memory", "stats", "--db", db, "--run", "f", "--json").stdout)
    assert [r["round"] for r in stats["rounds"]] == [1, 2]


@needs_benchmarks
def test_ctrl_c_of_eval_prints_the_command_that_resumes_it(tmp_path: Path) -> None:
    """Ctrl-C of ``diagevo eval`` into a pipe, after its first batch was saved and while the
    second waits on the server: one line with the command; run as printed, it generates only the
    questions not saved (``4 resumed``) and the outputs end complete and in order."""
    from tests.llm_server import Hang, LLMServer
    from tests.test_eval import SHARED, answering, gsm_answers

    answers = answering(gsm_answers(wrong={2}))
    calls, hanging = [0], [True]

    def first_batch_only(body: dict[str, object]) -> object:
        calls[0] += 1
        return Hang(300) if hanging[0] and calls[0] > 4 else answers(body)  # batch 2 waits on the server

    out = tmp_path / "o" / "served" / "gsm8k.jsonl"
    with LLMServer() as srv:
        srv.default("other", first_batch_only)
        args = ["eval", "--model", "served", "--url", srv.url, "--out", "o", "--batch-size", "4", "--limit", "10"]
        args += ["--bench", f"gsm8k={SHARED / 'gsm8k_test.jsonl'}"]
        proc = piped(tmp_path, args)
        try:
            # every request of batch 2 at the server (they go out together), so that none of the
            # interrupted process's arrives late, counted as the resumed one's
            while calls[0] < 8 or not (out.is_file() and len(out.read_text().splitlines()) == 4):
                assert proc.poll() is None, proc.communicate()[1]
                threading.Event().wait(0.05)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 130, err
        lines = err.strip().splitlines()
        assert lines[0].lstrip("[ 0123456789s]").startswith("gsm8k 0/10")  # progress into the pipe
        assert lines[-1].startswith("interrupted: continue with `") and "Traceback" not in err
        words = printed(lines[-1])
        assert words[1:] == args
        hanging[0] = False
        before = len(srv.calls("other"))
        resumed = run_as_printed(tmp_path, shlex.join(words))
        assert len(srv.calls("other")) - before == 6
    assert "(4 resumed)" in resumed.stdout
    assert [json.loads(line)["index"] for line in out.read_text().splitlines()] == list(range(10))
