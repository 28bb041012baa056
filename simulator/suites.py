"""Benchmark suites: fixed, versioned sets of generated instances, each with a checksum.

A suite is a list of cells (agent count x map size); each cell is one stage config generated with a seed derived
from the suite's name and the cell, so a cell can be regenerated alone. ``suite_checksum`` hashes the canonical
bytes of every cell in order; the tests pin the quick suites' checksums so that a silent change of the
generator, the solver's certificates or the random streams cannot pass unnoticed (bump ``SUITE_VERSION`` and
the pinned values together when a change is intended).

Suites (v1):

* ``paper``: the published evaluation: 3, 4 and 5 agents; square maps from ``agents x agents`` to 10x10;
  150 instances per cell (3,150 in all); hole ratio 0.2 and wait ratio 0.5 in every cell.
* ``train-2agent``: 2 agents on 3x3..10x10, 500 instances per size, hole ratio 0.2, wait ratio 0.5: a pool
  for training on 2-agent boards.
* ``test-small``: the CPU presets' test set: 2 agents (their training distribution) and 3 agents (the paper's
  transfer: trained on 2, tested on more) on 3x3..6x6, 100 instances per cell, hole ratio 0.2 and wait ratio 0.3
  as the presets train. Its cell seeds lie in their own domain (``TEST_SEED_DOMAIN``).
* ``test-small-4``: ``test-small`` (the same 2- and 3-agent cells, instance for instance) plus 4-agent cells on
  3x3..6x6: the test set of a run that trains on 2 and 3 agents, whose transfer column is then 4 agents.
* ``paper-quick``, ``train-2agent-quick``, ``test-small-quick`` and ``test-small-4-quick``: the same cells with 10
  instances each, for tests and smoke runs.

A run reads its ``evaluation_suite`` as its test set: the generator keeps every instance of it out of the run's
training and evidence data by content (``curriculum.loop.sets``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable

from simulator.config import StageConfig
from simulator.errors import ConfigError
from simulator.generator import GeneratedStage, generate, to_jsonl

SUITE_VERSION = 1
PAPER_HOLE_RATIO = 0.2
PAPER_WAIT_RATIO = 0.5


@dataclass(frozen=True)
class SuiteCell:
    """One (agents, size) cell of a suite."""

    agents: int
    size: int
    count: int
    hole_ratio: float
    wait_ratio: float
    seed: int

    def config(self) -> StageConfig:
        return StageConfig.from_dict(
            {
                "agents": self.agents,
                "samples": self.count,
                "seed": self.seed,
                "sizes": {self.size: {"data_ratio": 1.0, "hole_ratio": self.hole_ratio, "wait_ratio": self.wait_ratio}},
            }
        )


def _cell_seed(name: str, agents: int, size: int) -> int:
    digest = hashlib.sha256(f"{name}/v{SUITE_VERSION}/{agents}/{size}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


# Test-suite seeds: [2**61, 2**62), apart from the stage-config seeds people write (below 2**61 in a run's evidence
# set, ``curriculum.loop.sets``) and from the run's training seeds ([2**62, 2**63)).
TEST_SEED_DOMAIN = 2**61


def _test_cell_seed(name: str, agents: int, size: int) -> int:
    return TEST_SEED_DOMAIN | (_cell_seed(name, agents, size) >> 2)


def _test_small(count: int, counts: tuple[int, ...] = (2, 3)) -> list[SuiteCell]:
    """``test-small``'s cells for each agent count in ``counts``: a cell's seed depends on its agent count and
    side only, so ``test-small-4``'s 2- and 3-agent cells are ``test-small``'s."""
    return [
        SuiteCell(agents, size, count, 0.2, 0.3, _test_cell_seed("test-small", agents, size))
        for agents in counts
        for size in range(3, 7)
    ]


def _paper(count: int) -> list[SuiteCell]:
    return [
        SuiteCell(agents, size, count, PAPER_HOLE_RATIO, PAPER_WAIT_RATIO, _cell_seed("paper", agents, size))
        for agents in (3, 4, 5)
        for size in range(agents, 11)
    ]


def _train_2agent(count: int) -> list[SuiteCell]:
    return [
        SuiteCell(2, size, count, PAPER_HOLE_RATIO, PAPER_WAIT_RATIO, _cell_seed("train-2agent", 2, size))
        for size in range(3, 11)
    ]


SUITES: dict[str, Callable[[], list[SuiteCell]]] = {
    "paper": lambda: _paper(150),
    "paper-quick": lambda: _paper(10),
    "train-2agent": lambda: _train_2agent(500),
    "train-2agent-quick": lambda: _train_2agent(10),
    "test-small": lambda: _test_small(100),
    "test-small-quick": lambda: _test_small(10),
    "test-small-4": lambda: _test_small(100, (2, 3, 4)),
    "test-small-4-quick": lambda: _test_small(10, (2, 3, 4)),
}


def suite_cells(name: str) -> list[SuiteCell]:
    if name not in SUITES:
        raise ConfigError("suite", name, f"one of {sorted(SUITES)}")
    return SUITES[name]()


def generate_cell(cell: SuiteCell) -> GeneratedStage:
    return generate(cell.config())


def _offset(progress: Callable[[int], None], base: int) -> Callable[[int], None]:
    """``progress`` called with ``base + n`` (a cell's count of finished instances -> the suite's)."""
    return lambda n: progress(base + n)


def generate_suite(name: str, progress: Callable[[int], None] | None = None) -> list[tuple[SuiteCell, GeneratedStage]]:
    """Every cell of the suite, generated in order; ``progress`` gets the instances finished so far."""
    out = []
    finished = 0
    for cell in suite_cells(name):
        base = finished
        stage = generate(cell.config(), progress=_offset(progress, base) if progress else None)
        finished += len(stage.instances)
        out.append((cell, stage))
    return out


def suite_checksum(cells: list[tuple[SuiteCell, GeneratedStage]]) -> str:
    """sha256 over the cells' canonical bytes, in order."""
    digest = hashlib.sha256()
    for cell, stage in cells:
        digest.update(f"{cell.agents}x{cell.size}\n".encode())
        digest.update(to_jsonl(stage.instances))
    return digest.hexdigest()


def suite_size(name: str) -> int:
    return sum(cell.count for cell in suite_cells(name))
