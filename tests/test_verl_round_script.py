"""Issue 83: the round script (``examples/verl_round.sh``) takes no server but its own as the
round's frozen solver. A server already answering on its port was taken for it (its answers then
rewarded the challenger): the script now refuses that port before it writes anything, serves the
solver under a name of this round alone, and names that model to the challenger's reward.

Issue 93: every wait of the script is bounded and says what it waits for: the port check waited
forever, without a word, on a process that takes the connection and never answers."""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

import diagevo
from diagevo.catalog import FailureDiagnosed, FailureRecorded, RoundCommitted
from diagevo.rounds import commit_counts, logged_questions
from diagevo.verl import rollout_failures
from tests.llm_server import LLMServer

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "verl_round.sh"


def round_env(tmp_path: Path, port: int, **more: str) -> dict[str, str]:
    """The script's environment for round 1 of run ``r`` in ``tmp_path``, diagevo's environment first on PATH."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {
        **os.environ,
        "PATH": path,
        "RUN": "r",
        "SOLVER": "solver-0",
        "CHALLENGER": "challenger-0",
        "ROUND": str(tmp_path / "round"),
        "PORT": str(port),
        "DB": f"sqlite:///{tmp_path / 'x.db'}",
        **more,
    }


def test_a_port_another_server_answers_on_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    with LLMServer() as srv:
        port = urlsplit(srv.url).port
        assert port is not None
        env = round_env(tmp_path, port)
        done = subprocess.run(["bash", str(SCRIPT)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and f"port {port} answers already" in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no database, no round folder


def test_a_port_held_by_a_process_that_never_answers_is_refused_in_time(tmp_path: Path) -> None:
    """A listener that takes the connection and never answers (a wedged server): the check gives
    up after PORT_CHECK_S and refuses the port, naming the wait (it waited forever, silently)."""
    with socket.create_server(("127.0.0.1", 0)) as wedged:
        port = wedged.getsockname()[1]
        env = round_env(tmp_path, port, PORT_CHECK_S="1")
        done = subprocess.run(["bash", str(SCRIPT)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=30)
        wedged.settimeout(5)
        held, _ = wedged.accept()  # the connection the check made, taken and never answered
        held.close()
    assert done.returncode == 1, done.stderr
    assert f"port {port} is taken" in done.stderr and "did not answer within 1 s (PORT_CHECK_S" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no database, no round folder


def test_the_wait_for_the_solver_server_is_bounded_and_said(tmp_path: Path) -> None:
    """A ``vllm serve`` that never serves the solver (here one that only sleeps): the script says
    what it waits for, and stops after SERVE_WAIT_S naming it (it waited as long as the process lived)."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "vllm").write_text("#!/bin/sh\nexec sleep 60\n")
    (stubs / "vllm").chmod(0o755)
    with socket.create_server(("127.0.0.1", 0)) as probe:  # a port nothing listens on once closed
        port = probe.getsockname()[1]
    env = round_env(tmp_path, port, SERVE_WAIT_S="3")
    env["PATH"] = f"{stubs}{os.pathsep}{env['PATH']}"
    done = subprocess.run(["bash", str(SCRIPT)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert f"waiting for vllm serve to serve solver-0 on port {port}" in done.stderr, done.stderr
    assert f"did not serve solver-0 on port {port} within 3 s (SERVE_WAIT_S)" in done.stderr, done.stderr


def test_the_challengers_reward_is_told_the_model_this_round_serves() -> None:
    """The served name is the round's own, and the challenger's reward asks the server for it (a
    server of another model answers its requests with HTTP 404, naming what it serves)."""
    text = SCRIPT.read_text(encoding="utf-8")
    serve = next(line.strip() for line in text.splitlines() if line.strip().startswith("vllm serve"))
    assert shlex.split(serve)[shlex.split(serve).index("--served-model-name") + 1] == "$SERVED"
    assert 'reward.custom_reward_function.reward_kwargs.solver_model="$SERVED"' in text
    assert 'grep -q "\\"$SERVED\\""' in text  # waited for until the server lists it


# --- issue 92: a round picks up where it stopped (verl's and vLLM's entry points stubbed) --------

SIZES = [
    "train.challenger_questions=6",
    "train.curriculum_questions=5",
    "grpo.construction_responses=4",
    "solver.max_steps=2",
    "challenger.max_steps=2",
]
STUBS = {
    "verl/__init__.py": "",
    "verl/trainer/__init__.py": "",
    "verl/_stub.py": r'''"""What the stubs share: verl's command line, the log of the steps they run, the kill points.

STUB_LOG: the file a stub appends ``start NAME``, then ``done NAME`` or ``killed NAME`` to.
STUB_KILL: ``NAME`` kills the step NAME midway (its output half written), ``NAME:after`` once it is
done (its outputs whole, the process killed before it exits)."""
import os
import sys


def args():
    """hydra's overrides (``key=value``, a leading ``+`` or ``++`` dropped) and ``--flag value``."""
    out, argv = {}, sys.argv[1:]
    while argv:
        word = argv.pop(0)
        if word.startswith("--"):
            out[word[2:]] = argv.pop(0)
        else:
            key, _, value = word.partition("=")
            out[key.lstrip("+")] = value
    return out


def log(line):
    with open(os.environ["STUB_LOG"], "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def start(name):
    log(f"start {name}")


def midway(name):
    return os.environ.get("STUB_KILL") == name


def die(name):
    log(f"killed {name}")
    os._exit(137)


def done(name):
    log(f"done {name}")
    if os.environ.get("STUB_KILL") == f"{name}:after":
        die(name)
''',
    "verl/trainer/main_ppo.py": r'''"""
verl's trainer as the round script runs it, its outputs in verl's layout: a checkpoint
(``global_step_N/actor``, then ``latest_checkpointed_iteration.txt``) at each trainer.save_freq step
and the last, resumed from the latest (verl's resume_mode auto). The challenger's asks the served
solver for its models (its reward's server); the solver's scores a right and a wrong response to
each prompt with diagevo's compute_score (given the export tag of its reward_kwargs, as verl calls
it) and dumps them, a ``STEP.jsonl`` a step (trainer.rollout_data_dir)."""
import json
from pathlib import Path
from urllib.request import urlopen

import pyarrow.parquet as pq

from verl import _stub

a = _stub.args()
role = a["config-name"]
name = f"main_ppo {role}"
_stub.start(name)
rows = pq.read_table(a["data.train_files"]).to_pylist()
steps, every = int(a["trainer.total_training_steps"]), int(a["trainer.save_freq"])
kwargs = "reward.custom_reward_function.reward_kwargs."
if role == "challenger":
    with urlopen(a[kwargs + "solver_url"] + "/models", timeout=10) as answer:
        served = [m["id"] for m in json.load(answer)["data"]]
    assert a[kwargs + "solver_model"] in served, served
else:
    from diagevo.verl import compute_score

    dump = Path(a["trainer.rollout_data_dir"])
    dump.mkdir(parents=True, exist_ok=True)
ckpt = Path(a["trainer.default_local_dir"])
latest = ckpt / "latest_checkpointed_iteration.txt"
for step in range(int(latest.read_text()) + 1 if latest.is_file() else 1, steps + 1):
    killed = _stub.midway(name) and step == steps  # in its last step: its dump half written, no checkpoint
    if role == "solver":
        lines = []
        for row in rows:
            label, info = row["reward_model"]["ground_truth"], row["extra_info"]
            chat = "".join(f"{m['role']}\n{m['content']}\n" for m in row["prompt"]) + "assistant\n"
            for response in (f"\\boxed{{{label}}}", f"it is \\boxed{{{label}0}}"):
                score = compute_score(row["data_source"], response, label, info, export=a[kwargs + "export"])["score"]
                line = {"input": chat, "output": response, "gts": label, "score": score, "step": step}
                lines.append(json.dumps({**line, "uid": f"u{len(lines)}"}) + "\n")
        with open(dump / f"{step}.jsonl", "w", encoding="utf-8") as fh:
            fh.writelines(lines[: len(lines) // 2] if killed else lines)
    if killed:
        _stub.die(name)
    if step % every == 0 or step == steps:
        actor = ckpt / f"global_step_{step}" / "actor"
        actor.mkdir(parents=True, exist_ok=True)
        (actor / "model.pt").write_text(f"{role} at step {step}")
        latest.write_text(str(step))
_stub.done(name)
''',
    "verl/trainer/main_generation_server.py": r'''"""
verl's generation entry point: the input's columns and ``responses``, n a row, written with
pandas to data.output_path. The challenger writes a question for each request (``What is A + B?``,
from the request's index; STUB_VARIANT shifts B); the solver answers each question n times, the sum
boxed, one answer in four wrong but for every third question (STUB_VARIANT: another answer wrong)."""
import os
import re
from pathlib import Path

import pandas as pd

from verl import _stub

a = _stub.args()
role = a["config-name"]
name = f"generation {role}"
_stub.start(name)
frame = pd.read_parquet(a["data.train_files"])
n, variant = int(a["actor_rollout_ref.rollout.n"]), int(os.environ.get("STUB_VARIANT", "0"))


def answers(info):
    total = sum(int(x) for x in re.findall(r"[0-9]+", info["question"]))
    wrong = variant + (0 if info["index"] % 3 == 0 else 1)
    return [f"\\boxed{{{total}}}"] * (n - wrong) + [f"\\boxed{{{total + 1}}}"] * wrong


if role == "challenger":
    assert Path(a["actor_rollout_ref.model.path"]).is_dir(), "the merged challenger generates Q^cur"
    frame["responses"] = [
        [f"<question>What is {info['index'] + 2} + {3 * info['index'] + 1 + variant}?</question>"] * n
        for info in frame["extra_info"]
    ]
else:
    frame["responses"] = [answers(info) for info in frame["extra_info"]]
out = Path(a["data.output_path"])
if _stub.midway(name):
    out.write_bytes(b"PAR1 half written")
    _stub.die(name)
frame.to_parquet(out)
_stub.done(name)
''',
    "verl/model_merger.py": r'''"""
verl's model merger (``merge --backend fsdp --local_dir D --target_dir T``): a Hugging Face
directory in T, its config then its weights."""
import json
from pathlib import Path

from verl import _stub

a = _stub.args()
target = Path(a["target_dir"])
name = f"merge {target.name.removesuffix('.partial')}"
_stub.start(name)
local = Path(a["local_dir"])
assert (local / "model.pt").is_file(), f"no checkpoint in {local}"
target.mkdir(parents=True, exist_ok=True)
(target / "config.json").write_text(json.dumps({"merged_from": local.parent.name}))
if _stub.midway(name):
    _stub.die(name)
(target / "model.safetensors").write_text((local / "model.pt").read_text())
_stub.done(name)
''',
}
VLLM = r'''"""vllm serve MODEL --served-model-name NAME --port PORT: GET /v1/models lists NAME."""
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

argv = sys.argv[1:]
name, port = argv[argv.index("--served-model-name") + 1], int(argv[argv.index("--port") + 1])
with open(os.environ["STUB_LOG"], "a", encoding="utf-8") as fh:
    fh.write("start vllm serve\n")


class Models(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": name, "object": "model"}]}).encode()
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


HTTPServer(("127.0.0.1", port), Models).serve_forever()
'''
DIAGEVO = r"""#!/usr/bin/env bash
# diagevo as the script runs it, logged as the stubs are: a kill before a command (STUB_KILL=NAME)
# or after it (NAME:after), NAME being "diagevo" and its command ("diagevo round record").
name="diagevo $1${2:+ $2}"
[[ $1 == diagnose ]] && name="diagevo diagnose"
echo "start $name" >> "$STUB_LOG"
[[ ${STUB_KILL:-} == "$name" ]] && { echo "killed $name" >> "$STUB_LOG"; exit 137; }
"$REAL_DIAGEVO" "$@" || exit
echo "done $name" >> "$STUB_LOG"
[[ ${STUB_KILL:-} != "$name:after" ]] || { echo "killed $name" >> "$STUB_LOG"; exit 137; }
"""
STEPS = [
    "diagevo round start",
    "main_ppo challenger",
    "merge challenger",
    "generation challenger",
    "generation solver",
    "diagevo round record",
    "diagevo round promote",
    "main_ppo solver",
    "merge solver",
    "diagevo diagnose",
    "diagevo round commit",
]
"""The steps of a round, in order: each runs once in a round however often it is killed."""


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:  # a port nothing listens on once closed
        return probe.getsockname()[1]


def stub_env(tmp_path: Path, **more: str) -> dict[str, str]:
    """The script's environment in ``tmp_path`` with verl (on PYTHONPATH), ``vllm`` and ``diagevo``
    (first on PATH) stubbed, logging to ``tmp_path/log``."""
    stubs = tmp_path / "stubs"
    for name, source in STUBS.items():
        (stubs / "py" / name).parent.mkdir(parents=True, exist_ok=True)
        (stubs / "py" / name).write_text(source)
    (stubs / "bin").mkdir(exist_ok=True)
    (stubs / "bin" / "vllm").write_text(f"#!{sys.executable}\n{VLLM}")
    (stubs / "bin" / "diagevo").write_text(DIAGEVO)
    for exe in ("vllm", "diagevo"):
        (stubs / "bin" / exe).chmod(0o755)
    env = round_env(tmp_path, free_port(), STUB_LOG=str(tmp_path / "log"), PYTHONPATH=str(stubs / "py"), **more)
    env["REAL_DIAGEVO"] = str(Path(sys.executable).parent / "diagevo")
    env["PATH"] = f"{stubs / 'bin'}{os.pathsep}{env['PATH']}"
    return env


def stubbed(tmp_path: Path, **more: str) -> dict[str, str]:
    """:func:`stub_env`, and run ``r`` created with the small config of SIZES (round 1 not open)."""
    env = stub_env(tmp_path, **more)
    with diagevo.open_store(env["DB"]) as store:
        diagevo.start_run(store, "r", diagevo.load_config(None, SIZES), trainer="verl")
    return env


def run_round(env: dict[str, str], **more: str) -> subprocess.CompletedProcess[str]:
    log = Path(env["STUB_LOG"])
    log.write_text("")  # each run's own steps
    return subprocess.run(
        ["bash", str(SCRIPT)], env={**env, **more}, cwd=log.parent, capture_output=True, text=True, timeout=180
    )


def steps_of(env: dict[str, str], said: str = "done") -> list[str]:
    """The steps of STEPS the last run started (``said="start"``) or finished; the challenger's
    GRPO starts with serving the solver."""
    lines = Path(env["STUB_LOG"]).read_text().splitlines()
    named = [line.partition(" ")[2] for line in lines if line.partition(" ")[0] == said]
    steps = [("main_ppo challenger" if n == "vllm serve" else n) for n in named if n in (*STEPS, "vllm serve")]
    return [n for i, n in enumerate(steps) if not i or n != steps[i - 1]]


def the_round(db: str) -> dict[str, Any]:
    """What round 1 of run ``r`` holds: its questions (votes and filter), failures, diagnoses, commits."""
    with diagevo.open_store(db) as store:
        questions = [
            (q.question_id, q.text, q.pseudo_label, q.votes.retained) for q in logged_questions(store, "r", t=1)
        ]
        failures = sorted((e.event.failure_id, e.event.response) for e in store.read("r", types=(FailureRecorded,)))
        diagnosed = sorted(
            (e.event.failure_id, e.event.matched_cause, e.event.error_cause)
            for e in store.read("r", types=(FailureDiagnosed,))
        )
        commits = [commit_counts(e.event) for e in store.read("r", types=(RoundCommitted,))]
    return {"questions": questions, "failures": failures, "diagnosed": diagnosed, "commits": commits}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """One round run through the script without a kill: its folder and what the round holds."""
    tmp_path = tmp_path_factory.mktemp("uninterrupted")
    env = stubbed(tmp_path)
    done = run_round(env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert steps_of(env, "start") == steps_of(env) == STEPS  # each step once, in order
    return tmp_path, the_round(env["DB"])


def test_a_round_runs_end_to_end_through_the_script(uninterrupted: tuple[Path, dict[str, Any]]) -> None:
    """The stubs' round: questions voted on and filtered, the solver's dump read back into
    failures, diagnosed, committed once; every output whole in its place, nothing left half written."""
    tmp_path, held = uninterrupted
    retained = [q for q in held["questions"] if q[3]]
    assert len(held["questions"]) == 5 and 0 < len(retained) < 5
    assert len(held["failures"]) == 2 * len(retained)  # a wrong response a question at each of 2 steps
    assert [f for f, *_ in held["diagnosed"]] == [f for f, _ in held["failures"]]
    [commit] = held["commits"]
    assert (commit["questions"], commit["retained"], commit["failures"]) == (5, len(retained), len(held["failures"]))
    folder = tmp_path / "round"
    for model in ("challenger", "solver"):
        assert sorted(p.name for p in (folder / model).iterdir()) == ["config.json", "model.safetensors"]
    assert sorted(p.name for p in (folder / "rollouts").iterdir()) == ["1.jsonl", "2.jsonl"]
    assert (folder / "questions.parquet").is_file() and (folder / "constructed.parquet").is_file()
    assert not list(folder.glob("*.partial"))


KILLS = [
    "diagevo round start",
    "main_ppo challenger",  # midway: its checkpoint of step 1 written (trainer.save_freq=1), not step 2's
    "main_ppo challenger:after",  # trained (its last checkpoint whole), killed before the merge
    "merge challenger",  # midway: a model directory half written
    "generation challenger",  # midway: questions.parquet half written
    "generation solver",
    "diagevo round record",
    "diagevo round promote",
    "main_ppo solver",  # midway: its last step's dump half written
    "main_ppo solver:after",  # its dump whole, not yet moved into place
    "merge solver",
    "diagevo diagnose",  # then the test records the failures, as a diagnosis killed midway leaves them
    "diagevo diagnose:after",
    "diagevo round commit",
]


def test_a_round_killed_at_each_step_goes_on_where_it_stopped(
    tmp_path: Path, uninterrupted: tuple[Path, dict[str, Any]]
) -> None:
    """The script killed at every step in turn (midway, its output half written, or once done),
    each run again after the last kill: each run starts no step an earlier run finished, and the
    round is committed once with the questions, failures and diagnoses of the round run without a
    kill (issue 92: run again after a kill in the solver's step, the script redid the challenger's
    GRPO and both generations, then stopped at round record)."""
    env = stubbed(tmp_path, VERL_ARGS="trainer.save_freq=1")
    finished: list[str] = []
    for kill in KILLS:
        done = run_round(env, STUB_KILL=kill)
        assert done.returncode != 0, f"{kill}: {done.stderr[-2000:]}"
        started = steps_of(env, "start")
        assert started and not set(started) & set(finished), (kill, started, finished)
        assert started[-1] == kill.removesuffix(":after"), (kill, started)  # killed where it was told
        finished += steps_of(env)
        if kill == "main_ppo solver":  # the promotions decided: recording or promoting again names what is next
            refusals_name_the_next_step(env, tmp_path / "round")
        if kill == "diagevo diagnose":  # killed inside diagnose, its failures recorded and none diagnosed
            with diagevo.open_store(env["DB"]) as store:
                rnd = diagevo.Round(store, "r", 1)
                rnd.record_failures(rollout_failures(store, "r", tmp_path / "round" / "rollouts"))
                assert rnd.next_step == "diagnose"
    done = run_round(env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "round 1 of run r: next, commit" in done.stderr
    assert steps_of(env, "start") == steps_of(env) == ["diagevo round commit"]
    assert sorted([*finished, *steps_of(env)]) == sorted(STEPS)  # each step once
    assert the_round(env["DB"]) == uninterrupted[1]
    folder = tmp_path / "round"
    for model in ("challenger", "solver"):
        assert sorted(p.name for p in (folder / model).iterdir()) == ["config.json", "model.safetensors"]
    assert not list(folder.glob("*.partial"))


def refusals_name_the_next_step(env: dict[str, str], folder: Path) -> None:
    """Issue 92: round record --from-verl of a construction generated again (other votes) into a
    round whose promotions are decided named `round withdraw`, which the round refuses; it names the
    round's next step (the solver's training on solver.parquet, then its rollout dump diagnosed, then the
    commit), as round promote again does."""
    again = subprocess.run(  # the solver's construction generated again: other votes
        [sys.executable, "-m", "verl.trainer.main_generation_server", "--config-name", "solver"]
        + [f"data.train_files={folder / 'construct.parquet'}", f"+data.output_path={folder.parent / 'again.parquet'}"]
        + ["actor_rollout_ref.rollout.n=4"],
        env={**env, "STUB_VARIANT": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 0, again.stderr
    record = ["round", "record", "--from-verl", str(folder.parent / "again.parquet")]
    for args, refusal in (
        (record, "is recorded in round 1 of run 'r' already with another p1, and its promotions are decided"),
        (["round", "promote"], "promotions of round 1 in run 'r' are decided already"),
    ):
        refused = subprocess.run(
            [env["REAL_DIAGEVO"], *args, "--run", "r", "--db", env["DB"]], capture_output=True, text=True, timeout=60
        )
        said = " ".join(refused.stderr.split())
        assert refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert refusal in said and "round 1 goes on at its next step record_failures: train the solver" in said
        assert "solver.parquet" in said and "rollout dump" in said and "diagevo round commit --run r" in said
        assert "withdraw" not in said


def test_a_round_folder_of_a_committed_round_is_refused_before_anything_runs(
    tmp_path: Path, uninterrupted: tuple[Path, dict[str, Any]]
) -> None:
    """The script run again once its round is committed would open round 2 on round 1's files:
    refused in one line naming both rounds, before anything runs (no round opened, no stub run)."""
    shutil.copytree(uninterrupted[0], tmp_path, dirs_exist_ok=True)
    env = stub_env(tmp_path)
    done = run_round(env)
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    said = f"{tmp_path / 'round'} holds round 1 of run 'r' (its verl.json), committed; run 'r' stands at round 2"
    assert said + ": give round 2 its own ROUND" in done.stderr
    assert Path(env["STUB_LOG"]).read_text().split() == "start diagevo round status done diagevo round status".split()
    with diagevo.open_store(env["DB"]) as store:
        assert diagevo.Round(store, "r", 2).next_step == "open"
