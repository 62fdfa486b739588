"""The README's "What the simulator shows" tables, regenerated from ``diagevo ablate --json`` output;
with ``--log``, the mini world's results page tables and plot, read from the ablation's log.

    diagevo ablate --seeds 3 --rounds 7 --world "all on" --json > ablate.json
    python benchmarks/ablation_table.py ablate.json [more.json ...]
    python benchmarks/ablation_table.py --log sqlite:///ablation/mini.db --pair models/mini --svg docs/mini-ablation.svg
    python benchmarks/ablation_table.py --log sqlite:///ablation/mini.db --pair models/mini \
        --cells docs/data/mini-ablation-cells.json --save-cells docs/data/mini-ablation-cells.json

An ablation of many cells outlives a machine (a session's commands end with it; the log and the
checkpoints stay behind): ``--save-cells`` keeps every committed round of every cell read (the
logs' and the cells file's) in a small JSON file, with the pair's per-skill accuracy it started
from; ``--cells`` reads it back, so the next part (``diagevo ablate --seed N --variant A``) trains
only the cells missing and the tables are of them all. A cell in a log replaces the file's rows of
that cell; a file of another pair (other per-skill accuracy) is refused: ``diagevo models mini``
builds the same pair on any x86 machine with AVX2 (its warm-up pinned to the AVX2 kernels), a
``--kernels native`` build only on one kind of processor (the mini-world page measures both), so
the parts of one ablation run where the pair builds the same.

The mini world's primary outcome, named before any result was known: held-out accuracy after the
last round, full DiagEvo against no memory (free exploration only), paired by seed, with its 95 %
t interval. Everything else (per skill, per round, the targeted share, F_t, ε) is secondary.

Several files (runs of other variants, same seeds and rounds) are merged world by world; the
dynamics rows read the variants they name from whichever file has them.

Every row names the paper's figure, the simulator's and whether the simulator's value was
*calibrated* (a world parameter in ``diagevo/train/sim/config.py`` was set from that very figure,
so agreement is by construction) or *predicted* (no parameter was set from it). Calibration was
done before issue 23's switches (spread wrong answers, the paper's challenger schedule, a skewed
challenger start), which are on here, so a calibrated row can still miss.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from html import escape
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from diagevo.log import Recorder

# Table 2 and Table 4 (Qwen3-8B-Base, math average over five benchmarks)
PAPER_TABLE = {
    "full": 72.3,
    "frozen challenger": 68.5,
    "pure free": 69.5,
    "pure targeted": 70.1,
    "no state updates": 70.1,
    "no stitching": 70.8,
    "random-pair stitching": 71.3,
    "no filtering": 69.4,
    "absolute only": 70.9,
    "fixed 7:3": 70.1,
    "fixed 5:5": 70.9,
    "fixed 3:7": 71.2,
}


def _fmt(xs: list[float], digits: int = 2, pct: bool = False) -> str:
    return " -> ".join(f"{x * 100:.0f}" if pct else f"{x:.{digits}f}" for x in xs)


def _peak(c: list[float]) -> str:
    k = max(range(len(c)), key=c.__getitem__)
    tail = " (the last round)" if k == len(c) - 1 else f", {c[-1]:.3f} at round {len(c)}"
    return f"{c[0]:.3f} -> {c[k]:.3f} at round {k + 1}{tail}"


def ablation_table(rows: list[dict[str, Any]]) -> str:
    out = [
        (
            "| variant | paper (Table 2/4) | held-out at the val-best round | last round (7) | val-best rounds (seeds "
            "0-2) | best held-out round (optimistic) |"
        ),
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        paper = PAPER_TABLE.get(r["variant"])
        out.append(
            f"| {r['variant']} | {'' if paper is None else paper} | {r['selected_mean']:.3f} ± {r['selected_std']:.3f} "
            f"| {r['final_mean']:.3f} ± {r['final_std']:.3f} | {', '.join(map(str, r['selected_rounds']))} "
            f"| {r['oracle_mean']:.3f} |"
        )
    return "\n".join(out)


def dynamics_table(rows: list[dict[str, Any]]) -> str:
    by = {r["variant"]: r for r in rows}

    def dyn(variant: str, key: str) -> list[float]:
        return by[variant]["dynamics"].get(key, []) if variant in by else []

    def curve(variant: str) -> list[float]:
        return by[variant]["curve"] if variant in by else []

    lines = [
        "| measurement | paper | simulator | calibrated or predicted |",
        "|---|---|---|---|",
    ]

    def row(what: str, paper: str, sim: str, status: str) -> None:
        lines.append(f"| {what} | {paper} | {sim} | {status} |")

    ref = "pure free, absolute only"
    lab = dyn(ref, "shared_label_acc")
    if lab:
        row(
            "pseudo-label acc., round 1 (Fig. 3c)",
            "83 %",
            f"{lab[0] * 100:.0f} %",
            "calibrated: `skill_logit_lo/hi`, `difficulty_slope`",
        )
        row(
            "same, pure free + absolute only, rounds 1 -> 5",
            "83 -> 65 %",
            _fmt(lab[:5], pct=True) + " %",
            "calibrated: `shared_bias`, `shared_per_100_words`, `shared_per_distractor`",
        )
    a5, f5 = dyn("absolute only", "shared_label_acc"), dyn("full", "shared_label_acc")
    if len(a5) >= 5 and len(f5) >= 5:
        row(
            "round 5: memory + absolute / + double filter (Fig. 3c)",
            "72 % / 75 %",
            f"{a5[4] * 100:.0f} % / {f5[4] * 100:.0f} %",
            "predicted",
        )
    pf = curve("pure free")
    if pf:
        row(
            "held-out, pure free (Fig. 3a)",
            "63.4 -> 69.5 at round 3, 68.0 at round 7",
            _peak(pf),
            "calibrated: `solver_lr`",
        )
    fc = curve("full")
    if fc:
        row("held-out, full (Fig. 3a)", "rises to 72.3 at round 5, then 72.0, 71.4", _peak(fc), "predicted")
    w = dyn("pure free", "question_words")
    if w:
        row(
            "question length, pure free, round 1 (Fig. 4a)",
            "45.6 words",
            f"{w[0]:.0f}",
            "calibrated: initial pad/distractor/depth logits",
        )
        parts = dyn("pure free", "parts_per_question")
        row(
            "same, rounds 1 -> 5",
            "45.6 -> 168.9 words",
            f"{_fmt(w[:5], 0)} ({_fmt(parts[:5])} parts)",
            "predicted (`challenger_lr` sized so that 5 rounds could reach it; whether they do is the reward's)",
        )
    wf = dyn("full", "question_words")
    if len(wf) >= 2:
        row(
            "question length with the memory (full)",
            "~73 words after round 2",
            f"{wf[1]:.0f} (round 2), {wf[4]:.0f} (round 5)",
            "predicted",
        )
    bf, bp = dyn("full", "bigram_diversity"), dyn("pure free", "bigram_diversity")
    if bf and bp:
        row(
            "2-gram diversity, rounds 1 -> 5 (Fig. 4b)",
            "memory 33.3 -> 36.5; pure free rises only late",
            f"memory {_fmt(bf[:5], 1)}; pure free {_fmt(bp[:5], 1)}",
            "predicted",
        )
    act, mas = dyn("full", "active"), dyn("full", "mastered")
    if len(act) >= 5:
        peak = max(range(5), key=act.__getitem__)
        row(
            "Active causes, full (Fig. 3b)",
            "peak 188 in round 2, 117 in round 5",
            f"{_fmt(act[:5], 0)} (peak round {peak + 1})",
            "predicted",
        )
        row(
            "Mastered at round 5",
            "127 of 244, over half",
            f"{mas[4]:.0f} of {act[4] + mas[4]:.0f} ({mas[4] / (act[4] + mas[4]) * 100:.0f} %)",
            "calibrated: `drift_rate`, `drift_practice_scale`",
        )
        row(
            "causes after round 1 / candidates",
            "151 / 256 = 0.59",
            f"{act[0] + mas[0]:.0f} / 192 = {(act[0] + mas[0]) / 192:.2f}",
            "calibrated: `dedup_mid`, `dedup_width`",
        )
    nodes = dyn("full", "nodes")
    if nodes:
        row(
            "skill nodes",
            "~36, stable after round 3",
            f"{_fmt(nodes[:5], 0)}",
            "by construction (one family = one skill)",
        )
    return "\n".join(lines)


SKILL_METRIC = "heldout_acc/"


@dataclass(frozen=True)
class CellRound:
    """One committed round of one (arm, seed) run."""

    arm: str
    seed: int
    round: int
    heldout_acc: float
    by_skill: dict[str, float] = field(default_factory=dict)
    targeted_share: float = 0.0
    F: float = 0.0
    epsilon_next: float = 0.0
    seconds: float = 0.0
    label_acc: float = float("nan")  # retained questions whose pseudo-label is right (where the truth is known)
    wrong_share: float = float("nan")  # the solver's positive rewards on wrong answers
    shared_label_acc: float = float("nan")  # Figure 3(c): majority labels right on the shared questions
    # where practice goes: skill -> counts of the round's questions generated, retained and targeted (a cause
    # asked for), failures recorded and failures counted into the memory (attributed, or a new cause)
    practice: dict[str, dict[str, int]] = field(default_factory=dict)


PRACTICE = ("generated", "retained", "targeted", "failures", "counted")


def practice_counts(store: Recorder, run: str) -> dict[int, dict[str, dict[str, int]]]:
    """Round -> skill -> how many of the round's questions the world puts in that skill were
    generated, retained and targeted, and how many of their failures were recorded and counted
    into the memory: where a run's practice went, the question's own skill deciding (the mini
    world reads it from the digits; ``outside``: a question of no skill)."""
    from diagevo.catalog import CauseCreated, FailureAttributed, FailureRecorded
    from diagevo.rounds import logged_questions
    from diagevo.train.labels import OUTSIDE
    from diagevo.train.mini.world import skill_of

    out: dict[int, dict[str, dict[str, int]]] = {}
    skill: dict[str, tuple[int, str]] = {}

    def bump(t: int, s: str, what: str) -> None:
        out.setdefault(t, {}).setdefault(s, dict.fromkeys(PRACTICE, 0))[what] += 1

    for q in logged_questions(store, run):
        s = skill_of(q.text) or OUTSIDE
        skill[q.question_id] = (q.round, s)
        bump(q.round, s, "generated")
        if q.votes.retained:
            bump(q.round, s, "retained")
        if q.asked.mode != "free":
            bump(q.round, s, "targeted")
    failed: dict[str, str] = {}
    counted: set[str] = set()
    for e in store.rows(run, types=(FailureRecorded, FailureAttributed, CauseCreated)):
        match e.event:
            case FailureRecorded(failure_id=f, question_id=q):
                failed[f] = q
            case FailureAttributed(failure_id=f) | CauseCreated(failure_id=str() as f):
                counted.add(f)
    for f, q in failed.items():
        if q in skill:
            bump(*skill[q], "failures")
            if f in counted:
                bump(*skill[q], "counted")
    return out


def cell_of(run: str) -> tuple[str, int] | None:
    """(arm, seed) of an ablation run ``ablate/<world>/<arm>/s<seed>``; None for another run."""
    parts = run.split("/")
    if len(parts) != 4 or parts[0] != "ablate" or not parts[3].startswith("s") or not parts[3][1:].isdigit():
        return None
    return parts[2], int(parts[3][1:])


def cell_rounds(store: Recorder) -> list[CellRound]:
    """Every committed round of every ablation run in the log, by arm, seed and round: held-out
    accuracy overall (``round.committed``) and per skill (``eval.recorded``), the share of the
    round's curriculum questions that targeted a cause (``question.generated``), F_t, ε_{t+1} and
    the round's seconds (``round.committed``)."""
    from diagevo.catalog import EvalRecorded, QuestionGenerated, RoundCommitted

    rows = []
    for run in store.runs():
        cell = cell_of(run)
        if cell is None:
            continue
        skills: dict[int, dict[str, float]] = {}
        asked: dict[int, list[bool]] = {}
        practice = practice_counts(store, run)
        for e in store.rows(run, types=(EvalRecorded, QuestionGenerated)):
            match e.event:
                case EvalRecorded(metrics=metrics):
                    named = (metrics or {}).items()
                    skills[e.round] = {
                        k.removeprefix(SKILL_METRIC): float(v) for k, v in named if k.startswith(SKILL_METRIC)
                    }
                case QuestionGenerated(mode=mode):
                    asked.setdefault(e.round, []).append(mode != "free")
        for row in store.rows(run, types=(RoundCommitted,)):
            c, modes = row.event, asked.get(row.round, [])
            assert isinstance(c, RoundCommitted)
            rows.append(
                CellRound(
                    arm=cell[0],
                    seed=cell[1],
                    round=row.round,
                    heldout_acc=float("nan") if c.heldout_acc is None else float(c.heldout_acc),
                    by_skill=skills.get(row.round, {}),
                    targeted_share=sum(modes) / len(modes) if modes else 0.0,
                    F=float(c.F or 0.0),
                    epsilon_next=float(c.epsilon_next or 0.0),
                    seconds=float(sum((c.timing or {}).values())),
                    label_acc=float("nan") if c.retained_label_acc is None else float(c.retained_label_acc),
                    wrong_share=float("nan") if c.wrong_reward_share is None else float(c.wrong_reward_share),
                    shared_label_acc=float("nan") if c.pseudo_label_acc is None else float(c.pseudo_label_acc),
                    practice=practice.get(row.round, {}),
                )
            )
    return sorted(rows, key=lambda r: (r.arm, r.seed, r.round))


CELL_FILE_VERSION = 1


def save_cells(path: str, rows: list[CellRound], pair: dict[str, float]) -> None:
    """Every committed round of every cell, with the pair's per-skill accuracy they started from."""
    from dataclasses import asdict

    body = {"version": CELL_FILE_VERSION, "pair": pair, "rounds": [asdict(r) for r in rows]}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(body, f, indent=1, sort_keys=True)
        f.write("\n")


def load_cells(path: str, pair: dict[str, float] | None) -> list[CellRound]:
    """A cells file's rounds; refused (SystemExit, one line) when its pair is not ``pair``."""
    with open(path, encoding="utf-8") as f:
        body = json.load(f)
    if body.get("version") != CELL_FILE_VERSION:
        raise SystemExit(f"{path}: cells file version {body.get('version')!r}, this script reads {CELL_FILE_VERSION}")
    if pair is not None and body["pair"] != pair:
        raise SystemExit(f"{path}: its cells started from another pair ({body['pair']}), not {pair}")
    return [CellRound(**r) for r in body["rounds"]]


def merged(logged: list[CellRound], saved: list[CellRound]) -> list[CellRound]:
    """The logs' rounds, and the saved rounds of every cell no log holds."""
    in_logs = {(r.arm, r.seed) for r in logged}
    rows = logged + [r for r in saved if (r.arm, r.seed) not in in_logs]
    return sorted(rows, key=lambda r: (r.arm, r.seed, r.round))


def _interval(xs: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95 % t interval across seeds (0 for one seed)."""
    import statistics

    from scipy.stats import t

    if any(x != x for x in xs):  # a cell without the figure (an older log's): none for the round
        return float("nan"), float("nan")
    m = statistics.fmean(xs)
    return m, (float(t.ppf(0.975, len(xs) - 1)) * statistics.stdev(xs) / len(xs) ** 0.5 if len(xs) > 1 else 0.0)


def pair_accuracy(pair: str) -> tuple[float, dict[str, float]]:
    """The built pair's held-out accuracy (``mini.json``: greedy, the loop's held-out questions),
    overall (the mean of the skills, as the loop's) and per skill: round 0 of every arm."""
    with open(f"{pair}/mini.json", encoding="utf-8") as f:
        by_skill = json.load(f)["measured"]["accuracy"]
    return sum(by_skill.values()) / len(by_skill), by_skill


def _cell(x: tuple[float, float], digits: int = 3) -> str:
    return "–" if x[0] != x[0] else f"{x[0]:.{digits}f} ± {x[1]:.{digits}f}"


def read_rounds(dbs: list[str]) -> list[CellRound]:
    """Every committed round of every ablation cell in these logs."""
    from diagevo.log import open_log

    rows: list[CellRound] = []
    for db in dbs:
        with open_log(db) as store:
            rows += cell_rounds(store)
    return sorted(rows, key=lambda r: (r.arm, r.seed, r.round))


def contrast(rows: list[CellRound], arm: str, other: str) -> str:
    """``arm`` minus ``other`` after the last round both reached, paired by seed: held-out accuracy
    (each seed's difference named) and the shared questions' label accuracy."""
    last = min(max((r.round for r in rows if r.arm == a), default=0) for a in (arm, other))
    at = {a: {r.seed: r for r in rows if r.arm == a and r.round == last} for a in (arm, other)}
    seeds = sorted(set(at[arm]) & set(at[other]))
    if len(seeds) < 2:
        return f"- {arm} − {other}: fewer than two seeds with both arms' round {last}"
    held = [at[arm][s].heldout_acc - at[other][s].heldout_acc for s in seeds]
    shared = [at[arm][s].shared_label_acc - at[other][s].shared_label_acc for s in seeds]
    (d, h), (ds, hs) = _interval(held), _interval(shared)
    each = ", ".join(f"seed {s} {x:+.3f}" for s, x in zip(seeds, held))
    return (
        f"- {arm} − {other}, round {last}, paired by seed: held-out {d:+.3f} ± {h:.3f} (95 % t interval, "
        f"{d - h:+.3f} to {d + h:+.3f}; {each}); shared labels right {ds:+.3f} ± {hs:.3f}"
    )


def mini_tables(
    rows: list[CellRound], svg: str | None, pair: str | None = None, contrasts: list[list[str]] | None = None
) -> str:
    """The primary outcome first, each arm's change over the pair, the ``contrasts`` asked for
    (pairs of arms), then the per-arm, per-round table (mean ± 95 % half-width across seeds) with
    the label figures beside held-out accuracy."""
    arms = sorted({r.arm for r in rows})
    skills = sorted({s for r in rows for s in r.by_skill})
    last = {a: max((r.round for r in rows if r.arm == a), default=0) for a in arms}
    start = pair_accuracy(pair) if pair else None
    head = [
        "arm",
        "round",
        "seeds",
        "held-out acc",
        *skills,
        "shared labels right",
        "kept labels right",
        "wrong+",
        "targeted share",
        "F_t",
    ]
    out = ["| " + " | ".join([*head, "ε_t+1", "minutes"]) + " |", "|" + "---|" * (len(head) + 2)]
    curves: dict[str, list[tuple[float, float]]] = {}
    for a in arms:
        if start is not None:
            curves[a] = [(start[0], 0.0)]
            out.append(
                f"| {a} | 0 (the pair) | – | {start[0]:.3f} | "
                + " | ".join(f"{start[1].get(s, float('nan')):.3f}" for s in skills)
                + " | – | – | – | – | – | – | – |"
            )
        for t in range(1, last[a] + 1):
            cell = [r for r in rows if r.arm == a and r.round == t]
            m = {
                k: _interval([getattr(r, k) for r in cell])
                for k in (
                    "heldout_acc",
                    "shared_label_acc",
                    "label_acc",
                    "wrong_share",
                    "targeted_share",
                    "F",
                    "epsilon_next",
                )
            }
            by = [_interval([r.by_skill.get(s, float("nan")) for r in cell]) for s in skills]
            curves.setdefault(a, []).append(m["heldout_acc"])
            shares = [m["shared_label_acc"], m["label_acc"], m["wrong_share"], m["targeted_share"]]
            out.append(
                f"| {a} | {t} | {len(cell)} | "
                + " | ".join(_cell(x) for x in [m["heldout_acc"], *by])
                + " | "
                + " | ".join(_cell(x, 2) for x in shares)
                + f" | {m['F'][0]:.1f} ± {m['F'][1]:.1f} | {m['epsilon_next'][0]:.2f} ± {m['epsilon_next'][1]:.2f}"
                + f" | {sum(r.seconds for r in cell) / len(cell) / 60:.1f} |"
            )
    final = {a: {r.seed: r.heldout_acc for r in rows if r.arm == a and r.round == last[a]} for a in arms}
    primary = "**Primary outcome** (full − pure free, held-out accuracy after the last round, paired by seed): "
    if "full" in final and "pure free" in final and (seeds := sorted(set(final["full"]) & set(final["pure free"]))):
        d, h = _interval([final["full"][s] - final["pure free"][s] for s in seeds])
        primary += (
            f"{d:+.3f} ± {h:.3f} (95 % t interval, {len(seeds)} seeds)"
            if len(seeds) > 1
            else f"{d:+.3f} (one seed: no interval yet)"
        )
    else:
        primary += "not measured yet (no seed has both arms' last round)"
    gains = []
    if start is not None:
        for a in arms:
            if len(final[a]) >= 1:
                d, h = _interval([v - start[0] for v in final[a].values()])
                gains.append(
                    f"- {a}: round {last[a]} − the pair {d:+.3f}"
                    + (f" ± {h:.3f} ({len(final[a])} seeds)" if len(final[a]) > 1 else " (one seed)")
                )
    if svg:
        with open(svg, "w", encoding="utf-8") as f:
            f.write(_svg(curves, first=0 if start is not None else 1))
    fig = figure_3c_table(rows) if any(r.arm in FIGURE_3C for r in rows) else ""
    paired = [contrast(rows, a, b) for a, b in contrasts or []]
    blocks = [*gains, *([""] if gains else []), *paired, *([""] if paired else [])]
    return "\n".join([primary, "", *blocks, *out, *(["", fig] if fig else [])])


def _share(r: CellRound, skill: str, what: str) -> float:
    """The skill's share of the round's ``what`` (nan where the round counted none)."""
    total = sum(c[what] for c in r.practice.values())
    return r.practice.get(skill, {}).get(what, 0) / total if total else float("nan")


def practice_table(rows: list[CellRound], arm: str, start: dict[str, float] | None = None) -> str:
    """Where ``arm``'s practice went: per skill, each round's error rate before it (1 − held-out
    accuracy after the round before; the pair's for round 1) beside the skill's share of the
    round's generated, retained and targeted questions and of the failures counted into the
    memory, in % (each a mean across the seeds whose logs counted them)."""
    cells = [r for r in rows if r.arm == arm and r.practice]
    if not cells:
        return f"{arm}: no round's practice counted (cells of an older log)"
    last = max(r.round for r in cells)
    skills = sorted({s for r in cells for s in r.practice})
    before = {(r.seed, r.round + 1): r.by_skill for r in rows if r.arm == arm}
    head = ["skill", *(f"round {t}: error · gen · ret · tgt · mem" for t in range(1, last + 1))]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in skills:
        shown = []
        for t in range(1, last + 1):
            at = [r for r in cells if r.round == t]
            acc = [(before.get((r.seed, t)) or (start if t == 1 else None) or {}).get(s, float("nan")) for r in at]
            figures = [_mean([1 - a for a in acc])] + [
                _mean([_share(r, s, w) for r in at]) for w in ("generated", "retained", "targeted", "counted")
            ]
            shown.append(" · ".join("–" if x != x else f"{100 * x:.0f}" for x in figures))
        out.append(f"| {s} | " + " | ".join(shown) + " |")
    return "\n".join(out)


def _mean(xs: list[float]) -> float:
    known = [x for x in xs if x == x]
    return sum(known) / len(known) if known else float("nan")


@dataclass(frozen=True)
class DosePoint:
    """One cell on the dose-response: its arm and seed, the share of its positive rewards paid to
    wrong answers (the mean over its rounds) and its held-out change after the last round."""

    arm: str
    seed: int
    wrong: float
    change: float


def dose_points(rows: list[CellRound], arms: list[str], start: float, last: int = 5) -> list[DosePoint]:
    """The cells of ``arms`` that reached round ``last``: wrong+ (mean of rounds 1..last) against
    held-out accuracy after round ``last`` minus the pair's ``start``."""
    out = []
    for arm in arms:
        for seed in sorted({r.seed for r in rows if r.arm == arm}):
            cell = sorted((r for r in rows if r.arm == arm and r.seed == seed), key=lambda r: r.round)
            if len(cell) >= last and all(r.wrong_share == r.wrong_share for r in cell[:last]):
                wrong = sum(r.wrong_share for r in cell[:last]) / last
                out.append(DosePoint(arm, seed, wrong, cell[last - 1].heldout_acc - start))
    return out


def line_fit(points: list[DosePoint]) -> tuple[float, float]:
    """Least squares change = a + b x wrong+: (a, b)."""
    n = len(points)
    mx, my = sum(p.wrong for p in points) / n, sum(p.change for p in points) / n
    sxx = sum((p.wrong - mx) ** 2 for p in points)
    b = sum((p.wrong - mx) * (p.change - my) for p in points) / sxx
    return my - b * mx, b


def break_even(points: list[DosePoint], draws: int = 2000) -> tuple[float, float, float]:
    """The wrong+ at which the fitted line crosses zero, and its 95 % interval: percentiles of the
    crossing over ``draws`` resamples of the cells with replacement (a fixed stream: the same
    points give the same interval)."""
    import random

    a, b = line_fit(points)
    rng, found = random.Random(0), []
    for _ in range(draws):
        sample = [rng.choice(points) for _ in points]
        if len({p.wrong for p in sample}) > 1:
            sa, sb = line_fit(sample)
            if sb < 0:
                found.append(-sa / sb)
    found.sort()
    return -a / b, found[int(0.025 * len(found))], found[int(0.975 * len(found)) - 1]


def dose_table(
    rows: list[CellRound], dose: list[str], others: list[str], start: float, fit_below: float = 1.0
) -> tuple[str, str]:
    """The dose-response (markdown, SVG): the line through the ``dose`` cells whose wrong+ is below
    ``fit_below`` (the range a line is asked to hold over), its break-even, then each arm (the dose
    arms too) placed at its own measured wrong+ (mean over its seeds) beside its measured change:
    what the line predicts for it, and by how much it misses."""
    every = dose_points(rows, dose, start)
    points = [p for p in every if p.wrong < fit_below]
    a, b = line_fit(points)
    at, lo, hi = break_even(points)
    out = [
        f"Line through the {len(points)} control cells with wrong+ below {fit_below:g}: change ≈ {a:+.3f} {b:+.3f} × "
        f"wrong+; break-even wrong+ {at:.3f} (95 % interval {lo:.3f} to {hi:.3f}, cells resampled)",
        "",
        "| arm | cells | wrong+ (rounds 1-5) | change after round 5 | the line at its wrong+ | measured − line |",
        "|---|---|---|---|---|---|",
    ]
    placed = []
    for arm in [*dose, *others]:
        cells = dose_points(rows, [arm], start)
        if not cells:
            continue
        w = sum(p.wrong for p in cells) / len(cells)
        c = sum(p.change for p in cells) / len(cells)
        placed.append((arm, w, c, arm in dose))
        out.append(f"| {arm} | {len(cells)} | {w:.3f} | {c:+.3f} | {a + b * w:+.3f} | {c - a - b * w:+.3f} |")
    return "\n".join(out), _dose_svg(every, placed, (a, b), at)


def _dose_svg(
    points: list[DosePoint], placed: list[tuple[str, float, float, bool]], fit: tuple[float, float], at: float
) -> str:
    """The dose cells as dots, the fitted line, the break-even, each other arm a labelled cross."""
    w, h, pad = 560, 340, 48
    xs = [p.wrong for p in points] + [x for _, x, _, _ in placed] + [0.0]
    ys = [p.change for p in points] + [y for _, _, y, _ in placed] + [0.0]
    x0, x1 = min(xs) - 0.02, max(xs) + 0.02
    y0, y1 = min(ys) - 0.02, max(ys) + 0.02

    def xy(x: float, y: float) -> tuple[float, float]:
        return pad + (w - 2 * pad) * (x - x0) / (x1 - x0), h - pad - (h - 2 * pad) * (y - y0) / (y1 - y0)

    a, b = fit
    (lx0, ly0), (lx1, ly1), (zx0, zy), (zx1, _) = xy(x0, a + b * x0), xy(x1, a + b * x1), xy(x0, 0), xy(x1, 0)
    bx, by = xy(at, 0)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
        f'<text x="{pad}" y="16">held-out change after round 5 against wrong+ (mean of rounds 1-5)</text>',
        f'<line x1="{zx0:.1f}" y1="{zy:.1f}" x2="{zx1:.1f}" y2="{zy:.1f}" stroke="#999" stroke-dasharray="3,3"/>',
        f'<line x1="{lx0:.1f}" y1="{ly0:.1f}" x2="{lx1:.1f}" y2="{ly1:.1f}" stroke="#1f77b4"/>',
        f'<circle cx="{bx:.1f}" cy="{by:.1f}" r="4" fill="none" stroke="#1f77b4"/>',
        f'<text x="{bx + 6:.1f}" y="{by - 6:.1f}" fill="#1f77b4">break-even {at:.2f}</text>',
        f'<text x="4" y="{h - pad:.0f}">{y0:+.2f}</text><text x="4" y="{pad:.0f}">{y1:+.2f}</text>',
        f'<text x="{pad}" y="{h - 8}">wrong+ {x0:.2f}</text><text x="{w - pad - 60}" y="{h - 8}">{x1:.2f}</text>',
    ]
    for p in points:
        cx, cy = xy(p.wrong, p.change)
        parts.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="2.5" fill="#1f77b4"/>')
    for k, (arm, x, y, is_dose) in enumerate(placed):
        if is_dose:
            continue
        cx, cy = xy(x, y)
        cross = f"M{cx - 4:.1f},{cy - 4:.1f}l8,8m-8,0l8,-8"
        parts.append(f'<path d="{cross}" stroke="#d62728"/>')
        parts.append(f'<text x="{cx + 6:.1f}" y="{cy + 4 + 11 * (k % 2):.1f}" fill="#d62728">{escape(arm)}</text>')
    return "\n".join([*parts, "</svg>"]) + "\n"


# Figure 3(c)'s three settings, in the paper's order, and its figures: round 1 (pure free only) and round 5
FIGURE_3C = {
    "pure free, absolute only": ("83 %", "65 %"),
    "absolute only": ("–", "72 %"),
    "full": ("–", "75 %"),
}
FIGURE_3C_SETTINGS = {
    "pure free, absolute only": "pure free exploration, absolute constraint only",
    "absolute only": "+ memory",
    "full": "+ relative constraint (full DiagEvo)",
}


def figure_3c_table(rows: list[CellRound]) -> str:
    """Figure 3(c) replicated: the shared-question pseudo-label accuracy of each of its three
    settings per round (mean ± 95 % half-width across seeds), beside the paper's figures."""
    arms = [a for a in FIGURE_3C if any(r.arm == a for r in rows)]
    last = max((r.round for r in rows if r.arm in arms), default=0)
    head = ["setting (arm)", "seeds", *(f"round {t}" for t in range(1, last + 1)), "paper: round 1", "round 5"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for a in arms:
        shown = []
        for t in range(1, last + 1):
            cell = [r.shared_label_acc for r in rows if r.arm == a and r.round == t]
            if not cell or any(x != x for x in cell):  # a round not run, or a cell without the figure
                shown.append("–")
            else:
                m, h = _interval(cell)
                shown.append(f"{100 * m:.1f} ± {100 * h:.1f} %")
        seeds = len({r.seed for r in rows if r.arm == a})
        out.append(f"| {FIGURE_3C_SETTINGS[a]} ({a}) | {seeds} | " + " | ".join([*shown, *FIGURE_3C[a]]) + " |")
    return "\n".join(out)


def _svg(curves: dict[str, list[tuple[float, float]]], first: int = 1) -> str:
    """Held-out accuracy per round, one line per arm with its 95 % band (hand-written SVG)."""
    w, h, pad = 480, 300, 40
    n = max((len(c) for c in curves.values()), default=1)
    lo = min((m - e for c in curves.values() for m, e in c), default=0.0)
    hi = max((m + e for c in curves.values() for m, e in c), default=1.0)
    lo, hi = max(0.0, lo - 0.02), min(1.0, hi + 0.02) if hi > lo else lo + 0.1

    def xy(i: int, v: float) -> str:
        x = pad + (w - 2 * pad) * (i / max(1, n - 1))
        return f"{x:.1f},{h - pad - (h - 2 * pad) * (v - lo) / (hi - lo):.1f}"

    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f"]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
        f'<text x="{pad}" y="16">held-out accuracy by round (mean, 95 % band across seeds)</text>',
        f'<text x="4" y="{h - pad}">{lo:.2f}</text><text x="4" y="{pad}">{hi:.2f}</text>',
    ]
    for k, (arm, c) in enumerate(sorted(curves.items())):
        col = colours[k % len(colours)]
        band = [xy(i, m + e) for i, (m, e) in enumerate(c)] + [
            xy(i, m - e) for i, (m, e) in reversed(list(enumerate(c)))
        ]
        parts.append(f'<polygon points="{" ".join(band)}" fill="{col}" opacity="0.15"/>')
        parts.append(
            f'<polyline points="{" ".join(xy(i, m) for i, (m, _) in enumerate(c))}" fill="none" stroke="{col}"/>'
        )
        parts.append(f'<text x="{w - pad - 90}" y="{pad + 14 * k}" fill="{col}">{arm}</text>')
    parts.append(f'<text x="{w // 2 - 20}" y="{h - 8}">round {first} .. {first + n - 1}</text></svg>')
    return "\n".join(parts) + "\n"


def main(paths: list[str]) -> None:
    data: dict[str, list[dict[str, Any]]] = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for world, rows in json.load(f).items():
                data.setdefault(world, []).extend(rows)
    for world, rows in data.items():
        print(f"### world: {world}\n")
        print(ablation_table(rows))
        print()
        print(dynamics_table(rows))
        print()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", metavar="JSON", help="`diagevo ablate --json` output")
    ap.add_argument(
        "--log", action="append", help="the mini world's ablation log (a database URL; repeatable): its results tables"
    )
    ap.add_argument("--svg", help="with --log: write the held-out accuracy plot here")
    ap.add_argument("--pair", help="with --log: the pair's directory (its mini.json): round 0 and each arm's gain")
    ap.add_argument("--cells", help="with --log: a cells file (--save-cells) whose cells no log holds join the tables")
    ap.add_argument("--save-cells", help="with --log: write every cell's rounds (the logs' and --cells') here")
    ap.add_argument("--dose", action="append", metavar="ARM", help="with --cells/--log: an arm of the dose-response")
    ap.add_argument("--dose-svg", help="with --dose: write the dose-response plot here")
    ap.add_argument(
        "--fit-below", type=float, default=1.0, help="with --dose: the line through cells below this wrong+"
    )
    ap.add_argument("--place", action="append", metavar="ARM", help="with --dose: place only these arms (default: all)")
    ap.add_argument(
        "--practice",
        action="append",
        metavar="ARM",
        help="with --log or --cells: where ARM's practice went, per skill and round (repeatable)",
    )
    ap.add_argument(
        "--contrast",
        nargs=2,
        action="append",
        metavar=("ARM", "OTHER"),
        help="with --log or --cells: ARM minus OTHER after the last round, paired by seed (repeatable)",
    )
    args = ap.parse_args()
    if args.log or args.cells:  # the cells file alone: the tables of the cells it holds
        by_skill = pair_accuracy(args.pair)[1] if args.pair else None
        rows = merged(read_rounds(args.log or []), load_cells(args.cells, by_skill) if args.cells else [])
        if args.save_cells:
            if by_skill is None:
                raise SystemExit("--save-cells needs --pair (the file names the pair its cells started from)")
            save_cells(args.save_cells, rows, by_skill)
        print(mini_tables(rows, args.svg, args.pair, args.contrast))
        if args.dose:
            if not args.pair:
                raise SystemExit("--dose needs --pair (the change is measured from the pair)")
            others = sorted(set(args.place or {r.arm for r in rows}) - set(args.dose))
            text, svg = dose_table(rows, args.dose, others, pair_accuracy(args.pair)[0], args.fit_below)
            print("\nThe label accuracy a learner needs\n\n" + text)
            if args.dose_svg:
                with open(args.dose_svg, "w", encoding="utf-8") as f:
                    f.write(svg)
        for arm in args.practice or []:
            print(f"\nWhere practice goes: {arm}\n\n" + practice_table(rows, arm, by_skill))
    else:
        main(args.paths)
