"""The curriculum in verl: a dataset whose rows come from the current stage, and verl's curriculum sampler.

verl trains on a map-style dataset (``data.custom_cls``) through a torch ``DataLoader`` and, after each training
step, hands the step's batch (a ``verl.DataProto``) back to the data side: verl 0.7 calls the curriculum
sampler's ``update(batch)`` (``data.sampler.class_path`` / ``class_name``, a subclass of
``verl.experimental.dataset.sampler.AbstractCurriculumSampler``) and, in every version since, the dataset's
``on_batch_end(batch)`` (after every step but the last, hence the dataset's one step more: ``len()``). verl 0.8
removed the sampler hook (and ``data.sampler``); the dataset's hook remained. Both hooks here lead to one place,
:meth:`MapfCurriculumDataset.observe`, which counts each batch once:

* **Rows.** With ``data.train_files: mapf-lake:curriculum`` (:data:`CURRICULUM_FILES`), each row the loader asks
  for is the next certified training instance of the curriculum's *current* stage (``Curriculum.sample``), in the
  row shape of ``mapf-lake export --layout verl`` (``data_source``, ``prompt`` messages, ``ability``,
  ``reward_model.ground_truth`` = the ``policy.score`` record as JSON, ``extra_info``) plus what verl's
  ``RLHFDataset.__getitem__`` adds (``raw_prompt``, ``dummy_tensor``, ``index``, ``tools_kwargs``,
  ``interaction_kwargs``). The index the sampler gives only positions the row: the rows follow the engineer's
  configs whatever sampler verl uses. Other ``data_files`` (``data.val_files``: an export of a suite) are read as
  they are, in the same shape.
* **Outcomes.** Each batch's responses are decoded (the dataset's tokenizer, padding cut by ``response_mask``) and
  judged against their rows' records (``policy.score.score_batch``: valid or not); their rewards are verl's own
  (``token_level_scores`` summed over each response: the reward function's output, before any KL penalty). The
  responses of one prompt (one ``uid``) form a GRPO group, recorded with ``policy.rewards.StageReward`` per
  agents x map side: the stage's training signal the engineer reads.
* **Stage boundary.** Every ``stage_steps`` batches, the newest Hugging Face checkpoint verl saved
  (``<checkpoint_dir>/global_step_N/actor/huggingface``, written when ``actor_rollout_ref.actor.checkpoint.
  save_contents`` holds ``hf_model``) goes to ``Curriculum.end_stage`` with the stage's training report: the
  evidence set, the engineer's decision, the records, and the next stage's config, from which the next batch is
  drawn. After the last stage the checkpoint is scored on the run's test set (``Curriculum.evaluate``), unless
  ``final_evaluation`` is false. ``trainer.save_freq`` should divide ``stage_steps``, so that the checkpoint is the
  stage's last step (another one is used with a warning). The boundary runs where verl keeps its data loader (the
  driver, verl's ``TaskRunner`` Ray actor): the evidence answers come from the run config's validation backend in
  that process (transformers on its CPU when the actor holds no GPU), while verl's workers wait.
* **Resume.** verl saves the loader's state in each checkpoint (``data.pt``); the dataset's :meth:`state_dict` is
  part of it (the curriculum's stage and draws, the step counts, the stage's tallies). verl saves it *before* the
  step's batch reaches the hook, so a resumed run counts that step without its outcomes and, when it closed a stage,
  closes the stage on resume (a stage the run folder already recorded is read back, not decided again).

Options, under ``data.curriculum`` (:class:`VerlCurriculumOptions`): ``run_config`` (a run config YAML, as
``mapf-lake train`` reads), ``run_folder``, ``start_model``, ``checkpoint_dir``, ``stage_steps``,
``final_evaluation``. ``data.dataloader_num_workers`` must be 0: a loader worker would hold a copy of the curriculum
that never hears of the stage boundaries (verl 0.7 asserts the same for curriculum samplers). A bad value raises
``ConfigError`` naming the option, the value and what is allowed. ``examples/verl_curriculum.yaml`` is a config.

The verl classes are imported when present; without verl the sampler has a plain base with the same methods (a
message says that verl's hook is absent), so the plug-in's behaviour can be tested without verl. Tested on a CPU
against verl 0.7.1 (its ``AbstractCurriculumSampler`` and ``create_rl_sampler``) and 0.9.1 (no sampler hook): verl's
``DataProto``, ``create_rl_dataset``, ``collate_fn``, stateful loader and Hydra config
(``tests/curriculum/test_verl_sampler.py``); no verl training job has run it.
"""

from __future__ import annotations

import copy
import re
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler

from simulator.documents import is_python_int
from simulator.errors import ConfigError

if TYPE_CHECKING:
    from curriculum.loop.curriculum import Curriculum
    from policy.rewards import StageReward

CURRICULUM_FILES = "mapf-lake:curriculum"
"""``data.train_files`` value that makes :class:`MapfCurriculumDataset` serve the curriculum's current stage."""
MAX_COUNT = 10**12  # bound of a count in a saved loader state (steps, rows served, groups)
STATE_FORMAT = "mapf-lake-verl-curriculum"
STATE_VERSION = 1
MAX_STAGE_STEPS = 10**6
_STEP_FOLDER = re.compile(r"global_step_(\d+)")
_WEIGHT_FILES = ("*.safetensors", "pytorch_model*.bin")


@dataclass(frozen=True)
class VerlCurriculumOptions:
    """The ``data.curriculum`` section of a verl config (each checked on construction, ConfigError naming it)."""

    run_config: str
    """A run config YAML (``mapf-lake train --print-config`` writes one): sets, stage 1's config, the engineer,
    validation. Its ``training`` section is not verl's: only ``training.steps`` is read (the default of
    ``stage_steps``) and what validation reads of it (``temperature`` for sampled pass@1, ``enable_thinking``,
    ``use_vllm`` for ``validation.backend: auto``). Required."""
    start_model: str
    """The model stage 1 trains from (``${actor_rollout_ref.model.path}``): validated before stage 1 and the
    engineer's base model. Required."""
    checkpoint_dir: str
    """Where verl saves checkpoints (``${trainer.default_local_dir}``): each stage boundary takes the newest
    ``global_step_N/actor/huggingface`` folder with weights. Required."""
    run_folder: str | None = None
    """The run folder (made, or resumed); null: the run config's ``output_dir/name``."""
    stage_steps: int | None = None
    """verl training steps (batches) per stage, 1..1,000,000; null: the run config's ``training.steps``."""
    final_evaluation: bool = True
    """After the last stage, score its checkpoint on the run's test set (``final/``), as ``mapf-lake train`` does."""

    @classmethod
    def from_data_config(cls, data_config: Any) -> "VerlCurriculumOptions":
        """The options in ``data_config["curriculum"]`` (verl's ``data`` section: a DictConfig or a mapping)."""
        section = _get(data_config, "curriculum")
        if not isinstance(section, Mapping):
            raise ConfigError("data.curriculum", section, "a mapping with run_config, start_model and "
                              "checkpoint_dir (see examples/verl_curriculum.yaml)")
        known = {"run_config", "start_model", "checkpoint_dir", "run_folder", "stage_steps", "final_evaluation"}
        unknown = sorted((key for key in section if key not in known), key=str)
        if unknown:
            raise ConfigError(f"data.curriculum.{unknown[0]}", section[unknown[0]], f"an option among {sorted(known)}")
        stage_steps = section.get("stage_steps")
        if stage_steps is not None and (not is_python_int(stage_steps)
                                        or not 1 <= stage_steps <= MAX_STAGE_STEPS):
            raise ConfigError("data.curriculum.stage_steps", stage_steps,
                              f"an integer in 1..{MAX_STAGE_STEPS} (verl steps per stage), or null")
        final = section.get("final_evaluation", True)
        if not isinstance(final, bool):
            raise ConfigError("data.curriculum.final_evaluation", final, "true or false")
        run_folder = section.get("run_folder")
        return cls(run_config=_path_option(section, "run_config"), start_model=_path_option(section, "start_model"),
                   checkpoint_dir=_path_option(section, "checkpoint_dir"),
                   run_folder=None if run_folder is None else _path_option(section, "run_folder"),
                   stage_steps=stage_steps, final_evaluation=final)


def _get(config: Any, key: str, default: Any = None) -> Any:
    return config.get(key, default) if isinstance(config, Mapping) or hasattr(config, "get") else default


def _path_option(section: Mapping, key: str) -> str:
    value = section.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"data.curriculum.{key}", value, "a path (a non-empty string)")
    return value


def _file_list(data_files: Any) -> list[str]:
    if isinstance(data_files, (str, Path)):
        return [str(data_files)]
    if isinstance(data_files, Sequence) or hasattr(data_files, "__iter__"):
        files = list(data_files)
        if files and all(isinstance(name, (str, Path)) for name in files):
            return [str(name) for name in files]
    raise ConfigError("data_files", data_files, f"{CURRICULUM_FILES!r} or files of verl rows (.parquet, .jsonl)")


def newest_hf_checkpoint(checkpoint_dir: str | Path) -> tuple[str, int] | None:
    """The newest Hugging Face model folder verl saved under ``checkpoint_dir`` and its step:
    ``global_step_N/actor/huggingface`` with the highest ``N`` holding ``config.json`` and weights (verl writes the
    folder's config and tokenizer at every save, the weights only with ``hf_model`` in the checkpoint's
    ``save_contents``). None when there is none."""
    root = Path(checkpoint_dir)
    found: list[tuple[int, Path]] = []
    if root.is_dir():
        for child in root.iterdir():
            match = _STEP_FOLDER.fullmatch(child.name)
            folder = child / "actor" / "huggingface"
            if match and (folder / "config.json").is_file() and any(
                    any(folder.glob(pattern)) for pattern in _WEIGHT_FILES):
                found.append((int(match.group(1)), folder))
    if not found:
        return None
    step, folder = max(found)
    return str(folder), step


def _read_rows(files: list[str], max_samples: int) -> list[dict]:
    """Rows of verl dataset files (``mapf-lake export --layout verl``): Parquet, JSON lines or a JSON list, each
    row checked (:func:`_checked_file_row`) before verl sees any."""
    from simulator.files import MAX_INSTANCES_BYTES, load_json, read_bytes_bounded, read_text_bounded

    rows: list[tuple[str, Any]] = []
    for name in files:
        path = Path(name)
        if not path.is_file():
            raise ConfigError("data_files", name, f"an existing .parquet/.jsonl/.json file of verl rows, or "
                              f"{CURRICULUM_FILES!r} (data.train_files)")
        if path.suffix == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            data = read_bytes_bounded(path, MAX_INSTANCES_BYTES, "a .parquet file of verl rows", "data_files")
            try:
                table = pq.read_table(pa.BufferReader(data))
            except (pa.ArrowException, OSError, ValueError) as error:
                raise ConfigError("data_files", name, "a Parquet file of verl rows",
                                  " ".join(str(error).split())[:200]) from None
            rows.extend((f"{name}: row {number}", row) for number, row in enumerate(table.to_pylist(), start=1))
        elif path.suffix in (".jsonl", ".json"):
            what = "a .json/.jsonl file of verl rows"
            text = read_text_bounded(path, MAX_INSTANCES_BYTES, what, "data_files")
            if path.suffix == ".json":
                document = load_json(text, name, what)
                if not isinstance(document, list):
                    raise ConfigError("data_files", name, "a JSON list of verl rows", type(document).__name__)
                rows.extend((f"{name}: row {number}", row) for number, row in enumerate(document, start=1))
            else:
                rows.extend((f"{name}: line {number}", load_json(line, name, what, line=number))
                            for number, line in enumerate(text.splitlines(), start=1) if line.strip())
        else:
            raise ConfigError("data_files", name, "a .parquet, .jsonl or .json file of verl rows")
    if not rows:
        raise ConfigError("data_files", files, "files holding at least one verl row (these are empty)")
    kept = rows[:max_samples] if max_samples > 0 else rows
    return [_checked_file_row(row, where) for where, row in kept]


def _checked_file_row(row: Any, where: str) -> dict:
    """A row of a verl dataset file as verl and the project's reward read it: a mapping with ``prompt`` (chat
    messages of text) and ``reward_model.ground_truth`` (a scoring record, ``policy.score``), whose instance the
    solver certifies with the record's labels (a relabelled ``optimal_makespan`` would score wrong answers right)."""
    from policy.score import check_record
    from simulator.generator import certify_labels
    from simulator.types import Instance

    if not isinstance(row, Mapping):
        raise ConfigError(where, type(row).__name__, "a verl row: a mapping (mapf-lake export --layout verl)")
    messages = row.get("prompt")
    if not isinstance(messages, list) or not messages or not all(
            isinstance(message, Mapping) and isinstance(message.get("role"), str)
            and isinstance(message.get("content"), str) for message in messages):
        raise ConfigError(f"{where}: prompt", "missing" if messages is None else type(messages).__name__,
                          "a non-empty list of chat messages {role, content} of text")
    reward = row.get("reward_model")
    truth = reward.get("ground_truth") if isinstance(reward, Mapping) else None
    if not isinstance(truth, str):
        raise ConfigError(f"{where}: reward_model.ground_truth", "missing" if truth is None else type(truth).__name__,
                          "the row's scoring record as JSON text (mapf-lake export --layout verl)")
    record = check_record(truth, f"{where}: reward_model.ground_truth")
    labels = record["labels"]
    try:
        instance = Instance.from_dict(record["instance"])
    except (TypeError, ValueError, KeyError) as error:  # ConfigError is a ValueError
        raise ConfigError(f"{where}: reward_model.ground_truth.instance", "unreadable", "an instance {grid, "
                          "starts, goals}", " ".join(str(error).split())[:200]) from None
    certify_labels(instance, labels["size"], labels, f"{where}: reward_model.ground_truth.labels")
    if labels["agents"] != instance.n_agents:
        raise ConfigError(f"{where}: reward_model.ground_truth.labels.agents", labels["agents"],
                          f"the instance's agent count, {instance.n_agents}")
    return dict(row)


def _verl_item(row: dict, index: int) -> dict:
    """``row`` as verl's ``RLHFDataset.__getitem__`` returns one (verl 0.7 to 0.9: the agent loop applies the chat
    template to ``raw_prompt``)."""
    item = dict(row)
    item["raw_prompt"] = [dict(message) for message in row["prompt"]]
    item["dummy_tensor"] = torch.tensor([0], dtype=torch.uint8)  # verl needs a non-empty tensor batch
    extra = dict(row.get("extra_info") or {})
    item["extra_info"] = extra
    item["index"] = extra.get("index", index)
    item["tools_kwargs"] = extra.get("tools_kwargs", {})
    item["interaction_kwargs"] = extra.get("interaction_kwargs", {})
    return item


class MapfCurriculumDataset(Dataset):
    """verl's ``data.custom_cls``: rows of the curriculum's current stage (module docstring), or of files.

    Constructed as verl constructs datasets, ``(data_files, tokenizer, config, processor, max_samples)``.
    With ``data_files == "mapf-lake:curriculum"`` it opens the run (``Curriculum.open`` and ``begin``, which
    validates ``start_model`` unless the folder has it already) and ``len()`` is the prompts of
    ``stages x stage_steps + 1`` verl steps of the batch size (``data.gen_batch_size`` or ``train_batch_size``), so
    that with ``total_epochs: 1`` verl runs the whole curriculum. The one step more is there because verl >= 0.8
    calls :meth:`on_batch_end` after every step *but its last*: the last stage closes (and the test set is scored)
    after the step before, on that step's checkpoint, and the extra step trains on the last stage's config outside
    the run's records. Any other ``data_files`` are read as verl rows.

    Hooks: :meth:`on_batch_end` (verl calls it after each step) and :meth:`observe`; :meth:`state_dict` /
    :meth:`load_state_dict` (verl's stateful loader saves them in each checkpoint)."""

    # the current stage's tallies (reset at each boundary)
    _steps: int  # verl steps counted in the stage
    _steps_without_outcomes: int  # of them, steps saved before their batch was seen (resume)
    _reward: "StageReward | None"  # the GRPO groups per agents x side, made at the stage's first groups
    _generations: int | None  # responses per prompt, from the stage's first batch
    _reward_sum: float  # verl's rewards, summed over every response
    _reward_count: int
    _groups_skipped: int  # groups of another size than the first (filtered by the trainer)

    def __init__(self, data_files: Any, tokenizer: Any = None, config: Any = None, processor: Any = None,
                 max_samples: int = -1, log: Callable[[str], None] | None = None) -> None:
        files = _file_list(data_files)
        self.tokenizer = tokenizer
        self.curriculum: Curriculum | None = None
        self._rows: list[dict] = []
        if files != [CURRICULUM_FILES]:
            if CURRICULUM_FILES in files:
                raise ConfigError("data_files", files, f"{CURRICULUM_FILES!r} alone, or files of verl rows")
            self._rows = _read_rows(files, max_samples)
            return
        from curriculum.config import load_run_config
        from curriculum.loop.curriculum import Curriculum, log_to_stderr

        workers = _get(config, "dataloader_num_workers", 8)
        if workers != 0:
            raise ConfigError("data.dataloader_num_workers", workers, "0 with the curriculum (a loader worker "
                              "would keep serving a copy of the curriculum that never changes stage)")
        batch = _get(config, "gen_batch_size") or _get(config, "train_batch_size")
        if not is_python_int(batch) or batch < 1:
            raise ConfigError("data.train_batch_size", batch, "an integer >= 1 (prompts per verl step)")
        self.options = VerlCurriculumOptions.from_data_config(config)
        run_config = load_run_config(self.options.run_config)
        if self.options.run_folder is not None:
            folder = Path(self.options.run_folder)
            if folder.name in ("", ".", "..") or folder.resolve() in (Path.cwd(), *Path.cwd().parents):
                raise ConfigError("data.curriculum.run_folder", self.options.run_folder, "a folder with a name of "
                                  "its own, not the working folder or one above it (the run writes its records there)")
            run_config = run_config.with_overrides(output_dir=str(folder.resolve().parent),
                                                   name=folder.resolve().name)
        self.log = log or log_to_stderr
        self.stage_steps = self.options.stage_steps or run_config.training.steps
        self.batch_size = batch
        self.curriculum = Curriculum(run_config, self.log).open()
        self.curriculum.begin(self.options.start_model)
        if self.curriculum.stage > 1:
            self.log(f"verl curriculum: {self.curriculum.stage - 1} stage(s) of {run_config.run_dir} are finished; "
                     f"rows come from stage {self.curriculum.stage} (resume verl from its checkpoint so the model "
                     "matches)")
        self._buffer: list[dict] = []
        self._served = 0
        self._unobserved = False
        self._global_step = 0
        self._last_batch: Callable[[], Any] | None = None
        self._after_run: list[dict] = []  # rows served once every stage is finished (verl's extra step)
        self._reset_stage()

    # --- rows -------------------------------------------------------------------------------------------------
    def __len__(self) -> int:
        if self.curriculum is None:
            return len(self._rows)
        return (self.curriculum.config.stages * self.stage_steps + 1) * self.batch_size

    def __getitem__(self, index: int) -> dict:
        if self.curriculum is None:
            return _verl_item(self._rows[index], index)
        if not self._buffer:
            if self.curriculum.finished and not self._after_run:
                raise ConfigError("verl curriculum", str(self.curriculum.dir), "a run with a stage left to train: "
                                  "every stage of this folder is finished and no loader state was restored (resume "
                                  "verl from its checkpoint, trainer.resume_mode: auto, or name a new run_folder)")
            self._buffer = copy.deepcopy(self._after_run) if self.curriculum.finished else \
                [self._row(item) for item in self.curriculum.sample(self.batch_size)]
        row = self._buffer.pop(0)
        position, self._served, self._unobserved = self._served, self._served + 1, True
        row["extra_info"]["index"] = position
        return _verl_item(row, position)

    def _row(self, item: Any) -> dict:
        from policy.export import layout_row
        from policy.score import make_record

        cur = self._require_curriculum()
        source = f"curriculum:{cur.config.name}/stage-{cur.stage:02d}"
        return layout_row(make_record(item, cur.style, source), "verl", 0, "train")

    def _require_curriculum(self) -> "Curriculum":
        if self.curriculum is None:
            raise ConfigError("data_files", "files", f"{CURRICULUM_FILES!r} (data.train_files): these rows come "
                              "from files, not from a curriculum")
        return self.curriculum

    # --- outcomes and stage boundaries ------------------------------------------------------------------------
    def on_batch_end(self, batch: Any) -> None:
        """verl's dataset hook after each training step: :meth:`observe`."""
        self.observe(batch)

    def observe(self, batch: Any) -> None:
        """Count one training step: its groups into the stage's training signal; at ``stage_steps`` steps, the
        stage boundary (module docstring). A batch already observed (verl 0.7 calls both hooks) is skipped."""
        cur = self._require_curriculum()
        if self._last_batch is not None and self._last_batch() is batch:
            return
        # a step that closes the stage needs verl's checkpoint: without one, fail before anything is counted
        checkpoint = self._stage_checkpoint() if not cur.finished and self._steps + 1 >= self.stage_steps else None
        if not cur.finished:
            self._record(batch)
        try:
            self._last_batch = weakref.ref(batch)
        except TypeError:  # an object without weak references: hold it until the next step
            self._last_batch = (lambda held: lambda: held)(batch)
        self._count_step(checkpoint)

    def _count_step(self, checkpoint: tuple[str, int] | None = None) -> None:
        cur = self._require_curriculum()
        self._unobserved = False
        self._global_step += 1
        if cur.finished:
            return
        self._steps += 1
        if self._steps >= self.stage_steps:
            self._end_stage(checkpoint or self._stage_checkpoint())

    def _record(self, batch: Any) -> None:
        from policy.rewards import group_key
        from policy.score import check_record, score_batch
        from simulator.types import Instance

        tensors, columns = batch.batch, batch.non_tensor_batch
        for key in ("responses", "token_level_scores"):
            if key not in tensors.keys():
                raise ConfigError(f"batch.batch[{key!r}]", None, "present: a verl training batch after rewards")
        if "reward_model" not in columns:
            raise ConfigError("batch.non_tensor_batch['reward_model']", None, "present: rows of this dataset")
        records = [check_record(model["ground_truth"], f"batch row {i}: reward_model.ground_truth")
                   for i, model in enumerate(columns["reward_model"])]
        rewards = tensors["token_level_scores"].float().sum(-1).cpu().numpy().astype(np.float64)
        valid = np.array([verdict["valid"] for verdict in score_batch(records, self._texts(tensors))], np.float64)
        self._reward_sum += float(rewards.sum())
        self._reward_count += len(rewards)
        # GRPO's groups: the responses of one prompt share a uid (verl may reorder the batch to balance lengths)
        uids = list(columns["uid"]) if "uid" in columns else [record["id"] for record in records]
        groups: dict[Any, list[int]] = {}
        for row, uid in enumerate(uids):
            groups.setdefault(uid, []).append(row)
        if self._generations is None:
            self._generations = max(len(rows) for rows in groups.values())
        keep = [rows for rows in groups.values() if len(rows) == self._generations]
        self._groups_skipped += len(groups) - len(keep)
        if keep and self._generations >= 2:
            order = np.array([row for rows in keep for row in rows])
            keys = [group_key(Instance.from_dict(records[rows[0]]["instance"])) for rows in keep]
            self._signal(self._generations).record_groups(keys, rewards[order], valid[order])

    def _texts(self, tensors: Any) -> list[str]:
        """Each response's text as verl's reward manager decodes it: the response's tokens, padding cut."""
        if self.tokenizer is None:
            raise ConfigError("tokenizer", None, "the policy's tokenizer (verl passes it to data.custom_cls)")
        responses = tensors["responses"]
        mask = tensors["response_mask"] if "response_mask" in tensors.keys() else \
            tensors["attention_mask"][:, -responses.shape[-1]:]
        return [self.tokenizer.decode(ids[keep.bool()].tolist(), skip_special_tokens=True)
                for ids, keep in zip(responses, mask)]

    def _signal(self, generations: int) -> "StageReward":
        from policy.rewards import StageReward

        if self._reward is None:
            self._reward = StageReward({"valid": 1.0}, generations)
        return self._reward

    def _stage_checkpoint(self) -> tuple[str, int]:
        """The newest HF checkpoint verl saved (:func:`newest_hf_checkpoint`), or ConfigError naming the option."""
        found = newest_hf_checkpoint(self.options.checkpoint_dir)
        if found is None:
            raise ConfigError("data.curriculum.checkpoint_dir", self.options.checkpoint_dir,
                              "a folder where verl saved a Hugging Face checkpoint (global_step_N/actor/huggingface "
                              "with weights): set trainer.save_freq to divide data.curriculum.stage_steps "
                              f"({self.stage_steps}) and add hf_model to actor_rollout_ref.actor.checkpoint."
                              "save_contents")
        return found

    def _end_stage(self, checkpoint: tuple[str, int]) -> None:
        from curriculum.loop.records import TrainingReport

        cur = self._require_curriculum()
        model, step = checkpoint
        if cur.stage == cur.config.stages:  # the steps verl takes after the run repeat a batch of the last stage
            self._after_run = [self._row(item) for item in cur.sample(self.batch_size)]
        if step != self._global_step:
            self.log(f"verl curriculum: stage {cur.stage} ends at step {self._global_step} but the newest checkpoint "
                     f"is step {step} ({model}); set trainer.save_freq to divide stage_steps ({self.stage_steps})")
        state = self._reward.state() if self._reward is not None else {}
        groups = sum(tally["groups"] for tally in state.values())
        signal = self._reward.signal() if self._reward is not None and groups else None
        report = TrainingReport(
            steps=self._steps, reward_mean=self._reward_sum / self._reward_count if self._reward_count else None,
            zero_variance_share=sum(tally["zero_variance"] for tally in state.values()) / groups if groups else None,
            signal=signal,
            figures={"trainer": "verl", "global_step": self._global_step, "checkpoint_step": step,
                     "generations": self._generations, "groups_skipped": self._groups_skipped,
                     "steps_without_outcomes": self._steps_without_outcomes})
        cur.end_stage(model, report)
        self._reset_stage()
        self._buffer = []  # rows drawn from the closed stage are not served
        if cur.finished and self.options.final_evaluation:
            cur.evaluate(model)

    def _reset_stage(self) -> None:
        self._steps = 0
        self._steps_without_outcomes = 0
        self._reward = None
        self._generations = None
        self._reward_sum = 0.0
        self._reward_count = 0
        self._groups_skipped = 0

    # --- state ------------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """What verl's checkpoint keeps: the curriculum's state (draws not yet served are given back), the step
        counts and the stage's tallies. Plain JSON values."""
        cur = self._require_curriculum()
        curriculum = cur.state_dict()
        curriculum["drawn"] = max(curriculum["drawn"] - len(self._buffer), 0)
        return {"format": STATE_FORMAT, "version": STATE_VERSION, "curriculum": curriculum,
                "global_step": self._global_step, "steps": self._steps, "served": self._served,
                "unobserved": self._unobserved, "steps_without_outcomes": self._steps_without_outcomes,
                "reward": self._reward.state() if self._reward is not None else None,
                "generations": self._generations, "reward_sum": self._reward_sum, "reward_count": self._reward_count,
                "groups_skipped": self._groups_skipped, "after_run": self._after_run}

    def load_state_dict(self, state: Any) -> None:
        """Continue from :meth:`state_dict`'s document (verl's ``data.pt``). A step whose batch was drawn but not
        yet observed when it was saved is counted now, without outcomes, and closes its stage if it was the last."""
        cur = self._require_curriculum()
        if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT or \
                state.get("version") != STATE_VERSION:
            raise ConfigError("verl curriculum state", state, f"a {STATE_FORMAT!r} v{STATE_VERSION} document "
                              "(MapfCurriculumDataset.state_dict)")
        checked = self._checked_state(state)  # every key, before anything changes
        try:
            cur.load_state_dict(dict(checked["curriculum"]))
        except ConfigError as error:
            raise ConfigError(f"verl curriculum state: {error.field}", error.value, error.allowed) from None
        self._reset_stage()
        self._buffer = []
        self._global_step, self._steps, self._served = checked["global_step"], checked["steps"], checked["served"]
        self._steps_without_outcomes = checked["steps_without_outcomes"]
        self._generations, self._groups_skipped = checked["generations"], checked["groups_skipped"]
        self._reward_sum, self._reward_count = checked["reward_sum"], checked["reward_count"]
        self._after_run = checked["after_run"]
        if checked["reward"] is not None and self._generations is not None:
            self._signal(self._generations).load_state(checked["reward"])
        self._unobserved, self._last_batch = False, None
        if checked["unobserved"]:
            self._steps_without_outcomes += 1
            self._count_step()

    def _checked_state(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """``state``'s values checked against what :meth:`state_dict` writes: every key present, counts integers in
        their range, the reward sum finite, flags true booleans, the reward tallies whole, and the rows served after
        the run (``after_run``) rebuilt from their certified instances (an edited prompt or label is refused).
        ConfigError naming ``verl curriculum state.KEY``, the value and what is allowed."""
        from policy.rewards import StageReward
        from simulator.documents import checked_int, checked_real

        where = "verl curriculum state"
        keys = ("curriculum", "global_step", "steps", "served", "unobserved", "steps_without_outcomes", "reward",
                "generations", "reward_sum", "reward_count", "groups_skipped", "after_run")
        missing = [key for key in keys if key not in state]
        if missing:
            raise ConfigError(f"{where}.{missing[0]}", "missing", "every key MapfCurriculumDataset.state_dict writes")
        if not isinstance(state["curriculum"], Mapping):
            raise ConfigError(f"{where}.curriculum", state["curriculum"], "a mapping (Curriculum.state_dict)")
        checked: dict[str, Any] = {"curriculum": state["curriculum"]}
        for key, high in (("global_step", MAX_COUNT), ("steps", self.stage_steps), ("served", MAX_COUNT),
                          ("steps_without_outcomes", MAX_COUNT), ("groups_skipped", MAX_COUNT),
                          ("reward_count", MAX_COUNT)):
            checked[key] = checked_int(state[key], f"{where}.{key}", 0, high)
        if not isinstance(state["unobserved"], bool):
            raise ConfigError(f"{where}.unobserved", state["unobserved"], "true or false")
        checked["unobserved"] = state["unobserved"]
        generations = state["generations"]
        checked["generations"] = None if generations is None else checked_int(generations, f"{where}.generations",
                                                                              2, 1024)
        checked["reward_sum"] = checked_real(state["reward_sum"], f"{where}.reward_sum", -1e12, 1e12)
        reward = state["reward"]
        if reward is not None:
            try:  # checked on a throwaway tally: the run's own changes only once every key passed
                StageReward({"valid": 1.0}, generations or 2).load_state(reward)
            except ConfigError as error:
                raise ConfigError(f"{where}.{error.field}", error.value, error.allowed) from None
        checked["reward"] = reward
        checked["after_run"] = self._certified_rows(state["after_run"], f"{where}.after_run")
        return checked

    def _certified_rows(self, rows: Any, where: str) -> list[dict]:
        """Rows served after the run, as a checkpoint handed them back: each rebuilt from its instance, certified
        by the solver, apart from the run's test and evidence sets; a row that differs from its rebuilt self (an
        edited prompt, label or id) is refused."""
        import json

        from simulator.files import load_json
        from simulator.generator import label_instance
        from simulator.types import Instance

        if not isinstance(rows, list) or len(rows) > self.batch_size:
            raise ConfigError(where, type(rows).__name__ if not isinstance(rows, list) else f"{len(rows)} rows",
                              f"a list of at most {self.batch_size} rows (the batch size)")
        cur = self._require_curriculum()
        protected = cur.sets.test | cur.sets.evidence_keys
        out = []
        for number, row in enumerate(rows):
            at = f"{where}[{number}]"
            try:
                truth = row["reward_model"]["ground_truth"]
                if not isinstance(truth, str):
                    raise TypeError(f"ground_truth is a {type(truth).__name__}")
                record = load_json(truth, at, "a record", object_only=True)
                instance = Instance.from_dict(record["instance"])
                index = int(str(record["id"]).rsplit("/", 1)[-1])
                source, size = str(record["source"]), int(record["labels"]["size"])
            except (KeyError, TypeError, ValueError) as error:  # ConfigError is a ValueError
                raise ConfigError(at, "a row without a readable instance", "a row MapfCurriculumDataset served",
                                  " ".join(str(error).split())[:200]) from None
            if not 0 <= index <= MAX_COUNT:
                raise ConfigError(at, index, f"a row index in 0..{MAX_COUNT:,}")
            if instance.content_key() in protected:
                raise ConfigError(at, "a test or evidence instance", "a training instance of this run")
            labelled, status, reason = label_instance(instance, size=size, index=index)
            if labelled is None:
                raise ConfigError(at, f"an instance the solver finds {status}", "a certified instance", reason)
            from policy.export import layout_row
            from policy.score import make_record

            rebuilt = layout_row(make_record(labelled, cur.style, source), "verl", 0, "train")
            if json.dumps(rebuilt, sort_keys=True) != json.dumps(row, sort_keys=True):
                raise ConfigError(at, "a row that differs from its certified rebuild (prompt, labels or id edited)",
                                  "the row as MapfCurriculumDataset served it")
            out.append(rebuilt)
        return out


class _PlainCurriculumSampler(Sampler[int]):
    """The base when verl's ``AbstractCurriculumSampler`` cannot be imported (no verl, or verl >= 0.8): the same
    constructor (:class:`MapfCurriculumSampler` adds ``update``)."""

    def __init__(self, data_source: Any, data_config: Any) -> None:
        pass


if TYPE_CHECKING:
    _SamplerBase = _PlainCurriculumSampler
else:
    try:
        from verl.experimental.dataset.sampler import AbstractCurriculumSampler as _SamplerBase
    except ImportError:  # verl absent, or 0.8+ (no data.sampler hook: the dataset's on_batch_end drives the stages)
        _SamplerBase = _PlainCurriculumSampler
VERL_SAMPLER_HOOK = _SamplerBase is not _PlainCurriculumSampler
"""Whether verl's ``AbstractCurriculumSampler`` was imported (verl 0.7; 0.8 removed it)."""


class MapfCurriculumSampler(_SamplerBase):
    """verl's curriculum sampler (``data.sampler.class_path: curriculum/plugins/verl_sampler.py``, ``class_name:
    MapfCurriculumSampler``), constructed as verl does, ``(data_source, data_config)``, over a
    :class:`MapfCurriculumDataset` serving the curriculum.

    It yields the positions ``0 .. len(data_source) - 1`` in order (the dataset serves the current stage's next
    row whatever the position); ``update(batch)``, which verl 0.7 calls after each step, is
    :meth:`MapfCurriculumDataset.observe`."""

    def __init__(self, data_source: Any, data_config: Any) -> None:
        # checked by what it does, not by class: verl loads a file path (not a pkg:// one) as a new module each time,
        # so the dataset's class and this module's may be two copies of one class
        if getattr(data_source, "curriculum", None) is None or not callable(getattr(data_source, "observe", None)):
            raise ConfigError("data.custom_cls", type(data_source).__name__,
                              f"MapfCurriculumDataset (curriculum/plugins/verl_sampler.py) with data.train_files: "
                              f"{CURRICULUM_FILES}")
        super().__init__(data_source, data_config)
        self.dataset = data_source
        if not VERL_SAMPLER_HOOK:
            data_source.log("verl curriculum: verl's AbstractCurriculumSampler is not importable (verl absent, or "
                            "verl >= 0.8, which has no data.sampler hook); this sampler works on its own, and on "
                            "verl >= 0.8 the dataset's on_batch_end drives the stages without it")

    def __iter__(self):
        return iter(range(len(self.dataset)))

    def __len__(self) -> int:
        return len(self.dataset)

    def update(self, batch: Any) -> None:
        """Count the step's outcomes; at a stage boundary, close the stage (:meth:`MapfCurriculumDataset.observe`)."""
        self.dataset.observe(batch)


__all__ = ["CURRICULUM_FILES", "MapfCurriculumDataset", "MapfCurriculumSampler", "VERL_SAMPLER_HOOK",
           "VerlCurriculumOptions", "newest_hf_checkpoint"]
