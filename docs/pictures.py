"""Regenerate the pictures of the documentation (docs/img/) from a real run: ``make pictures``.

- ``train.svg``: a terminal recording of ``diagevo train`` on the simulator (two small rounds),
  its colours kept, through Rich's SVG export;
- ``replay.svg``: ``diagevo memory replay --round 2`` of that run (the memory tree);
- ``report.png``: the top of ``diagevo report`` of that run in headless Chromium at 1,280 px
  (playwright; Debian's ``chromium``).

Everything runs in a temporary directory; only the three files are written here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMG = ROOT / "docs" / "img"
SMALL = ["--set", "train.challenger_questions=16", "--set", "train.curriculum_questions=48"]


def diagevo(args: list[str], cwd: Path, width: int = 96) -> str:
    """The command's output with its colours (Rich forced to a terminal of ``width`` columns)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "FORCE_COLOR": "1",
        "COLUMNS": str(width),
        "TERM": "xterm-256color",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    env.pop("NO_COLOR", None)
    done = subprocess.run(
        [sys.executable, "-m", "diagevo.cli.app", *args], cwd=cwd, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"diagevo {' '.join(args)} failed: {done.stderr[-2000:]}")
    return done.stdout + done.stderr


def save_svg(ansi: str, path: Path, title: str, width: int = 96) -> None:
    from rich.console import Console
    from rich.text import Text

    console = Console(record=True, width=width, file=open(os.devnull, "w"), force_terminal=True)
    console.print(Text.from_ansi(ansi.rstrip("\n")), soft_wrap=True)
    console.save_svg(str(path), title=title)


def screenshot(html: Path, path: Path) -> None:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(html.as_uri())
        page.wait_for_timeout(500)
        page.screenshot(path=str(path), type="png")
        browser.close()


def main() -> None:
    IMG.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="diagevo-pictures-") as tmp:
        work = Path(tmp)
        run = diagevo(["train", "--run", "demo", "--rounds", "2", "--quiet", *SMALL], work)
        save_svg("$ diagevo train --run demo --rounds 2\n" + run, IMG / "train.svg", "diagevo train")
        tree = diagevo(["memory", "replay", "--round", "2", "--run", "demo"], work)
        lines = tree.splitlines()
        if len(lines) > 40:  # the top of the tree and the schedule's first lines: a picture, not the whole memory
            lines = [*lines[:38], "…"]
        save_svg(
            "$ diagevo memory replay --round 2 --run demo\n" + "\n".join(lines),
            IMG / "replay.svg",
            "diagevo memory replay",
        )
        diagevo(["report", "--run", "demo", "-o", str(work / "report.html")], work)
        screenshot(work / "report.html", IMG / "report.png")
    for name in ("train.svg", "replay.svg", "report.png"):
        print(f"{IMG / name}: {(IMG / name).stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
