"""A run's three instance sets, and why they never share an instance.

A curriculum claim is only as good as the set that scores it. A run reads three sets, disjoint by content
(grid + starts + goals):

* **training**: the warm start's instances and every stage's, generated from the run's stage configs with seeds in
  the training domain, ``[2**62, 2**63)``: :func:`training_seed` (run seed, stage), which no other set's seed can
  equal (the warm start is stage 0);
* **evidence**: what the engineer reads between stages (the run config's ``validation`` set, its seed as written,
  below :data:`EVIDENCE_SEED_LIMIT`);
* **test**: the run's ``evaluation_suite``, read by nothing but the final score: no engineer, no plan, no
  threshold, no checkpoint choice. Suite cells take hash-derived seeds (the test suites' in ``[2**61, 2**62)``).

Seeds keep the sets apart by construction; content keeps them apart by proof: the generator rejects any candidate
whose content key is protected (``simulator.generator.generate(exclude=...)``). The evidence set is generated with
the test set protected, each training set with both protected, so even a colliding seed or a small map with few
possible boards (a 3x3 with two agents has a few thousand) cannot put a scored instance into training.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from curriculum.config import RunConfig
from simulator.config import StageConfig
from simulator.errors import ConfigError
from simulator.generator import GeneratedStage, LabelledInstance, certify_labelled, generate
from simulator.suites import generate_suite

TRAINING_SEED_DOMAIN = 2**62
"""Training seeds are ``TRAINING_SEED_DOMAIN + run_seed * STAGE_SLOTS + stage``."""
STAGE_SLOTS = 4096
"""Stages a run seed's training domain holds (``stages`` is at most 1000, the warm start is stage 0)."""
EVIDENCE_SEED_LIMIT = 2**61
"""The evidence set's seed (``validation.config.seed``) lies below this: apart from test and training seeds."""


def training_seed(run_seed: int, stage: int) -> int:
    """Seed of the training instances of ``stage`` (0: the warm start) of a run with seed ``run_seed``."""
    if not 0 <= stage < STAGE_SLOTS:
        raise ConfigError("stage", stage, f"0 <= stage < {STAGE_SLOTS}")
    if not 0 <= run_seed < 2**31:
        raise ConfigError("seed", run_seed, "0 <= seed < 2**31")
    return TRAINING_SEED_DOMAIN + run_seed * STAGE_SLOTS + stage


def certify_handed(items: Sequence[LabelledInstance], configs: Sequence[StageConfig], source: str) -> None:
    """Check instances a decision record handed a stage (``EngineerDecision.instances``), read back from the file
    ``source``, before anything trains on them: each is a board some stage of the run trains on (a map side among
    one of ``configs``' used sizes, with an agent count in that config's range: the run's stage configs so far,
    the next stage's included) and the generator's labelling agrees with its record
    (:func:`simulator.generator.certify_labelled`: solver labels, needs-wait, a valid plan of the optimal makespan).

    The first disagreement is a ConfigError naming ``source``, the index and the field, the recorded value and the
    certified one. Cheap next to a stage: about 0.1 ms an instance on 6x6 boards with 2 agents (5,000 in 0.5 s)."""
    shapes = {(side, agents) for config in configs for side in config.used_sizes() for agents in config.agent_counts()}
    for index, item in enumerate(items):
        where = f"{source}: instances[{index}]"
        if (item.size, item.instance.n_agents) not in shapes:
            trained = "; ".join(dict.fromkeys(
                f"sides {','.join(map(str, config.used_sizes()))} with {config.agents_min}"
                + (f"..{config.agents_max}" if config.agents_max > config.agents_min else "") + " agents"
                for config in configs))
            raise ConfigError(where, f"a {item.size}x{item.size} board with {item.instance.n_agents} agents",
                              f"a board of a size and agent count a stage of this run trains on ({trained})")
        certify_labelled(item, where)


@lru_cache(maxsize=8)
def test_keys(suite: str) -> frozenset[bytes]:
    """Content keys of every instance of the test suite ``suite`` (generated once per process)."""
    return frozenset(item.instance.content_key() for _, stage in generate_suite(suite) for item in stage.instances)


@dataclass(frozen=True)
class RunSets:
    """The protected content of one run: its test set's keys and its evidence set (generated with the test set
    protected). Training data is generated through :meth:`training` only."""

    test: frozenset[bytes]
    evidence: GeneratedStage
    evidence_keys: frozenset[bytes]

    @classmethod
    def build(cls, evaluation_suite: str, evidence_config: StageConfig, evidence_samples: int) -> "RunSets":
        if not 0 <= evidence_config.seed < EVIDENCE_SEED_LIMIT:
            raise ConfigError("validation.config.seed", evidence_config.seed,
                              "0 <= seed < 2**61 (the evidence domain; training seeds start at 2**62)")
        protected = test_keys(evaluation_suite)
        evidence = generate(replace(evidence_config, samples=evidence_samples), exclude=protected)
        keys = frozenset(item.instance.content_key() for item in evidence.instances)
        return cls(test=protected, evidence=evidence, evidence_keys=keys)

    def training(self, config: StageConfig) -> GeneratedStage:
        """``config``'s instances (its seed set by the caller with :func:`training_seed`) with every test and
        evidence instance excluded."""
        if config.seed < TRAINING_SEED_DOMAIN:
            raise ConfigError("seed", config.seed, "a training seed (curriculum.loop.sets.training_seed), >= 2**62")
        return generate(config, exclude=self.test | self.evidence_keys)


PROBE_INSTANCES = 2
"""Instances per banded size (and per kind, with and without a wait) :func:`check_bands` generates."""


def check_bands(config: RunConfig) -> None:
    """Refuse, before anything trains, a makespan band in one of the run config's stage configs that the generator
    cannot fill: for each size with ``min_makespan`` or ``max_makespan``, :data:`PROBE_INSTANCES` instances of it
    (with and without a wait when the size has waits) are generated with the run's own candidate limit. ConfigError
    naming ``FIELD.sizes.SIDE.min_makespan`` (or ``max_makespan``) and what the generator saw (``mapf-lake train``
    puts the run config file's name in front when the size is the file's own). A top band that no candidate's bare
    distances meet is refused in seconds, and so is a floor band that a quick valid plan of every candidate
    undercuts (``simulator.prioritized``)."""
    from simulator.config import SizeSpec

    documents = {"initial_config": config.initial_config, "validation.config": config.validation.config,
                 "warm_start.config": config.warm_start.config}
    for where, stage in documents.items():
        if stage is None:
            continue
        for side, spec in stage.sizes.items():
            if spec.data_ratio == 0 or (spec.min_makespan is None and spec.max_makespan is None):
                continue
            for waits in ((0.0, 1.0) if spec.wait_ratio > 0 else (0.0,)):
                least = max(stage.agents_min, 2) if waits else stage.agents_min
                probe = replace(stage, agents_min=least, samples=PROBE_INSTANCES, sizes={side: SizeSpec(
                    1.0, spec.hole_ratio, waits, spec.min_makespan, spec.max_makespan)})
                try:
                    generate(probe)
                except ConfigError as error:
                    field = error.field if error.field.startswith("sizes.") else f"sizes.{side}"
                    raise ConfigError(f"{where}.{field}", error.value, error.allowed) from None
