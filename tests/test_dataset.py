"""``diagevo export dataset``: a run's questions, failures and memory as Parquet files with a
dataset card, loaded back by polars and by Hugging Face ``datasets`` (by file and by the card's
configs); the cuts ``--round`` and ``--retained-only``; model and user text kept out of the card."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from diagevo.catalog import FailureAttributed, FailureRecorded, QuestionScored
from diagevo.dataset import TABLES, export_dataset, fenced
from diagevo.errors import BadInput
from diagevo.log import open_log
from diagevo.train.config import load_config
from diagevo.train.run import train
from diagevo.views.memory import load_memory
from tests.test_cli_memory import run_cli
from tests.test_rounds import RUN
from tests.test_whatif import two_rounds

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A two-round simulator run ``two`` (failures, diagnoses, causes)."""
    tmp = tmp_path_factory.mktemp("dataset")
    db = f"sqlite:///{tmp / 'two.db'}"
    sizes = ["train.challenger_questions=16", "train.curriculum_questions=48", "train.rounds=2"]
    cfg = load_config(ROOT / "configs" / "sim.toml", [*sizes, 'train.run="two"', f'train.out_dir="{tmp / "c"}"'])
    with open_log(db) as store:
        train(cfg, store)
    return db


def test_the_files_agree_with_the_log(sim: str, tmp_path: Path) -> None:
    with open_log(sim) as store:
        done = export_dataset(store, "two", tmp_path / "ds")
        scored = [e.event for e in store.read("two", types=(QuestionScored,))]
        recorded = [e.event for e in store.read("two", types=(FailureRecorded,))]
        attributed = {e.event.failure_id: e.event.cause_id for e in store.read("two", types=(FailureAttributed,))}
        memory = load_memory(store, "two", 2)
    assert [f.name for f in done.files] == [*(f"{t}.parquet" for t in TABLES), "README.md"]
    q = pl.read_parquet(tmp_path / "ds" / "questions.parquet")
    assert q.height == len(scored) and q["retained"].sum() == sum(s.retained for s in scored) > 0
    f = pl.read_parquet(tmp_path / "ds" / "failures.parquet")
    assert f.height == len(recorded) > 0 and f["diagnosis"].null_count() == 0
    mine = {r["failure_id"]: r["attributed_cause"] for r in f.iter_rows(named=True) if r["attributed_via"] != "created"}
    assert {k: v for k, v in mine.items() if v is not None} == attributed
    c = pl.read_parquet(tmp_path / "ds" / "causes.parquet")
    assert {r["cause_id"]: (r["state"], r["frequency"]) for r in c.iter_rows(named=True)} == {
        k: (v.state.value, v.frequency) for k, v in memory.causes.items()
    }
    states = pl.read_parquet(tmp_path / "ds" / "cause_states.parquet")
    assert sorted(set(states["round"].to_list())) == [1, 2]


def test_promotion_scores_by_hand(store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Round 2 of the protocol log: every candidate at p1 = 9/12, its targets C1 and C2 promoted."""
    two_rounds(store)
    export_dataset(store, RUN, tmp_path / "ds")
    q = pl.read_parquet(tmp_path / "ds" / "questions.parquet")
    targeted = q.filter(pl.col("round") == 2, pl.col("active_cause").is_not_null())
    assert targeted.height > 0 and set(targeted["promotion_score"]) == {0.75} and targeted["promoted"].all()
    assert q.filter(pl.col("round") == 1)["promotion_score"].null_count() == 4  # free questions: no cause
    states = pl.read_parquet(tmp_path / "ds" / "cause_states.parquet").sort("round", "cause_id")
    assert states.rows() == [
        (1, "C1", "N1", "active", 2),
        (1, "C2", "N1", "active", 1),
        (2, "C1", "N1", "active", 1),
        (2, "C2", "N1", "mastered", 0),
    ]
    export_dataset(store, RUN, tmp_path / "r1", upto_round=1)
    assert pl.read_parquet(tmp_path / "r1" / "questions.parquet")["round"].unique().to_list() == [1]
    assert pl.read_parquet(tmp_path / "r1" / "causes.parquet")["frequency"].sort().to_list() == [1, 2]


def test_loaded_by_datasets(
    sim: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    out = tmp_path / "ds"
    args = ["export", "dataset", "--db", sim, "--run", "two", "-o", str(out), "--retained-only", "--json"]
    code, stdout, err = run_cli(capsys, *args)
    assert code == 0, err
    sizes = {f["name"]: f["rows"] for f in json.loads(stdout)["files"]}
    cache = str(tmp_path / "cache")
    for name in TABLES:
        by_file = datasets.load_dataset("parquet", data_files=str(out / f"{name}.parquet"), cache_dir=cache)["train"]
        by_card = datasets.load_dataset(str(out), name, cache_dir=cache)["train"]
        assert by_file.num_rows == by_card.num_rows == sizes[f"{name}.parquet"]
        assert by_card.column_names == pl.read_parquet(out / f"{name}.parquet").columns
    q = datasets.load_dataset(str(out), "questions", cache_dir=cache)["train"]
    assert all(q["retained"])  # --retained-only


def test_untrusted_text_stays_out_of_the_card(store, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    from diagevo import rounds
    from tests.test_rounds import candidate

    run = "x```\n# owned <script>alert(1)</script>"
    rounds.start_run(store, run.replace("\n", " "), {"k": 1.0})
    run = run.replace("\n", " ")
    rounds.open_round(store, run)
    rounds.Round(store, run, 1).record([candidate("q1")])
    rounds.Round(store, run, 1).promote()
    rounds.Round(store, run, 1).commit()
    export_dataset(store, run, tmp_path / "ds")
    card = (tmp_path / "ds" / "README.md").read_text(encoding="utf-8")
    assert fenced(run) in card and card.count(run) == 1  # the id once, in a fence its backticks cannot close
    assert fenced(run).startswith("````\n")
    with pytest.raises(BadInput, match="not committed"):
        export_dataset(store, run, tmp_path / "ds", upto_round=4)
    (tmp_path / "file").write_text("x")
    with pytest.raises(BadInput, match="not a directory"):
        export_dataset(store, run, tmp_path / "file")


def test_export_dataset_never_replaces_files_it_did_not_write(store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A folder holding other files is refused unless ``force``, and they stay; an earlier
    export is replaced file by file; ``-o ""`` is refused; a new folder appears whole."""
    two_rounds(store)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("a user's file")
    with pytest.raises(BadInput, match=r"holds files the export does not write \(thesis.tex\): name a new directory"):
        export_dataset(store, RUN, mine)
    assert sorted(p.name for p in mine.iterdir()) == ["thesis.tex"]
    done = export_dataset(store, RUN, mine, force=True)
    assert (mine / "thesis.tex").read_text() == "a user's file"
    assert sorted(p.name for p in mine.iterdir()) == sorted([*(f.name for f in done.files), "thesis.tex"])
    for empty in (Path(""), Path(".")):
        with pytest.raises(BadInput, match="the output directory needs a name"):
            export_dataset(store, RUN, empty)
    fresh = tmp_path / "a" / "fresh"
    export_dataset(store, RUN, fresh)
    again = export_dataset(store, RUN, fresh, upto_round=1)  # an earlier export: replaced, no other file there
    assert pl.read_parquet(fresh / "questions.parquet")["round"].unique().to_list() == [1]
    assert sorted(p.name for p in fresh.iterdir()) == sorted(f.name for f in again.files)
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["fresh"]  # no staging folder left


def test_export_dataset_cli_refuses_an_empty_output_name(
    store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    two_rounds(store)
    code, _, err = run_cli(capsys, "export", "dataset", "--run", RUN, "-o", "", "--db", store.url)
    assert code != 0 and "the output directory needs a name" in " ".join(err.split())


def test_export_dataset_never_replaces_a_readme_it_did_not_write(store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Its own card is known by the digest it carries, not by its name: a user's README.md (with
    ``force`` too) and a card edited since are refused in one line and left byte for byte."""
    two_rounds(store)
    mine = tmp_path / "mine"
    mine.mkdir()
    theirs = b"# My dataset\n\nNotes I wrote by hand.\n"
    (mine / "README.md").write_bytes(theirs)
    for force in (False, True):
        with pytest.raises(BadInput, match=r"README.md was not written by diagevo's dataset export") as refused:
            export_dataset(store, RUN, mine, force=force)
        assert "\n" not in str(refused.value)
        assert (mine / "README.md").read_bytes() == theirs and [p.name for p in mine.iterdir()] == ["README.md"]
    ours = tmp_path / "ours"
    export_dataset(store, RUN, ours)
    export_dataset(store, RUN, ours, upto_round=1)  # its own card: replaced
    card = (ours / "README.md").read_text(encoding="utf-8")
    assert "rounds 1 to 1" in card
    edited = card.replace("# A DiagEvo run", "# My edited run").encode()
    (ours / "README.md").write_bytes(edited)
    with pytest.raises(BadInput, match="or was edited since"):
        export_dataset(store, RUN, ours)
    assert (ours / "README.md").read_bytes() == edited
