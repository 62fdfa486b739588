"""No credential is written anywhere (issue 28, item 7): passwords planted in ``--db``, in
``--set diagnosis.llm_url=http://host/v1?key=SECRET`` (a URL with ``user:password@`` is refused
there: the key goes in the environment), ``hf.vllm_server_url`` and
``diagnosis.api_key`` are looked for, byte for byte, in the log (the SQLite file, the
PostgreSQL rows), ``memory export``, the report, the printed plan, every command's output and
the internal-error traceback file; the redacted forms are there instead."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from diagevo.log import open_log
from diagevo.rounds import start_run
from diagevo.text.redaction import REDACTED, given_secrets, redact_argv, redact_config, redact_text
from diagevo.train.config import load_config
from diagevo.train.run import resumed_config
from tests.input_cases import cli

SECRETS = ("Secret1-llm", "Secret2-vllm", "Secret3-key", "Secret4-db")
SETS = [
    "--set",
    f"diagnosis.llm_url=http://llm.example/v1?key={SECRETS[0]}",
    "--set",
    f"hf.vllm_server_url=http://alice:{SECRETS[1]}@vllm.example:8000",
    "--set",
    f'diagnosis.api_key="{SECRETS[2]}"',
]


def no_secret(where: str, data: str | bytes) -> None:
    raw = data.encode() if isinstance(data, str) else data
    for s in SECRETS:
        assert s.encode() not in raw, f"{s} written in {where}"


def files_of(db_path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in db_path.parent.glob(db_path.name + "*"))


def test_a_planted_password_is_in_no_log_export_report_plan_or_output(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    db = f"sqlite:///{path}"
    outputs: list[tuple[str, str]] = []

    def run(*args: str) -> str:
        code, out, err = cli(*args)
        assert code == 0, err
        outputs.append((" ".join(args[:2]), out + err))
        return out

    run("round", "start", "--run", "r", "--db", db, *SETS)
    exported = run("memory", "export", "--run", "r", "--db", db)
    run("memory", "export", "--run", "r", "--db", db, "-o", str(tmp_path / "log.jsonl"))
    run("report", "--run", "r", "--db", db, "-o", str(tmp_path / "r.html"))
    run("memory", "events", "--json", "--run", "r", "--db", db)
    plan = run("train", "--dry-run", "--db", db, *SETS)
    run("train", "--dry-run", "--json", "--db", db, *SETS)

    no_secret("the SQLite log", files_of(path))
    no_secret("the export file", (tmp_path / "log.jsonl").read_text(encoding="utf-8"))
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    no_secret("the report", html)
    for where, out in outputs:
        no_secret(where, out)
    # what is there instead: the same URLs, their passwords redacted
    config = json.loads(exported.splitlines()[0])["data"]["config"]
    assert config["diagnosis"]["llm_url"] == f"http://llm.example/v1?key={REDACTED}"
    assert config["hf"]["vllm_server_url"] == f"http://alice:{REDACTED}@vllm.example:8000"
    assert config["diagnosis"]["api_key"] == REDACTED
    assert f"http://llm.example/v1?key={REDACTED}" in html and f"http://llm.example/v1?key={REDACTED}" in plan


def test_the_traceback_file_holds_no_password(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import diagevo.cli.train as train_command

    def broken(*_: object, **__: object) -> None:
        raise RuntimeError(
            f"cannot reach postgresql://user:{SECRETS[3]}@db.example/x nor http://bob:{SECRETS[0]}@h/v1 "
            f"(api_key={SECRETS[2]})"
        )

    monkeypatch.setattr(train_command, "show_plan", broken)
    monkeypatch.delenv("DIAGEVO_TRACEBACK", raising=False)
    db = f"postgresql://user:{SECRETS[3]}@db.example:5432/x"
    code, _, err = cli("train", "--dry-run", "--db", db, *SETS)
    assert code == 70, err
    no_secret("the internal-error line", err)
    trace = Path(err.strip().rsplit("traceback written to ", 1)[1].rstrip(")"))
    try:
        content = trace.read_text(encoding="utf-8")
        no_secret("the traceback file", content)
        assert "RuntimeError" in content and f"postgresql://user:{REDACTED}@db.example:5432/x" in content
        assert f"diagnosis.llm_url=http://llm.example/v1?key={REDACTED}" in content
    finally:
        trace.unlink()


@pytest.mark.postgres
def test_a_password_in_a_postgres_url_is_nowhere(pg_database: str, tmp_path: Path) -> None:
    """trust authentication ignores the password, so a URL that carries one still connects."""
    url = make_url(pg_database).set(password=SECRETS[3]).render_as_string(hide_password=False)
    outputs = []
    for args in (
        ["round", "start", "--run", "pg", *SETS],
        ["memory", "show", "--run", "pg"],
        ["memory", "export", "--run", "pg"],
        ["report", "--run", "pg", "-o", str(tmp_path / "pg.html")],
        ["memory", "verify", "--run", "pg"],
    ):
        code, out, err = cli(*args, "--db", url)
        assert code == 0, err
        outputs.append(out + err)
    for out in outputs:
        no_secret("output", out)
    no_secret("the report", (tmp_path / "pg.html").read_text(encoding="utf-8"))
    engine = create_engine(pg_database)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT run_id, type, data::text FROM events")).all()
    finally:
        engine.dispose()
    assert rows
    no_secret("the PostgreSQL log", repr(rows))


def test_a_resumed_run_takes_its_credentials_from_the_command(tmp_path: Path) -> None:
    url = f"http://llm.example/v1?key={SECRETS[0]}"
    cfg = load_config(None, [f"diagnosis.llm_url={json.dumps(url)}", 'train.run="r"'])
    with open_log(f"sqlite:///{tmp_path / 'r.db'}", create=True) as store:
        start_run(store, "r", cfg)
        stored = next(iter(store.read("r"))).event.config
        assert stored["diagnosis"]["llm_url"] == f"http://llm.example/v1?key={REDACTED}"
        before = store.last_seq("r")
        again = resumed_config(store, "r", cfg).config
        assert again.diagnosis.llm_url == url and store.last_seq("r") == before  # nothing recorded: same config
        other = load_config(None, ['diagnosis.llm_url="http://elsewhere.example/v1?key=x"'])
        assert resumed_config(store, "r", other).config.diagnosis.llm_url == f"http://llm.example/v1?key={REDACTED}"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("postgresql://user:p@ss@h:5432/db", f"postgresql://user:{REDACTED}@h:5432/db"),
        ("postgresql+psycopg://u:pw@127.0.0.1/test", f"postgresql+psycopg://u:{REDACTED}@127.0.0.1/test"),
        ("postgresql://user@h/db", "postgresql://user@h/db"),
        ("sqlite:////tmp/x.db", "sqlite:////tmp/x.db"),
        ("http://host:8000/v1", "http://host:8000/v1"),
        ("http://h/v1?api_key=K1&x=1", f"http://h/v1?api_key={REDACTED}&x=1"),
        ("http://h/v1?x=1&key=K2#top", f"http://h/v1?x=1&key={REDACTED}#top"),
        ("sorted(rows, key=lambda r: r[0])", "sorted(rows, key=lambda r: r[0])"),
        ("diagnosis.api_key=sk-1", f"diagnosis.api_key={REDACTED}"),
        ('{"hf_token": "t0k", "password": "pw"}', f'{{"hf_token": "{REDACTED}", "password": "{REDACTED}"}}'),
        ("Authorization: Bearer abc.def", f"Authorization: Bearer {REDACTED}"),
        ("max_new_tokens=1024 unexpected token: }", "max_new_tokens=1024 unexpected token: }"),
    ],
)
def test_redact_text(raw: str, shown: str) -> None:
    assert redact_text(raw) == shown


def test_redact_config_and_argv() -> None:
    config = {
        "diagnosis": {"api_key": "k", "llm_url": "http://b:p@h/v1", "model": "m"},
        "hf": {"max_new_tokens": 5, "hf_token": None},
    }
    assert redact_config(config) == {
        "diagnosis": {"api_key": REDACTED, "llm_url": f"http://b:{REDACTED}@h/v1", "model": "m"},
        "hf": {"max_new_tokens": 5, "hf_token": None},
    }
    assert redact_argv(["diagevo", "--token", "t", "--db", "postgresql://u:p@h/d"]) == [
        "diagevo",
        "--token",
        REDACTED,
        "--db",
        f"postgresql://u:{REDACTED}@h/d",
    ]
    assert given_secrets(redact_config(config), config) == [
        ("diagnosis.api_key", "k"),
        ("diagnosis.llm_url", "http://b:p@h/v1"),
    ]
