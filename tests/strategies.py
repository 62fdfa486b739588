"""Valid random logs, produced through the real deciders (so they obey every invariant)."""

from __future__ import annotations

import random

from hypothesis import strategies as st

from diagevo.memory import apply_changes, decide_attribution, decide_merge, decide_new_cause, decide_promotions, fold
from tests.logs import Log


def random_log(rng: random.Random, rounds: int, run: str = "r1") -> Log:
    theta_up = rng.choice([0.3, 0.5, 0.7])
    log = Log(run=run, k=rng.choice([0.2, 0.5, 1.0, 2.0]), theta_up=theta_up)
    for _ in range(rounds):
        start = fold(log.rows(), run)
        log.add("round.started")
        # evidence for promotion: questions targeting active causes
        evidence = []
        for i in range(rng.randint(0, 6)):
            active = [c.id for c in start.active()]
            cause = rng.choice(active) if active and rng.random() < 0.7 else None
            p1 = round(rng.random(), 3)
            log.question(f"q{log.round}-{i}", p1, active=cause)
            evidence.append((cause, p1))
        for change in decide_promotions(start, evidence, theta_up):
            log.append(change)
        mem = fold(log.rows(), run)
        failures = rng.randint(0, 6) if evidence else 0  # a failure is of a retained question of its round
        for j in range(failures):
            fid = f"f{log.round}-{j}"
            log.add("failure.recorded", failure_id=fid, question_id=f"q{log.round}-0", response="r", reference="ref")
            if mem.causes and rng.random() < 0.5:
                cause, via = rng.choice(sorted(mem.causes)), rng.choice(["recurrence", "dedup"])
                log.evidence(fid, matched_cause=cause if via == "recurrence" else None, error_cause=f"like {cause}")
                changes = decide_attribution(mem, fid, cause, via, rng.random())  # type: ignore[arg-type]
            elif mem.nodes and rng.random() < 0.5:
                log.evidence(fid, error_cause=f"cause text {fid}")
                changes = decide_new_cause(mem, fid, f"cause text {fid}", node_id=rng.choice(sorted(mem.nodes)))
            else:
                log.evidence(fid, error_cause=f"cause text {fid}")
                changes = decide_new_cause(mem, fid, f"cause text {fid}", new_node_label=f"node label {fid}")
            for change in changes:
                log.append(change)
            mem = apply_changes(mem, log.round, changes)
        if len(mem.nodes) >= 2 and rng.random() < 0.4:
            a, b = rng.sample(sorted(mem.nodes), 2)
            for change in decide_merge(mem, a, b, f"merged {a}+{b}", 0.7):
                log.append(change)
        log.commit()
    return log


@st.composite
def logs(draw: st.DrawFn, max_rounds: int = 6) -> Log:
    seed = draw(st.integers(0, 2**32 - 1))
    rounds = draw(st.integers(1, max_rounds))
    return random_log(random.Random(seed), rounds)
