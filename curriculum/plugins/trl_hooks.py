"""The curriculum in a TRL script: three plug-ins over one :class:`~curriculum.loop.curriculum.Curriculum`.

* :func:`curriculum_dataset`: a ``datasets.IterableDataset`` whose rows are drawn from the curriculum's *current*
  stage config (certified instances, the test and evidence sets excluded), with the columns the project's reward
  reads (``policy.rewards.StageReward``: ``prompt``, ``instance``, ``optimal_makespan``, ``horizon``), or
  prompt/completion rows of the solver's plans for a supervised trainer (``kind="sft"``), or the step-by-step
  game's first prompt (``kind="tools"``, for :class:`MapfToolEnv`).
* :class:`CurriculumCallback`: a ``TrainerCallback`` that every ``stage_steps`` optimizer steps runs the stage
  boundary with the trainer's own model (evidence set, failure summary, the engineer's decision and reasons, the
  next config), so the rows that follow come from the next config. The decision is logged through the
  trainer's logging (``trainer.log``: TensorBoard, W&B, ... like any metric) when the callback is attached with
  :func:`attach`; the curriculum's state is saved in every TRL checkpoint and restored from it on resume.
  It works with any ``transformers.Trainer`` (``GRPOTrainer``, ``SFTTrainer``, ...).
* :class:`MapfToolEnv` / :func:`environment_factory`: TRL's ``environment_factory`` environment for the
  step-by-step mode: ``reset`` starts the row's instance, the one tool ``move`` plays one joint action per call,
  ``get_reward`` is the episode's verdict (``policy.multiturn.episode_outcome``'s ``default``).

A script (``examples/trl_grpo_curriculum.py`` is one)::

    curriculum = Curriculum(preset("demo").with_overrides(name="grpo-demo")).open()
    curriculum.begin(model_dir)                        # validates the start model; plans stage 1
    reward = StageReward(dict(config.training.rewards), generations)
    trainer = GRPOTrainer(model=model_dir, reward_funcs=[reward], train_dataset=curriculum_dataset(curriculum),
                          args=GRPOConfig(max_steps=stages * stage_steps, ...))
    attach(trainer, curriculum, stage_steps, reward=reward)
    trainer.train()

The trainer and the data loader run one batch ahead of the optimizer step: the first batch after a boundary may
still hold rows of the stage before it (one batch per stage; with ``dataloader_num_workers=0``, as TRL requires
for an IterableDataset). Resuming sets ``ignore_data_skip``: the curriculum, not the Trainer, knows where its
stream stands.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback

from curriculum.loop.curriculum import Curriculum
from curriculum.loop.records import TrainingReport, read_record
from curriculum.loop.validation import LoadedModel
from simulator.errors import ConfigError

if TYPE_CHECKING:
    from policy.multiturn import TextGame

STATE_FILE = "curriculum_state.json"
"""Beside each TRL checkpoint (``checkpoint-N/``): the curriculum's :meth:`~Curriculum.state_dict`."""
ROW_KINDS = ("grpo", "sft", "tools")


def curriculum_dataset(curriculum: Curriculum, kind: str = "grpo", chunk: int = 64):
    """An endless ``datasets.IterableDataset`` of rows from the curriculum's current stage (see the module
    docstring for ``kind``). Rows are drawn ``chunk`` at a time, so a stage boundary takes effect within
    ``chunk`` rows of the trainer's next batch; the trainer's ``max_steps`` ends the run."""
    from datasets import IterableDataset

    if kind not in ROW_KINDS:
        raise ConfigError("kind", kind, f"one of {', '.join(ROW_KINDS)}")
    if isinstance(chunk, bool) or not isinstance(chunk, int) or not 1 <= chunk <= 65_536:
        raise ConfigError("chunk", chunk, "an integer in 1..65536")
    return IterableDataset.from_generator(_rows, gen_kwargs={"curriculum": curriculum, "kind": kind, "chunk": chunk})


def _rows(curriculum: Curriculum, kind: str, chunk: int):
    while True:
        for item in curriculum.sample(chunk):
            yield _row(curriculum, item, kind)


def _row(curriculum: Curriculum, item, kind: str) -> dict[str, Any]:
    if kind == "grpo":
        return curriculum.training_row(item)
    style = curriculum.style
    if kind == "sft":
        answer = style.write_answer(item.instance, item.plan)
        if style.chat:
            return {"prompt": style.prompt(item.instance), "completion": [{"role": "assistant", "content": answer}]}
        return {"prompt": style.prompt(item.instance), "completion": answer}
    row = curriculum.training_row(item)  # kind == "tools": the game's rules and map; the env adds the positions
    row["prompt"] = [{"role": "user", "content": TOOL_INTRO + _text(style.prompt(item.instance))}]
    return row


def _text(prompt: Any) -> str:
    return prompt if isinstance(prompt, str) else "\n\n".join(message["content"] for message in prompt)


TOOL_INTRO = ("Play this board one joint move at a time with the `move` tool: each call moves every agent one "
              "step at once (U, D, L, R or W for wait, one per agent in agent order, e.g. 'R W'). Stop calling "
              "once every agent is on its goal.\n\n")


class CurriculumCallback(TrainerCallback):
    """Runs the curriculum's stage boundary every ``stage_steps`` optimizer steps of any ``transformers.Trainer``.

    ``reward``: the ``policy.rewards.StageReward`` the trainer scores with (its per-size tallies are the stage's
    training signal for the engineer; without it the engineer sees no training signal). ``trainer``: set by
    :func:`attach`, so the decision is logged through ``trainer.log``. Needs the trainer's ``processing_class``
    (the tokenizer), which Trainer passes to callbacks."""

    def __init__(self, curriculum: Curriculum, stage_steps: int, reward: Any = None, trainer: Any = None) -> None:
        if isinstance(stage_steps, bool) or not isinstance(stage_steps, int) or stage_steps < 1:
            raise ConfigError("stage_steps", stage_steps, "an integer >= 1 (optimizer steps per stage)")
        self.curriculum = curriculum
        self.stage_steps = stage_steps
        self.reward = reward
        self.trainer = trainer
        self.records: list = []
        self._stage_began = 0  # the global step the current stage began at

    def on_init_end(self, args, state, control, **kwargs):
        # The curriculum's stream, not the Trainer's replay of it, says where the data stands on resume.
        args.ignore_data_skip = True

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.global_step:
            return
        saved = Path(args.output_dir) / f"checkpoint-{state.global_step}" / STATE_FILE
        if not saved.is_file():
            raise ConfigError(str(saved), "missing", f"the curriculum's state beside the TRL checkpoint (written by "
                              f"CurriculumCallback); without it the run cannot say which stage step "
                              f"{state.global_step} was in")
        document = read_record(saved, "curriculum state beside the TRL checkpoint", ("curriculum",))
        self.curriculum.load_state_dict(document["curriculum"])
        if self.reward is not None and isinstance(document.get("reward"), dict):
            self.reward.load_state(document["reward"])
        self._stage_began = int(document.get("stage_began", 0))

    def on_save(self, args, state, control, **kwargs):
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if folder.is_dir() and self.curriculum.is_main_process:
            from simulator.atomic import atomic_write

            document = {"curriculum": self.curriculum.state_dict(), "stage_began": self._stage_began,
                        "reward": self.reward.state() if self.reward is not None else None}
            atomic_write(folder / STATE_FILE, json.dumps(document, sort_keys=True))

    def on_step_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        if self.curriculum.finished or state.global_step - self._stage_began < self.stage_steps:
            return
        if model is None or processing_class is None:
            raise ConfigError("trainer", "no model or processing_class in the callback's arguments",
                              "a transformers Trainer (it passes both to its callbacks)")
        training = model.training
        model.eval()
        try:
            record = self.curriculum.end_stage(
                LoadedModel(_unwrapped(model), processing_class, name=f"{self.curriculum.config.name}-step-"
                                                                     f"{state.global_step}"),
                self._training_report(state))
        finally:
            model.train(training)
        self._stage_began = state.global_step
        if self.reward is not None:
            self.reward.load_state({})  # the next stage's signal starts from nothing
        self.records.append(record)
        figures = decision_figures(record)
        if self.trainer is not None:
            self.trainer.log(figures)
        else:
            state.log_history.append({**figures, "step": state.global_step})

    def _training_report(self, state) -> TrainingReport:
        """The stage's training figures from the trainer's own log (its entries since the stage began) and the
        reward's tallies."""
        entries = [entry for entry in state.log_history if entry.get("step", 0) > self._stage_began]

        def mean_of(key: str):
            values = [entry[key] for entry in entries if isinstance(entry.get(key), (int, float))]
            return sum(values) / len(values) if values else None

        signal = None
        if self.reward is not None and self.reward.state():
            signal = self.reward.signal()
        return TrainingReport(steps=state.global_step - self._stage_began, reward_mean=mean_of("reward"),
                              zero_variance_share=mean_of("frac_reward_zero_std"),
                              completion_tokens_mean=mean_of("completions/mean_length"), signal=signal,
                              figures={"trainer": "trl", "global_step": state.global_step})


def _unwrapped(model):
    """The model under a DDP / DeepSpeed wrapper (what generates), else the model itself."""
    return getattr(model, "module", model)


def decision_figures(record) -> dict[str, float]:
    """A stage boundary as scalars a trainer's loggers take: the stage, the evidence rates, whether the engineer
    changed the config, how many knobs, and the next config's knobs per map side."""
    figures: dict[str, float] = {
        "curriculum/stage": float(record.stage),
        "curriculum/evidence_valid_rate": float(record.scores.valid_rate),
        "curriculum/evidence_optimal_rate": float(record.scores.optimal_rate),
        "curriculum/changed": float(record.decision.outcome == "changed"),
        "curriculum/changes": float(len(record.decision.diff)),
        "curriculum/next_agents": float(record.next_config.agents),
        "curriculum/next_samples": float(record.next_config.samples),
    }
    for side, size in sorted(record.next_config.sizes.items()):
        for knob in ("data_ratio", "hole_ratio", "wait_ratio"):
            figures[f"curriculum/next_{side}x{side}/{knob}"] = float(getattr(size, knob))
    return figures


def attach(trainer, curriculum: Curriculum, stage_steps: int, reward: Any = None) -> CurriculumCallback:
    """Add a :class:`CurriculumCallback` to ``trainer`` that logs each decision through ``trainer.log``."""
    callback = CurriculumCallback(curriculum, stage_steps, reward=reward, trainer=trainer)
    callback.on_init_end(trainer.args, trainer.state, trainer.control)
    trainer.add_callback(callback)
    return callback


class MapfToolEnv:
    """One episode of the step-by-step mode for TRL's ``environment_factory``: the instance comes from the
    dataset row (``curriculum_dataset(kind="tools")``: drawn from the curriculum's current stage) or, without
    one, from the curriculum itself."""

    curriculum: Curriculum | None = None  # set by :func:`environment_factory`

    def __init__(self) -> None:
        self.game: TextGame | None = None

    def reset(self, instance: str | None = None, optimal_makespan: int | None = None, **row) -> str:
        """Start the row's instance; returns the agents' starting positions (added to the prompt)."""
        from policy.multiturn import TextGame
        from simulator.types import Instance

        if instance is None:
            if self.curriculum is None:
                raise ConfigError("instance", None, "a row with an instance column, or an environment made by "
                                  "environment_factory(curriculum)")
            item = self.curriculum.sample(1)[0]
            board, optimal_makespan = item.instance, item.optimal_makespan
        else:
            board = Instance.from_dict(json.loads(instance))
        self.game = TextGame(board, "natural", optimal_makespan=optimal_makespan)
        self.game.reset()
        state = self.game.env.state
        return "Start: " + self.game.style.observation(board, state.pos, state.t)

    def move(self, actions: str) -> str:
        """Move every agent one step at once.

        Args:
            actions: one move per agent, in agent order: U (up), D (down), L (left), R (right) or W (wait), e.g. "R W".

        Returns:
            The agents' positions after the move, or how the episode ended.
        """
        if self.game is None:
            raise ValueError("the episode has not started (reset first)")
        if self.game.done:
            return _ended(self.game.outcome())
        result = self.game.step(actions)
        return _ended(result.info["outcome"]) if result.done else result.observation

    def get_reward(self) -> float:
        """The episode's verdict as the project's default reward (1.0 valid + 0.5 optimal + 0.1 format)."""
        if self.game is None:
            return 0.0
        return float(self.game.outcome()["default"])


def _ended(outcome: dict) -> str:
    if outcome["valid"]:
        return "The episode is over: every agent is on its goal (a valid plan)."
    reason = f" ({outcome['parse_error']})" if outcome["parse_error"] else ""
    return f"The episode is over: {outcome['category']}{reason}."


def environment_factory(curriculum: Curriculum | None = None):
    """A no-argument factory of :class:`MapfToolEnv` for ``GRPOTrainer(environment_factory=...)``."""

    class CurriculumToolEnv(MapfToolEnv):
        pass

    CurriculumToolEnv.curriculum = curriculum
    return CurriculumToolEnv


__all__ = ["CurriculumCallback", "MapfToolEnv", "ROW_KINDS", "STATE_FILE", "attach", "curriculum_dataset",
           "decision_figures", "environment_factory"]
