"""The one example each command's help ends with, and the page of the documentation about it.

One table for the whole CLI, applied when the command tree is built (:func:`diagevo.cli.app.build`), so
no command function carries its own. Keys are command paths after ``diagevo`` (``""`` is
``diagevo --help`` itself); every command and group must have an entry
(``tests/test_cli_examples.py``), and every page must be one ``diagevo docs`` lists. A help names its
page as the command that shows it in any installation (``More: diagevo docs how-to/audit``); the CLI
reference links the page (rendered by ``docs/render.py`` when the site or the wheel is built).
"""

from __future__ import annotations

from typing import Any

# command path -> (the example a user most needs, the page about it as `diagevo docs` names it)
EXAMPLES: dict[str, tuple[str, str]] = {
    "": ("diagevo train --run demo --rounds 2", "getting-started"),
    "train": ("diagevo train --run demo --rounds 2", "getting-started"),
    "ablate": ("diagevo ablate --seeds 3 --rounds 7 --world 'all on'", "concepts/simulator"),
    "config": ("diagevo config --set memory.k=0.25", "reference/configuration"),
    "db": ("diagevo db upgrade --db postgresql+psycopg://owner@host/diagevo", "how-to/upgrade"),
    "db current": ("diagevo db current", "how-to/upgrade"),
    "db upgrade": ("diagevo db upgrade --db postgresql+psycopg://owner@host/diagevo", "how-to/upgrade"),
    "diagnose": (
        "diagevo diagnose failures.jsonl --run mine --round 3 --llm-url http://localhost:8000/v1 "
        "--model Qwen/Qwen3-4B-Instruct-2507",
        "how-to/own-trainer",
    ),
    "docs": ("diagevo docs how-to/audit", "getting-started"),
    "doctor": ("diagevo doctor --db postgresql+psycopg://me@127.0.0.1/diagevo", "getting-started"),
    "export": ("diagevo export dataset --run demo -o demo-dataset", "how-to/export-dataset"),
    "export dataset": ("diagevo export dataset --run demo -o demo-dataset", "how-to/export-dataset"),
    "export verl": ("diagevo export verl --run mine -o round1", "how-to/verl"),
    "eval": ("diagevo eval --run demo --select val.jsonl --bench math500=math500.jsonl", "how-to/evaluate"),
    "gpu-check": ("diagevo gpu-check --model models/smollm2 --out gpu-check/first", "how-to/gpus"),
    "memory": ("diagevo memory why C1 --run demo", "how-to/audit"),
    "memory diff": ("diagevo memory diff --run demo --run demo-k2", "how-to/replay-and-compare"),
    "memory events": ("diagevo memory events --type cause.reactivated", "how-to/audit"),
    "memory export": ("diagevo memory export --run demo -o demo.jsonl", "how-to/own-trainer"),
    "memory fork": ("diagevo memory fork --run demo --round 1 --to demo-k2", "how-to/replay-and-compare"),
    "memory ingest": ("diagevo memory ingest demo.jsonl --run demo-copy", "how-to/own-trainer"),
    "memory plot": ("diagevo memory plot -o lifecycle.svg", "how-to/report"),
    "memory reindex": ("diagevo memory reindex --run demo", "concepts/event-log"),
    "memory replay": ("diagevo memory replay --round 2 --run demo", "how-to/replay-and-compare"),
    "memory show": ("diagevo memory show --run demo", "how-to/audit"),
    "memory stats": ("diagevo memory stats --run demo --wide", "getting-started"),
    "memory verify": ("diagevo memory verify --run demo", "concepts/event-log"),
    "memory whatif": ("diagevo memory whatif --run demo --set memory.k=0.25,1,2", "how-to/what-if"),
    "memory why": ("diagevo memory why C1 --run demo", "how-to/audit"),
    "models": ("diagevo models smollm2 --out models/smollm2", "how-to/smollm2"),
    "models smollm2": ("diagevo models smollm2 --out models/smollm2", "how-to/smollm2"),
    "models tiny": ("diagevo models tiny --out models/tiny", "how-to/smollm2"),
    "models mini": ("diagevo models mini --out models/mini", "how-to/mini-world"),
    "report": ("diagevo report --run demo -o report.html", "how-to/report"),
    "round": ("diagevo round start --run mine --set memory.k=1.0", "how-to/own-trainer"),
    "round start": ("diagevo round start --run mine --set memory.k=1.0", "how-to/own-trainer"),
    "round requests": ("diagevo round requests --run mine --n 256 --jsonl", "how-to/own-trainer"),
    "round record": ("diagevo round record questions.jsonl --run mine --json", "how-to/own-trainer"),
    "round promote": ("diagevo round promote --run mine", "how-to/own-trainer"),
    "round withdraw": ("diagevo round withdraw --run mine --batch 212-267", "how-to/own-trainer"),
    "round commit": ("diagevo round commit --run mine --metric acc=0.71", "how-to/own-trainer"),
    "round status": ("diagevo round status --run mine --json", "how-to/own-trainer"),
    "runs": ("diagevo runs", "how-to/replay-and-compare"),
    "runs tag": ("diagevo runs tag demo baseline", "how-to/replay-and-compare"),
    "runs note": ("diagevo runs note demo 'k = 0.5, the paper default'", "how-to/replay-and-compare"),
}


def epilog(path: str) -> str | None:
    """The end of ``diagevo PATH --help``: the example and the command that shows the page (two
    paragraphs), or None for a command the table does not know."""
    entry = EXAMPLES.get(path)
    if entry is None:
        return None
    example, page = entry
    return f"Example:  {example}\n\nMore: diagevo docs {page}"


def command_paths(command: Any, prefix: str = "") -> dict[str, Any]:
    """Every command and group of a click tree by its path after ``diagevo`` (the root is ``""``)."""
    out = {prefix: command}
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        out.update(command_paths(sub, f"{prefix} {name}".strip()))
    return out
