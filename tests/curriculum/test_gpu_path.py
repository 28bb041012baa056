"""The GPU path, checked on a CPU: ``mapf-lake bench gpu`` (its refusal without CUDA, its arguments, its parts
and report with a CPU-sized stand-in), the accelerate launch of the same entry point, the shipped accelerate
configs, and the run config's vLLM server fields. The vLLM parts themselves run only where vLLM and a GPU are."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

from tests.cli_runner import ROOT, mapf_lake
from tests.model_fixtures import tiny_model_dir

GPU_DOCS = ROOT / "docs" / "gpu"
HAS_VLLM = importlib.util.find_spec("vllm") is not None


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


cli = partial(mapf_lake, check=False, timeout=120)


def stand_in(**changes):
    """CPU-sized settings for the same parts: the embedded tiny model, transformers instead of vLLM."""
    from curriculum.benches.gpu import GpuBenchSettings

    options = dict(model=str(tiny_model_dir()), preset="tiny", style="compact-nb", steps=2, prompts_per_step=2,
                   generations=2, max_completion_length=8, generation_prompts=4, generation_tokens=8, backend="hf",
                   use_vllm=False, cpu_threads=1)
    return GpuBenchSettings(**{**options, **changes})


# --- bench gpu: the command ---------------------------------------------------------------------------------

@pytest.mark.skipif("_cuda()", reason="this machine has a CUDA GPU: the refusal is for machines without one")
def test_bench_gpu__without_cuda_one_line_and_status_2():
    from policy.backends import VLLM_INSTALL_HINT

    result = cli("bench", "gpu")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "no CUDA GPU is available" in lines[0] and "Traceback" not in result.stderr
    assert (VLLM_INSTALL_HINT in lines[0]) == (not HAS_VLLM)
    assert result.stdout == ""


def test_bench_gpu__help_names_every_part_and_option():
    from curriculum.benches.gpu import PARTS

    result = cli("bench", "gpu", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    for name in PARTS:
        assert name in text
    for flag in ("--parts", "--out", "--model", "--preset", "--steps", "--stage-batch", "--gpu-memory-utilization"):
        assert flag in text
    assert "exit status 2" in text
    assert re.search(r"^\s+gpu\s+the paper's setting on one GPU", cli("bench", "--help").stdout, re.M)


@pytest.mark.parametrize("args, named", [
    (["--parts", "grpo-full,nope"], "nope"),
    (["--parts", ","], "choose comma-separated parts"),
    (["--preset", "tiny"], "--preset"),
    (["--stage-batch", "huge"], "--stage-batch"),
])
def test_bench_gpu__bad_arguments_are_refused_by_the_parser(args, named, capsys):
    from curriculum.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["bench", "gpu", *args])
    assert stop.value.code == 2
    assert named in capsys.readouterr().err


@pytest.mark.parametrize("args, field", [
    (["--steps", "1"], "--steps"),
    (["--generations", "1"], "--generations"),
    (["--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization"),
    (["--model", "/no/such/model"], "--model"),
])
def test_bench_gpu__bad_values_name_their_flag_before_any_gpu_check(args, field, capsys):
    from curriculum.cli import main

    assert main(["bench", "gpu", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"mapf-lake: error: {field} = ")


def test_bench_gpu__out_must_not_be_a_folder(tmp_path, capsys):
    from curriculum.cli import main

    assert main(["bench", "gpu", "--out", str(tmp_path)]) == 2
    assert "--out" in capsys.readouterr().err


def test_bench_gpu__settings_default_to_the_gpu_measurement():
    from curriculum.benches.gpu import GpuBenchSettings

    settings = GpuBenchSettings()
    assert settings.model is None and settings.use_vllm and settings.backend == "vllm" and settings.needs_vllm
    assert settings.style == "natural" and settings.preset == "qwen3-4b-nothink"
    assert not stand_in().needs_vllm


# --- bench gpu: the parts, on a CPU-sized stand-in ------------------------------------------------------------

def test_bench_gpu__every_part_runs_on_the_cpu_stand_in_and_the_report_is_written(tmp_path):
    from curriculum.benches.gpu import PARTS, run_parts

    out = tmp_path / "report.json"
    lines: list[str] = []
    report = run_parts(list(PARTS), stand_in(engineer_answers=2), out=out, log=lines.append)
    assert json.loads(out.read_text()) == json.loads(json.dumps(report))
    assert list(report["parts"]) == list(PARTS)
    failed = {name: part.get("error") for name, part in report["parts"].items() if not part["ok"]}
    assert not failed
    for name in ("torch", "transformers", "trl", "vllm", "peft"):
        assert name in report["versions"]
    import torch

    here = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"  # the stand-in runs where it is
    assert report["versions"]["torch"] and report["device"]["name"] == here
    assert report["model"]["vocab_size"] == 27 and report["wall_s"] > 0
    full, lora, stage = report["parts"]["grpo-full"], report["parts"]["grpo-lora"], report["parts"]["stage"]
    assert full["training"] == "full" and full["generation"] == "transformers"
    assert full["step_s"] > 0 and full["first_step_s"] > 0 and full["peak_memory_gib"] > 0
    assert lora["training"] == "lora r=16" and lora["trainable_parameters"] < full["trainable_parameters"]
    assert stage["steps"] == 2 and stage["prompts_per_step"] == 2
    assert stage["final_model_gib"] > 0 and stage["disk_free_gib_before"] > 0
    generation, engineer = report["parts"]["generation"], report["parts"]["engineer"]
    assert generation["prompts"] == 4 and generation["tokens_per_s"] > 0 and generation["engine_build_s"] > 0
    assert engineer["engine_build_s"] is None  # the engine generation built, reused as a run reuses it
    assert engineer["prompt_tokens"] > 0 and engineer["completion_tokens"] > 0 and engineer["call_s"] > 0
    # two calls; the tiny model's 27-token tokenizer cannot write JSON, so auto answers in free text
    assert engineer["answers"] == 2 and engineer["answers_per_s"] > 0 and engineer["answer_mode"] == "free"
    assert 0 <= engineer["answers_accepted"] <= engineer["answers_read"] <= 2
    assert all(part["seconds"] > 0 for part in report["parts"].values())
    assert sum("done in" in line for line in lines) == len(PARTS)


def test_bench_gpu__a_failing_part_is_recorded_and_the_next_one_runs(tmp_path):
    from curriculum.benches.gpu import PARTS, Part, run_parts

    def broken(bench):
        raise RuntimeError("CUDA out of memory (pretend)")

    parts = {"broken": Part("fails", broken), "generation": PARTS["generation"]}
    report = run_parts(["generation", "broken"], stand_in(), out=tmp_path / "r.json", parts=parts, log=lambda _: None)
    assert list(report["parts"]) == ["broken", "generation"]  # the registry's order, not the request's
    assert report["parts"]["broken"] == {**report["parts"]["broken"], "ok": False,
                                         "error": "RuntimeError: CUDA out of memory (pretend)"}
    assert report["parts"]["broken"]["where"][-1].endswith("in broken")
    assert report["parts"]["generation"]["ok"]
    assert json.loads((tmp_path / "r.json").read_text())["parts"]["broken"]["ok"] is False


def test_bench_gpu__unknown_part_names_are_refused():
    from curriculum.benches.gpu import run_parts
    from simulator.errors import ConfigError

    with pytest.raises(ConfigError, match="--parts"):
        run_parts(["grpo-ful"], stand_in())
    for answers in (0, 1025, True):
        with pytest.raises(ConfigError, match="--engineer-answers"):
            stand_in(engineer_answers=answers)


def test_bench_gpu__random_qwen3_builder_writes_a_loadable_folder(tmp_path):
    from transformers import AutoConfig, AutoTokenizer

    from curriculum.benches.gpu import build_random_qwen3
    from policy.models import QWEN3_VOCAB_ROWS, tiny_config

    config = tiny_config(QWEN3_VOCAB_ROWS, pad_id=151_643, eos_id=151_645, bos_id=151_643)
    folder = build_random_qwen3(tmp_path, config=config, device=None)
    assert AutoConfig.from_pretrained(folder).vocab_size == QWEN3_VOCAB_ROWS
    assert AutoTokenizer.from_pretrained(folder)("Hello world")["input_ids"] == [9707, 1879]


@pytest.mark.skipif(not HAS_VLLM or not _cuda(), reason="needs a CUDA GPU and vLLM (pip install "
                    "'mapf-frozenlake[vllm]' on a GPU machine); the same parts run on the CPU stand-in above")
def test_bench_gpu__vllm_parts_on_a_gpu(tmp_path):
    from curriculum.benches.gpu import GpuBenchSettings, run_parts
    from policy.models import init_tiny_qwen3
    from tests.model_fixtures import qwen3_tokenizer_dir

    model = init_tiny_qwen3(tmp_path / "tiny-qwen3", qwen3_tokenizer_dir(), max_position_embeddings=4096)
    settings = GpuBenchSettings(model=str(model), steps=2, prompts_per_step=2, generations=2,
                                max_completion_length=16, generation_prompts=8, generation_tokens=16,
                                gpu_memory_utilization=0.3)
    report = run_parts(["grpo-full", "generation", "engineer"], settings, log=lambda _: None)
    assert {name: part.get("error") for name, part in report["parts"].items() if not part["ok"]} == {}
    assert report["parts"]["generation"]["backend"] == "vllm" and report["device"]["cuda"]


# --- several GPUs: accelerate and the server mode -----------------------------------------------------------

def _accelerate(*args: str) -> subprocess.CompletedProcess:
    accelerate = Path(sys.executable).with_name("accelerate")
    if not accelerate.exists():
        pytest.skip("accelerate's launcher is not installed beside this Python (pip install -e '.[train]')")
    return subprocess.run([str(accelerate), "launch", *args], capture_output=True, text=True, cwd=ROOT, timeout=120)


TRAIN_ARGS = ("train", "--preset", "tiny", "--print-config", "--set", "training.vllm_mode=server",
              "training.vllm_server_port=8001")


@pytest.mark.parametrize("config_file", [None, "ddp.yaml"])
def test_accelerate_launch__starts_the_same_entry_point(config_file):
    direct = cli(*TRAIN_ARGS)
    assert direct.returncode == 0, direct.stderr
    chosen = ["--config_file", str(GPU_DOCS / config_file)] if config_file else []
    launched = _accelerate(*chosen, "--num_processes", "1", "--num_machines", "1", "--cpu", "--mixed_precision", "no",
                           "--dynamo_backend", "no", "-m", "curriculum.cli", *TRAIN_ARGS)
    assert launched.returncode == 0, launched.stderr
    assert launched.stdout == direct.stdout
    assert "vllm_server_port: 8001" in direct.stdout and "vllm_server_host: 0.0.0.0" in direct.stdout


@pytest.mark.parametrize("name, kind, extra", [("ddp.yaml", "MULTI_GPU", {}),
                                               ("zero3.yaml", "DEEPSPEED", {"zero_stage": 3})])
def test_accelerate_configs__load_with_accelerates_reader(name, kind, extra):
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(GPU_DOCS / name))
    assert config.distributed_type.value == kind and config.mixed_precision == "bf16" and config.num_processes == 8
    assert not config.use_cpu
    for key, value in extra.items():
        assert config.deepspeed_config[key] == value
    assert f"docs/gpu/{name}" in (GPU_DOCS / "README.md").read_text()


def test_run_config__vllm_server_fields_are_checked():
    from curriculum.config import preset
    from simulator.errors import ConfigError

    run = preset("qwen3-4b").with_overrides(**{"training.vllm_mode": "server", "training.vllm_server_host": "10.0.0.2",
                                               "training.vllm_server_port": 8100})
    assert (run.training.vllm_server_host, run.training.vllm_server_port) == ("10.0.0.2", 8100)
    for key, value in (("training.vllm_server_port", 0), ("training.vllm_server_port", "8000"),
                       ("training.vllm_server_host", ""), ("training.vllm_server_host", 5)):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            preset("tiny").with_overrides(**{key: value})


def test_grpo_config__has_the_vllm_fields_grpo_stage_sets():
    from trl import GRPOConfig

    # grpo_stage passes these by name only when vLLM is on: a misspelt one would fail on a GPU machine first
    assert {"use_vllm", "vllm_mode", "vllm_server_host", "vllm_server_port"} <= set(GRPOConfig.__dataclass_fields__)


def test_stdout_to_stderr__moves_file_descriptor_1_and_restores_it(capfd):
    import os

    from curriculum.benches.gpu import stdout_to_stderr

    with stdout_to_stderr():
        os.write(1, b"library log line\n")
    print("report")
    out, err = capfd.readouterr()
    assert out == "report\n" and err == "library log line\n"


def test_trl_vllm_serve__takes_the_flags_the_recipe_uses():
    from trl.scripts.vllm_serve import ScriptArguments, build_command

    command = build_command(ScriptArguments(model="Qwen/Qwen3-4B", port=8000, max_model_len=10240))
    assert command[command.index("--port") + 1] == "8000" and command[command.index("--max-model-len") + 1] == "10240"
    recipe = (GPU_DOCS / "README.md").read_text()
    assert "trl vllm-serve --model Qwen/Qwen3-4B --port 8000 --max_model_len 10240" in recipe
    assert "training.vllm_server_port=8000" in recipe
