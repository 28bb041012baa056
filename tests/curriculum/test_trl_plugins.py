"""The public curriculum in a user's TRL script: its state in a trainer's checkpoint, the IterableDataset, the
TrainerCallback (GRPO and SFT), the ``environment_factory`` environment on Qwen3's real tokenizer, and the example
script end to end at reduced size. The ``Curriculum`` object on its own is ``test_curriculum.py``'s."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from curriculum.config import preset
from curriculum.loop.curriculum import Curriculum
from simulator.errors import ConfigError
from tests.small_run import SMALL

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
REDUCED = SMALL  # two stages of two steps, a six-step warm start, 12 evidence instances, the quick test suite


def _config(tmp_path: Path, name: str, **extra):
    return preset("tiny").with_overrides(name=name, output_dir=str(tmp_path), **{**REDUCED, **extra})


@pytest.fixture(scope="module")
def example_run(tmp_path_factory):
    """The example script, run as a user runs it, at reduced size: warm start, two stages of two GRPO steps."""
    out = tmp_path_factory.mktemp("example")
    sets = [f"--set={key}={value if value is not None else 'null'}" for key, value in REDUCED.items()]
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "trl_grpo_curriculum.py"), "--preset", "tiny",
                           "--engineer", "rule", "--stage-steps", "2", "--name", "example", "--output-dir", str(out),
                           *sets], capture_output=True, text=True, timeout=900, cwd=out)
    assert done.returncode == 0, done.stderr[-3000:]
    return out / "example", done


def test_example__runs_the_stages_through_the_callback_and_leaves_a_run_folder_report_reads(example_run):
    from curriculum.reports.report import load_run, render_report

    run_dir, done = example_run
    for name in ("manifest.json", "warm_start/summary.json", "stage-01/stage.json", "stage-01/decision.json",
                 "stage-02/stage.json", "final/table.json", "metrics.jsonl"):
        assert (run_dir / name).exists(), name
    assert "stage 1: engineer rule" in done.stderr and "stage 2: engineer rule" in done.stderr
    record = json.loads((run_dir / "stage-01" / "stage.json").read_text())
    assert record["train"]["steps"] == 2 and record["train"]["signal"]["by_size"]  # the reward's tallies reached it
    states = sorted((run_dir / "trl").glob("checkpoint-*/curriculum_state.json"))
    assert states and json.loads(states[-1].read_text())["curriculum"]["stage"] == 3
    assert "stage" in render_report(load_run(run_dir))


def test_curriculum__a_state_from_an_earlier_checkpoint_rolls_back_and_reads_the_recorded_decision(example_run):
    from curriculum.loop.records import StageRecord
    from curriculum.reports.report import load_run  # noqa: F401  (the folder reads back, as above)

    run_dir, _ = example_run
    config = _config(run_dir.parent, "example", **{"engineer.spec": "rule", "arm": "rule+trl-grpo"})
    curriculum = Curriculum(config, log=lambda line: None).open()
    model = curriculum.begin(str(run_dir / "warm_start" / "model"))
    assert curriculum.finished and curriculum.stage == 3 and model
    curriculum.load_state_dict({"run": "example", "stage": 2, "drawn": 5})
    assert curriculum.stage == 2 and curriculum.current == StageRecord.from_dict(
        json.loads((run_dir / "stage-01" / "stage.json").read_text())).next_config
    lines: list[str] = []
    curriculum.log = lines.append
    record = curriculum.end_stage("unused: the record is read back")
    assert record.stage == 2 and curriculum.finished and any("already recorded" in line for line in lines)
    for bad in ({"run": "other", "stage": 1, "drawn": 0}, {"run": "example", "stage": 9, "drawn": 0},
                {"run": "example", "stage": 1, "drawn": -1}, "garbage"):
        with pytest.raises(ConfigError):
            curriculum.load_state_dict(bad)


def test_example_per_stage__trains_each_stage_through_the_loops_own_stage_function(example_run, tmp_path):
    """``--per-stage`` from the example run's warm start: each stage goes through ``train_next_stage`` (the function
    ``mapf-lake train``'s loop calls: its status line says so), and the run folder reads back."""
    from curriculum.reports.report import load_run

    run_dir, _ = example_run
    sets = [f"--set={key}={value if value is not None else 'null'}" for key, value in REDUCED.items()]
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "trl_grpo_curriculum.py"), "--preset", "tiny",
                           "--engineer", "rule", "--per-stage", "--model", str(run_dir / "warm_start" / "model"),
                           "--name", "per-stage", "--output-dir", str(tmp_path), *sets],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "stage 1: GRPO on" in done.stderr and "stage 2: GRPO on" in done.stderr
    run = load_run(tmp_path / "per-stage")
    assert [record.stage for record in run.stages] == [1, 2]


def test_run_id__a_state_or_stage_record_of_another_run_with_the_same_name_is_refused_by_its_id(example_run, tmp_path):
    import shutil

    from curriculum.loop.folder import RunFolder

    run_dir, _ = example_run
    own = json.loads((run_dir / "manifest.json").read_text())["run_id"]
    record = json.loads((run_dir / "stage-01" / "stage.json").read_text())
    state = json.loads(sorted((run_dir / "trl").glob("checkpoint-*/curriculum_state.json"))[-1].read_text())
    assert len(own) == 16 and record["run_id"] == own and state["curriculum"]["run_id"] == own
    config = _config(run_dir.parent, "example", **{"engineer.spec": "rule", "arm": "rule+trl-grpo"})
    curriculum = Curriculum(config, log=lambda line: None).open()
    curriculum.begin(str(run_dir / "warm_start" / "model"))
    other = "0123456789abcdef"
    with pytest.raises(ConfigError, match=f"run_id = '{other}'.*{own}"):
        curriculum.load_state_dict({**state["curriculum"], "stage": 2, "run_id": other})
    assert curriculum.stage == 3  # refused before anything changed
    with pytest.raises(ConfigError, match="run_id.*hex digits"):
        curriculum.load_state_dict({**state["curriculum"], "run_id": "not an id"})
    # another run's stage record in this run's folder (same name and config, another run)
    folder = tmp_path / "example"
    (folder / "stage-01").mkdir(parents=True)
    shutil.copy(run_dir / "manifest.json", folder / "manifest.json")
    (folder / "stage-01" / "stage.json").write_text(json.dumps({**record, "run_id": other}))
    runs = RunFolder(config, log=lambda line: None, folder=folder)
    with pytest.raises(ConfigError, match=f"stage.json: run_id = '{other}'.*{own}"):
        runs.read_stage(folder / "stage-01" / "stage.json", 1)
    (folder / "stage-01" / "stage.json").write_text(json.dumps({key: value for key, value in record.items()
                                                                if key != "run_id"}))
    assert runs.read_stage(folder / "stage-01" / "stage.json", 1).stage == 1  # written before run ids: read


def test_fuzz_curriculum__a_hostile_checkpoint_state_is_refused_whole_or_taken_and_nothing_else_moves(example_run):
    """``Curriculum.load_state_dict`` fed hypothesis-made states (each key of what ``state_dict`` writes replaced by
    a hostile value, keys dropped or added): one ConfigError and the curriculum as it was, or a state it takes
    whose stage is one this folder reached; the run folder's files never change."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st


    run_dir, _ = example_run
    config = _config(run_dir.parent, "example", **{"engineer.spec": "rule", "arm": "rule+trl-grpo"})
    curriculum = Curriculum(config, log=lambda line: None).open()
    curriculum.begin(str(run_dir / "warm_start" / "model"))
    good = curriculum.state_dict()
    before = _folder_bytes(run_dir)
    hostile = (st.none() | st.booleans() | st.integers(-10**45, 10**45) | st.floats() | st.text(max_size=20)
               | st.sampled_from(["example", good["run_id"], "0" * 16, "2", "3.0", [], {}, [1]]))

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
    @given(changes=st.dictionaries(st.sampled_from(["run", "run_id", "stage", "drawn", "extra"]), hostile, max_size=3),
           dropped=st.sets(st.sampled_from(["run", "run_id", "stage", "drawn"]), max_size=1))
    def check(changes, dropped):
        state = {key: value for key, value in {**good, **changes}.items() if key not in dropped}
        seen = (curriculum.stage, curriculum.current, curriculum.state_dict()["drawn"])
        try:
            curriculum.load_state_dict(state)
        except ConfigError as error:
            assert "\n" not in str(error)
            assert (curriculum.stage, curriculum.current, curriculum.state_dict()["drawn"]) == seen
            return
        assert 1 <= curriculum.stage <= config.stages + 1

    check()
    assert _folder_bytes(run_dir) == before


def test_callback__stage_steps_below_one_and_a_missing_checkpoint_state_are_refused(tmp_path):
    from curriculum.plugins.trl_hooks import CurriculumCallback, curriculum_dataset

    curriculum = Curriculum(_config(tmp_path, "bad"), log=lambda line: None)
    for steps in (0, -3, 1.5, True):
        with pytest.raises(ConfigError, match="stage_steps"):
            CurriculumCallback(curriculum, steps)
    with pytest.raises(ConfigError, match="kind"):
        curriculum_dataset(curriculum, kind="ppo")

    class Args:
        output_dir = str(tmp_path)

    class State:
        global_step = 4

    with pytest.raises(ConfigError, match="curriculum's state"):
        CurriculumCallback(curriculum, 2).on_train_begin(Args(), State(), None)


def _sft_trainer(tmp_path: Path, curriculum: Curriculum, **dataset):
    """SFTTrainer on the curriculum's solver-plan rows from a fresh tiny model (the curriculum begun from it): four
    steps of four rows."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from curriculum.plugins.trl_hooks import curriculum_dataset
    from policy.models import init_tiny_model

    model_dir = init_tiny_model(tmp_path / "init", seed=0)
    curriculum.begin(str(model_dir))
    return SFTTrainer(model=AutoModelForCausalLM.from_pretrained(str(model_dir)),
                      processing_class=AutoTokenizer.from_pretrained(str(model_dir)),
                      train_dataset=curriculum_dataset(curriculum, kind="sft", **dataset),
                      args=SFTConfig(output_dir=str(tmp_path / "trl"), max_steps=4, per_device_train_batch_size=4,
                                     report_to=[], use_cpu=True, disable_tqdm=True, save_strategy="no",
                                     max_length=160))


def test_callback__the_supervised_trainer_switches_stages_too(tmp_path):
    """SFTTrainer (the supervised trainer of the rejection-sampling stages) on the curriculum's solver-plan rows,
    with the callback closing a stage every two steps."""
    from curriculum.plugins.trl_hooks import attach

    config = _config(tmp_path, "sft", **{"warm_start.enabled": False, "engineer.spec": "rule"})
    curriculum = Curriculum(config, log=lambda line: None).open()
    trainer = _sft_trainer(tmp_path, curriculum, chunk=8)
    callback = attach(trainer, curriculum, 2)
    trainer.train()
    assert [record.stage for record in callback.records] == [1, 2] and curriculum.finished
    logged = [entry for entry in trainer.state.log_history if "curriculum/stage" in entry]
    assert [entry["curriculum/stage"] for entry in logged] == [1.0, 2.0]
    assert all(0.0 <= entry["curriculum/evidence_valid_rate"] <= 1.0 for entry in logged)


def test_tool_env__scripted_moves_play_the_row_s_instance_and_the_verdict_is_the_reward(tmp_path):
    from curriculum.plugins.trl_hooks import _row, environment_factory
    from simulator.constants import ACTION_LETTERS

    curriculum = Curriculum(_config(tmp_path, "tools"), log=lambda line: None).open()
    curriculum._begun = True
    item = next(item for item in curriculum.sample(50) if item.optimal_makespan >= 2)
    row = _row(curriculum, item, "tools")
    assert "move" in row["prompt"][0]["content"]
    env = environment_factory(curriculum)()
    assert env.reset(**row).startswith("Start:")
    plan = item.plan.actions  # (K, T) action codes of the solver's optimal plan
    for step in range(plan.shape[1]):
        answer = env.move(" ".join(ACTION_LETTERS[int(code)] for code in plan[:, step]))
    assert answer == "The episode is over: every agent is on its goal (a valid plan)."
    assert env.get_reward() == pytest.approx(1.6)  # valid, optimal, formatted
    env.reset(**row)
    assert "parse_error" in env.move("fly away") and env.get_reward() == 0.0  # an unreadable move ends the episode
    assert environment_factory(curriculum)().reset().startswith("Start:")  # without a row: drawn from the curriculum


def test_tool_env__grpo_trainer_exposes_the_move_tool_through_qwen3_s_real_chat_template(tmp_path):
    """TRL renders the environment's tools through the chat template: on a miniature random Qwen3 with the real
    Qwen3 tokenizer the prompt carries the ``move`` tool's schema, and a GRPO step runs (a random model makes no
    tool call, so every reward is the verdict of an unplayed episode)."""
    from trl import GRPOConfig, GRPOTrainer

    from curriculum.loop.rehearsal import rehearsal_model
    from curriculum.plugins.trl_hooks import curriculum_dataset, environment_factory

    model = rehearsal_model(tmp_path)
    curriculum = Curriculum(_config(tmp_path, "qwen-tools", prompt_style="natural"), log=lambda line: None).open()
    curriculum._begun = True
    trainer = GRPOTrainer(model=str(model), train_dataset=curriculum_dataset(curriculum, kind="tools", chunk=4),
                          environment_factory=environment_factory(curriculum),
                          args=GRPOConfig(output_dir=str(tmp_path / "trl"), max_steps=1, per_device_train_batch_size=2,
                                          num_generations=2, max_completion_length=8, report_to=[], use_cpu=True,
                                          disable_tqdm=True, save_strategy="no", logging_steps=1))
    names = [tool.__name__ for tool in trainer.tools]
    assert names == ["move"]
    rendered = trainer.processing_class.apply_chat_template([{"role": "user", "content": "hi"}], tools=trainer.tools,
                                                            tokenize=False, add_generation_prompt=True)
    assert '"name": "move"' in rendered and "<tools>" in rendered
    trainer.train()
    rewards = [entry for entry in trainer.state.log_history if "reward" in entry]
    assert rewards and 0.0 <= rewards[0]["reward"] <= 1.6


def _example(output_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    sets = [f"--set={key}={value if value is not None else 'null'}" for key, value in REDUCED.items()]
    return subprocess.run([sys.executable, str(ROOT / "examples" / "trl_grpo_curriculum.py"), "--preset", "tiny",
                           "--engineer", "rule", "--stage-steps", "2", "--name", "example", "--output-dir",
                           str(output_dir), *sets, *extra], capture_output=True, text=True, timeout=900,
                          cwd=output_dir)


def _outcome(run_dir: Path) -> dict:
    """What a run decided and scored: each stage's evidence rates, decision and next config, and the test table."""
    table = json.loads((run_dir / "final" / "table.json").read_text())
    table.pop("policy")  # the scored model's path: the run folder's own
    outcome: dict = {"final": table}
    for stage in (1, 2):
        record = json.loads((run_dir / f"stage-0{stage}" / "stage.json").read_text())
        outcome[stage] = (record["scores"], record["decision"], record["next_config"])
    return outcome


def test_example__a_run_killed_after_a_checkpoint_resumes_and_ends_as_an_uninterrupted_run(example_run, tmp_path):
    """The state of a kill between checkpoint-2 and stage 2's boundary: the later checkpoint, stage 2's records and the
    final evaluation gone. The same command resumes from checkpoint-2 (its curriculum state: stage 2), trains stage 2
    on the rows the uninterrupted run trained on, and ends with the same evidence, decisions and test table."""
    import shutil

    run_dir, _ = example_run
    copy = tmp_path / "example"
    shutil.copytree(run_dir, copy)
    for gone in ["final", "stage-02", "trl/checkpoint-4", "final-model"]:
        shutil.rmtree(copy / gone, ignore_errors=True)
    stage = json.loads((copy / "trl" / "checkpoint-2" / "curriculum_state.json").read_text())["curriculum"]["stage"]
    assert stage == 2
    done = _example(tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "stage 1: engineer" not in done.stderr and "stage 2: engineer rule" in done.stderr
    assert _outcome(copy) == _outcome(run_dir)


def test_example__killed_in_the_final_evaluation_finishes_it_and_a_finished_run_is_not_extended(example_run,
                                                                                              tmp_path):
    """After the last boundary: a run killed in its final evaluation scores the saved final model on rerun, a finished
    run says so and reads its table back, and a longer --stage-steps is refused with one line (a run's identity)."""
    import shutil

    run_dir, _ = example_run
    copy = tmp_path / "example"
    shutil.copytree(run_dir, copy)
    shutil.rmtree(copy / "final")
    done = _example(tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert _outcome(copy) == _outcome(run_dir)
    again = _example(tmp_path)
    assert again.returncode == 0 and "finished and scored" in again.stderr, again.stderr[-2000:]
    longer = _example(tmp_path, "--stage-steps", "3")
    assert longer.returncode == 2 and "Traceback" not in longer.stderr
    assert longer.stderr.count("\n") == 1 and "training.steps: 2 -> 3" in longer.stderr, longer.stderr


def _stage_keys(curriculum: Curriculum) -> set:
    """The content keys of the stage the curriculum is on (its certified instances)."""
    return {item.instance.content_key() for item in curriculum.prepare_stage().instances}


def _row_key(text: str):
    from simulator.types import Instance

    return Instance.from_dict(json.loads(text)).content_key()


def test_attach__grpo_rows_of_a_new_stage_reach_the_first_step_after_its_boundary(tmp_path):
    """Counted through ``GRPOTrainer``'s own data loader (the rows its reward is called with), with TRL's defaults
    (``shuffle_dataset=True``): every row of every step comes from the stage being trained, the first step after a
    boundary included; the boundary's figures join that step's own log entry (its loss stays)."""
    from trl import GRPOConfig, GRPOTrainer

    from curriculum.plugins.trl_hooks import attach, curriculum_dataset
    from policy.models import init_tiny_model
    from policy.rewards import StageReward

    config = _config(tmp_path, "rows", **{"warm_start.enabled": False, "engineer.spec": "rule"})
    curriculum = Curriculum(config, log=lambda line: None).open()
    model_dir = init_tiny_model(tmp_path / "init", seed=0)
    curriculum.begin(str(model_dir))
    reward = StageReward({"default": 1.0}, 4)
    steps: list[tuple[int, int, int]] = []  # (stage, rows, rows of that stage)

    def counting(prompts=None, completions=(), instance=(), **columns):
        keys = _stage_keys(curriculum)
        steps.append((curriculum.stage, len(instance), sum(_row_key(text) in keys for text in instance)))
        return reward(prompts=prompts, completions=completions, instance=instance, **columns)

    counting.__name__ = "counting"
    trainer = GRPOTrainer(model=str(model_dir), reward_funcs=[counting], train_dataset=curriculum_dataset(curriculum),
                          args=GRPOConfig(output_dir=str(tmp_path / "trl"), max_steps=4, per_device_train_batch_size=8,
                                          num_generations=4, max_completion_length=8, report_to=[], use_cpu=True,
                                          disable_tqdm=True, save_strategy="no", logging_steps=1))
    assert trainer.shuffle_dataset  # TRL's default, which a boundary used to hide behind a 1,000-row buffer
    callback = attach(trainer, curriculum, 2, reward=reward)
    assert not trainer.shuffle_dataset
    trainer.train()
    assert [stage for stage, _, _ in steps] == [1, 1, 2, 2]
    assert all(rows == 8 and fresh == rows for _, rows, fresh in steps), steps  # 0 stale rows, from the first step on
    assert [record.stage for record in callback.records] == [1, 2]
    boundaries = [entry for entry in trainer.state.log_history if "curriculum/stage" in entry]
    assert [entry["step"] for entry in boundaries] == [2, 4]
    assert all("loss" in entry and "reward" in entry and "learning_rate" in entry for entry in boundaries)
    record = json.loads((curriculum.stage_dir(2) / "stage.json").read_text())
    assert record["train"]["steps"] == 2 and record["train"]["reward_mean"] is not None


def test_attach__sft_rows_of_a_new_stage_reach_the_trainer_one_batch_after_its_boundary(tmp_path):
    """``SFTTrainer`` tokenizes rows inside its loader, so rows are drawn as the loader pulls them, one at a time:
    the loader's one batch of look-ahead is the whole lag (0 stale rows from the second step after a boundary)."""
    from curriculum.plugins.trl_hooks import attach

    drawn: list[int] = []  # the stage each row was drawn from, in the order the loader pulled them

    class Counted(Curriculum):
        def sample(self, n, start=None):
            drawn.extend([self.stage] * n)
            return super().sample(n, start)

    config = _config(tmp_path, "sft-rows", **{"warm_start.enabled": False, "engineer.spec": "rule"})
    curriculum = Counted(config, log=lambda line: None).open()
    trainer = _sft_trainer(tmp_path, curriculum)
    attach(trainer, curriculum, 2)
    before = len(drawn)  # SFTTrainer peeks at the dataset's first rows while it is built
    trainer.train()
    batches = [drawn[before + step * 4:before + (step + 1) * 4] for step in range(4)]  # steps 1..4, loader order
    assert batches[:2] == [[1] * 4] * 2 and batches[3] == [2] * 4, batches
    assert batches[2] == [1] * 4  # step 3: the batch the loader fetched ahead, before the boundary


def test_attach__a_reward_with_other_groups_than_the_trainer_s_is_refused(tmp_path):
    from trl import GRPOConfig, GRPOTrainer

    from curriculum.plugins.trl_hooks import attach, curriculum_dataset
    from policy.models import init_tiny_model
    from policy.rewards import StageReward

    curriculum = Curriculum(_config(tmp_path, "groups"), log=lambda line: None).open()
    model_dir = init_tiny_model(tmp_path / "init", seed=0)
    reward = StageReward({"default": 1.0}, 8)
    trainer = GRPOTrainer(model=str(model_dir), reward_funcs=[reward], train_dataset=curriculum_dataset(curriculum),
                          args=GRPOConfig(output_dir=str(tmp_path / "trl"), max_steps=2, per_device_train_batch_size=8,
                                          num_generations=4, report_to=[], use_cpu=True, save_strategy="no"))
    with pytest.raises(ConfigError, match="StageReward generations = 8.*num_generations"):
        attach(trainer, curriculum, 2, reward=reward)


def test_tool_env__an_episode_without_a_move_earns_nothing(tmp_path):
    from curriculum.plugins.trl_hooks import _row, environment_factory

    curriculum = Curriculum(_config(tmp_path, "no-move"), log=lambda line: None).open()
    curriculum._begun = True
    env = environment_factory(curriculum)()
    env.reset(**_row(curriculum, curriculum.sample(1)[0], "tools"))
    assert env.get_reward() == 0.0  # the format credit is for a played move, not for silence


def test_curriculum__sampling_a_run_begun_finished_says_it_is_finished(example_run):
    run_dir, _ = example_run
    config = _config(run_dir.parent, "example", **{"engineer.spec": "rule", "arm": "rule+trl-grpo"})
    curriculum = Curriculum(config, log=lambda line: None).open()
    curriculum.begin(str(run_dir / "warm_start" / "model"))
    with pytest.raises(ConfigError, match="every stage of .* is finished"):
        curriculum.sample(4)
    for bad in (-1, 10**7, True, 2.0):
        with pytest.raises(ConfigError, match="n = "):
            curriculum.sample(bad)


def _folder_bytes(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.mark.parametrize("damage", [
    {"stage_began": -10**30}, {"stage_began": 10**30}, {"stage_began": "2"}, {"stage_began": True},
    {"stage_began": 1.5}, {"stage_began": [2]}, {"stage_steps": 3},
    {"reward": {"2x3": {"groups": 0, "reward": 0.0, "valid": 0.0, "zero_variance": 0, "abs_advantage": 0.0}}},
    {"reward": {"2x3": {"groups": 2.5, "reward": 0.0, "valid": 0.0, "zero_variance": 0, "abs_advantage": 0.0}}},
    {"reward": "garbage"}, {"curriculum": {"run": "another", "stage": 2, "drawn": 0}},
    {"curriculum": {"run": "example", "stage": 7, "drawn": 0}},
    {"signal file": '{"2x3": {"groups": 0, "reward": 0.0, "valid": 0.0, "zero_variance": 0, "abs_advantage": 0.0}}'},
    {"signal file": '{"2x3": '}, {"signal file": "[]"}, {"signal file": '{"2x3": {"groups": NaN}}'}])
def test_callback__a_damaged_checkpoint_state_is_refused_before_the_run_folder_changes(example_run, tmp_path, damage):
    """The curriculum's state (``curriculum_state.json``; a ``reward`` key in it is how checkpoints before the
    tallies' own file kept them) and the reward tallies (``stage_signal.json``, as ``mapf-lake train``'s GRPO stages
    keep them): each damage is one ConfigError naming its file, and the run folder keeps its bytes."""
    import shutil

    from curriculum.plugins.trl_hooks import STATE_FILE, CurriculumCallback
    from curriculum.training.callbacks import SIGNAL_FILE
    from policy.rewards import StageReward

    run_dir, _ = example_run
    copy = tmp_path / "example"
    shutil.copytree(run_dir, copy)
    state_path = copy / "trl" / "checkpoint-2" / STATE_FILE
    assert "reward" not in json.loads(state_path.read_text())  # the tallies are in their own file now
    if "signal file" in damage:
        state_path = state_path.parent / SIGNAL_FILE
        state_path.write_text(damage["signal file"])
    else:
        state_path.write_text(json.dumps({**json.loads(state_path.read_text()), **damage}))
    before = _folder_bytes(copy)
    config = _config(tmp_path, "example", **{"engineer.spec": "rule", "arm": "rule+trl-grpo"})
    curriculum = Curriculum(config, log=lambda line: None).open()
    curriculum.begin(str(copy / "warm_start" / "model"))

    class Args:
        output_dir = str(copy / "trl")

    class State:
        global_step = 2

    callback = CurriculumCallback(curriculum, 2, reward=StageReward({"default": 1.0}, 4))
    with pytest.raises(ConfigError, match=str(state_path) if "stage_steps" not in damage else "stage_steps"):
        callback.on_train_begin(Args(), State(), None)
    assert _folder_bytes(copy) == before


def test_compare__names_the_arms_trainers_when_they_differ():
    from types import SimpleNamespace

    from curriculum.commands import arm_trainers

    def run(arm: str, trainer: str, spec: str = "gap"):
        config = preset("tiny").with_overrides(arm=arm, **{"engineer.spec": spec, "training.trainer": trainer})
        return SimpleNamespace(run_config=config)  # what compare reads of a run: its typed run config

    runs = [run("gap-band", "rft"), run("gap-band+trl-grpo", "grpo"), run("gap-band", "rft"), run("", "rft", "fixed"),
            run("", "grpo", "fixed")]
    assert arm_trainers(runs) == {"gap-band": "rft", "gap-band+trl-grpo": "grpo", "fixed": "rft/grpo"}


@pytest.mark.parametrize("instance", ["not json", "[" * 100 + "]" * 100, '{"size": ' + "9" * 5000 + "}", "[1, 2]",
                                      "x" * 300_000, '{"a": NaN}', 7])
def test_tool_env__a_hostile_instance_column_is_one_config_error(tmp_path, instance):
    from curriculum.plugins.trl_hooks import environment_factory

    env = environment_factory(None)()
    with pytest.raises(ConfigError):
        env.reset(instance=instance, optimal_makespan=3)


def test_attach__the_tool_mode_s_episodes_after_a_boundary_come_from_the_new_stage(tmp_path):
    """GRPOTrainer with ``environment_factory`` on a miniature random Qwen3 (the real tokenizer): the rows each
    episode's ``reset`` receives are drawn when the trainer takes the batch, so the step after the boundary plays the
    new stage's boards (counted through the reward, which TRL calls with the same rows)."""
    from trl import GRPOConfig, GRPOTrainer

    from curriculum.loop.rehearsal import rehearsal_model
    from curriculum.plugins.trl_hooks import attach, curriculum_dataset, environment_factory

    model = rehearsal_model(tmp_path)
    config = _config(tmp_path, "tool-rows", prompt_style="natural", **{"warm_start.enabled": False,
                                                                      "engineer.spec": "fixed",
                                                                      "validation.samples": 4,
                                                                      "validation.max_new_tokens": 8})
    curriculum = Curriculum(config, log=lambda line: None).open()
    curriculum.begin(str(model))
    steps: list[tuple[int, int, int]] = []

    def counting(completions=(), instance=(), environments=None, **columns):
        keys = _stage_keys(curriculum)
        steps.append((curriculum.stage, len(instance), sum(_row_key(text) in keys for text in instance)))
        return [0.0] * len(completions)

    counting.__name__ = "counting"
    trainer = GRPOTrainer(model=str(model), reward_funcs=[counting],
                          train_dataset=curriculum_dataset(curriculum, kind="tools"),
                          environment_factory=environment_factory(curriculum),
                          args=GRPOConfig(output_dir=str(tmp_path / "trl"), max_steps=2, per_device_train_batch_size=2,
                                          num_generations=2, max_completion_length=8, report_to=[], use_cpu=True,
                                          disable_tqdm=True, save_strategy="no", logging_steps=1))
    attach(trainer, curriculum, 1)
    trainer.train()
    assert [stage for stage, _, _ in steps] == [1, 2]
    assert all(rows == 2 and fresh == rows for _, rows, fresh in steps), steps


def test_fuzz_callback__hypothesis_damaged_checkpoint_files_are_refused_in_one_line_or_resume(example_run, tmp_path):
    """The TRL checkpoint's two files (``curriculum_state.json``, ``stage_signal.json``) with hypothesis-made values
    in place of each key (and the tallies' counts): ``on_train_begin`` raises one ConfigError of one line, or resumes
    at a stage this folder reached; the run folder's bytes never change."""
    import shutil

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from curriculum.plugins.trl_hooks import STATE_FILE, CurriculumCallback
    from curriculum.training.callbacks import SIGNAL_FILE
    from policy.rewards import StageReward

    run_dir, _ = example_run
    copy = tmp_path / "example"
    shutil.copytree(run_dir, copy)
    checkpoint = copy / "trl" / "checkpoint-2"
    state = json.loads((checkpoint / STATE_FILE).read_text())
    signal = json.loads((checkpoint / SIGNAL_FILE).read_text())
    config = _config(tmp_path, "example", **{"engineer.spec": "rule", "arm": "rule+trl-grpo"})
    curriculum = Curriculum(config, log=lambda line: None).open()
    curriculum.begin(str(copy / "warm_start" / "model"))
    hostile = (st.none() | st.booleans() | st.integers(-10**45, 10**45) | st.floats() | st.text(max_size=12)
               | st.lists(st.integers(), max_size=2) | st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))
    tally_keys = sorted({name for tally in signal.values() for name in tally}) or ["groups"]

    class Args:
        output_dir = str(copy / "trl")

    class State:
        global_step = 2

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(top=st.dictionaries(st.sampled_from(["stage_began", "stage_steps", "curriculum", "reward", "x"]), hostile,
                               max_size=2),
           inner=st.dictionaries(st.sampled_from(["run", "run_id", "stage", "drawn"]), hostile, max_size=2),
           counts=st.dictionaries(st.sampled_from(tally_keys), hostile, max_size=2))
    def check(top, inner, counts):
        damaged_state = {**state, "curriculum": {**state["curriculum"], **inner}, **top}
        damaged_signal = {key: {**tally, **counts} for key, tally in signal.items()}
        try:
            (checkpoint / STATE_FILE).write_text(json.dumps(damaged_state))
            (checkpoint / SIGNAL_FILE).write_text(json.dumps(damaged_signal))
        except ValueError:  # a value JSON cannot hold (hypothesis' NaN is written as NaN, which is fine)
            return
        before = _folder_bytes(copy)
        callback = CurriculumCallback(curriculum, 2, reward=StageReward({"default": 1.0}, 4))
        try:
            callback.on_train_begin(Args(), State(), None)
        except ConfigError as error:
            assert "\n" not in str(error)
        else:
            assert 1 <= curriculum.stage <= config.stages + 1
        assert _folder_bytes(copy) == before

    check()
