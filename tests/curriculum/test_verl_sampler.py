"""The verl plug-in of the curriculum (curriculum/plugins/verl_sampler.py): rows of the current stage, outcomes of a
verl batch into the stage's training signal, stage boundaries on verl's newest Hugging Face checkpoint, resume.

Batches are verl's ``DataProto`` where verl is installed; without verl, a stand-in with the same three fields
(``batch``, ``non_tensor_batch``, ``meta_info``) and constructor (``from_dict``)."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import numpy as np
import pytest
import torch

from curriculum.config import preset, save_run_config
from curriculum.loop.records import StageRecord
from curriculum.plugins.verl_sampler import (CURRICULUM_FILES, VERL_SAMPLER_HOOK, MapfCurriculumDataset,
                                             MapfCurriculumSampler, newest_hf_checkpoint)
from model_fixtures import tiny_model_dir
from policy.export import layout_row
from policy.score import compute_score
from simulator.errors import ConfigError

try:
    from verl import DataProto
except ImportError:  # verl is not installed here: a stand-in of DataProto's fields and constructor
    class DataProto:  # type: ignore[no-redef]
        def __init__(self, batch, non_tensor_batch, meta_info):
            self.batch, self.non_tensor_batch, self.meta_info = batch, non_tensor_batch, meta_info

        @classmethod
        def from_dict(cls, tensors, non_tensors=None, meta_info=None):
            return cls(dict(tensors), dict(non_tensors or {}), dict(meta_info or {}))

GENERATIONS = 4
BATCH = 2  # prompts per step


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A run config of two stages (no warm start, 12 evidence instances), the tiny model and its tokenizer."""
    from transformers import AutoTokenizer

    root = tmp_path_factory.mktemp("verl")
    # tests/small_run.py's small run, spelt out by value: verl's wheel ships a top-level ``tests`` package that
    # hides this folder's modules from ``from tests.... import`` where verl is installed
    config = preset("tiny").with_overrides(**{
        "name": "verl", "output_dir": str(root), "stages": 2, "training.steps": 2, "warm_start.enabled": False,
        "initial_config.samples": 16, "validation.samples": 12, "evaluation_suite": "train-2agent-quick",
        "cpu_threads": None})
    save_run_config(config, root / "run.yaml")
    return root, tiny_model_dir(), AutoTokenizer.from_pretrained(str(tiny_model_dir()))


def data_config(root: Path, name: str, **options) -> dict:
    """verl's ``data`` section as the example sets it (a mapping: verl passes a DictConfig of the same keys)."""
    return {"train_batch_size": BATCH, "dataloader_num_workers": 0, "curriculum": {
        "run_config": str(root / "run.yaml"), "run_folder": str(root / name), "start_model": str(tiny_model_dir()),
        "checkpoint_dir": str(root / name / "verl-checkpoints"), "stage_steps": 2, "final_evaluation": False,
        **options}}


def save_checkpoint(checkpoint_dir: Path, step: int) -> Path:
    """What verl writes with ``hf_model`` in save_contents: ``global_step_N/actor/huggingface`` (here the model)."""
    folder = checkpoint_dir / f"global_step_{step}" / "actor" / "huggingface"
    shutil.copytree(tiny_model_dir(), folder)
    return folder


def step_batch(dataset, tokenizer, valid_first: int = 2) -> DataProto:
    """One verl training step: a batch of rows from the loader, ``GENERATIONS`` responses each (the first
    ``valid_first`` of each group the reference answer, the rest garbage), rewards by verl's ``compute_score`` at
    each response's last token, rows shuffled as verl's length balancing does."""
    rows = [dataset[position] for position in range(BATCH)]
    texts, truths, uids = [], [], []
    for row in rows:
        record = json.loads(row["reward_model"]["ground_truth"])
        uid = str(uuid.uuid4())
        for g in range(GENERATIONS):
            texts.append(record["reference"] if g < valid_first else "A0 ZZ")
            truths.append(row["reward_model"])
            uids.append(uid)
    ids = [tokenizer(text, add_special_tokens=False).input_ids for text in texts]
    width = max(map(len, ids))
    responses = torch.full((len(ids), width), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    scores = torch.zeros((len(ids), width))
    for i, (tokens, text, truth) in enumerate(zip(ids, texts, truths)):
        responses[i, :len(tokens)] = torch.tensor(tokens)
        mask[i, :len(tokens)] = 1
        scores[i, len(tokens) - 1] = compute_score("mapf-lake", text, truth["ground_truth"])
    order = np.random.default_rng(0).permutation(len(ids))
    return DataProto.from_dict(
        tensors={"responses": responses[order], "response_mask": mask[order], "token_level_scores": scores[order]},
        non_tensors={"reward_model": np.array([truths[i] for i in order], dtype=object),
                     "uid": np.array([uids[i] for i in order], dtype=object)},
        meta_info={})


def quiet(message: str) -> None:
    pass


@pytest.mark.parametrize("change, field", [
    ({"curriculum": {"stage_steps": 0}}, "data.curriculum.stage_steps"),
    ({"curriculum": {"stage_steps": True}}, "data.curriculum.stage_steps"),
    ({"curriculum": {"checkpoint_dir": ""}}, "data.curriculum.checkpoint_dir"),
    ({"curriculum": {"stage_step": 2}}, "data.curriculum.stage_step"),
    ({"curriculum": {"final_evaluation": "yes"}}, "data.curriculum.final_evaluation"),
    ({"dataloader_num_workers": 8}, "data.dataloader_num_workers"),
    ({"train_batch_size": 0}, "data.train_batch_size"),
    ({"curriculum": None}, "data.curriculum"),
])
def test_verl_dataset__bad_options_name_the_field(setup, change, field):
    root, _, tokenizer = setup
    config = data_config(root, "bad")
    for key, value in change.items():
        config[key] = {**config[key], **value} if isinstance(value, dict) else value
    with pytest.raises(ConfigError) as caught:
        MapfCurriculumDataset(CURRICULUM_FILES, tokenizer=tokenizer, config=config, log=quiet)
    assert caught.value.field == field


def test_verl_dataset__rows_are_the_verl_export_layout_of_the_current_stage(setup, tmp_path):
    root, _, tokenizer = setup
    config = data_config(root, "rows")
    dataset = MapfCurriculumDataset(CURRICULUM_FILES, tokenizer=tokenizer, config=config, log=quiet)
    sampler = MapfCurriculumSampler(dataset, config)
    # stages x stage_steps steps and one more (verl >= 0.8 hands its last step's batch to no hook)
    assert len(dataset) == len(sampler) == (2 * 2 + 1) * BATCH
    assert list(sampler) == list(range(len(dataset)))
    row = dataset[3]  # the position does not pick the row: the stage's next instance does
    record = json.loads(row["reward_model"]["ground_truth"])
    assert set(row) >= {"data_source", "prompt", "ability", "reward_model", "extra_info", "raw_prompt",
                        "dummy_tensor", "index", "tools_kwargs", "interaction_kwargs"}
    assert row["raw_prompt"] == row["prompt"] and row["prompt"][0]["role"] == "user"
    assert record["id"].startswith("curriculum:rows/stage-01/") and row["index"] == 0
    assert compute_score(row["data_source"], record["reference"], row["reward_model"]["ground_truth"]) == 1.6
    # the same rows from a file (data.val_files: an export) come back in the same shape
    export = tmp_path / "val.jsonl"
    export.write_text(json.dumps(layout_row(record, "verl", 7, "val")) + "\n")
    from_file = MapfCurriculumDataset(str(export), tokenizer=tokenizer, config=config)
    assert len(from_file) == 1 and from_file[0]["index"] == 7 and from_file[0]["raw_prompt"] == row["prompt"]
    with pytest.raises(ConfigError) as caught:
        MapfCurriculumSampler(from_file, config)
    assert caught.value.field == "data.custom_cls"
    assert VERL_SAMPLER_HOOK == (DataProto.__module__.startswith("verl") and _verl_has_sampler_hook())


def _export_row(index: int = 0) -> dict:
    """A row of ``mapf-lake export --layout verl`` (a train-2agent-quick instance as its scoring record)."""
    from policy.prompts import get_style
    from policy.score import make_record
    from simulator.suites import generate_suite

    item = generate_suite("train-2agent-quick")[0][1].instances[index]
    return layout_row(make_record(item, get_style("natural"), "train-2agent-quick"), "verl", index, "val")


def _relabelled(row: dict, **labels) -> dict:
    truth = json.loads(row["reward_model"]["ground_truth"])
    truth["labels"].update(labels)
    return {**row, "reward_model": {**row["reward_model"], "ground_truth": json.dumps(truth)}}


@pytest.mark.parametrize("content, field", [
    (b"PAR1 not parquet at all", "data_files"), (b"", "data_files"), (b"[1, 2]\n", "line 1"),
    (b"{rows\n", "rows.jsonl"), ("no-prompt", "prompt"), ("no-reward", "ground_truth"),
    ("relabelled", "optimal_makespan"), ("agents", "labels.agents"), ("cell", "instance")])
def test_verl_dataset__a_row_file_is_read_checked_and_certified_or_refused_naming_the_row(setup, tmp_path, content,
                                                                                           field):
    """``data.val_files`` rows (found by the hostile corpus: a garbage Parquet raised pyarrow's ArrowInvalid, an
    empty file IndexError, a list row TypeError, a row without its prompt KeyError; a row without its reward or
    with a relabelled optimal makespan was served): each is one ConfigError naming the file and the row."""
    root, _, tokenizer = setup
    row = _export_row()
    if isinstance(content, str):
        damaged = {"no-prompt": {k: v for k, v in row.items() if k != "prompt"},
                   "no-reward": {k: v for k, v in row.items() if k != "reward_model"},
                   "relabelled": _relabelled(row, optimal_makespan=1),
                   "agents": _relabelled(row, agents=5), "cell": None}[content]
        if content == "cell":
            truth = json.loads(row["reward_model"]["ground_truth"])
            truth["instance"]["grid"][0][0] = 2
            damaged = {**row, "reward_model": {"ground_truth": json.dumps(truth)}}
        content = (json.dumps(damaged) + "\n").encode()
    name = "rows.parquet" if content.startswith(b"PAR1") else "rows.jsonl"
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        MapfCurriculumDataset(str(path), tokenizer=tokenizer, config=data_config(root, "files"))
    assert field in str(caught.value) and "\n" not in str(caught.value)


def test_verl_dataset__an_exported_parquet_and_json_list_read_as_rows(setup, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    root, _, tokenizer = setup
    rows = [_export_row(index) for index in range(3)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "val.parquet")
    (tmp_path / "val.json").write_text(json.dumps(rows))
    for name in ("val.parquet", "val.json"):
        dataset = MapfCurriculumDataset(str(tmp_path / name), tokenizer=tokenizer, config=data_config(root, "x"))
        assert len(dataset) == 3 and dataset[2]["raw_prompt"] == rows[2]["prompt"]


def _verl_has_sampler_hook() -> bool:
    try:
        import verl.experimental.dataset.sampler  # noqa: F401  (verl 0.7; removed in 0.8)
    except ImportError:
        return False
    return True


def test_verl_sampler__update_records_the_signal_and_closes_stages_on_the_newest_checkpoint(setup):
    root, _, tokenizer = setup
    config = data_config(root, "stages", final_evaluation=True)
    dataset = MapfCurriculumDataset(CURRICULUM_FILES, tokenizer=tokenizer, config=config, log=quiet)
    sampler = MapfCurriculumSampler(dataset, config)
    checkpoints = Path(config["curriculum"]["checkpoint_dir"])
    batch = step_batch(dataset, tokenizer)
    sampler.update(batch)
    dataset.on_batch_end(batch)  # verl 0.7 calls both hooks with the same batch: one step
    assert dataset.curriculum.stage == 1
    with pytest.raises(ConfigError) as caught:  # the boundary needs a checkpoint verl saved
        sampler.update(step_batch(dataset, tokenizer))
    assert caught.value.field == "data.curriculum.checkpoint_dir"
    save_checkpoint(checkpoints, 1)
    newest = save_checkpoint(checkpoints, 2)
    (checkpoints / "global_step_3" / "actor" / "huggingface").mkdir(parents=True)  # config and tokenizer only
    assert newest_hf_checkpoint(checkpoints) == (str(newest), 2)
    sampler.update(step_batch(dataset, tokenizer))
    assert dataset.curriculum.stage == 2
    stage_dir = Path(config["curriculum"]["run_folder"]) / "stage-01"
    record = StageRecord.from_dict(json.loads((stage_dir / "stage.json").read_text()))
    assert record.model == str(newest)
    signal = record.train.signal.by_agents_size
    assert sum(figures.groups for figures in signal.values()) == 2 * BATCH  # two steps of two groups: the refused
    for figures in signal.values():  # batch counted nothing
        assert figures.valid_rate == pytest.approx(0.5)
        assert figures.zero_variance_share == 0.0
    assert record.train.steps == 2 and record.train.figures["trainer"] == "verl"
    assert record.train.reward_mean == pytest.approx(0.5 * 1.6)  # two references (1.6), two garbage (0) per group
    assert dataset[0]["extra_info"]["id"].startswith("curriculum:stages/stage-02/")  # the next config's rows
    save_checkpoint(checkpoints, 4)
    for _ in range(2):
        sampler.update(step_batch(dataset, tokenizer, valid_first=GENERATIONS))
    assert dataset.curriculum.finished
    assert (Path(config["curriculum"]["run_folder"]) / "final" / "table.json").exists()
    # verl's step after the run (len() has one more, verl >= 0.8 hands its last batch to no hook): the last stage
    after = [dataset[position]["extra_info"]["id"] for position in range(BATCH)]
    assert all(name.startswith("curriculum:stages/stage-02/") for name in after)
    sampler.update(step_batch(dataset, tokenizer))
    assert json.loads(json.dumps(dataset.state_dict()))["global_step"] == 5
    fresh = MapfCurriculumDataset(CURRICULUM_FILES, tokenizer=tokenizer, config=config, log=quiet)
    with pytest.raises(ConfigError, match="every stage of this folder is finished"):  # was IndexError
        fresh[0]


@pytest.mark.parametrize("folder", [".", "./", "..", "sub/.."])
def test_verl_dataset__a_run_folder_that_is_the_working_folder_or_above_is_refused(setup, tmp_path, monkeypatch,
                                                                                  folder):
    root, _, tokenizer = setup
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    with pytest.raises(ConfigError, match="run_folder"):
        MapfCurriculumDataset(CURRICULUM_FILES, tokenizer=tokenizer, config=data_config(root, "x", run_folder=folder),
                              log=quiet)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["sub"]  # nothing written where the user stands


def test_verl_dataset__resume_counts_the_step_saved_before_its_outcomes(setup):
    root, _, tokenizer = setup
    config = data_config(root, "resume")
    checkpoints = Path(config["curriculum"]["checkpoint_dir"])
    dataset = MapfCurriculumDataset(CURRICULUM_FILES, tokenizer=tokenizer, config=config, log=quiet)
    dataset.observe(step_batch(dataset, tokenizer))
    rows = [dataset[position] for position in range(BATCH)]  # step 2 drawn; verl saves here, before its outcomes
    save_checkpoint(checkpoints, 2)
    state = json.loads(json.dumps(dataset.state_dict()))
    assert state["unobserved"] and state["steps"] == 1 and state["curriculum"]["drawn"] == 2 * BATCH
    resumed = MapfCurriculumDataset(CURRICULUM_FILES, tokenizer=tokenizer, config=config, log=quiet)
    resumed.load_state_dict(state)  # counts step 2: the stage closes on the checkpoint of step 2
    assert resumed.curriculum.stage == 2
    record = json.loads((Path(config["curriculum"]["run_folder"]) / "stage-01" / "stage.json").read_text())
    assert record["train"]["steps_without_outcomes"] == 1 and record["train"]["steps"] == 2
    assert rows[0]["extra_info"]["id"].startswith("curriculum:resume/stage-01/")
    assert resumed[0]["extra_info"]["id"].startswith("curriculum:resume/stage-02/")


def test_verl_wiring__verls_own_factories_build_the_dataset_sampler_and_loader_state(setup):
    """Where verl is installed: its ``create_rl_dataset`` / ``create_rl_sampler`` read the example's keys, its
    ``collate_fn`` and stateful loader take the rows, and the loader's state (verl's ``data.pt``) holds the
    curriculum's."""
    pytest.importorskip("verl")
    from omegaconf import OmegaConf
    from torchdata.stateful_dataloader import StatefulDataLoader

    from verl.utils.dataset.rl_dataset import collate_fn
    try:  # verl >= 0.8
        from verl.trainer.ppo.utils import create_rl_dataset, create_rl_sampler
    except ImportError:  # verl 0.7
        from verl.trainer.main_ppo import create_rl_dataset, create_rl_sampler

    root, _, tokenizer = setup
    plugin = "pkg://curriculum.plugins.verl_sampler"
    config = OmegaConf.create({**data_config(root, "wiring"), "shuffle": False,
                               "custom_cls": {"path": plugin, "name": "MapfCurriculumDataset"},
                               "sampler": {"class_path": plugin, "class_name": "MapfCurriculumSampler"}})
    dataset = create_rl_dataset(CURRICULUM_FILES, config, tokenizer, None)
    assert isinstance(dataset, MapfCurriculumDataset)
    sampler = create_rl_sampler(config, dataset)
    assert isinstance(sampler, MapfCurriculumSampler) == VERL_SAMPLER_HOOK  # verl >= 0.8 has no data.sampler
    loader = StatefulDataLoader(dataset, batch_size=BATCH, sampler=sampler, collate_fn=collate_fn, num_workers=0,
                                drop_last=True)
    batch = DataProto.from_single_dict(next(iter(loader)))
    truths = batch.non_tensor_batch["reward_model"]
    assert len(truths) == BATCH and json.loads(truths[0]["ground_truth"])["id"].startswith("curriculum:wiring/")
    assert batch.non_tensor_batch["raw_prompt"][0][0]["role"] == "user"
    assert loader.state_dict()["dataset_state"]["curriculum"]["drawn"] == BATCH


def test_verl_example__composes_with_verls_own_config():
    """Where verl is installed: examples/verl_curriculum.yaml composes with verl's ppo_trainer config (Hydra, as
    ``python -m verl.trainer.main_ppo --config-path examples --config-name verl_curriculum`` does) and its
    ``data.curriculum`` section reads as the plug-in's options, the interpolations resolved."""
    pytest.importorskip("verl")
    from hydra import compose, initialize_config_dir

    from curriculum.plugins.verl_sampler import VerlCurriculumOptions

    with initialize_config_dir(config_dir=str(Path(__file__).resolve().parents[2] / "examples"), version_base=None):
        config = compose(config_name="verl_curriculum")
    options = VerlCurriculumOptions.from_data_config(config.data)
    assert options.start_model == config.actor_rollout_ref.model.path
    assert options.checkpoint_dir == config.trainer.default_local_dir
    assert options.stage_steps % config.trainer.save_freq == 0
    assert "hf_model" in config.actor_rollout_ref.actor.checkpoint.save_contents
    assert config.data.train_files == CURRICULUM_FILES and config.data.dataloader_num_workers == 0
    assert config.custom_reward_function.name == "compute_score"


def _folder_bytes(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def test_verl_dataset__a_damaged_loader_state_is_refused_before_the_run_folder_changes(setup):
    """verl's saved loader state (``data.pt``) is input: counts of 10**30, -5, 1.5 or NaN, a flag "no", a tally
    with 0 groups, a key missing, or a row served after the run whose prompt or label was edited are each one
    ConfigError naming the key, and the run folder keeps its bytes. A row as the dataset served it is accepted."""
    root, _, tokenizer = setup
    config = data_config(root, "damaged")
    dataset = MapfCurriculumDataset(CURRICULUM_FILES, tokenizer=tokenizer, config=config, log=quiet)
    served = [dataset._row(item) for item in dataset.curriculum.sample(2)]  # rows as the dataset serves them
    state = json.loads(json.dumps(dataset.state_dict()))
    run_folder = Path(config["curriculum"]["run_folder"])
    edited = json.loads(json.dumps(served[0]))
    edited["prompt"][0]["content"] += " (and ignore the board)"
    relabelled = json.loads(json.dumps(served[0]))
    truth = json.loads(relabelled["reward_model"]["ground_truth"])
    truth["labels"]["optimal_makespan"] = 1
    relabelled["reward_model"]["ground_truth"] = json.dumps(truth, separators=(",", ":"))
    damages = [("steps", 10**30), ("steps", -5), ("served", 1.5), ("reward_sum", float("nan")),
               ("unobserved", "no"), ("generations", 1), ("global_step", True),
               ("reward", {"2x3": {"groups": 0, "reward": 0.0, "valid": 0.0, "zero_variance": 0,
                                   "abs_advantage": 0.0}}),
               ("after_run", [edited]), ("after_run", [relabelled]), ("after_run", "rows"), ("curriculum", "x")]
    before = _folder_bytes(run_folder)
    for key, value in damages:
        resumed = MapfCurriculumDataset(CURRICULUM_FILES, tokenizer=tokenizer, config=config, log=quiet)
        with pytest.raises(ConfigError, match="verl curriculum state"):
            resumed.load_state_dict({**state, key: value})
        assert _folder_bytes(run_folder) == before, key
    missing = {name: value for name, value in state.items() if name != "served"}
    with pytest.raises(ConfigError, match="served"):
        MapfCurriculumDataset(CURRICULUM_FILES, tokenizer=tokenizer, config=config, log=quiet).load_state_dict(missing)
    resumed = MapfCurriculumDataset(CURRICULUM_FILES, tokenizer=tokenizer, config=config, log=quiet)
    resumed.load_state_dict({**state, "after_run": served})  # the dataset's own rows pass their certification
    assert resumed.state_dict()["after_run"] == served


def test_fuzz_verl_dataset__hypothesis_damaged_loader_states_are_refused_in_one_line_or_taken(setup):
    """verl's loader state with hypothesis-made values in place of each key (the curriculum's inner keys too):
    ``load_state_dict`` raises one ConfigError of one line or takes a state whose counts are in range; the run
    folder's bytes never change."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    root, _, tokenizer = setup
    config = data_config(root, "fuzzed")
    dataset = MapfCurriculumDataset(CURRICULUM_FILES, tokenizer=tokenizer, config=config, log=quiet)
    dataset.curriculum.sample(2)
    state = json.loads(json.dumps(dataset.state_dict()))
    run_folder = Path(config["curriculum"]["run_folder"])
    before = _folder_bytes(run_folder)
    hostile = (st.none() | st.booleans() | st.integers(-10**45, 10**45) | st.floats() | st.text(max_size=12)
               | st.lists(st.integers(), max_size=2) | st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))

    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
    @given(top=st.dictionaries(st.sampled_from(sorted(state) + ["x"]), hostile, max_size=2),
           inner=st.dictionaries(st.sampled_from(["run", "run_id", "stage", "drawn"]), hostile, max_size=2))
    def check(top, inner):
        damaged = {**state, "curriculum": {**state["curriculum"], **inner}, **top}
        resumed = MapfCurriculumDataset(CURRICULUM_FILES, tokenizer=tokenizer, config=config, log=quiet)
        try:
            resumed.load_state_dict(damaged)
        except ConfigError as error:
            assert "\n" not in str(error)
        else:
            taken = resumed.state_dict()
            assert 0 <= taken["served"] and 0 <= taken["steps"] and 1 <= resumed.curriculum.stage <= 3
        assert _folder_bytes(run_folder) == before

    check()
