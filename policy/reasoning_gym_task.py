"""MAPF-FrozenLake as a reasoning-gym procedural dataset, ``mapf_frozenlake`` (extra: ``adapters``).

Importing this module registers the dataset, so reasoning-gym's own factory and curriculum tools drive it::

    import reasoning_gym
    import policy.reasoning_gym_task  # noqa: F401  (registers "mapf_frozenlake")

    data = reasoning_gym.create_dataset("mapf_frozenlake", size=100, seed=1, min_size=3, max_size=6)
    entry = data[0]                                  # {"question", "answer", "metadata"}
    data.score_answer(model_answer, entry)           # 1.0 optimal, 0.6875 valid, 0.0625 parsed only, 0 else

Config knobs map onto a stage config (``simulator.config.StageConfig``): entry ``i`` is one certified instance
of side ``min_size..max_size`` with ``min_agents..max_agents`` agents, both drawn from ``(seed, i)``, with the
``hole_ratio`` and ``wait_ratio`` (the chance that it needs a wait) of its size; the same seed and index give
the same instance. The question is the ``natural`` prompt (rules, map, agents, answer format) as one text;
``metadata["record"]`` is the scoring record (``policy.score``), so ``score_answer`` judges with the GRPO
reward's own parse and judge (its default reward divided by its maximum, 1.6). The curriculum
(``MapfFrozenLakeCurriculum``) has levels for the largest side, the agent range and the hole ratio.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

try:
    from reasoning_gym.coaching import BaseCurriculum, RangeAttributeDefinition, ScalarAttributeDefinition
    from reasoning_gym.factory import ProceduralDataset, register_dataset
except ImportError as error:  # the adapter is an optional extra; say how to get it
    raise ImportError("the reasoning-gym adapter needs reasoning-gym: pip install 'mapf-frozenlake[adapters]' "
                      f"({error})") from None

from policy.prompts import get_style
from policy.score import check_record, make_record, score
from simulator.config import MAX_SEED, MAX_SIZE, MAX_STAGE_AGENTS, MIN_SIZE, StageConfig
from simulator.documents import is_python_int
from simulator.errors import ConfigError
from simulator.generator import generate

DATASET_NAME = "mapf_frozenlake"
MAX_REWARD = 1.6  # the default reward of an optimal answer (policy.rewards)


MAX_DATASET_SIZE = 10**9  # entries one dataset may index (len() must fit an index)


def _check_int(value: Any, name: str, low: int, high: int) -> None:
    if not is_python_int(value) or not low <= value <= high:
        raise ConfigError(name, value, f"an integer {low} <= {name} <= {high}")


@dataclass
class MapfFrozenLakeConfig:
    """reasoning-gym config of ``mapf_frozenlake`` (see the module docstring)."""

    min_size: int = 3
    max_size: int = 6
    min_agents: int = 2
    max_agents: int = 2
    hole_ratio: float = 0.2
    wait_ratio: float = 0.3
    seed: Optional[int] = None
    size: int = 500

    def validate(self) -> None:
        """Refuse what the stage config would refuse, naming the knob, the value and the allowed range."""
        # Types first: 6.5, "3" or None reached random.randint or a comparison and raised ValueError/TypeError.
        for name, low, high in (("min_size", MIN_SIZE, MAX_SIZE), ("max_size", MIN_SIZE, MAX_SIZE),
                                ("min_agents", 1, MAX_STAGE_AGENTS), ("max_agents", 1, MAX_STAGE_AGENTS),
                                ("size", 1, MAX_DATASET_SIZE)):
            _check_int(getattr(self, name), name, low, high)
        if self.seed is not None:
            _check_int(self.seed, "seed", 0, MAX_SEED)
        if not MIN_SIZE <= self.min_size <= self.max_size <= MAX_SIZE:
            raise ConfigError("min_size/max_size", [self.min_size, self.max_size],
                              f"{MIN_SIZE} <= min_size <= max_size <= {MAX_SIZE}")
        if not 1 <= self.min_agents <= self.max_agents <= MAX_STAGE_AGENTS:
            raise ConfigError("min_agents/max_agents", [self.min_agents, self.max_agents],
                              f"1 <= min_agents <= max_agents <= {MAX_STAGE_AGENTS}")
        if self.max_agents > self.min_size ** 2:
            raise ConfigError("max_agents", self.max_agents, f"at most {self.min_size ** 2} (min_size squared)")
        self.stage_config(self.min_size, self.max_agents, 0)  # the ratios, checked by the stage config itself

    def stage_config(self, side: int, agents: int, seed: int) -> StageConfig:
        """One instance of ``side`` with ``agents`` agents (a lone agent never waits: wait ratio 0)."""
        wait = self.wait_ratio if agents >= 2 else 0.0
        return StageConfig.from_dict({"agents": agents, "samples": 1, "seed": seed, "sizes": {
            side: {"data_ratio": 1.0, "hole_ratio": self.hole_ratio, "wait_ratio": wait}}})


class MapfFrozenLakeDataset(ProceduralDataset):
    """Certified multi-agent path-finding instances on a frozen lake, scored by the plan judge."""

    def __init__(self, config: MapfFrozenLakeConfig):
        super().__init__(config=config, seed=config.seed, size=config.size)
        self._style = get_style("natural")

    def __getitem__(self, idx: int) -> dict[str, Any]:
        rng = random.Random(f"{self.seed}:{idx}")
        side = rng.randint(self.config.min_size, self.config.max_size)
        agents = rng.randint(self.config.min_agents, min(self.config.max_agents, side * side))
        item = generate(self.config.stage_config(side, agents, rng.randrange(2**31))).instances[0]
        record = make_record(item, self._style, f"reasoning-gym:{DATASET_NAME}")
        question = "\n\n".join(message["content"] for message in record["prompt"])
        return {"question": question, "answer": record["reference"],
                "metadata": {"source_dataset": DATASET_NAME, "source_index": idx, "record": record,
                             "difficulty": {"size": side, "agents": agents, "hole_ratio": self.config.hole_ratio,
                                            "wait_ratio": self.config.wait_ratio}}}

    def score_answer(self, answer: Optional[str], entry: dict[str, Any]) -> float:
        """The default reward of ``answer`` over its maximum, 0..1; 0 for no answer.

        Raises:
            ConfigError: ``entry`` is not one of this dataset's entries (no ``metadata.record``, or a bad record).
        """
        metadata = entry.get("metadata") if isinstance(entry, Mapping) else None
        if not isinstance(metadata, Mapping) or "record" not in metadata:
            raise ConfigError("entry.metadata.record", entry, "an entry of this dataset: a mapping whose "
                              "metadata holds the scoring record")
        record = check_record(metadata["record"], "entry.metadata.record")
        if not isinstance(answer, str) or not answer:
            return 0.0
        reward: float = score(record, answer)["reward"]
        return reward / MAX_REWARD


class MapfFrozenLakeCurriculum(BaseCurriculum):
    """Levels for reasoning-gym's curriculum tools: the largest side, the agent range and the hole ratio."""

    def __init__(self) -> None:
        super().__init__(MapfFrozenLakeCurriculum.__name__, MapfFrozenLakeConfig)
        self._define_attributes(
            ScalarAttributeDefinition(name="max_size", field_name="max_size", levels=[3, 4, 5, 6, 8, 10],
                                      description="Largest map side"),
            RangeAttributeDefinition(name="agents", levels=[1, 2, 3, 4, 5], description="Agents per instance",
                                     lower_field_name="min_agents", upper_field_name="max_agents"),
            ScalarAttributeDefinition(name="hole_ratio", field_name="hole_ratio", levels=[0.1, 0.2, 0.3, 0.4],
                                      description="Share of cells that are holes"),
        )


register_dataset(DATASET_NAME, MapfFrozenLakeDataset, MapfFrozenLakeConfig, MapfFrozenLakeCurriculum)

__all__ = ["DATASET_NAME", "MapfFrozenLakeConfig", "MapfFrozenLakeCurriculum", "MapfFrozenLakeDataset"]
