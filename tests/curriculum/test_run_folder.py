"""Run folders read back by ``train --resume``, ``report`` and ``compare``: a folder is resumed by the folder (moved or
spelled another way), a gap in its stages is refused, and a damaged record is named, never a traceback.

The folders are built by hand (manifest, run.yaml, stage records) as ``mapf-lake train`` writes them: nothing here
trains a model.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from curriculum.config import preset, save_run_config
from curriculum.reports.report import load_run
from curriculum.loop.folder import RUN_PROTOCOL
from curriculum.training.run import Run, resume
from simulator.errors import ConfigError


def stage_record(stage: int, model: str, config: dict) -> dict:
    return {"stage": stage, "config": config, "next_config": config, "model": model, "train": {},
            "scores": {"valid_rate": 0.5, "optimal_rate": 0.25},
            "decision": {"outcome": "kept", "engineer": "fixed", "accepted": True, "reason": "r", "diff": []}}


def make_run_folder(output_dir: Path, name: str = "run", finished: tuple[int, ...] = (1,), stages: int = 2):
    """A run folder as ``train`` leaves it with the stages ``finished`` done (their stage.json written, each naming
    its checkpoint by the path the run was made with)."""
    config = preset("tiny").with_overrides(name=name, output_dir=str(output_dir), stages=stages)
    folder = config.run_dir
    folder.mkdir(parents=True)
    save_run_config(config, folder / "run.yaml")
    (folder / "manifest.json").write_text(json.dumps({"protocol": RUN_PROTOCOL, "run_config": config.to_dict(),
                                                      "versions": {}}))
    for stage in finished:
        (folder / f"stage-{stage:02d}").mkdir()
        (folder / f"stage-{stage:02d}" / "stage.json").write_text(json.dumps(stage_record(
            stage, str(folder / f"stage-{stage:02d}" / "model"), config.initial_config.to_dict())))
    return config


@pytest.fixture
def started(monkeypatch):
    """``resume`` up to the point where the run has accepted its folder (``Curriculum.open``), without training."""
    runs = []

    def start_only(run):
        run.curriculum.open()
        runs.append(run)
        return {}

    monkeypatch.setattr(Run, "execute", start_only)
    return runs


@pytest.mark.parametrize("made_with, moved_to, resumed_as", [
    ("absolute", None, "relative"),
    ("relative", None, "absolute"),
    ("absolute", "elsewhere/renamed", "relative"),
    ("absolute", "elsewhere/renamed", "absolute"),
    ("relative", "elsewhere/renamed", "relative"),
    ("absolute", "elsewhere/renamed", "relative/"),
    ("absolute", None, "."),
])
def test_resume__a_run_folder_is_resumed_by_the_folder_however_it_is_spelled_or_wherever_it_moved(
        tmp_path, monkeypatch, started, made_with, moved_to, resumed_as):
    monkeypatch.chdir(tmp_path)
    config = make_run_folder(tmp_path / "runs" if made_with == "absolute" else Path("runs"))
    folder = tmp_path / "runs" / "run"
    if moved_to:
        (tmp_path / moved_to).parent.mkdir(parents=True)
        shutil.move(folder, tmp_path / moved_to)
        folder = tmp_path / moved_to
    if resumed_as == ".":
        monkeypatch.chdir(folder)
        spelled = "."
    elif resumed_as.startswith("relative"):
        spelled = str(folder.relative_to(tmp_path)) + ("/" if resumed_as.endswith("/") else "")
    else:
        spelled = str(folder)
    resume(spelled)
    (run,) = started
    assert run.dir.resolve() == folder.resolve() and run.config.stages == config.stages
    # the finished stage's checkpoint is the one in the folder now, not where the folder was made
    (record,) = run.curriculum.folder.completed_stages()
    assert Path(record.model).resolve() == (folder / "stage-01" / "model").resolve()


def test_run__another_config_in_the_folder_is_refused_naming_what_differs(tmp_path):
    config = make_run_folder(tmp_path)
    with pytest.raises(ConfigError) as refused:
        Run(config.with_overrides(**{"training.steps": config.training.steps + 1})).curriculum.open()
    assert "training.steps" in str(refused.value)


@pytest.mark.parametrize("finished, partial, missing", [
    ((2,), (), "stage-01"),  # stage 1's folder gone, stage 2 finished
    ((1, 3), (), "stage-02"),
    ((2,), (1,), "stage-01"),  # stage 1's folder there but never finished
    ((), (2,), "stage-01"),  # stage 2 begun (validation written) with no stage 1
])
def test_run__a_gap_in_the_stage_folders_is_refused_naming_the_missing_stage(tmp_path, finished, partial, missing):
    config = make_run_folder(tmp_path, finished=finished, stages=3)
    for stage in partial:
        (config.run_dir / f"stage-{stage:02d}").mkdir(exist_ok=True)
        (config.run_dir / f"stage-{stage:02d}" / "validation.mlr").write_bytes(b"")
    run = Run(config)
    with pytest.raises(ConfigError, match=missing):
        run.curriculum.open()  # refused before anything is trained or validated
    with pytest.raises(ConfigError, match=missing):
        run.curriculum.folder.completed_stages()


@pytest.mark.parametrize("finished, missing", [((2,), "stage-01"), ((1, 3), "stage-02")])
def test_load_run__a_gap_in_the_stages_is_refused_naming_the_missing_stage(tmp_path, finished, missing):
    config = make_run_folder(tmp_path, finished=finished, stages=3)
    with pytest.raises(ConfigError, match=missing):
        load_run(config.run_dir)


@pytest.mark.parametrize("finished, trials, refused", [
    ((1,), 3, None),  # stage 2 deciding: stage 3's lookahead trials, killed before stage 2's record
    ((), 2, None),
    ((), 3, "stage-01"),  # trials two stages on are no decision in progress
])
def test_run__trials_of_the_next_stage_are_no_gap(tmp_path, finished, trials, refused):
    config = make_run_folder(tmp_path, finished=finished, stages=3)
    (config.run_dir / f"stage-{trials:02d}" / "candidates" / "0123456789ab").mkdir(parents=True)
    folder = Run(config).curriculum.folder
    if refused:
        with pytest.raises(ConfigError, match=refused):
            folder.completed_stages()
    else:
        assert [record.stage for record in folder.completed_stages()] == list(finished)


def test_run__stages_without_a_gap_are_read_in_order(tmp_path):
    config = make_run_folder(tmp_path, finished=(1, 2), stages=3)
    (config.run_dir / "stage-03").mkdir()  # the stage in progress
    assert [record.stage for record in Run(config).curriculum.folder.completed_stages()] == [1, 2]
    assert [record.stage for record in load_run(config.run_dir).stages] == [1, 2]


def _damage(path: Path, how: str) -> None:
    text = path.read_text() if path.exists() else json.dumps({"config": {}, "accepted": True})
    path.write_text(text[: len(text) // 2] if how == "truncated" else "")


def _read_back(config, name: str):
    """The code path of ``train --resume`` that reads the record ``name`` of the folder."""
    run = Run(config)
    if name == "manifest.json":
        return run.curriculum.open()
    if name == "stage.json":
        return run.curriculum.folder.completed_stages()
    if name == "summary.json":  # a finished validation is read back instead of run again
        return run.curriculum.validate("unused-model", config.run_dir / "untrained", 0)
    return run.curriculum.decide(1, "unused", config.initial_config, None, [],
                                 config.run_dir / "stage-01" / "decision.json")


@pytest.mark.parametrize("how", ["truncated", "empty"])
@pytest.mark.parametrize("name, where", [
    ("manifest.json", "."), ("stage.json", "stage-01"), ("summary.json", "untrained"), ("decision.json", "stage-01"),
])
def test_resume__a_truncated_or_empty_record_is_a_config_error_naming_the_file(tmp_path, name, where, how):
    config = make_run_folder(tmp_path)
    path = config.run_dir / where / name
    path.parent.mkdir(exist_ok=True)
    if name == "summary.json":
        path.write_text(json.dumps({"valid_rate": 0.5, "optimal_rate": 0.25, "episodes": 4}))
        (path.parent / "validation.mlr").write_bytes(b"")
    _damage(path, how)
    with pytest.raises(ConfigError) as caught:
        _read_back(config, name)
    assert str(path) in str(caught.value) and "JSON" in str(caught.value)


@pytest.mark.parametrize("content, says", [
    ("[]", "JSON object"),
    ('"text"', "JSON object"),
    ("{\"protocol\": 2}", "run_config"),
])
def test_run__a_manifest_that_is_not_a_run_manifest_is_named(tmp_path, content, says):
    config = make_run_folder(tmp_path)
    (config.run_dir / "manifest.json").write_text(content)
    with pytest.raises(ConfigError, match=says) as caught:
        Run(config).curriculum.open()
    assert "manifest.json" in str(caught.value)


def test_run__a_record_that_is_a_folder_or_too_large_is_named(tmp_path, monkeypatch):
    import curriculum.loop.records as records_module

    config = make_run_folder(tmp_path)
    path = config.run_dir / "stage-01" / "stage.json"
    monkeypatch.setattr(records_module, "MAX_RECORD_BYTES", 100)
    with pytest.raises(ConfigError, match="100 bytes"):
        Run(config).curriculum.folder.completed_stages()
    path.unlink()
    path.mkdir()
    with pytest.raises(ConfigError, match="regular file"):
        Run(config).curriculum.folder.completed_stages()


CPUINFO_AMX = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse2 avx2 avx512f avx512bw amx_tile amx_bf16 avx512_vnni
bugs\t\t: spectre_v1

processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse2 avx2 avx512f avx512bw amx_tile amx_bf16 avx512_vnni
"""


@pytest.mark.parametrize("text, facts", [
    (CPUINFO_AMX, ("Intel(R) Xeon(R) Platinum 8480+", ["amx_bf16", "amx_tile", "avx512_vnni", "avx512bw",
                                                          "avx512f"])),
    ("processor\t: 0\nmodel name\t: AMD EPYC 7B12\nflags\t\t: fpu sse2 avx avx2 fma\n", ("AMD EPYC 7B12", [])),
    ("processor\t: 0\nfeatures\t: fp asimd\n", (None, [])),  # an ARM machine: neither field
    (None, (None, [])),  # no /proc/cpuinfo (not Linux)
])
def test_cpu_facts__model_name_and_amx_avx512_flags_of_the_first_processor(tmp_path, text, facts):
    from curriculum.loop.folder import _cpu_facts

    path = tmp_path / "cpuinfo"
    if text is not None:
        path.write_text(text)
    assert _cpu_facts(str(path)) == facts


def test_run_folder__the_manifest_records_the_facts_that_choose_the_cpu_kernels(tmp_path, monkeypatch):
    from curriculum.loop.folder import KERNEL_ENV, RunFolder

    for name in KERNEL_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    monkeypatch.setenv("MKL_CBWR", "COMPATIBLE")
    config = preset("tiny").with_overrides(name="run", output_dir=str(tmp_path))
    RunFolder(config, lambda message: None).start()
    machine = json.loads((config.run_dir / "manifest.json").read_text())["machine"]
    assert machine["kernel_env"] == {"ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "COMPATIBLE"}  # only those set
    import torch

    assert machine["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert {"cpu_model", "cpu_flags", "system", "machine", "cpus"} <= set(machine)
    assert all(flag.startswith(("amx", "avx512")) for flag in machine["cpu_flags"])
    # what compare reads of it: the capability and the variables set
    run = load_run(config.run_dir)
    from curriculum.reports.report import run_kernels

    assert run_kernels(run) == {"torch_cpu_capability": machine["torch_cpu_capability"],
                                "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "COMPATIBLE"}


def test_resume__a_stage_record_that_says_it_is_another_stage_is_refused_naming_the_file(tmp_path):
    """``"stage": 7`` inside ``stage-01/stage.json`` was accepted as stage 1."""
    from curriculum.loop.folder import RunFolder
    from tests.curriculum.test_records import _record

    config = preset("tiny").with_overrides(name="renumbered", output_dir=str(tmp_path))
    folder = RunFolder(config, lambda line: None)
    (tmp_path / "renumbered" / "stage-01").mkdir(parents=True)
    path = tmp_path / "renumbered" / "stage-01" / "stage.json"
    path.write_text(json.dumps(_record(stage=7)))
    with pytest.raises(ConfigError, match="stage-01/stage.json: stage = 7 is not allowed: 1"):
        folder.completed_stages()
