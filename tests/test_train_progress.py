"""The one-time load of the embedding model is its own phase (issue 31): the progress callback
sees ``embedder`` 0/1 and 1/1 once, before the first round's first phase, and the first round's
diagnosis begins with the model loaded, so its seconds are the diagnosis's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from diagevo.diagnosis.embedder import local_model
from diagevo.log import open_log
from diagevo.train.config import load_config
from diagevo.train.run import TrainOptions, train

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_embedder_load_is_a_phase_of_its_own(tmp_path: Path) -> None:
    cfg = load_config(
        ROOT / "configs" / "sim.toml",
        [
            "train.challenger_questions=16",
            "train.curriculum_questions=48",
            'train.run="p"',
            "train.rounds=2",
            f'train.out_dir="{tmp_path / "ckpt"}"',
            'diagnosis.embedder="local"',  # the full MiniLM: a load worth a phase (the static one is a table)
        ],
    )
    local_model.cache_clear()  # an earlier test of this process may have loaded it
    seen: list[tuple[str, int, int | None, bool]] = []

    def progress(phase: str, done: int, total: int | None) -> None:
        seen.append((phase, done, total, local_model.cache_info().currsize == 1))

    with open_log(f"sqlite:///{tmp_path / 'p.db'}") as store:
        train(cfg, store, TrainOptions(progress=progress))
    loads = [i for i, (phase, *_rest) in enumerate(seen) if phase == "embedder"]
    assert [seen[i][1:3] for i in loads] == [(0, 1), (1, 1)]  # once for the run, not once a round
    assert not seen[loads[0]][3] and seen[loads[1]][3]  # loaded when the phase says it is done
    first_round = next(i for i, (phase, *_rest) in enumerate(seen) if phase == "challenger")
    assert loads[1] < first_round
    extraction = [s for s in seen if s[0] == "extract"]
    assert extraction and all(s[3] for s in extraction)  # the diagnosis never waits for the load
    # a resumed run with nothing left to do loads nothing
    with open_log(f"sqlite:///{tmp_path / 'p.db'}") as store:
        seen.clear()
        train(cfg, store, TrainOptions(resume=True, progress=progress))
    assert "embedder" not in [s[0] for s in seen]
