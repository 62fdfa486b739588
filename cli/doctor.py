"""``diagevo doctor``: what this installation can do, each check with the command that fixes it.

The checks live in :mod:`diagevo.doctor`; this module renders them. Exit code 0, unless a check
the user asked for by naming its subject (``--db``, ``--postgres``, ``--model``) is not ok: 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from diagevo.cli.common import JsonOpt, console, emit_json, spell
from diagevo.cli.safe import text

STYLE = {"ok": "green", "warning": "yellow", "missing": "red"}


def doctor(
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="Database URL to check (default: $DIAGEVO_DB, else sqlite:///diagevo.db). Named: a problem exits 1.",
        ),
    ] = None,
    postgres: Annotated[
        str | None,
        typer.Option(
            "--postgres",
            help=(
                "PostgreSQL URL to reach (default: the --db when it is PostgreSQL, else the local server). Named: "
                "unreachable exits 1."
            ),
        ),
    ] = None,
    model: Annotated[
        list[Path] | None,
        typer.Option(
            "--model",
            help="A model directory to check besides those under models/ (repeatable). Named: incomplete exits 1.",
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            help="A TOML config: also the checks `train` runs before it starts (packages, model directories, GPUs, "
            "the diagnostician, disk). Named: a problem exits 1.",
        ),
    ] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="Override a field of --config.")] = None,
    json: JsonOpt = False,
) -> None:
    """What this installation can do: database, disk, PostgreSQL, models, embedding model, hf
    backend, vLLM, Chromium, diagevo on PATH; each ok / warning / missing with its fix.
    Exits 1 only when something you named (--db, --postgres, --model) is not ok."""
    from diagevo.doctor import as_json, run_checks
    from diagevo.train.preflight import detail

    checks = run_checks(db=db, postgres=postgres, models=list(model or []))
    if config is not None or set_:
        from diagevo.config import load_config, resolve_db_url
        from diagevo.train.preflight import checkpoint_root, preflight

        cfg = load_config(config, list(set_ or []))
        checks += preflight(cfg, checkpoint_root(cfg, resolve_db_url(db or cfg.db)))
    failed = [c for c in checks if c.failed]
    if json:
        emit_json(as_json(checks, spell))
    else:
        # one line a check (readable at any width, piped or not), its fix indented under it
        names = [c.name + (" *" if c.asked else "") for c in checks]
        width = max(map(len, names)) + 2
        for c, name in zip(checks, names):
            name = name.ljust(width)
            console.print(text((f"{c.status:<8}", STYLE[c.status]), " ", name, detail(c, spell)), soft_wrap=True)
            if c.fix is not None:
                fix = c.fix if isinstance(c.fix, str) else spell(c.fix)
                console.print(text(" " * 9, "fix: ", (fix, "bold")), soft_wrap=True)
        if failed:
            console.print(
                text(("not ok: ", "red"), ", ".join(c.name for c in failed), " (named with an option: exit code 1)"),
                soft_wrap=True,
            )
    if failed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
