"""The hf backend's arguments, plans and heuristics, checked without loading a model (GPU
configurations included)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from diagevo.config import load_config
from diagevo.diagnosis.interface import ExtractionInput, KnownCause, NodeView
from diagevo.generation import Sampling
from diagevo.generation.vllm_engine import engine_args, sampling_params
from diagevo.train.hf.args import grpo_kwargs, launch_command, plan, steps_and_prompts, vllm_kwargs
from diagevo.train.hf.heuristic import HeuristicDiagnostician, cause_for, first_departure, node_label_for
from diagevo.train.hf.tiny import corpus

ROOT = Path(__file__).resolve().parents[1]
GPU_CONFIGS = ["qwen3-4b-base", "qwen3-8b-base", "octothinker-8b"]
REF = "Step 1: First 12 + 3 = 15.\nStep 2: Then 15 * 4 = 60.\nStep 3: The final answer is \\boxed{60}."


@pytest.mark.parametrize("name", GPU_CONFIGS)
def test_gpu_configs_hold_the_paper_values(name: str) -> None:
    cfg = load_config(ROOT / "configs" / f"{name}.toml")
    assert cfg.train.backend == "hf" and cfg.hf.device == "cuda" and cfg.hf.bf16
    for role, n, steps, group in (("challenger", 256, 6, 8), ("solver", 256, 12, 8)):
        kw = grpo_kwargs(cfg, role, n, "/tmp/out", 0)
        assert (kw["learning_rate"], kw["weight_decay"], kw["beta"]) == (1e-6, 1e-2, 1e-2)
        assert (kw["temperature"], kw["top_p"]) == (1.0, 0.99)
        assert kw["num_generations"] == group and kw["max_steps"] == steps
        assert kw["use_vllm"] and kw["vllm_mode"] == "colocate" and kw["vllm_enable_sleep_mode"]
        assert kw["bf16"] and not kw["use_cpu"]
        # one step's generation batch covers that step's prompts, in whole groups
        _, per_step = steps_and_prompts(cfg, role, n)
        batch = kw["per_device_train_batch_size"] * cfg.hf.num_processes * kw["gradient_accumulation_steps"]
        assert batch % group == 0 and batch >= per_step * group
    assert Path(ROOT / str(cfg.hf.accelerate_config)).is_file()


def test_trl_accepts_the_built_arguments(tmp_path: Path) -> None:
    trl = pytest.importorskip("trl")
    cfg = load_config(ROOT / "configs" / "tiny-hf.toml")
    args = trl.GRPOConfig(**grpo_kwargs(cfg, "solver", 8, tmp_path, 0))
    assert args.num_generations == cfg.grpo.solver_group_size and args.use_cpu
    assert args.generation_batch_size % args.num_generations == 0
    gpu = grpo_kwargs(load_config(ROOT / "configs" / "qwen3-8b-base.toml"), "solver", 256, tmp_path, 0)
    assert set(gpu) <= set(trl.GRPOConfig.__dataclass_fields__)


def test_vllm_arguments() -> None:
    cfg = load_config(ROOT / "configs" / "qwen3-4b-base.toml")
    kw = vllm_kwargs(cfg, "models/Qwen3-4B-Base")
    assert engine_args(**kw)["model"] == "models/Qwen3-4B-Base" and kw["dtype"] == "bfloat16"
    with pytest.raises(ValueError, match="unknown vLLM engine option"):
        engine_args("m", tensor_parallel=2)
    assert sampling_params(Sampling(n=12, temperature=1.0, top_p=0.99, max_new_tokens=64, seed=3)) == {
        "n": 12, "temperature": 1.0, "top_p": 0.99, "max_tokens": 64, "seed": 3,
    }
    assert sampling_params(Sampling(temperature=0.0, top_p=0.5))["top_p"] == 1.0


def test_bad_vllm_settings_are_one_line_errors() -> None:
    cpu = load_config(ROOT / "configs" / "tiny-hf.toml", ["hf.use_vllm=true"])
    with pytest.raises(ValueError, match="needs hf.device"):
        grpo_kwargs(cpu, "solver", 8, "/tmp", 0)
    server = load_config(ROOT / "configs" / "qwen3-8b-base.toml", ['hf.vllm_mode="server"'])
    with pytest.raises(ValueError, match="needs hf.vllm_server_url"):
        grpo_kwargs(server, "solver", 8, "/tmp", 0)
    ok = load_config(ROOT / "configs" / "qwen3-8b-base.toml", ['hf.vllm_mode="server"', 'hf.vllm_server_url="http://h:8000"'])
    assert grpo_kwargs(ok, "solver", 8, "/tmp", 0)["vllm_server_base_url"] == "http://h:8000"


def test_launch_commands() -> None:
    gpu = load_config(ROOT / "configs" / "qwen3-8b-base.toml")
    cmd = launch_command(gpu, "configs/qwen3-8b-base.toml", "r1")
    assert cmd[:4] == ["accelerate", "launch", "--config_file", "configs/accelerate/zero3-8gpu.yaml"]
    assert cmd[-4:] == ["--config", "configs/qwen3-8b-base.toml", "--run", "r1"]
    one = load_config(ROOT / "configs" / "qwen3-4b-base.toml", ['hf.accelerate_config="configs/accelerate/zero3-1gpu.yaml"', "hf.num_processes=1"])
    assert "configs/accelerate/zero3-1gpu.yaml" in launch_command(one, None, None)
    assert launch_command(load_config(ROOT / "configs" / "tiny-hf.toml"), "c.toml", None) == ["diagevo", "train", "--config", "c.toml"]


def test_plan_names_models_engines_and_paths(tmp_path: Path) -> None:
    cfg = load_config(ROOT / "configs" / "octothinker-8b.toml")
    p = plan(cfg, config_path="configs/octothinker-8b.toml", run="r", checkpoints=tmp_path / "ck", db="sqlite:///x.db")
    assert p["models"]["solver"].endswith("OctoThinker-8B-Hybrid-Base") and p["engine"] == "vllm"
    assert p["grpo"]["solver"]["output_dir"].startswith(str(tmp_path / "ck"))
    assert p["diagnostician"] == "http://127.0.0.1:8000/v1" and "accelerate launch" in p["launch"]


def test_dry_run_cli_loads_nothing(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    code = "import sys; from cli.app import main; main()"
    out = subprocess.run(
        [sys.executable, "-c", code, "train", "--config", str(ROOT / "configs" / "qwen3-8b-base.toml"), "--dry-run", "--json", "--db", f"sqlite:///{db}"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["checkpoints"].startswith(str(tmp_path / "x.runs"))
    assert data["grpo"]["challenger"]["max_steps"] == 6 and data["models"]["challenger"] == "models/Qwen3-8B-Base"
    assert not db.exists()


def test_first_departure_and_causes() -> None:
    slip = REF.replace("= 60.\nStep 3", "= 64.\nStep 3")
    assert first_departure(REF, REF) is None
    assert first_departure(slip, REF)[0] == 2
    assert "multiplication" in cause_for(slip, REF) and "wrong numerical result" in cause_for(slip, REF)
    other = "Step 1: First 12 - 3 = 9.\nStep 2: The final answer is \\boxed{9}."
    assert "different calculation" in cause_for(other, REF)
    for c in (cause_for(slip, REF), cause_for(other, REF), cause_for("", REF), node_label_for(cause_for(slip, REF))):
        assert 10 <= len(c.split()) <= 20


class _Bag:
    """Bag-of-words vectors: a real (if crude) embedder, so similarity decides."""

    name = "bag"

    def embed(self, texts):  # noqa: ANN001, ANN201
        vocab = sorted({w for t in texts for w in t.lower().split()})
        m = np.array([[t.lower().split().count(w) for w in vocab] for t in texts], dtype=np.float32)
        return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-9)


def test_heuristic_diagnostician_decisions() -> None:
    d = HeuristicDiagnostician(_Bag(), theta_dup=0.8, theta_merge=0.8)
    slip = REF.replace("= 60.\nStep 3", "= 64.\nStep 3")
    item = ExtractionInput("f", "q", "What is (12 + 3) * 4?", "60", slip, REF)
    new = asyncio.run(d.extract(item)).value
    assert new.matched_cause_id is None and new.error_cause == cause_for(slip, REF)
    known = ExtractionInput("f", "q", "", "60", slip, REF, (KnownCause("C7", "active", new.error_cause),))
    assert asyncio.run(d.extract(known)).value.matched_cause_id == "C7"
    assert asyncio.run(d.extract(ExtractionInput("f", "q", "", "60", REF, REF))).value.error_cause is None
    assert asyncio.run(d.deduplicate(new.error_cause, [KnownCause("C1", "active", new.error_cause)])).value.duplicate
    assert not asyncio.run(d.deduplicate(new.error_cause, [KnownCause("C1", "active", "unrelated words entirely here")])).value.duplicate
    label = node_label_for(new.error_cause)
    assert asyncio.run(d.assign_node(new.error_cause, [NodeView("N1", label)])).value.assigned_node == "N1"
    fresh = asyncio.run(d.assign_node(new.error_cause, [NodeView("N1", "geometry of circles and their tangents")])).value
    assert fresh.create_new_node and fresh.new_node_label == label


def test_tiny_corpus_holds_out_its_heldout_questions() -> None:
    pairs, heldout = corpus(2000, 0)
    seen = {p[0][-1]["content"] for p in pairs}
    assert heldout and not any(h["question"] in seen for h in heldout)
    assert any("<question>" in c for _, c in pairs) and any("\\boxed{" in c for _, c in pairs)


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    code = "import sys; from cli.app import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.mark.slow
def test_models_tiny_cli_writes_a_loadable_pair(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    out = _cli("models", "tiny", "--out", str(tmp_path / "t"), "--steps", "2", "--hidden", "16", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["solver"] == str(tmp_path / "t" / "solver")
    assert "Writing model shards" not in out.stderr  # transformers' own bars stay off the CLI's output
    from transformers import AutoConfig, AutoTokenizer

    for role in ("challenger", "solver"):
        cfg = AutoConfig.from_pretrained(tmp_path / "t" / role)
        assert cfg.hidden_size == 16 and cfg.head_dim == 4 and cfg.tie_word_embeddings
        tok = AutoTokenizer.from_pretrained(tmp_path / "t" / role)
        text = tok.apply_chat_template([{"role": "user", "content": "What is 12 + 3?"}], tokenize=False, add_generation_prompt=True)
        assert text.endswith("<|im_start|>assistant\n")
        assert [tok.decode([i]) for i in tok("123", add_special_tokens=False)["input_ids"]] == ["1", "2", "3"]
    assert (tmp_path / "t" / "heldout.jsonl").read_text().strip()


def test_bad_models_and_hub_ids_are_one_line_errors(tmp_path: Path) -> None:
    bad = _cli("models", "tiny", "--out", str(tmp_path / "t"), "--hidden", "18")
    assert bad.returncode != 0 and "multiple of 4" in bad.stderr and not (tmp_path / "t").exists()
    hub = _cli(
        "train", "--config", str(ROOT / "configs" / "tiny-hf.toml"), "--db", f"sqlite:///{tmp_path / 'x.db'}",
        "--set", 'hf.solver_model="Qwen/Qwen3-4B-Base"', "--quiet",
    )
    assert hub.returncode == 1, hub.stderr
    assert "no network: pass a local model directory" in hub.stderr and len(hub.stderr.strip().splitlines()) == 1


def test_bad_heldout_files_are_one_line_errors(tmp_path: Path) -> None:
    from diagevo.train.hf.backend import HFBackend

    for role in ("solver", "challenger"):
        (tmp_path / role).mkdir()
        (tmp_path / role / "config.json").write_text("{}")
    bad = tmp_path / "h.jsonl"
    bad.write_text('{"question": "What is 1 + 1?", "answer": "2"}\n{"question": "x"}\n')
    models = [f"hf.solver_model={json.dumps(str(tmp_path / 'solver'))}", f"hf.challenger_model={json.dumps(str(tmp_path / 'challenger'))}"]
    cfg = load_config(ROOT / "configs" / "tiny-hf.toml", [*models, f"hf.heldout={json.dumps(str(bad))}"])
    with pytest.raises(ValueError, match=r"h\.jsonl:2: expected a JSON object with question and answer"):
        HFBackend(cfg, 0).heldout()
    gone = load_config(ROOT / "configs" / "tiny-hf.toml", [*models, f"hf.heldout={json.dumps(str(tmp_path / 'none.jsonl'))}"])
    with pytest.raises(ValueError, match="no held-out file"):
        HFBackend(gone, 0).heldout()
    assert HFBackend(load_config(ROOT / "configs" / "tiny-hf.toml", models), 0).heldout() == []
    with pytest.raises(ValueError, match="not a model directory"):
        HFBackend(load_config(ROOT / "configs" / "tiny-hf.toml", [*models, f"hf.solver_model={json.dumps(str(tmp_path))}"]), 0)


def test_the_plan_says_how_the_ranks_share_the_work() -> None:
    eight = plan(load_config(ROOT / "configs" / "qwen3-8b-base.toml"), config_path="c.toml", run=None, checkpoints=Path("/tmp/c"), db="sqlite:///x.db")
    assert eight["processes"].startswith("8: rank 0 leads") and "ranks 1-7 follow" in eight["processes"]
    assert "--num_processes 8" in eight["launch"]
    one = plan(load_config(ROOT / "configs" / "tiny-hf.toml"), config_path="c.toml", run=None, checkpoints=Path("/tmp/c"), db="sqlite:///x.db")
    assert one["processes"].startswith("1:")


def test_only_a_zero3_trainer_has_its_policy_gathered() -> None:
    """Under ZeRO-3 the policy is sharded after GRPO and must be gathered before rank 0 saves it;
    under DDP (as the CPU tests run) or ZeRO-2 every rank already holds it whole."""
    from types import SimpleNamespace

    from diagevo.train.hf.distributed import is_zero3

    def trainer(enabled: bool, stage: int | None) -> SimpleNamespace:
        plugin = None if stage is None else SimpleNamespace(zero_stage=stage)
        return SimpleNamespace(is_deepspeed_enabled=enabled, accelerator=SimpleNamespace(state=SimpleNamespace(deepspeed_plugin=plugin)))

    assert is_zero3(trainer(True, 3))
    assert not is_zero3(trainer(True, 2))
    assert not is_zero3(trainer(False, None))
    assert not is_zero3(trainer(False, 3))
