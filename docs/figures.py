"""The outputs and figures the documentation shows, produced by running the commands.

A page marks each generated block with two HTML comments (invisible on the site)::

    <!-- figures:NAME -->
    ...what the generator NAME wrote...
    <!-- /figures:NAME -->

``python docs/figures.py`` (``make docs-figures``) runs every generator and rewrites its block;
``--check`` rewrites nothing and exits 1 naming each stale block with a diff; ``--fast`` keeps to
the generators that take seconds (the fast tier of the tests runs ``--check --fast``); ``--only
NAME`` runs one. A generator runs diagevo's commands in a temporary directory, with this
checkout's CLI, and returns Markdown; the conclusions drawn from its figures are written by the
generator from the same figures, so they cannot say the opposite of them.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MARK = re.compile(r"(<!-- figures:(?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- /figures:(?P=name) -->)", re.S)
CLI = [sys.executable, "-c", "import sys; from diagevo.cli.app import main; sys.argv[0] = 'diagevo'; main()"]
ENV = {
    **os.environ,
    "PYTHONPATH": str(ROOT),
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "COLUMNS": "100",
    "NO_COLOR": "1",
}


def diagevo(cwd: Path, *args: str, columns: int = 100) -> str:
    """Run ``diagevo ARGS`` (this checkout's) in ``cwd``, ``columns`` wide; its stdout, trailing
    spaces stripped."""
    env = {**ENV, "COLUMNS": str(columns)}
    done = subprocess.run([*CLI, *args], cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"diagevo {' '.join(args)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return "\n".join(line.rstrip() for line in done.stdout.splitlines())


def train_plan(work: Path) -> str:
    """The plan of the first run, as ``diagevo train --run demo --dry-run`` prints it."""
    # the plan names this checkout's config: wrapped as if its path were as long as "<checkout>",
    # so that the block does not depend on where the checkout is
    columns = 100 + max(0, len(str(ROOT)) - len("<checkout>"))
    out = diagevo(work, "train", "--run", "demo", "--dry-run", columns=columns)
    out = out.replace(str(ROOT), "<checkout>").rstrip()
    return f"```text\n$ diagevo train --run demo --dry-run\n{out}\n```\n"


def k_comparison(work: Path) -> str:
    """One memory at round 3 (the default simulator config, seed 0, k = 0.5), continued to round 5
    with k = 0.25 and with k = 2.0: the table, its conclusion and the end of ``memory diff``."""
    diagevo(work, "train", "--run", "base", "--rounds", "3", "--quiet")
    for to, k in (("k025", "0.25"), ("k2", "2.0")):
        diagevo(work, "memory", "fork", "--run", "base", "--round", "3", "--to", to)
        diagevo(work, "train", "--run", to, "--resume", "--rounds", "5", "--set", f"memory.k={k}", "--quiet")
    stats = {r: json.loads(diagevo(work, "memory", "stats", "--run", r, "--json"))["rounds"] for r in ("k025", "k2")}
    diff = json.loads(diagevo(work, "memory", "diff", "--run", "k025", "--run", "k2", "--json"))
    tail = diagevo(work, "memory", "diff", "--run", "k025", "--run", "k2").strip().splitlines()

    def row(r: dict[str, Any]) -> list[str]:
        acc = r.get("heldout_acc")
        return [
            str(r["active"]),
            str(r["mastered"]),
            str(r["F"]),
            f"{r['epsilon_next']:.3f}",
            str(r["promotions"]),
            str(r["reactivations"]),
            "" if acc is None else f"{acc:.3f}",
        ]

    shared = stats["k025"][:3]
    first, last = row(shared[0]), row(shared[-1])
    lines = [
        "| round | run | active | mastered | F_t | ε_t+1 | promotions | reactivations | held-out acc |",
        "|---|---|---|---|---|---|---|---|---|",
        "| 1-3 | all three (shared history) | "
        + " | ".join(
            [
                f"{first[0]} → {last[0]}",
                f"{first[1]} → {last[1]}",
                f"{first[2]} → {last[2]}",
                f"{first[3]} → {last[3]}",
                ", ".join(str(r["promotions"]) for r in shared),
                ", ".join(str(r["reactivations"]) for r in shared),
                f"{first[6]} → {last[6]}",
            ]
        )
        + " |",
    ]
    for t in (4, 5):
        for name, label in (("k025", "k = 0.25"), ("k2", "k = 2.0")):
            r = next(x for x in stats[name] if x["round"] == t)
            lines.append(f"| {t} | {label} | " + " | ".join(row(r)) + " |")
    small, large = stats["k025"][-1], stats["k2"][-1]

    def more(key: str, what: str) -> str:
        a, b = small[key], large[key]
        if a == b:
            return f"as many {what} with either k ({a})"
        side = "the small k" if a > b else "the large k"
        return f"more {what} with {side} ({a} with k = 0.25, {b} with k = 2.0)"

    only = diff["causes_only_in"]
    text = (
        f"At round 5, ε_5 is {small['epsilon_next']:.2f} with k = 0.25 and {large['epsilon_next']:.2f} with k = 2.0; "
        f"{more('mastered', 'mastered causes')}, {more('active', 'Active causes')} and "
        f"{more('reactivations', 'reactivations in round 5')}. `memory diff` at round 5 finds "
        f"{len(diff['causes_differing'])} shared causes whose state or frequency differ, {len(only['k025'])} causes "
        f"only in the k = 0.25 run and {len(only['k2'])} only in the k = 2.0 run, all created after the fork; "
        f"{len(diff['same_id_differs'])} ids name a different cause in each run. It ends with"
    )
    start = next((i for i, ln in enumerate(tail) if "name a different cause" in ln), len(tail) - 1)
    block = "\n".join(tail[start:])
    return "\n".join(lines) + "\n\n" + _wrap(text) + "\n\n```text\n" + block + "\n```\n"


def audit(work: Path) -> str:
    """The audit how-to's commands and what they print, on the two-round run of Getting started."""
    diagevo(work, "train", "--run", "demo", "--rounds", "2", "--quiet")
    shown = []
    for args in (
        ("memory", "events", "--type", "cause.reactivated", "--run", "demo", "--limit", "5"),
        ("memory", "why", "C1", "--run", "demo"),
        ("memory", "verify", "--run", "demo"),
    ):
        shown.append(f"$ diagevo {' '.join(args)}\n{diagevo(work, *args).rstrip()}")
    # the chain hashes the events' times too: every run's last hash is its own
    shown[-1] = re.sub(r"hash [0-9a-f]{64}", "hash <64 hex digits, this run's own>", shown[-1])
    return "```text\n" + "\n\n".join(shown) + "\n```\n"


def whatif(work: Path) -> str:
    """The what-if how-to: a five-round run, its no-change what-if (``memory diff`` finds nothing)
    and a k sweep, as the commands print them."""
    diagevo(work, "train", "--run", "five", "--rounds", "5", "--quiet")
    shown = []
    for args in (
        ("memory", "whatif", "--run", "five", "--to", "five-same"),
        ("memory", "diff", "--run", "five", "--run", "five-same"),
        ("memory", "whatif", "--run", "five", "--set", "memory.k=0.25,0.5,1,2"),
        ("memory", "whatif", "--run", "five", "--set", "memory.theta_up=0.6,0.8,0.9"),
        ("memory", "whatif", "--run", "five", "--set", "memory.state_updates=false"),
    ):
        shown.append(f"$ diagevo {' '.join(args)}\n{diagevo(work, *args, columns=80).rstrip()}")
    return "```text\n" + "\n\n".join(shown) + "\n```\n"


def dataset(work: Path) -> str:
    """The dataset how-to: the export of the two-round run of Getting started, read back with
    polars and with datasets, and the head of its card."""
    diagevo(work, "train", "--run", "demo", "--rounds", "2", "--quiet")
    shown = "$ diagevo export dataset --run demo -o demo-dataset\n"
    shown += diagevo(work, "export", "dataset", "--run", "demo", "-o", "demo-dataset", columns=80).rstrip()
    # the card names the diagevo that wrote it (a development build: its commit), so its size is the
    # build's: shown as the width of the column, not a number that changes with every commit
    shown = re.sub(r"(│ README\.md +│ +- │) *[\d,]+ │", lambda m: m.group(1) + " varies │", shown)
    script = (
        "import polars as pl\n"
        "from datasets import load_dataset\n"
        "causes = pl.read_parquet('demo-dataset/causes.parquet')\n"
        "print(causes.select('cause_id', 'node_id', 'state', 'frequency').head(4))\n"
        "failures = load_dataset('demo-dataset', 'failures', cache_dir='hf-cache')['train']\n"
        "print(failures)\n"
        "print(failures.to_polars()['diagnosis'].value_counts(sort=True))\n"
    )
    env = {**ENV, "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(work / "hf"), "COLUMNS": "80", "POLARS_FMT_MAX_COLS": "8"}
    done = subprocess.run([sys.executable, "-c", script], cwd=work, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"reading the dataset back failed:\n{done.stderr[-2000:]}")
    card = (work / "demo-dataset" / "README.md").read_text(encoding="utf-8").splitlines()
    head = "\n".join(card[:12])
    return (
        "```text\n" + shown + "\n```\n\nRead back (the script below), with polars and with `datasets`:\n\n"
        "```text\n" + "\n".join(ln.rstrip() for ln in done.stdout.splitlines()) + "\n```\n\n"
        "The card's header begins:\n\n```yaml\n" + head + "\n```\n"
    )


# what a server constraining decoding to each stage's schema answers the probes of `doctor`
# (diagevo/diagnosis/probe.toml: 2 + 3 x 4 worked left to right, cause c1, nodes n1 and n2)
CONSTRAINED = {
    "extract": '{"matched_cause_id": "c1", "error_cause": null}',
    "deduplicate": '{"duplicate": true, "matched_cause_id": "c1"}',
    "assign_node": '{"create_new_node": false, "new_node_label": null, "assigned_node": "n1"}',
    "consolidate": '{"merge": true, "merged_label": "applies the conventional order of operations when evaluating '
    'arithmetic expressions with mixed operators"}',
}
FREE_TEXT = "The two attempts diverge at the first step: the failing one adds before it multiplies."
MODEL = "Qwen/Qwen3-4B-Instruct-2507"  # what the loopback server serves (GET /models lists it)


def _doctor_against(work: Path, replies: dict[str, str]) -> str:
    """``diagevo doctor --diagnostician`` against the loopback server of tests/llm_server.py
    answering each stage with ``replies``: its diagnostician section, port and timings written
    as PORT and T."""
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.llm_server", "--defaults", json.dumps(replies), "--model", MODEL],
        cwd=ROOT,
        env=ENV,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None and server.stdin is not None
        url = server.stdout.readline().strip()
        args = ["doctor", "--diagnostician", url, "--diagnostician-model", MODEL]
        done = subprocess.run([*CLI, *args], cwd=work, env=ENV, capture_output=True, text=True)
    finally:
        if server.stdin is not None:
            server.stdin.close()  # the server exits when its stdin closes
        server.wait(timeout=30)
    out = "\n".join(line.rstrip() for line in done.stdout.splitlines())
    if "diagnostician *" not in out:
        raise SystemExit(f"diagevo doctor exited {done.returncode} without its diagnostician section:\n{done.stderr}")
    shown = f"$ diagevo {' '.join(args)}\n(the installation's checks)\n" + out[out.index("diagnostician *") :].rstrip()
    shown = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", shown)
    shown += f"\n$ echo $?\n{done.returncode}"
    return re.sub(r"\b\d+\.\d\d s:", "T s:", shown)


def doctor_diagnostician(work: Path) -> str:
    """The probes of a server that constrains replies to each stage's schema, and of one that
    ignores ``response_format`` and answers free text."""
    shown = [_doctor_against(work, CONSTRAINED), _doctor_against(work, dict.fromkeys(CONSTRAINED, FREE_TEXT))]
    return "```text\n" + "\n\n".join(shown) + "\n```\n"


def _wrap(text: str, width: int = 100) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False))


@dataclass(frozen=True)
class Generator:
    page: str  # under docs/ (or README.md)
    fast: bool  # seconds: regenerated by the fast tier's check
    make: Callable[[Path], str]


GENERATORS: dict[str, Generator] = {
    "train-plan": Generator("getting-started.md", True, train_plan),
    "k-comparison": Generator("how-to/replay-and-compare.md", False, k_comparison),
    "audit": Generator("how-to/audit.md", True, audit),
    "doctor-diagnostician": Generator("how-to/diagnostician.md", True, doctor_diagnostician),
    "whatif": Generator("how-to/what-if.md", False, whatif),
    "dataset": Generator("how-to/export-dataset.md", True, dataset),
}


def page_path(page: str) -> Path:
    return ROOT / page if page == "README.md" else ROOT / "docs" / page


def blocks(text: str) -> dict[str, str]:
    """The generated blocks of a page: name -> body."""
    return {m.group("name"): m.group("body") for m in MARK.finditer(text)}


def replace_block(text: str, name: str, body: str) -> str:
    def sub(m: re.Match[str]) -> str:
        return m.group(1) + body + m.group(4) if m.group("name") == name else m.group(0)

    return MARK.sub(sub, text)


def run(names: list[str], check: bool) -> list[str]:
    """Regenerate ``names``; with ``check``, write nothing and return a diff per stale block."""
    stale: list[str] = []
    for name in names:
        gen = GENERATORS[name]
        path = page_path(gen.page)
        text = path.read_text(encoding="utf-8")
        if name not in blocks(text):
            raise SystemExit(f"{gen.page} has no <!-- figures:{name} --> block")
        with tempfile.TemporaryDirectory(prefix=f"figures-{name}-") as work:
            body = gen.make(Path(work))
        old = blocks(text)[name]
        if old == body:
            continue
        if check:
            diff = difflib.unified_diff(
                old.splitlines(), body.splitlines(), f"{gen.page} (committed)", f"{gen.page} (generated)", lineterm=""
            )
            stale.append(f"stale block {name} in {gen.page}:\n" + "\n".join(diff))
        else:
            path.write_text(replace_block(text, name, body), encoding="utf-8")
    return stale


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each stale block")
    ap.add_argument("--fast", action="store_true", help="only the generators that take seconds")
    ap.add_argument("--only", action="append", choices=sorted(GENERATORS), help="this generator (repeatable)")
    args = ap.parse_args(argv)
    names = args.only or [n for n, g in GENERATORS.items() if g.fast or not args.fast]
    stale = run(names, args.check)
    for s in stale:
        print(s)
    if stale:
        print(f"{len(stale)} stale block(s): run `make docs-figures` and commit the pages")
        return 1
    print(f"{len(names)} block(s) {'up to date' if args.check else 'written'}: {', '.join(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
