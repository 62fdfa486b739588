"""The hf backend's arguments, plans and heuristics, checked without loading a model (GPU
configurations included)."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from diagevo.diagnosis.heuristic import HeuristicDiagnostician, cause_for, first_departure, node_label_for
from diagevo.diagnosis.interface import ExtractionInput, KnownCause, NodeView
from diagevo.errors import NotFound
from diagevo.generation import Sampling
from diagevo.generation.vllm_engine import engine_args, sampling_params
from diagevo.train.config import load_config
from diagevo.train.hf.args import attention, grpo_kwargs, launch_command, phase_plan, plan, step_order, vllm_kwargs
from diagevo.train.hf.tiny import corpus

ROOT = Path(__file__).resolve().parents[1]
GPU_CONFIGS = ["qwen3-4b-base", "qwen3-8b-base", "octothinker-8b"]
REF = "Step 1: First 12 + 3 = 15.\nStep 2: Then 15 * 4 = 60.\nStep 3: The final answer is \\boxed{60}."


@pytest.mark.parametrize("name", GPU_CONFIGS)
def test_gpu_configs_hold_the_paper_values(name: str) -> None:
    """Table 8 per step: 256 prompts x 8 completions, 6 challenger steps, up to 12 solver steps;
    Table 7's optimizer with a constant learning rate; FlashAttention 2."""
    cfg = load_config(ROOT / "configs" / f"{name}.toml")
    assert cfg.train.backend == "hf" and cfg.hf.device == "cuda" and cfg.hf.bf16
    assert cfg.hf.attn_implementation == "flash_attention_2"
    assert cfg.challenger_questions == 6 * 256 and cfg.train.curriculum_questions == 8000
    # the solver with 700 retained questions: three steps of 256 (the third topped up), 2,000 retained: 8
    for role, n, steps in (
        ("challenger", cfg.challenger_questions, 6),
        ("solver", 700, 3),
        ("solver", 2000, 8),
        ("solver", 9000, 12),
    ):
        plan = phase_plan(cfg, role, n)
        assert (plan.steps, plan.prompts_per_step, plan.group, plan.completions_per_step) == (steps, 256, 8, 2048)
        kw = grpo_kwargs(cfg, plan, "/tmp/out", 0)
        assert (kw["learning_rate"], kw["weight_decay"], kw["beta"]) == (1e-6, 1e-2, 1e-2)
        assert (kw["lr_scheduler_type"], kw["warmup_steps"]) == ("constant", 0)
        assert (kw["temperature"], kw["top_p"]) == (1.0, 0.99)
        assert kw["num_generations"] == 8 and kw["max_steps"] == steps and not kw["shuffle_dataset"]
        assert kw["use_vllm"] and kw["vllm_mode"] == "colocate" and kw["vllm_enable_sleep_mode"]
        assert kw["bf16"] and not kw["use_cpu"]
        # one optimizer step's generation batch is exactly that step's 256 prompts x 8 completions
        step = kw["per_device_train_batch_size"] * cfg.hf.num_processes * kw["gradient_accumulation_steps"]
        assert step == 2048 and kw["per_device_train_batch_size"] <= cfg.hf.per_device_batch
    assert Path(ROOT / str(cfg.hf.accelerate_config)).is_file()


def test_step_order_draws_every_prompt_before_any_twice() -> None:
    cfg = load_config(ROOT / "configs" / "qwen3-8b-base.toml")
    plan = phase_plan(cfg, "solver", 700)
    order = step_order(plan, random.Random(1))
    assert len(order) == plan.rows == 768
    assert sorted(order[:700]) == list(range(700)) and len(set(order[700:])) == 68
    assert step_order(plan, random.Random(1)) == order != step_order(plan, random.Random(2))
    big = phase_plan(cfg, "solver", 5000)  # more than 12 steps can take: a random 3,072 of them, once each
    assert len(set(step_order(big, random.Random(0)))) == big.rows == 3072


def test_a_step_is_split_into_whole_micro_batches_on_any_process_count() -> None:
    for procs, per_device in ((1, 16), (3, 8), (8, 8), (7, 6)):
        cfg = load_config(
            ROOT / "configs" / "qwen3-8b-base.toml", [f"hf.num_processes={procs}", f"hf.per_device_batch={per_device}"]
        )
        for n in (5, 256, 300):
            plan = phase_plan(cfg, "solver", n)
            assert plan.prompts_per_step % procs == 0 and plan.prompts_per_step >= min(256, n)
            assert plan.per_device * procs * plan.accumulation == plan.completions_per_step
            assert plan.per_device <= per_device


def test_attention_is_flash_on_cuda_and_sdpa_on_a_cpu() -> None:
    gpu = load_config(ROOT / "configs" / "qwen3-4b-base.toml")
    assert attention(gpu) == "flash_attention_2"
    assert (
        attention(load_config(ROOT / "configs" / "qwen3-4b-base.toml", ['hf.device="cpu"', "hf.use_vllm=false"]))
        == "sdpa"
    )
    assert attention(load_config(ROOT / "configs" / "tiny-hf.toml")) == "sdpa"


def test_flash_attention_missing_on_cuda_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from diagevo.errors import Unavailable
    from diagevo.train.hf.loading import check_flash_attention

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "flash_attn" else real(name, *a))
    with pytest.raises(Unavailable, match="needs the flash-attn package on CUDA"):
        check_flash_attention()


def test_trl_accepts_the_built_arguments(tmp_path: Path) -> None:
    trl = pytest.importorskip("trl")
    cfg = load_config(ROOT / "configs" / "tiny-hf.toml")
    args = trl.GRPOConfig(**grpo_kwargs(cfg, phase_plan(cfg, "solver", 8), tmp_path, 0))
    assert args.num_generations == cfg.solver.group_size and args.use_cpu
    assert args.generation_batch_size == 4 * 4 and args.lr_scheduler_type == "constant"
    gpu_cfg = load_config(ROOT / "configs" / "qwen3-8b-base.toml")
    gpu = grpo_kwargs(gpu_cfg, phase_plan(gpu_cfg, "solver", 256), tmp_path, 0)
    assert set(gpu) <= set(trl.GRPOConfig.__dataclass_fields__)


def test_the_engine_arguments_follow_the_declared_platform() -> None:
    """The dry run's vLLM decisions, computed without vLLM or a GPU: sleep mode on CUDA only,
    eager and an explicit KV cache on a CPU, and TRL told the same about sleep mode."""
    cpu = plan(
        load_config(ROOT / "configs" / "smollm2-cpu.toml"), config_path=None, run=None, checkpoints=Path("c"), db="d"
    )
    gpu = plan(
        load_config(ROOT / "configs" / "qwen3-4b-base.toml"), config_path=None, run=None, checkpoints=Path("c"), db="d"
    )
    c, g = cpu["vllm"], gpu["vllm"]
    assert (c["platform"], g["platform"]) == ("cpu", "cuda")
    assert c["engine"]["enable_sleep_mode"] is False and g["engine"]["enable_sleep_mode"] is True
    assert c["engine"]["enforce_eager"] is True and g["engine"]["enforce_eager"] is False
    assert c["engine"]["kv_cache_memory_bytes"] == 2**30 and "gpu_memory_utilization" not in c["engine"]
    assert g["engine"]["gpu_memory_utilization"] == 0.3 and "kv_cache_memory_bytes" not in g["engine"]
    assert c["engine"]["dtype"] == "float32" and g["engine"]["dtype"] == "bfloat16"
    assert c["environment"] == {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"} and g["environment"] == {}
    assert all(d["why"] for d in (*c["decisions"].values(), *g["decisions"].values()))
    assert (
        cpu["grpo"]["solver"]["vllm_enable_sleep_mode"] is False
        and gpu["grpo"]["solver"]["vllm_enable_sleep_mode"] is True
    )
    json.dumps(cpu)  # what --json prints


def test_vllm_arguments() -> None:
    cfg = load_config(ROOT / "configs" / "qwen3-4b-base.toml")
    kw = vllm_kwargs(cfg, "models/Qwen3-4B-Base")
    assert engine_args(**kw)["model"] == "models/Qwen3-4B-Base" and kw["dtype"] == "bfloat16"
    assert kw["distributed_executor_backend"] == "external_launcher" and kw["enable_sleep_mode"]
    assert "max_model_len" not in engine_args(**kw)  # None: vLLM's default
    with pytest.raises(ValueError, match="unknown vLLM engine option"):
        engine_args("m", tensor_parallel=2)
    assert sampling_params(Sampling(n=12, temperature=1.0, top_p=0.99, max_new_tokens=64, seed=3)) == {
        "n": 12,
        "temperature": 1.0,
        "top_p": 0.99,
        "max_tokens": 64,
        "seed": 3,
    }
    assert sampling_params(Sampling(temperature=0.0, top_p=0.5))["top_p"] == 1.0
    # vLLM seeds each request: each prompt of a call its own seed, or equal prompts sample alike
    seeds = {sampling_params(Sampling(seed=3), i)["seed"] for i in range(4)}
    assert len(seeds) == 4 and sampling_params(Sampling(seed=3), 0)["seed"] == 3


def test_bad_vllm_settings_are_one_line_errors() -> None:
    server = load_config(ROOT / "configs" / "qwen3-8b-base.toml", ['hf.vllm_mode="server"'])
    with pytest.raises(ValueError, match="needs hf.vllm_server_url"):
        grpo_kwargs(server, phase_plan(server, "solver", 8), "/tmp", 0)
    ok = load_config(
        ROOT / "configs" / "qwen3-8b-base.toml", ['hf.vllm_mode="server"', 'hf.vllm_server_url="http://h:8000"']
    )
    assert grpo_kwargs(ok, phase_plan(ok, "solver", 8), "/tmp", 0)["vllm_server_base_url"] == "http://h:8000"


def test_launch_commands() -> None:
    gpu = load_config(ROOT / "configs" / "qwen3-8b-base.toml")
    cmd = launch_command(gpu, "configs/qwen3-8b-base.toml", "r1")
    assert cmd[:4] == ["accelerate", "launch", "--config_file", "configs/accelerate/zero3-8gpu.yaml"]
    assert cmd[-4:] == ["--config", "configs/qwen3-8b-base.toml", "--run", "r1"]
    one = load_config(
        ROOT / "configs" / "qwen3-4b-base.toml",
        ['hf.accelerate_config="configs/accelerate/zero3-1gpu.yaml"', "hf.num_processes=1"],
    )
    assert "configs/accelerate/zero3-1gpu.yaml" in launch_command(one, None, None)
    assert launch_command(load_config(ROOT / "configs" / "tiny-hf.toml"), "c.toml", None) == [
        "diagevo",
        "train",
        "--config",
        "c.toml",
    ]


def test_plan_names_models_engines_and_paths(tmp_path: Path) -> None:
    cfg = load_config(ROOT / "configs" / "octothinker-8b.toml")
    p = plan(cfg, config_path="configs/octothinker-8b.toml", run="r", checkpoints=tmp_path / "ck", db="sqlite:///x.db")
    assert p["models"]["solver"].endswith("OctoThinker-8B-Hybrid-Base") and p["engine"] == "vllm"
    assert p["grpo"]["solver"]["output_dir"].startswith(str(tmp_path / "ck"))
    assert p["diagnostician"] == "http://127.0.0.1:8000/v1" and "accelerate launch" in p["launch"]


def test_dry_run_cli_loads_nothing(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    code = "import sys; from diagevo.cli.app import main; main()"
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "train",
            "--config",
            str(ROOT / "configs" / "qwen3-8b-base.toml"),
            "--dry-run",
            "--json",
            "--db",
            f"sqlite:///{db}",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["checkpoints"].startswith(str(tmp_path / "x.diagevo" / "runs"))
    assert data["grpo"]["challenger"]["max_steps"] == 6 and data["models"]["challenger"] == "models/Qwen3-8B-Base"
    chal, solver = data["phases"]["challenger"], data["phases"]["solver"]
    for phase in (chal, solver):
        assert (phase["prompts_per_step"], phase["completions_per_step"], phase["group"]) == (256, 2048, 8)
        assert phase["scheduler"].startswith("constant") and phase["attention"] == "flash_attention_2"
        assert phase["engines_per_process"].startswith("1 vLLM engine")
    assert chal["steps"] == 6 and chal["prompts"] == 1536
    assert solver["max_steps"] == 12 and solver["steps"] == "min(12, ceil(retained / 256))"
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
    item = ExtractionInput(
        failure_id="f",
        question_id="q",
        question="What is (12 + 3) * 4?",
        pseudo_label="60",
        response=slip,
        reference=REF,
    )
    new = asyncio.run(d.extract(item)).value
    assert new.matched_cause_id is None and new.error_cause == cause_for(slip, REF)
    known = item.model_copy(update={"question": "", "known": (KnownCause("C7", "active", new.error_cause),)})
    assert asyncio.run(d.extract(known)).value.matched_cause_id == "C7"
    right = item.model_copy(update={"question": "", "response": REF})
    assert asyncio.run(d.extract(right)).value.error_cause is None
    assert asyncio.run(d.deduplicate(new.error_cause, [KnownCause("C1", "active", new.error_cause)])).value.duplicate
    assert not asyncio.run(
        d.deduplicate(new.error_cause, [KnownCause("C1", "active", "unrelated words entirely here")])
    ).value.duplicate
    label = node_label_for(new.error_cause)
    assert asyncio.run(d.assign_node(new.error_cause, [NodeView("N1", label)])).value.assigned_node == "N1"
    fresh = asyncio.run(
        d.assign_node(new.error_cause, [NodeView("N1", "geometry of circles and their tangents")])
    ).value
    assert fresh.create_new_node and fresh.new_node_label == label


def test_tiny_corpus_holds_out_its_heldout_questions() -> None:
    pairs, heldout = corpus(2000, 0)
    seen = {p[0][-1]["content"] for p in pairs}
    assert heldout and not any(h["question"] in seen for h in heldout)
    assert any("<question>" in c for _, c in pairs) and any("\\boxed{" in c for _, c in pairs)


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    code = "import sys; from diagevo.cli.app import main; main()"
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
        text = tok.apply_chat_template(
            [{"role": "user", "content": "What is 12 + 3?"}], tokenize=False, add_generation_prompt=True
        )
        assert text.endswith("<|im_start|>assistant\n")
        assert [tok.decode([i]) for i in tok("123", add_special_tokens=False)["input_ids"]] == ["1", "2", "3"]
    assert (tmp_path / "t" / "heldout.jsonl").read_text().strip()


def test_bad_models_and_hub_ids_are_one_line_errors(tmp_path: Path) -> None:
    bad = _cli("models", "tiny", "--out", str(tmp_path / "t"), "--hidden", "18")
    assert bad.returncode != 0 and "multiple of 4" in bad.stderr and not (tmp_path / "t").exists()
    hub = _cli(
        "train",
        "--config",
        str(ROOT / "configs" / "tiny-hf.toml"),
        "--db",
        f"sqlite:///{tmp_path / 'x.db'}",
        "--set",
        'solver.model="Qwen/Qwen3-4B-Base"',
        "--set",
        'challenger.model="Qwen/Qwen3-4B-Base"',
        "--quiet",
    )
    assert hub.returncode == 2, hub.stderr
    assert "no network: pass a local model directory" in hub.stderr and len(hub.stderr.strip().splitlines()) == 1
    missing = _cli(
        "train",
        "--config",
        str(ROOT / "configs" / "tiny-hf.toml"),
        "--db",
        f"sqlite:///{tmp_path / 'y.db'}",
        "--set",
        f'solver.model="{tmp_path}/nosuch"',
        "--set",
        f'challenger.model="{tmp_path}/nosuch"',
        "--quiet",
    )
    assert missing.returncode == 2 and f"no model directory {tmp_path}/nosuch: build it with" in missing.stderr, (
        missing.stderr
    )


def test_bad_heldout_files_are_one_line_errors(tmp_path: Path) -> None:
    from diagevo.train.hf.backend import HFBackend

    for role in ("solver", "challenger"):
        (tmp_path / role).mkdir()
        (tmp_path / role / "config.json").write_text("{}")
    bad = tmp_path / "h.jsonl"
    bad.write_text('{"question": "What is 1 + 1?", "answer": "2"}\n{"question": "x"}\n')
    models = [
        f"solver.model={json.dumps(str(tmp_path / 'solver'))}",
        f"challenger.model={json.dumps(str(tmp_path / 'challenger'))}",
    ]
    cfg = load_config(ROOT / "configs" / "tiny-hf.toml", [*models, f"hf.heldout={json.dumps(str(bad))}"])
    with pytest.raises(ValueError, match=r"h\.jsonl:2: expected a JSON object with question and answer"):
        HFBackend(cfg).heldout()
    gone = load_config(
        ROOT / "configs" / "tiny-hf.toml", [*models, f"hf.heldout={json.dumps(str(tmp_path / 'none.jsonl'))}"]
    )
    with pytest.raises(NotFound, match="no held-out file"):
        HFBackend(gone).heldout()
    assert HFBackend(load_config(ROOT / "configs" / "tiny-hf.toml", models)).heldout() == []
    with pytest.raises(ValueError, match="not a model directory"):
        HFBackend(
            load_config(ROOT / "configs" / "tiny-hf.toml", [*models, f"solver.model={json.dumps(str(tmp_path))}"])
        )


def test_the_plan_says_how_the_ranks_share_the_work() -> None:
    eight = plan(
        load_config(ROOT / "configs" / "qwen3-8b-base.toml"),
        config_path="c.toml",
        run=None,
        checkpoints=Path("/tmp/c"),
        db="sqlite:///x.db",
    )
    assert eight["processes"].startswith("8: rank 0 leads") and "ranks 1-7 follow" in eight["processes"]
    assert "--num_processes 8" in eight["launch"]
    one = plan(
        load_config(ROOT / "configs" / "tiny-hf.toml"),
        config_path="c.toml",
        run=None,
        checkpoints=Path("/tmp/c"),
        db="sqlite:///x.db",
    )
    assert one["processes"].startswith("1:")


def test_only_a_zero3_trainer_has_its_policy_gathered() -> None:
    """Under ZeRO-3 the policy is sharded after GRPO and must be gathered before rank 0 saves it;
    under DDP (as the CPU tests run) or ZeRO-2 every rank already holds it whole."""
    from types import SimpleNamespace

    from diagevo.train.hf.distributed import is_zero3

    def trainer(enabled: bool, stage: int | None) -> SimpleNamespace:
        plugin = None if stage is None else SimpleNamespace(zero_stage=stage)
        return SimpleNamespace(
            is_deepspeed_enabled=enabled, accelerator=SimpleNamespace(state=SimpleNamespace(deepspeed_plugin=plugin))
        )

    assert is_zero3(trainer(True, 3))
    assert not is_zero3(trainer(True, 2))
    assert not is_zero3(trainer(False, None))
    assert not is_zero3(trainer(False, 3))
