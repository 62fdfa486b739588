"""The real loop on the mini world (``diagevo models mini``, the hf backend, ``diagevo ablate``): a
two-skill pair built here, one cell of the ablation, then the cells it skips, resumes and adds."""

from __future__ import annotations

import hashlib
import inspect
import json
import random
import shutil
from pathlib import Path

import pytest

pytest.importorskip("trl")
import torch  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

from diagevo.catalog import (  # noqa: E402
    CheckpointWritten,
    EvalRecorded,
    QuestionGenerated,
    QuestionScored,
    RoundCommitted,
    of_type,
)
from diagevo.log import open_log  # noqa: E402
from diagevo.train import ablate  # noqa: E402
from diagevo.train.mini import build, world  # noqa: E402
from diagevo.views.checkpoints import checkpoint_path  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

ROOT = Path(__file__).resolve().parents[1]
# two skills of two families (a cause's text names its operation), half the steps the challenger's:
# its targeting is measured on 64 samples a cause; the processor's own kernels (the pinned ones need a
# process whose torch has not run yet: tests/test_mini_world.py builds that way)
SPEC = build.MiniSpec(
    skills=("add_c", "sub_b"), hidden=64, layers=2, steps=300, chal_every=2, heldout=50, probes=64, kernels="native"
)
SMALL = [  # a round in a few minutes on one busy core
    "train.challenger_questions=8",
    "train.curriculum_questions=48",
    "challenger.batch_size=8",
    "challenger.max_steps=1",
    "solver.batch_size=8",
    "solver.max_steps=2",
    "train.keep_checkpoints=0",
    'filter.mode="absolute"',
]


@pytest.fixture(scope="module")
def pair(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two-skill pair, kept in pytest's cache while the world and its builder are unchanged."""
    source = "".join(inspect.getsource(m) for m in (build, world)) + world._DATA.read_text() + repr(SPEC)
    key = hashlib.sha256(source.encode()).hexdigest()[:12]
    cache = getattr(pytestconfig, "cache", None)
    out = Path(cache.mkdir(f"diagevo-mini-{key}")) if cache else tmp_path_factory.mktemp("mini") / "pair"
    if not (out / build.MINI_RECORD).is_file():
        shutil.rmtree(out, ignore_errors=True)
        build.build_mini(out, SPEC)
    return out


@pytest.fixture(scope="module")
def ablation(pair: Path, tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    db = f"sqlite:///{tmp_path_factory.mktemp('ablate') / 'ablate.db'}"
    models = [f'challenger.model="{pair / "challenger"}"', f'solver.model="{pair / "solver"}"']
    config = ROOT / "configs" / "mini-cpu.toml"

    def run(rounds: int, arms: list[str]) -> dict:
        cells = [ablate.CONFIGURED]
        return ablate.run_ablation(config, [*models, *SMALL], db, [0], rounds, arms, cells, lambda *_: None)

    first = run(1, ["full"])  # the one-cell smoke
    with open_log(db) as store:
        counts = {r: sum(1 for _ in store.read(r)) for r in store.runs()}
    again = run(1, ["full"])  # finished: skipped
    with open_log(db) as store:
        assert {r: sum(1 for _ in store.read(r)) for r in store.runs()} == counts
    later = run(2, ["full", "pure free"])  # the full cell resumed to round 2, the no-memory cell added
    return db, pair, first, again, later


def test_one_cell_runs_a_round_and_measures_each_skill(ablation) -> None:  # noqa: ANN001
    db, pair, first, again, _ = ablation
    (row,) = first[ablate.CONFIGURED]
    assert row["variant"] == "full" and len(row["curve"]) == 1 and 0 <= row["final_mean"] <= 1
    assert again == first
    with open_log(db) as store:
        (run,) = [r for r in store.runs() if "/full/" in r]
        names = {k for e in store.read(run, types=(EvalRecorded,)) for k in e.event.metrics or {}}
    assert {f"heldout_acc/{s}" for s in SPEC.skills} <= names
    recorded = json.loads((pair / build.MINI_RECORD).read_text())["measured"]
    assert set(recorded["accuracy"]) == set(recorded["validation_accuracy"]) == set(SPEC.skills)


def test_a_cause_s_targeted_questions_exercise_its_skill_more_often_than_free_ones(pair: Path) -> None:
    """Over the pair's causes, the share of a cause's questions that exercise its skill against that
    skill's share among free questions; the mean, as one cause's 64 samples are few."""
    measured = json.loads((pair / build.MINI_RECORD).read_text())["measured"]
    causes = {c.key: c.skill for c in world.world().causes.values() if c.skill in SPEC.skills}
    assert set(measured["targeted_share"]) == set(causes)
    targeted = [measured["targeted_share"][c] for c in causes]
    free = [measured["free_share"][s] for s in causes.values()]
    assert sum(targeted) / len(targeted) > sum(free) / len(free) + 0.05


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return load_file(str(path / "model.safetensors"))


def test_both_roles_change_every_round_of_the_full_arm(ablation) -> None:  # noqa: ANN001
    db, pair, *_ = ablation
    with open_log(db) as store:
        (run,) = [r for r in store.runs() if "/full/" in r]
        ckpts = {
            (e.round, e.event.phase): checkpoint_path(store, run, e.event.path)
            for e in store.read(run, types=(CheckpointWritten,))
        }
    before = {role: _weights(pair / role) for role in ("challenger", "solver")}
    for t in (1, 2):
        for role in ("challenger", "solver"):
            after = _weights(ckpts[(t, role)] / role)
            changed = [k for k in after if not torch.equal(after[k], before[role][k])]
            assert changed, f"round {t}: the {role}'s weights did not change"
            before[role] = after


def test_the_full_arm_targets_causes_and_the_no_memory_arm_never_does(ablation) -> None:  # noqa: ANN001
    db, *_ = ablation
    with open_log(db) as store:
        runs = {("full" if "/full/" in r else "free"): r for r in store.runs()}
        asked = {
            arm: [e for e in store.read(run, types=(QuestionGenerated,)) if e.round == 2] for arm, run in runs.items()
        }
    assert asked["full"] and asked["free"]
    targeted = [e for e in asked["full"] if e.event.mode != "free"]
    assert targeted and all(e.event.active_cause for e in targeted)
    assert all(e.event.mode == "free" and e.event.active_cause is None for e in asked["free"])


def test_every_round_of_every_arm_measures_figure_3c_on_one_shared_set(ablation) -> None:  # noqa: ANN001
    """The mini world knows its answers: each commit holds the pseudo-label accuracy on the shared
    questions (per skill in the round's metrics), drawn from the untrained challenger by the seed,
    so two arms (and a backend built again, as a resumed cell builds it) answer the same ones."""
    from diagevo.train.config import load_config
    from diagevo.train.run import make_backend

    db, pair, *_ = ablation
    with open_log(db) as store:
        for run in store.runs():
            commits = of_type(RoundCommitted, store.rows(run, types=(RoundCommitted,)))
            assert commits and all(c.pseudo_label_acc is not None and 0 <= c.pseudo_label_acc <= 1 for c in commits)
            names = {k for e in store.read(run, types=(EvalRecorded,)) for k in e.event.metrics or {}}
            assert {f"pseudo_label_acc/{s}" for s in SPEC.skills} & names
    models = [
        f'challenger.model="{pair / "challenger"}"',
        f'solver.model="{pair / "solver"}"',
        "hf.shared_label_questions=40",
    ]
    config = ROOT / "configs" / "mini-cpu.toml"
    sets = [
        make_backend(load_config(config, [*models, *ablate.VARIANTS[arm], "train.seed=3"])).shared_questions()
        for arm in ("full", "oracle")
    ]
    assert sets[0] == sets[1] and len(sets[0]) == 40 and all(world.truth(q) for q in sets[0])
    other = make_backend(load_config(config, [*models, "train.seed=4"])).shared_questions()
    assert other != sets[0]


def test_the_shared_error_check_labels_retained_questions_by_their_rewordings(pair: Path, tmp_path: Path) -> None:
    """One round of the check's arm: every candidate of a sum or difference is reworded and its
    verdict recorded; where the rewordings outvoted the majority, the label is another answer."""
    db = f"sqlite:///{tmp_path / 'check.db'}"
    models = [f'challenger.model="{pair / "challenger"}"', f'solver.model="{pair / "solver"}"']
    config = ROOT / "configs" / "mini-cpu.toml"
    ablate.run_ablation(config, [*models, *SMALL], db, [0], 1, ["shared-error check"], [ablate.CONFIGURED], print)
    with open_log(db) as store:
        (run,) = store.runs()
        rows = list(store.read(run, types=(QuestionGenerated, QuestionScored), texts=True))
    text = {e.event.question_id: e.event.text for e in rows if isinstance(e.event, QuestionGenerated)}
    scored = [e.event for e in rows if isinstance(e.event, QuestionScored)]
    labelled = [s for s in scored if s.pseudo_label is not None]
    assert labelled and all(s.check_score is not None and len(s.variant_labels or []) == 1 for s in labelled)
    assert all(world.variants(text[s.question_id], 1, random.Random(0)) for s in labelled)
    for s in labelled:
        if s.majority_label is not None:  # relabelled: the new label is a vote of the original too
            assert s.pseudo_label != s.majority_label and s.check_score > 0


def test_the_first_solver_votes_as_the_run_started_whatever_the_solver_learnt(pair: Path) -> None:
    """``filter.labeler = "initial"`` on real models: the votes come from the solver as the run
    started (``solver.model``), the same samples a fresh backend draws, whatever weights the
    trained solver holds (here its weights halved)."""
    import torch

    from diagevo.train.config import load_config
    from diagevo.train.run import make_backend

    models = [f'challenger.model="{pair / "challenger"}"', f'solver.model="{pair / "solver"}"']
    config = ROOT / "configs" / "mini-cpu.toml"
    texts = ["47+38=", "83-47=", "29+56="]
    fresh = make_backend(load_config(config, models)).sample(texts, 6, random.Random(3))
    trained = make_backend(load_config(config, models))
    with torch.no_grad():  # the round's solver moved away from the run's first one
        for weights in trained.model("solver").parameters():
            weights.mul_(0.5)
    trained._changed("solver")
    assert trained.sample(texts, 6, random.Random(3), initial=True) == fresh
    assert trained.sample(texts, 6, random.Random(3)) != fresh


# where a round of the real loop can be killed that the simulator's matrix (tests/test_crash_matrix.py)
# does not reach: the challenger's checkpoint written, inside the solver's GRPO (TRL's steps), inside
# the diagnosis of real failures
MINI_KILL_POINTS = [("generate", 0), ("solver", 1), ("extract", 1)]


@pytest.fixture(scope="module")
def mini_uninterrupted(pair: Path, tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str, str]]:
    from tests.test_crash_matrix import RUN
    from tests.test_train import comparable

    db = f"sqlite:///{tmp_path_factory.mktemp('mini-ref') / 'ref.db'}"
    proc = _mini_train(pair, db)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return comparable(db, RUN)


def _mini_train(pair: Path, db: str, *args: str, kill: tuple[str, int] | None = None):  # noqa: ANN202
    """``diagevo train`` of one round of the pair (killed at ``kill`` of round 1 where given)."""
    import subprocess
    import sys

    from tests.test_crash_matrix import ENV, KILLED, RUN

    head = [sys.executable, "-c", "import sys; from diagevo.cli.app import main; main()"]
    if kill is not None:
        head = [sys.executable, "-c", KILLED, kill[0], str(kill[1]), "1"]
    models = [f'challenger.model="{pair / "challenger"}"', f'solver.model="{pair / "solver"}"']
    sets = [x for o in [*models, *SMALL] for x in ("--set", o)]
    cmd = [*head, "train", "--config", str(ROOT / "configs" / "mini-cpu.toml"), "--db", db, "--run", RUN]
    cmd += ["--quiet", "--rounds", "1", *sets, *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=ENV, timeout=1800)


@pytest.mark.parametrize(("phase", "done"), MINI_KILL_POINTS, ids=[f"{p}-{d}" for p, d in MINI_KILL_POINTS])
def test_a_real_round_killed_anywhere_resumes_to_the_uninterrupted_round(
    phase: str, done: int, pair: Path, tmp_path: Path, mini_uninterrupted: list[tuple[str, str, str]]
) -> None:
    from tests.test_crash_matrix import RUN
    from tests.test_train import comparable

    db = f"sqlite:///{tmp_path / 'killed.db'}"
    killed = _mini_train(pair, db, kill=(phase, done))
    assert killed.returncode == -9, (phase, done, killed.returncode, killed.stderr[-2000:])
    resumed = _mini_train(pair, db, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert comparable(db, RUN) == mini_uninterrupted
