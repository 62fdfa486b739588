"""``diagevo doctor``: what this installation can do, each check with the command that fixes it.

The checks live in :mod:`diagevo.doctor` (and the diagnostician's probes in
:mod:`diagevo.diagnosis.probe`); this module renders them, spelling each fix for the way diagevo
was installed (:mod:`diagevo.cli.fixes`). Exit code 0, unless a check the user asked for by naming
its subject (``--db``, ``--postgres``, ``--model``, ``--config``, ``--diagnostician``) is not ok: 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from diagevo.cli.common import JsonOpt, acting_on, console, emit_json
from diagevo.cli.fixes import detail, spell_fix
from diagevo.cli.safe import text
from diagevo.config.sections import DiagnosisConfig
from diagevo.diagnosis.probe import DiagnosticianProbe, StageProbe, probe_diagnostician
from diagevo.doctor import run_checks
from diagevo.errors import Check
from diagevo.text.urls import resolve_db_url
from diagevo.train.config import Config, load_config
from diagevo.train.folders import checkpoint_root
from diagevo.train.preflight import preflight

STYLE = {"ok": "green", "warning": "yellow", "missing": "red"}


def as_json(checks: Sequence[Check], probe: DiagnosticianProbe | None = None) -> dict[str, Any]:
    """The checks (and the diagnostician's probes) as ``diagevo doctor --json`` prints them."""
    out: dict[str, Any] = {
        "ok": not any(c.failed for c in checks) and (probe is None or probe.ok),
        "checks": [
            {
                "name": c.name,
                "status": c.status,
                "detail": detail(c),
                "asked": c.asked,
                "failed": c.failed,
                "fix": spell_fix(c.fix) if c.fix is not None else None,
                **({"facts": c.facts} if c.facts else {}),
            }
            for c in checks
        ],
    }
    if probe is not None:
        out["diagnostician"] = {
            "url": probe.url,
            "model": probe.model,
            "timeout_s": probe.timeout_s,
            "ok": probe.ok,
            **({"listed": _stage_json(probe.listed)} if probe.listed is not None else {}),
            "stages": [{**_stage_json(s), "reply": s.reply} for s in probe.stages],
        }
    return out


def _stage_json(s: StageProbe) -> dict[str, Any]:
    return {
        "stage": s.stage,
        "title": s.title,
        "verdict": s.verdict,
        "ok": s.ok,
        "detail": s.detail,
        "latency_s": s.latency_s,
        "fix": spell_fix(s.fix) if s.fix is not None else None,
    }


def print_checks(checks: Sequence[Check]) -> None:
    """One line a check (readable at any width, piped or not), its fix indented under it."""
    names = [c.name + (" *" if c.asked else "") for c in checks]
    width = max(map(len, names)) + 2
    for c, name in zip(checks, names):
        shown = detail(c)
        console.print(text((f"{c.status:<8}", STYLE[c.status]), " ", name.ljust(width), shown), soft_wrap=True)
        if c.fix is not None:
            console.print(text(" " * 9, "fix: ", (spell_fix(c.fix), "bold")), soft_wrap=True)


def print_probe(probe: DiagnosticianProbe) -> None:
    """The diagnostician's probes: a heading, then one line a stage with its verdict and why."""
    console.print()
    console.print(
        text(
            ("diagnostician *", "bold"),
            f" {probe.url}, model ",
            (probe.model, "bold"),
            f" (each probe {probe.timeout_s:g} s at most)",
        ),
        soft_wrap=True,
    )
    shown_stages = (*((probe.listed,) if probe.listed is not None else ()), *probe.stages)
    width = max(len(s.title) for s in shown_stages) + 2
    shown = None
    for s in shown_stages:
        style = ("green" if s.verdict == "ok" else "yellow") if s.ok else "red"
        console.print(text("  ", (f"{s.verdict:<23}", style), s.title.ljust(width), s.detail), soft_wrap=True)
        if not s.ok and s.reply:
            console.print(text(" " * 25, "reply: ", repr(s.reply[:120])), soft_wrap=True)
        if s.fix is not None and s.fix != shown:  # the same fix as the stage above: said once
            console.print(text(" " * 25, "fix: ", (spell_fix(s.fix), "bold")), soft_wrap=True)
        shown = s.fix


def _probe(
    url: str | None, model: str | None, cfg: Config | None, timeout_s: float | None
) -> DiagnosticianProbe | None:
    """The diagnostician named with ``--diagnostician`` (else the config's), probed stage by stage."""
    section = cfg.diagnosis if cfg is not None else DiagnosisConfig()
    target = url or section.llm_url
    if target is None:
        return None
    return probe_diagnostician(target, model or section.model, section, timeout_s)


DbOpt = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Database URL to check (default: $DIAGEVO_DB, else sqlite:///diagevo.db). Named: a problem exits 1.",
    ),
]
PostgresOpt = Annotated[
    str | None,
    typer.Option(
        "--postgres",
        help="PostgreSQL URL to reach (default: the --db when it is PostgreSQL, else the local server). Named: "
        "unreachable exits 1.",
    ),
]
ModelOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--model",
        metavar="PATH (repeatable)",
        help="A model directory to check besides those under models/. Named: incomplete exits 1.",
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="A TOML config: also the checks `train` runs before it starts (packages, model directories, GPUs, "
        "the diagnostician, disk), and the probes of its diagnosis.llm_url. Named: a problem exits 1.",
    ),
]
SetOpt = Annotated[list[str] | None, typer.Option("--set", help="Override a field of --config.")]
DiagnosticianOpt = Annotated[
    str | None,
    typer.Option(
        "--diagnostician",
        help="Base URL of an OpenAI-compatible server for the LLM diagnostician (http://HOST:8000/v1): one request "
        "of each stage (Prompts 1-4), built as a round builds it, and per stage whether it works and why not "
        "(unreachable, HTTP error, no structured outputs, thinking text, too slow). A stage that does not work "
        "exits 1.",
    ),
]
DiagnosticianModelOpt = Annotated[
    str | None,
    typer.Option(
        "--diagnostician-model",
        help="The model --diagnostician serves (default: diagnosis.model of --config, else "
        "Qwen/Qwen3-4B-Instruct-2507).",
    ),
]
TimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        min=0.1,
        help="Seconds each diagnostician probe may take (default: diagnosis.request_timeout_s, 60).",
    ),
]


def doctor(
    db: DbOpt = None,
    postgres: PostgresOpt = None,
    model: ModelOpt = None,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    diagnostician: DiagnosticianOpt = None,
    diagnostician_model: DiagnosticianModelOpt = None,
    timeout: TimeoutOpt = None,
    json: JsonOpt = False,
) -> None:
    acting_on(resolve_db_url(db))
    checks = run_checks(db=db, postgres=postgres, models=list(model or []))
    cfg = None
    if config is not None or set_:
        cfg = load_config(config, list(set_ or []))
        checks += preflight(cfg, checkpoint_root(cfg, resolve_db_url(db or cfg.db), move=False))
    probe = _probe(diagnostician, diagnostician_model, cfg, timeout)
    failed = [c.name for c in checks if c.failed] + (["diagnostician"] if probe is not None and not probe.ok else [])
    if json:
        emit_json(as_json(checks, probe))
    else:
        print_checks(checks)
        if probe is not None:
            print_probe(probe)
        if failed:
            console.print(
                text(("not ok: ", "red"), ", ".join(failed), " (named with an option: exit code 1)"), soft_wrap=True
            )
    if failed:
        raise typer.Exit(1)
