"""The one example each command's help ends with, and the page of the documentation about it.

One table for the whole CLI, applied when the command tree is built (:func:`diagevo.cli.app.build`), so
no command function carries its own. Keys are command paths after ``diagevo`` (``""`` is
``diagevo --help`` itself); every command and group must have an entry
(``tests/test_cli_examples.py``), and every page must exist under ``docs/``.
"""

from __future__ import annotations

from typing import Any

# command path -> (the example a user most needs, the page about it, relative to the repository)
EXAMPLES: dict[str, tuple[str, str]] = {
    "": ("diagevo train --run demo --rounds 2", "docs/getting-started.md"),
    "train": ("diagevo train --run demo --rounds 2", "docs/getting-started.md"),
    "ablate": ("diagevo ablate --seeds 3 --rounds 7 --world 'all on'", "docs/concepts/simulator.md"),
    "config": ("diagevo config --set memory.k=0.25", "docs/reference/configuration.md"),
    "db": ("diagevo db upgrade --db postgresql+psycopg://owner@host/diagevo", "docs/how-to/upgrade.md"),
    "db current": ("diagevo db current", "docs/how-to/upgrade.md"),
    "db upgrade": ("diagevo db upgrade --db postgresql+psycopg://owner@host/diagevo", "docs/how-to/upgrade.md"),
    "diagnose": (
        "diagevo diagnose failures.jsonl --run mine --round 3 --llm-url http://localhost:8000/v1 "
        "--model Qwen/Qwen3-4B-Instruct-2507",
        "docs/how-to/own-trainer.md",
    ),
    "doctor": ("diagevo doctor --db postgresql+psycopg://me@127.0.0.1/diagevo", "docs/getting-started.md"),
    "export": ("diagevo export dataset --run demo -o demo-dataset", "docs/how-to/export-dataset.md"),
    "export dataset": ("diagevo export dataset --run demo -o demo-dataset", "docs/how-to/export-dataset.md"),
    "export verl": ("diagevo export verl --run mine -o round1", "docs/how-to/verl.md"),
    "eval": ("diagevo eval --run demo --select val.jsonl --bench math500=math500.jsonl", "docs/how-to/evaluate.md"),
    "gpu-check": ("diagevo gpu-check --model models/smollm2 --out gpu-check/first", "docs/how-to/gpus.md"),
    "memory": ("diagevo memory why C1 --run demo", "docs/how-to/audit.md"),
    "memory diff": ("diagevo memory diff --run demo --run demo-k2", "docs/how-to/replay-and-compare.md"),
    "memory events": ("diagevo memory events --type cause.reactivated", "docs/how-to/audit.md"),
    "memory export": ("diagevo memory export --run demo -o demo.jsonl", "docs/how-to/own-trainer.md"),
    "memory fork": ("diagevo memory fork --run demo --round 1 --to demo-k2", "docs/how-to/replay-and-compare.md"),
    "memory ingest": ("diagevo memory ingest demo.jsonl --run demo-copy", "docs/how-to/own-trainer.md"),
    "memory plot": ("diagevo memory plot -o lifecycle.svg", "docs/how-to/report.md"),
    "memory reindex": ("diagevo memory reindex --run demo", "docs/concepts/event-log.md"),
    "memory replay": ("diagevo memory replay --round 2 --run demo", "docs/how-to/replay-and-compare.md"),
    "memory show": ("diagevo memory show --run demo", "docs/how-to/audit.md"),
    "memory stats": ("diagevo memory stats --run demo --wide", "docs/getting-started.md"),
    "memory verify": ("diagevo memory verify --run demo", "docs/concepts/event-log.md"),
    "memory whatif": ("diagevo memory whatif --run demo --set memory.k=0.25,1,2", "docs/how-to/what-if.md"),
    "memory why": ("diagevo memory why C1 --run demo", "docs/how-to/audit.md"),
    "models": ("diagevo models smollm2 --out models/smollm2", "docs/how-to/smollm2.md"),
    "models smollm2": ("diagevo models smollm2 --out models/smollm2", "docs/how-to/smollm2.md"),
    "models tiny": ("diagevo models tiny --out models/tiny", "docs/how-to/smollm2.md"),
    "report": ("diagevo report --run demo -o report.html", "docs/how-to/report.md"),
    "round": ("diagevo round start --run mine --set memory.k=1.0", "docs/how-to/own-trainer.md"),
    "round start": ("diagevo round start --run mine --set memory.k=1.0", "docs/how-to/own-trainer.md"),
    "round requests": ("diagevo round requests --run mine --n 256 --jsonl", "docs/how-to/own-trainer.md"),
    "round record": ("diagevo round record questions.jsonl --run mine --json", "docs/how-to/own-trainer.md"),
    "round promote": ("diagevo round promote --run mine", "docs/how-to/own-trainer.md"),
    "round commit": ("diagevo round commit --run mine --metric acc=0.71", "docs/how-to/own-trainer.md"),
    "runs": ("diagevo runs", "docs/how-to/replay-and-compare.md"),
    "runs tag": ("diagevo runs tag demo baseline", "docs/how-to/replay-and-compare.md"),
    "runs note": ("diagevo runs note demo 'k = 0.5, the paper default'", "docs/how-to/replay-and-compare.md"),
}


def epilog(path: str) -> str | None:
    """The end of ``diagevo PATH --help``: the example and the page (two paragraphs), or None
    for a command the table does not know."""
    entry = EXAMPLES.get(path)
    if entry is None:
        return None
    example, page = entry
    return f"Example:  {example}\n\nMore: {page}"


def epilog_markdown(escaped: str) -> str:
    """An applied epilog as Markdown for the CLI reference: the example as code, the page as a
    link relative to the reference page (``docs/reference/cli.md``)."""
    from rich.markup import render

    example, _, page = render(escaped).plain.partition("\n\nMore: ")
    command = example.removeprefix("Example:").strip()
    target = "../" + page.removeprefix("docs/")
    return f"Example: `{command}`  \nMore: [{page.removeprefix('docs/')}]({target})"


def command_paths(command: Any, prefix: str = "") -> dict[str, Any]:
    """Every command and group of a click tree by its path after ``diagevo`` (the root is ``""``)."""
    out = {prefix: command}
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        out.update(command_paths(sub, f"{prefix} {name}".strip()))
    return out


def apply(command: Any) -> Any:
    """Set each command's epilog from the table; the markup characters of an example are escaped
    (typer renders an epilog as Rich markup)."""
    from rich.markup import escape

    for path, sub in command_paths(command).items():
        text = epilog(path)
        if text is not None:
            sub.epilog = escape(text)
    return command
