"""The stage trainers on the embedded tiny model (``curriculum/training/``): GRPO (LoRA, no save, weight average,
greedy member, failure credit), rejection-sampling fine-tuning, the SFT dataset, the progress line, the trainer
registry, and the ``bench grpo`` and ``bench lift`` targets that run them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from curriculum.config import Training
from curriculum.loop.records import TrainingReport
from simulator.config import StageConfig
from simulator.errors import ConfigError


def _instances(side: int, seed: int, samples: int = 8, wait_ratio: float = 0.5) -> list:
    """Certified 2-agent instances of one map side (hole ratio 0.2), as the trainers' tests feed them."""
    from simulator.generator import generate

    return generate(StageConfig.from_dict({"agents": 2, "samples": samples, "seed": seed, "sizes": {
        side: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": wait_ratio}}})).instances


def test_grpo_stage__lora_trains_merges_and_saves_a_loadable_checkpoint(tmp_path, finished_run):
    from curriculum.training.grpo import grpo_stage
    from policy.backend_base import Sampling
    from policy.backends import make_backend
    from policy.prompts import get_style

    items = _instances(4, seed=3)
    training = Training(steps=1, prompts_per_step=2, generations=4, max_completion_length=24, learning_rate=1e-4,
                        temperature=1.0, beta=0.0, lora=True, lora_rank=4)
    info = grpo_stage(training, str(finished_run.run_dir / "warm_start" / "model"), items,
                      get_style(finished_run.prompt_style), tmp_path, seed=0)
    assert info.steps == 1 and 0.0 <= info.zero_variance_share <= 1.0
    assert info.signal is not None and info.signal.by_size  # the engineer's training signal, typed
    assert TrainingReport.from_dict(json.loads(json.dumps(info.to_dict()))) == info  # stage.json's train
    backend = make_backend(f"hf:{tmp_path / 'model'}")
    out = backend.generate(["n=3\n...\n...\n...\nA0 0,0>0,2\nA1 2,2>2,0\n?\n"], Sampling(max_new_tokens=8, temperature=0.0))
    assert isinstance(out[0].text, str)


def test_progress_line__prints_each_tenth_with_time_left_and_latest_figure():
    import io
    from types import SimpleNamespace

    from curriculum.training.common import _Progress

    out = io.StringIO()
    progress = _Progress.make("GRPO stage-01", 20, stream=out)
    for step in range(1, 21):
        progress.on_step_begin(None, None, None)
        progress.on_log(None, None, None, logs={"reward": step / 10, "loss": 0.5})
        progress.on_step_end(None, SimpleNamespace(global_step=step), None)
    lines = out.getvalue().splitlines()
    assert len(lines) == 10 and len(progress.times) == 20  # not a terminal: every second step of 20, then done
    assert lines[0].startswith("GRPO stage-01: step 2/20") and "s/step" in lines[0] and "left" in lines[0]
    assert lines[-1].startswith("GRPO stage-01: step 20/20") and lines[-1].endswith("reward 2.000")


def test_bench_grpo__times_real_steps_of_a_fresh_tiny_model():
    from curriculum.benches.grpo import bench_grpo, render

    figures = bench_grpo(steps=2, prompts_per_step=2, generations=2, max_completion_length=12, cpu_threads=1, side=3)
    assert figures["model"] == "tiny" and figures["training"] == "full"
    assert figures["step_s"] > 0 and figures["first_step_s"] > 0 and figures["peak_memory_gib"] > 0.05
    assert figures["trainable_parameters"] == figures["parameters"] > 100_000
    assert "s/step" in render(figures)
    with pytest.raises(ConfigError, match="--steps"):
        bench_grpo(steps=1)


def test_grpo_stage__without_save_leaves_no_checkpoint(tmp_path, finished_run):
    from curriculum.training.grpo import grpo_stage
    from policy.prompts import get_style

    items = _instances(3, seed=4)
    training = Training(steps=3, prompts_per_step=2, generations=2, max_completion_length=16, learning_rate=1e-4,
                        temperature=1.0, beta=0.0, lora=False, lora_rank=4)
    info = grpo_stage(training, str(finished_run.run_dir / "warm_start" / "model"), items,
                      get_style(finished_run.prompt_style), tmp_path, seed=0, save=False)
    assert info.figures["first_step_seconds"] > 0 and info.figures["later_step_seconds"] > 0
    assert not (tmp_path / "model").exists() and not any((tmp_path / "trainer").glob("checkpoint-*"))


def test_bench_lift__grpo_and_sft_peer_validated_on_the_same_held_out_instances(finished_run):
    from curriculum.benches.lift import bench_lift, render

    model = str(finished_run.run_dir / "warm_start" / "model")
    figures = bench_lift(model, steps=2, validation=12, cpu_threads=None, log=lambda message: None)
    assert figures["style"] == finished_run.prompt_style and figures["validation_instances"] == 12
    rows = figures["rows"]
    assert list(rows) == ["checkpoint", "rl", "sft"]
    for name in ("rl", "sft"):
        assert rows[name]["lift"] == pytest.approx(rows[name]["valid"] - rows["checkpoint"]["valid"])
        assert rows[name]["seconds"] > 0
    train = rows["rl"]["train"]  # the trainer's own figures
    assert 0.0 <= train["zero_variance_share"] <= 1.0 and train["completion_tokens_mean"] > 0
    assert "failure_credit_localized" not in train  # only with training.failure_credit
    for row in rows.values():
        assert set(row["by_side"]) <= {3, 4, 5, 6} and 0.0 <= row["valid"] <= 100.0
    text = render(figures)
    assert "12 held-out instances" in text and "+ GRPO 2 steps" in text and "+ SFT 2 steps" in text
    with pytest.raises(ConfigError, match="--validation"):
        bench_lift(model, validation=5)


def test_best_valid_plans__count_the_instances_that_need_a_wait_apart():
    from curriculum.training.rft import _best_valid_plans
    from simulator.types import JointPlan

    items = _instances(4, seed=5)
    waiting = [index for index, item in enumerate(items) if item.needs_wait]
    assert 0 < len(waiting) < len(items)
    empty = JointPlan.from_sequences([[], []])
    # three samples each: the solver's plan only for the first instance that needs a wait and for every other one
    plans = [p for index, item in enumerate(items)
             for p in ((item.plan if index not in waiting[1:] else empty), empty, None)]
    kept, figures = _best_valid_plans(items, plans, 3)
    assert figures.needs_wait == len(waiting) and figures.needs_wait_kept == 1
    assert figures.needs_wait_sampled_valid_rate == pytest.approx(1 / (3 * len(waiting)))
    no_waits = [item for item in items if not item.needs_wait]
    _, plain = _best_valid_plans(no_waits, [item.plan for item in no_waits], 1)
    assert plain.needs_wait is None and "needs_wait" not in plain.to_dict()


def test_rft_stage__keeps_only_valid_own_plans_and_resumes_by_round(tmp_path, finished_run):
    from curriculum.training.rft import _best_valid_plans, rft_stage
    from policy.prompts import get_style
    from engineer.evidence import TrainingSignal
    from policy.rewards import StageReward
    from simulator.types import JointPlan

    items = _instances(3, seed=5, samples=6, wait_ratio=0.0)
    # Two samples per instance: the solver's plan (valid) and an empty plan (never reaches the goals; starts and
    # goals differ) or no parse at all. The kept plan is always the valid one; the group agrees only when both fail.
    empty = JointPlan.from_sequences([[], []])
    plans = [p for item in items for p in (item.plan, empty)]
    plans[2:4] = [None, empty]  # instance 1: nothing valid
    signal = StageReward({"valid": 1.0}, 2)
    outcomes: dict = {}
    kept, figures = _best_valid_plans(items, plans, 2, signal, outcomes=outcomes)
    # each instance's own samples, by content key: 1 of 2 valid, instance 1 none
    assert outcomes == {item.instance.content_key().hex(): [0 if i == 1 else 1, 2] for i, item in enumerate(items)}
    assert kept[1] is None and all(k is item.plan for k, item in zip(kept, items) if k is not None)
    assert figures.solved_share == pytest.approx(5 / 6) and figures.zero_variance_share == pytest.approx(1 / 6)
    assert figures.sampled_valid_rate == pytest.approx(5 / 12)
    # the samples of one instance are one group of the 0/1 valid reward: 5 mixed groups (each sample 0.5 from the
    # mean, the group's std 0.5 ** 0.5), 1 agreeing group (no advantage)
    three = signal.signal().by_size[3]
    assert three.groups == 6 and three.zero_variance_share == pytest.approx(1 / 6)
    assert three.valid_rate == pytest.approx(5 / 12)
    assert three.abs_advantage_mean == pytest.approx(5 / 6 * 0.5 / (0.5 ** 0.5 + 1e-4))

    model = str(finished_run.run_dir / "warm_start" / "model")
    training = Training(trainer="rft", steps=2, prompts_per_step=3, generations=4, max_completion_length=24,
                        learning_rate=1e-4, temperature=1.0, rft_rounds=2, rft_epochs=1, rft_batch_size=8,
                        rft_min_kept=1)
    kwargs = dict(seed=0, cpu_threads=1)
    info = rft_stage(training, model, items, get_style(finished_run.prompt_style), tmp_path / "a", **kwargs).to_dict()
    assert info["trainer"] == "rft" and [r["prompts"] for r in info["rounds"]] == [3, 3]
    assert all(r["kept"] <= r["prompts"] for r in info["rounds"]) and (tmp_path / "a" / "model" / "config.json").exists()
    # every sampled instance is one group of the stage's signal (what the bandit engineer reads), 4 samples each
    assert info["signal"]["by_size"]["3"]["groups"] == 6
    assert info["signal"]["by_size"]["3"]["valid_rate"] == pytest.approx(info["reward_mean"])
    assert TrainingSignal.from_dict(info["signal"]).trainer == "rft"
    # each round's own groups too (what the progress engineer reads): 3 instances each, together the stage's
    rounds = TrainingSignal.from_dict(info["signal"]).rounds
    assert [by_size[3].groups for by_size in rounds] == [3, 3]
    assert [by_size[3].valid_rate for by_size in rounds] == \
        pytest.approx([r["sampled_valid_rate"] for r in info["rounds"]])
    # each sampled instance's own samples (what the replay engineer scores it by): 6 prompts x 4 samples in all
    from curriculum.loop.records import OUTCOMES_FILE
    from engineer.material import read_outcomes

    outcomes = read_outcomes(json.loads((tmp_path / "a" / OUTCOMES_FILE).read_text()))
    assert sum(samples for _, samples in outcomes.values()) == 24
    assert sum(valid for valid, _ in outcomes.values()) == round(info["reward_mean"] * 24)
    assert set(outcomes) <= {item.instance.content_key() for item in items}
    # a stage killed after its first round: the round is read back, the second is done again, same figures
    (tmp_path / "a" / "round-02" / "model" / "checkpoint_done.json").unlink()
    (tmp_path / "a" / "model" / "checkpoint_done.json").unlink()
    again = rft_stage(training, model, items, get_style(finished_run.prompt_style), tmp_path / "a", **kwargs).to_dict()
    assert [r["kept"] for r in again["rounds"]] == [r["kept"] for r in info["rounds"]]
    assert again["signal"] == info["signal"]  # the first round's groups were read back with it, not lost
    assert read_outcomes(json.loads((tmp_path / "a" / OUTCOMES_FILE).read_text())) == outcomes  # and its samples
    # rounds that keep fewer plans than rft_min_kept do not fine-tune: the stage's model is its starting one
    from dataclasses import replace

    guarded = rft_stage(replace(training, rft_min_kept=4), model, items, get_style(finished_run.prompt_style),
                        tmp_path / "b", **kwargs).to_dict()
    assert [r["sft_steps"] for r in guarded["rounds"]] == [0, 0] and [r["kept"] for r in guarded["rounds"]] == \
        [r["kept"] for r in info["rounds"]]
    assert (tmp_path / "b" / "model" / "model.safetensors").read_bytes() == \
        (Path(model) / "model.safetensors").read_bytes()


def test_weight_average__is_the_exponential_average_of_the_steps_and_survives_a_resume(tmp_path):
    from types import SimpleNamespace

    import torch

    from curriculum.training.callbacks import AVERAGE_FILE, weight_average_callback

    model = torch.nn.Linear(3, 2)
    frozen = torch.nn.Parameter(torch.ones(2), requires_grad=False)
    model.register_parameter("frozen", frozen)
    args = SimpleNamespace(output_dir=str(tmp_path))
    average = weight_average_callback(0.5)
    average.on_train_begin(args, SimpleNamespace(global_step=0), None, model=model)
    expected = model.weight.detach().clone()
    for step in (1, 2):
        with torch.no_grad():
            model.weight.add_(1.0)
        expected = 0.5 * expected + 0.5 * model.weight.detach()
        average.on_step_end(args, SimpleNamespace(global_step=step), None, model=model)
    assert set(average.average) == {"weight", "bias"}  # only the trained weights
    torch.testing.assert_close(average.average["weight"], expected)
    (tmp_path / "checkpoint-2").mkdir()
    average.on_save(args, SimpleNamespace(global_step=2), None)
    resumed = weight_average_callback(0.5)
    resumed.on_train_begin(args, SimpleNamespace(global_step=2), None, model=model)
    torch.testing.assert_close(resumed.average["weight"], expected)
    resumed.on_train_end(args, SimpleNamespace(global_step=2), None, model=model)  # the stage keeps the average
    torch.testing.assert_close(model.weight.detach(), expected)
    assert (tmp_path / "checkpoint-2" / AVERAGE_FILE).exists() and not list(tmp_path.rglob("*.tmp"))


def test_grpo_stage__with_weight_average_saves_the_averaged_weights(tmp_path, finished_run):
    import torch
    from safetensors.torch import load_file

    from curriculum.training.callbacks import AVERAGE_FILE
    from curriculum.training.grpo import grpo_stage
    from policy.prompts import get_style

    items = _instances(3, seed=4)
    training = Training(steps=3, prompts_per_step=2, generations=2, max_completion_length=16, learning_rate=1e-3,
                        temperature=1.0, weight_average=0.5)
    grpo_stage(training, str(finished_run.run_dir / "warm_start" / "model"), items,
               get_style(finished_run.prompt_style), tmp_path, seed=0)
    # the last checkpoint holds the average, and the stage saved it (the callback's own test shows it lags the
    # weights; this warm start of a few steps earns no reward, so here the weights do not move)
    average = torch.load(tmp_path / "trainer" / "checkpoint-3" / AVERAGE_FILE, weights_only=True)
    saved = load_file(str(tmp_path / "model" / "model.safetensors"))
    shared = [name for name in average if name in saved]
    assert shared and len(shared) >= len(saved) - 1  # every trained weight (a tied head is saved once)
    for name in shared:
        torch.testing.assert_close(saved[name].float(), average[name])
    with pytest.raises(ConfigError, match="training.weight_average"):
        Training(weight_average=1.0).validate()


def test_sft_dataset__compact_xy_targets_trace_the_solver_plan_in_the_tiny_model_s_alphabet():
    from curriculum.training.common import sft_dataset
    from policy.models import compact_text_problems
    from policy.parsing import parse_plan
    from policy.prompts import get_style, xy_answer_for
    from simulator.generator import generate

    items = generate(StageConfig.from_dict(
        {"agents": 2, "samples": 24, "seed": 3, "sizes": {3: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.5},
                                                          6: {"data_ratio": 0.5, "hole_ratio": 0.3, "wait_ratio": 0.5}}})).instances
    rows = sft_dataset(items, get_style("compact-xy"))
    for item, row in zip(items, rows):
        assert row["completion"] == xy_answer_for(item.instance, item.plan)
        assert parse_plan(row["completion"], item.instance.n_agents).plan == item.plan
        assert compact_text_problems(row["prompt"] + row["completion"]) == ""


def test_greedy_member__each_group_starts_with_the_greedy_answer_and_a_stage_trains(tmp_path, finished_run):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    from curriculum.training.common import _common_arguments, grpo_dataset
    from curriculum.training.grpo import greedy_member_trainer, grpo_stage
    from policy.prompts import get_style
    from policy.rewards import StageReward

    model_dir = str(finished_run.run_dir / "warm_start" / "model")
    style = get_style(finished_run.prompt_style)
    items = _instances(4, seed=5, wait_ratio=0.0)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    args = GRPOConfig(**_common_arguments(tmp_path / "direct", 1, 1e-5, 1, 0, model), per_device_train_batch_size=8,
                      num_generations=4, max_completion_length=24, temperature=1.0, logging_steps=1)
    trainer = greedy_member_trainer()(model=model, reward_funcs=[StageReward({"default": 1.0}, 4, "group")], args=args,
                                      train_dataset=grpo_dataset(items, style), processing_class=tokenizer)
    trainer.model.train()
    prompts = [tokenizer(style.prompt(item.instance))["input_ids"] for item in items[:2] for _ in range(4)]
    completions, _ = trainer._generate_single_turn(prompts, None, {}, 4)
    for group in range(2):
        with torch.no_grad():
            ids = torch.tensor([prompts[group * 4]])
            greedy = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=24)
        expected = greedy[0, ids.shape[1]:].tolist()
        eos = tokenizer.eos_token_id
        expected = expected[:expected.index(eos) + 1] if eos in expected else expected
        assert completions[group * 4] == expected
    with pytest.raises(RuntimeError, match="groups of num_generations"):
        trainer._generate_single_turn([prompts[0], prompts[4], prompts[0], prompts[4]], None, {}, 2)

    training = Training(steps=2, prompts_per_step=2, generations=4, max_completion_length=24, greedy_member=True)
    info = grpo_stage(training, model_dir, items, style, tmp_path / "stage", seed=0)
    assert info.steps == 2 and (tmp_path / "stage" / "model" / "config.json").exists()
    with pytest.raises(ConfigError, match="training.greedy_member"):
        Training(greedy_member=True, use_vllm=True).validate()


@pytest.mark.parametrize("lengths, spans, expected", [
    ([1, 1, 1, 1, 1], [(2, 3)], [False, False, True, False, False]),
    ([2, 3, 1], [(1, 2)], [True, False, False]),  # inside a longer token
    ([2, 3, 1], [(2, 3), (5, 6)], [False, True, True]),
    ([1, 1], [], [False, False]),
    ([], [(0, 1)], []),
])
def test_blamed_tokens__table(lengths, spans, expected):
    from curriculum.training.grpo import blamed_tokens

    assert blamed_tokens(lengths, spans) == expected


def test_failure_credit__negative_advantage_lands_on_the_failing_move_only(finished_run):
    from collections import defaultdict

    import torch
    from transformers import AutoTokenizer

    from curriculum.training.grpo import failure_credit_trainer
    from policy.rewards import reward_columns
    from simulator.types import Instance

    tokenizer = AutoTokenizer.from_pretrained(str(finished_run.run_dir / "warm_start" / "model"))
    instance = Instance(grid=[[0, 0, 0], [0, 1, 0], [0, 0, 0]], starts=[[0, 0], [2, 2]], goals=[[0, 2], [2, 0]])
    row = reward_columns(instance, optimal_makespan=2, horizon=12)
    texts = ["A0 DR\nA1 LL", "A0 RR\nA1 LL", "A0 DR\nA1 LL", "A0 R\nA1 L"]  # hole at step 2, valid, hole, off goal
    encoded = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
    width = max(map(len, encoded)) + 2
    ids = torch.tensor([e + [tokenizer.pad_token_id or 0] * (width - len(e)) for e in encoded])
    mask = torch.tensor([[1] * len(e) + [0] * (width - len(e)) for e in encoded])
    advantages = torch.tensor([-0.5, 1.5, 0.5, -0.5])  # the third: a failure with a positive advantage keeps it all

    class Scored:  # what TRL's own method returns, for four completions of one prompt
        def __init__(self):
            self.processing_class, self.model = tokenizer, torch.nn.Linear(1, 1)  # a module in training mode
            self._metrics = {"train": defaultdict(list)}

        def _generate_and_score_completions(self, inputs):
            return {"completion_ids": ids, "completion_mask": mask, "advantages": advantages.clone()}

    trainer = failure_credit_trainer(Scored)()
    out = trainer._generate_and_score_completions([row] * 4)["advantages"]
    assert out.shape == ids.shape
    blamed = [i for i in range(width) if out[0, i] != 0]
    assert tokenizer.decode(ids[0, blamed]) == "R" and out[0, blamed].tolist() == [-0.5]  # A0's second move
    assert torch.all(out[1] == 1.5) and torch.all(out[2] == 0.5) and torch.all(out[3] == -0.5)
    assert trainer._metrics["train"]["failure_credit/localized"] == [0.5]  # 1 of the 2 negative ones


def test_failure_credit__a_stage_trains_with_it(tmp_path, finished_run):
    from curriculum.training.grpo import grpo_stage
    from policy.prompts import get_style

    items = _instances(4, seed=5, wait_ratio=0.0)
    training = Training(steps=2, prompts_per_step=2, generations=4, max_completion_length=24, failure_credit=True,
                        greedy_member=True)
    info = grpo_stage(training, str(finished_run.run_dir / "warm_start" / "model"), items,
                      get_style(finished_run.prompt_style), tmp_path / "stage", seed=0)
    assert info.steps == 2 and (tmp_path / "stage" / "model" / "config.json").exists()
    assert 0.0 <= info.figures["failure_credit_localized"] <= 1.0
    with pytest.raises(ConfigError, match="training.failure_credit"):
        Training(failure_credit="yes").validate()


def test_trainer_names__declared_once_for_the_config_the_signal_and_the_registry():
    from curriculum.config import Training
    from curriculum.training.trainers import STAGE_TRAINERS
    from policy.signal import SIGNAL_TRAINERS, TRAINERS
    from simulator.fields import field_rows

    (row,) = [row for row in field_rows(Training) if row.name == "trainer"]
    assert tuple(STAGE_TRAINERS) == TRAINERS == tuple(SIGNAL_TRAINERS)
    assert all(name in str(row.allowed) for name in TRAINERS)
