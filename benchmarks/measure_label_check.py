"""What the shared-error check (``filter.shared_error_check = "variants"``) did to a round's labels,
beside the arms without it: per ablation cell and round, the questions retained, the share of them
whose pseudo-label is right (the world's truth), the questions the check relabelled and doubted, and
the pseudo-label accuracy on the shared questions (Figure 3(c)). For a cell with the check, the same
candidates read three ways: the plain majority on the questions the filter alone keeps (the method
without the check), the check's labels on the questions it keeps, and a control that keeps as many
of the filter's questions as the check does, dropping the least confident (lowest p1) first: does
the check do more than keep fewer, surer questions?

    python benchmarks/measure_label_check.py --log sqlite:///ablation/mini-regime.db --round 1

Read from the log alone (``question.generated``, ``question.scored`` and ``round.committed``), the
truth from the mini world's rules; ``--json`` for one object per cell.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict

from diagevo.catalog import QuestionGenerated, QuestionScored, RoundCommitted
from diagevo.config.sections import FilterConfig
from diagevo.curriculum.equivalence import agrees
from diagevo.curriculum.filtering import keep
from diagevo.log import open_log
from diagevo.rounds.runs import run_config
from diagevo.train.mini.world import truth


def _right(label: str | None, text: str) -> bool | None:
    known = truth(text)
    return None if known is None else label is not None and agrees(label, known.answer)


def _share(oks: list[bool | None]) -> float | None:
    known = [ok for ok in oks if ok is not None]
    return sum(known) / len(known) if known else None


def readings(scored: list[QuestionScored], texts: dict[str, str], rule: FilterConfig) -> dict[str, object]:
    """The check's cell read three ways (the module docstring): without it, with it, the control."""
    plain = [s for s in scored if s.pseudo_label is not None and keep(s.p1, s.p2, rule)]
    checked = [s for s in scored if s.retained]
    surest = sorted(plain, key=lambda s: -s.p1)[: len(checked)]
    majority = lambda s: s.majority_label or s.pseudo_label  # noqa: E731
    return {
        "without_check": (len(plain), _share([_right(majority(s), texts[s.question_id]) for s in plain])),
        "with_check": (len(checked), _share([_right(s.pseudo_label, texts[s.question_id]) for s in checked])),
        "control_surest": (len(surest), _share([_right(majority(s), texts[s.question_id]) for s in surest])),
    }


def cell_figures(db: str, at_round: int) -> list[dict[str, object]]:
    out = []
    with open_log(db, readonly=True) as store:
        for run in sorted(store.runs()):
            parts = run.split("/")
            if len(parts) != 4 or parts[0] != "ablate":
                continue
            texts: dict[str, str] = {}
            scored: list[QuestionScored] = []
            shared = None
            for e in store.read(run, types=(QuestionGenerated, QuestionScored, RoundCommitted), texts=True):
                if e.round != at_round:
                    continue
                if isinstance(e.event, QuestionGenerated):
                    texts[e.event.question_id] = e.event.text
                elif isinstance(e.event, QuestionScored):
                    scored.append(e.event)
                elif isinstance(e.event, RoundCommitted):
                    shared = e.event.pseudo_label_acc
            kept = [s for s in scored if s.retained]
            right = [ok for s in kept if (ok := _right(s.pseudo_label, texts[s.question_id])) is not None]
            rule = run_config(store, run).filter
            checked = rule.shared_error_check == "variants"
            out.append(
                {
                    "log": db.rsplit("/", 1)[-1],
                    "arm": parts[2],
                    "seed": int(parts[3].removeprefix("s")),
                    "round": at_round,
                    "candidates": len(scored),
                    "retained": len(kept),
                    "kept_labels_right": sum(right) / len(right) if right else None,
                    "relabelled": sum(1 for s in scored if s.majority_label not in (None, s.pseudo_label)),
                    "doubted": sum(1 for s in scored if s.check_score == 0.0),
                    "shared_label_acc": shared,
                    **(readings(scored, texts, rule) if checked else {}),
                }
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", action="append", required=True, help="an ablation's log (repeatable)")
    ap.add_argument("--round", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = [row for db in args.log for row in cell_figures(db, args.round)]
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return
    print(
        "| log | arm | seed | candidates | retained | kept labels right | relabelled | doubted | shared labels right |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    by_arm: dict[str, list[dict[str, object]]] = defaultdict(list)
    for r in rows:
        by_arm[f"{r['log']}: {r['arm']}"].append(r)
        right, shared = r["kept_labels_right"], r["shared_label_acc"]
        print(
            f"| {r['log']} | {r['arm']} | {r['seed']} | {r['candidates']} | {r['retained']} | "
            f"{'–' if right is None else f'{right:.3f}'} | {r['relabelled']} | {r['doubted']} | "
            f"{'–' if shared is None else f'{shared:.3f}'} |"
        )
    checks = [r for r in rows if "with_check" in r]
    if checks:
        print("\n| cell | without the check: retained, labels right | with it | control: as many, surest first |")
        print("|---|---|---|---|")
        for r in checks:
            cols = [r[k] for k in ("without_check", "with_check", "control_surest")]
            print(f"| {r['log']}: {r['arm']} s{r['seed']} | " + " | ".join(f"{n}, {a:.3f}" for n, a in cols) + " |")  # type: ignore[misc]
    for arm, cells in sorted(by_arm.items()):
        right = [float(c["kept_labels_right"]) for c in cells if c["kept_labels_right"] is not None]  # type: ignore[arg-type]
        kept = [float(c["retained"]) for c in cells]  # type: ignore[arg-type]
        if right:
            print(
                f"\n{arm}: kept labels right {statistics.fmean(right):.3f}, retained {statistics.fmean(kept):.0f}"
                f" (mean of {len(cells)} seeds)",
                end="",
            )
    print()


if __name__ == "__main__":
    main()
