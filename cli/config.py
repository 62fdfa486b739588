"""``diagevo config``: the resolved configuration, each field with its description.

Printed as TOML with the descriptions as comments, so the output is itself a config file: unset
fields and secrets are commented out (TOML has no null; a secret is never printed).
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from diagevo.cli.common import JsonOpt, console, emit_json
from diagevo.cli.train import SetOpt, default_config
from diagevo.config.base import settings
from diagevo.text.redaction import REDACTED
from diagevo.text.untrusted import json_visible
from diagevo.train.config import load_config


def toml_value(value: Any) -> str:
    """A value as TOML spells it (a JSON string is a TOML basic string, and its escapes
    :func:`~diagevo.text.untrusted.json_visible`'s): no control character left."""
    return json_visible(json.dumps(value, ensure_ascii=False))


def config_command(
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="TOML config (default: configs/sim.toml, as for train).")
    ] = None,
    set_: SetOpt = None,
    json_out: JsonOpt = False,
) -> None:
    path = config or default_config()
    rows = settings(load_config(path, list(set_ or [])))
    if json_out:
        emit_json({"config": str(path) if path else None, "fields": [asdict(r) for r in rows]})
        return
    width = max(40, console.width - 2)
    out = Text()
    out.append(f"# resolved from {path or 'the defaults'}\n", style="dim")
    section = ""
    for r in rows:
        where, _, name = r.key.rpartition(".")
        if where != section:
            section = where
            out.append(f"\n[{section}]\n", style="bold")
        for line in textwrap.wrap(r.help, width - 2):
            out.append(f"# {line}\n", style="dim")
        unset = r.value is None or r.value == REDACTED
        line = f"{'# ' if unset else ''}{name} = {toml_value(r.value) if r.value is not None else ''}".rstrip()
        out.append(line, style="dim" if unset else "")
        if r.value != r.default and r.value is not None:
            out.append(f"    # default {'unset' if r.default is None else toml_value(r.default)}", style="dim")
        out.append("\n")
    console.print(out, soft_wrap=True, highlight=False)
