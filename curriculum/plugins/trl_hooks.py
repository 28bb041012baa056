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

:func:`attach` fits the trainer's data loader to the curriculum. A loader fetches one batch ahead of the optimizer
step (accelerate looks ahead to find the end of the data), and ``GRPOTrainer`` adds a 1,000-row shuffle buffer
(``shuffle_dataset``), so rows drawn when the loader fetches them would keep serving a stage after its boundary.
Attached to a ``GRPOTrainer`` (plain or with ``environment_factory``), the dataset yields placeholders that pace the
loader, and each batch's rows are drawn from the curriculum's current stage when the trainer *takes* the batch, at a
stream position fixed by the optimizer step: the first step after a boundary trains on the new stage's rows (no stale
row), and a run resumed from a TRL checkpoint trains on exactly the rows an uninterrupted one would. ``shuffle_dataset``
is turned off with a one-line reason (the curriculum's seeded order is the shuffle). Other trainers (``SFTTrainer``)
tokenize rows inside the loader, so there the rows are drawn one at a time as the loader fetches them: the stage's
rows arrive one batch after the boundary (the loader's look-ahead). Resuming sets ``ignore_data_skip``: the
curriculum, not the Trainer, knows where its stream stands.
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback

from curriculum.loop.curriculum import Curriculum
from curriculum.loop.records import TrainingReport, read_record, write_record
from curriculum.loop.validation import LoadedModel
from curriculum.training.callbacks import load_reward_state, restore_reward_state, save_reward_state
from simulator.documents import is_python_int
from simulator.errors import ConfigError, in_file

if TYPE_CHECKING:
    from policy.multiturn import TextGame

STATE_FILE = "curriculum_state.json"
"""Beside each TRL checkpoint (``checkpoint-N/``): the curriculum's :meth:`~Curriculum.state_dict`."""
ROW_KINDS = ("grpo", "sft", "tools")
MAX_INSTANCE_CHARS = 200_000
"""The longest instance column the tool environment reads (a 64x64 board with many agents is well under it)."""


class _Stream:
    """One :func:`curriculum_dataset`'s settings, read by its generator when the trainer starts iterating (so that
    :func:`attach`, called after the trainer is built, can still fit them): ``deferred`` rows are placeholders whose
    content a :class:`_TakenRows` draws when the trainer takes the batch; ``chunk`` is how many rows one pull draws."""

    def __init__(self, curriculum: Curriculum, kind: str, chunk: int) -> None:
        self.curriculum, self.kind, self.chunk = curriculum, kind, chunk
        self.deferred = False


_STREAMS: "weakref.WeakKeyDictionary[Curriculum, list[_Stream]]" = weakref.WeakKeyDictionary()


def curriculum_dataset(curriculum: Curriculum, kind: str = "grpo", chunk: int = 64):
    """An endless ``datasets.IterableDataset`` of rows from the curriculum's current stage (see the module
    docstring for ``kind``). Alone, rows are drawn ``chunk`` at a time when the loader fetches them;
    :func:`attach` fits the stream to the trainer (the module docstring says how); the trainer's ``max_steps``
    ends the run."""
    from datasets import IterableDataset

    if kind not in ROW_KINDS:
        raise ConfigError("kind", kind, f"one of {', '.join(ROW_KINDS)}")
    if not is_python_int(chunk) or not 1 <= chunk <= 65_536:
        raise ConfigError("chunk", chunk, "an integer in 1..65536")
    stream = _Stream(curriculum, kind, chunk)
    _STREAMS.setdefault(curriculum, []).append(stream)
    return IterableDataset.from_generator(_rows, gen_kwargs={"stream": stream})


def _rows(stream: _Stream):
    if stream.deferred:  # the trainer's loader draws the rows when it takes each batch (_TakenRows)
        slot = 0
        while True:
            yield {"slot": slot}
            slot += 1
    while True:
        for item in stream.curriculum.sample(stream.chunk):
            yield _row(stream.curriculum, item, stream.kind)


def _row(curriculum: Curriculum, item, kind: str) -> dict[str, Any]:
    if kind == "grpo":
        return curriculum.training_row(item)
    if kind == "sft":
        return curriculum.supervised_row(item)
    row = curriculum.training_row(item)  # kind == "tools": the game's rules and map; the env adds the positions
    row["prompt"] = [{"role": "user", "content": TOOL_INTRO + _text(curriculum.style.prompt(item.instance))}]
    return row


def _text(prompt: Any) -> str:
    return prompt if isinstance(prompt, str) else "\n\n".join(message["content"] for message in prompt)


TOOL_INTRO = ("Play this board one joint move at a time with the `move` tool: each call moves every agent one "
              "step at once (U, D, L, R or W for wait, one per agent in agent order, e.g. 'R W'). Stop calling "
              "once every agent is on its goal.\n\n")


class _TakenRows:
    """A ``GRPOTrainer``'s batches drawn when the trainer takes them. GRPO generates once every ``generate_every``
    micro-batches for ``unique`` prompts (over every process), each repeated ``generations`` times; the g-th
    generation of a stage takes the stage's stream positions ``g * unique ..`` (``Curriculum.sample(start=)``), so
    a batch's rows depend on the stage and the step only, never on what the loader fetched ahead. Each process keeps
    its slice of the global batch, as accelerate would have split it."""

    def __init__(self, curriculum: Curriculum, kind: str, unique: int, generations: int, generate_every: int,
                 rank: int, processes: int) -> None:
        self.curriculum, self.kind = curriculum, kind
        self.unique, self.generations, self.generate_every = unique, generations, generate_every
        self.rank, self.processes = rank, processes
        self.taken = 0  # micro-batches the trainer took in the current stage
        self._cached: tuple[tuple[int, int], list[dict[str, Any]]] | None = None

    def take(self, batch: list) -> list[dict[str, Any]]:
        generation = self.taken // self.generate_every
        self.taken += 1
        key = (self.curriculum.stage, generation)
        if self._cached is None or self._cached[0] != key:
            items = self.curriculum.sample(self.unique, start=generation * self.unique)
            rows = [_row(self.curriculum, item, self.kind) for item in items]
            self._cached = (key, [row for row in rows for _ in range(self.generations)])
        rows = self._cached[1]
        size = len(batch)
        if size * self.processes != len(rows):
            raise ConfigError("trainer batch", f"{size} rows x {self.processes} processes",
                              f"{len(rows)} rows per generation ({self.unique} prompts x {self.generations} "
                              f"generations): GRPOConfig's generation_batch_size")
        return [dict(row) for row in rows[self.rank * size:(self.rank + 1) * size]]


class _TakenLoader:
    """The trainer's prepared training loader with each batch's rows replaced by :class:`_TakenRows` when the
    trainer takes it; everything else (``set_epoch``, state, length) is the loader's own."""

    def __init__(self, loader: Any, rows: _TakenRows) -> None:
        self.loader, self.rows = loader, rows

    def __iter__(self):
        for batch in self.loader:
            yield self.rows.take(batch)

    def __len__(self) -> int:
        return len(self.loader)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)


class CurriculumCallback(TrainerCallback):
    """Runs the curriculum's stage boundary every ``stage_steps`` optimizer steps of any ``transformers.Trainer``.

    ``reward``: the ``policy.rewards.StageReward`` the trainer scores with (its per-size tallies are the stage's
    training signal for the engineer; without it the engineer sees no training signal). The boundary runs when the
    step's own log entry is written (the callback asks the trainer to log a boundary step), so the stage's training
    figures include its last step and the curriculum's figures (:func:`decision_figures`) join that entry: the
    trainer's loss, learning rate and rewards stay in it, and TensorBoard or W&B get both in one record. Needs the
    trainer's ``processing_class`` (the tokenizer), which Trainer passes to callbacks. Use :func:`attach`, which
    also fits the trainer's loader to the curriculum; ``trainer`` is kept for scripts that pass it."""

    def __init__(self, curriculum: Curriculum, stage_steps: int, reward: Any = None, trainer: Any = None) -> None:
        if not is_python_int(stage_steps) or stage_steps < 1:
            raise ConfigError("stage_steps", stage_steps, "an integer >= 1 (optimizer steps per stage)")
        self.curriculum = curriculum
        self.stage_steps = stage_steps
        self.reward = reward
        self.trainer = trainer
        self.records: list = []
        """The :class:`~curriculum.loop.records.StageRecord` of every boundary this callback closed, in order."""
        self.rows: _TakenRows | None = None  # set by attach on a GRPOTrainer
        self.micro_steps = 1  # the trainer's gradient accumulation steps (micro-batches per optimizer step)
        self._stage_began = 0  # the global step the current stage began at
        self._due = False  # a boundary reached at on_step_end, closed when the step's log entry is written

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
        recorded_steps = document.get("stage_steps", self.stage_steps)
        if recorded_steps != self.stage_steps:
            raise ConfigError("stage_steps", self.stage_steps, f"{recorded_steps!r}, as {saved} was trained with (a "
                              f"run's stages keep their length; start a new run for another)")
        from simulator.documents import checked_int

        # the step the checkpoint's stage began at: within one stage of the checkpoint's step
        began = checked_int(document.get("stage_began", 0), f"{saved}: stage_began",
                            max(0, state.global_step - self.stage_steps), state.global_step)
        # each load checks everything before it changes anything; nothing is written here
        if self.reward is not None and document.get("reward") is not None:  # before the tallies had their own file
            load_reward_state(self.reward, document["reward"], f"{saved}: reward")
        elif self.reward is not None and "reward" not in document:
            restore_reward_state(saved.parent, self.reward)
        try:
            self.curriculum.load_state_dict(document["curriculum"])
        except ConfigError as error:
            raise in_file(error, saved) from None
        self._stage_began = began
        if self.rows is not None:
            self.rows.taken = (state.global_step - self._stage_began) * self.micro_steps

    def on_step_end(self, args, state, control, **kwargs):
        if self.curriculum.finished or state.global_step - self._stage_began < self.stage_steps:
            return
        self._due = True
        control.should_log = True  # the boundary closes with the step's own log entry (on_log)

    def on_log(self, args, state, control, logs=None, model=None, processing_class=None, **kwargs):
        if not self._due:
            return
        figures = self._close(state, model, processing_class)
        if logs is not None:
            logs.update(figures)  # the loggers after this callback (TensorBoard, W&B, ...) see them
        entry = state.log_history[-1] if state.log_history else None
        if entry is not None and entry.get("step") == state.global_step:
            entry.update(figures)
        else:
            state.log_history.append({**figures, "step": state.global_step})

    def on_save(self, args, state, control, model=None, processing_class=None, **kwargs):
        if self._due:  # a trainer that saves without logging: the boundary still closes before the state is saved
            state.log_history.append({**self._close(state, model, processing_class), "step": state.global_step})
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if folder.is_dir() and self.curriculum.is_main_process:
            if self.reward is not None:  # the tallies' file, as mapf-lake train's GRPO stages write it
                save_reward_state(folder, self.reward)
            document = {"curriculum": self.curriculum.state_dict(), "stage_began": self._stage_began,
                        "stage_steps": self.stage_steps}
            write_record(folder / STATE_FILE, document, "curriculum state beside the TRL checkpoint", keys=("curriculum",))

    def on_train_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        if self._due:
            state.log_history.append({**self._close(state, model, processing_class), "step": state.global_step})

    def _close(self, state, model, processing_class) -> dict[str, float]:
        """The stage boundary with the trainer's model as it is after the stage's last step."""
        self._due = False
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
        if self.rows is not None:
            self.rows.taken = 0
        if self.reward is not None:
            self.reward.load_state({})  # the next stage's signal starts from nothing
        self.records.append(record)
        return decision_figures(record)

    def _training_report(self, state) -> TrainingReport:
        """The stage's training figures from the trainer's own log (its entries since the stage began, the
        boundary step's own included) and the reward's tallies."""
        signal = None
        if self.reward is not None and self.reward.state():
            signal = self.reward.signal()
        return TrainingReport.from_log(state.log_history, steps=state.global_step - self._stage_began,
                                       since_step=self._stage_began, signal=signal,
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
    """Put a :class:`CurriculumCallback` first among ``trainer``'s callbacks (so its figures reach the loggers in
    the step's own entry) and fit the trainer's loader to the curriculum (module docstring): on a ``GRPOTrainer``,
    rows drawn when each batch is taken and ``shuffle_dataset`` off; on any other trainer, the curriculum's
    datasets draw one row per pull. Refused with one line: a ``reward`` whose ``generations`` is not the trainer's
    ``num_generations`` (its tallies would silently count nothing), or stages that end inside a GRPO generation."""
    callback = CurriculumCallback(curriculum, stage_steps, reward=reward, trainer=trainer)
    streams = _STREAMS.get(curriculum, [])
    grpo = _is_grpo(trainer)
    if grpo:
        generations = int(trainer.num_generations)
        if reward is not None and getattr(reward, "generations", generations) != generations:
            raise ConfigError("StageReward generations", reward.generations,
                              f"{generations}, the trainer's num_generations (TRL scores groups of that many "
                              f"completions; other groups would tally nothing)")
        args = trainer.args
        callback.micro_steps = int(args.gradient_accumulation_steps)
        generate_every = int(args.steps_per_generation) * int(trainer.num_iterations)
        if (stage_steps * callback.micro_steps) % generate_every:
            raise ConfigError("stage_steps", stage_steps, f"a multiple of {generate_every} micro-batches / "
                              f"{callback.micro_steps} per step (GRPO generates once every steps_per_generation x "
                              f"num_iterations micro-batches; a stage must end between generations)")
        deferred = [stream for stream in streams if stream.kind in ("grpo", "tools")]
        if deferred:
            if getattr(trainer, "shuffle_dataset", False):
                trainer.shuffle_dataset = False
                curriculum.log("curriculum: GRPOConfig.shuffle_dataset turned off (the curriculum's seeded order is "
                               "the shuffle; a shuffle buffer would serve a stage's rows after its boundary)")
            for stream in deferred:
                stream.deferred = True
            accelerator = trainer.accelerator
            callback.rows = _TakenRows(curriculum, deferred[-1].kind,
                                       int(args.generation_batch_size) // generations, generations,
                                       generate_every, int(accelerator.process_index),
                                       int(accelerator.num_processes))
            original = trainer.get_train_dataloader
            rows = callback.rows

            def fitted_loader():
                return _TakenLoader(original(), rows)

            trainer.get_train_dataloader = fitted_loader
    for stream in streams:
        if not stream.deferred:
            stream.chunk = 1  # drawn as the loader pulls: one batch of look-ahead, no chunk on top
    callback.on_init_end(trainer.args, trainer.state, trainer.control)
    trainer.callback_handler.callbacks.insert(0, callback)
    return callback


def _is_grpo(trainer: Any) -> bool:
    try:
        from trl import GRPOTrainer
    except ImportError:  # pragma: no cover - trl is in the train extra with transformers
        return False
    return isinstance(trainer, GRPOTrainer)


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
            from simulator.files import load_json

            if not isinstance(instance, str) or len(instance) > MAX_INSTANCE_CHARS:
                raise ConfigError("instance", type(instance).__name__ if not isinstance(instance, str) else
                                  f"{len(instance)} characters", f"an instance as JSON text of at most "
                                  f"{MAX_INSTANCE_CHARS:,} characters (the row's instance column)")
            board = Instance.from_dict(load_json(instance, "the row's instance", "an instance", object_only=True))
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
        """The episode's verdict as the project's default reward (1.0 valid + 0.5 optimal + 0.1 format); an episode
        in which no move was played earns nothing (not calling the tool must not pay the format credit)."""
        if self.game is None or self.game.turns == 0:
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
