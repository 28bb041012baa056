"""The generator: ``(stage config, seed) -> certified, labelled instances``, deterministic byte for byte.

For each map size the config's ``size_counts()`` gives how many instances to make. Within a size, slot ``i``
(``0 <= i < n``) is decided up front: its agent count (the config's counts in turn) and whether it must need a
wait (``round(wait_ratio * n)`` slots do, spread by a seeded shuffle). Each slot then draws candidates from its
own random stream, seeded by ``(seed, size, i)``, until one fits:

1. exactly ``SizeSpec.hole_count(size)`` holes, uniformly placed;
2. distinct starts and distinct goals on ice, each goal different from its agent's start;
3. the optimal solver certifies it solvable (unsolvable candidates and those over the solver's node budget are
   rejected, never labelled);
4. its ``needs_wait`` label matches the slot;
5. its optimal makespan lies within the size's ``min_makespan`` / ``max_makespan`` when they are set (a candidate
   whose farthest agent is already beyond ``max_makespan`` on the bare map, or that has a valid plan by prioritized
   planning, ``simulator.prioritized``, ending before ``min_makespan``, is rejected before the wait search and the
   solver run: the solver would reject it too, so the instances are the same, only found sooner);
6. it is not in ``exclude``, a protected set of content keys (``Instance.content_key``: a run's test and evidence
   instances, kept out of its training data by content, whatever the seeds). A candidate found there is rejected
   at once and the slot draws its next candidate, so an empty or absent ``exclude`` changes nothing.

Every slot has ``max_attempts`` candidates; when they run out, generation stops with a :class:`ConfigError`
naming the knob (``sizes.<s>.wait_ratio``, ``hole_ratio``, ``min_makespan`` or ``max_makespan``) and what was seen,
instead of looping on. Without makespan bounds no candidate is drawn or judged differently, so documents
without them give the same instances as before the bounds existed.
Because slots are independent streams, instance ``i`` does not depend on how the others went.

``needs_wait`` (see ``simulator.needs_wait``): no conflict-free plan exists in which every agent walks one of its
own shortest paths without waiting; equivalently the optimal sum of costs exceeds the sum of the agents'
individual shortest distances.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Collection

import numpy as np

from simulator import constants as C
from simulator import grid_kernels
from simulator.config import SizeSpec, StageConfig
from simulator.documents import is_integer, is_python_int
from simulator.errors import ConfigError
from simulator.jit import Float64Array, Int8Array, Int32Array, Int64Array, njit
from simulator.needs_wait import needs_wait_search
from simulator.prioritized import makespan_upper_bound
from simulator.solver import solve
from simulator.types import Instance, InstanceLabels, JointPlan

_ICE = C.ICE
DEFAULT_MAX_ATTEMPTS = 2000  # candidates per instance before generation gives up and names the knob
DEFAULT_SOLVER_NODES = 100_000  # solver node budget per candidate; candidates over it are skipped


# The integer labels of an instance record and their largest values (each is >= 0).
_LABEL_RANGES = {"size": C.MAX_SIDE, "seed": 2**63 - 1, "index": 2**63 - 1, "optimal_makespan": C.MAX_PLAN_LENGTH,
                 "optimal_sum_of_costs": C.MAX_PLAN_LENGTH * C.MAX_AGENTS,
                 "sum_of_distances": C.MAX_PLAN_LENGTH * C.MAX_AGENTS}


def _record_int(value: Any, name: str, high: int) -> int:
    if not is_integer(value) or not 0 <= value <= high:
        raise ConfigError(f"instance record.{name}", value, f"an integer 0..{high} (not a string, float or boolean)")
    return int(value)


@dataclass(frozen=True, eq=False)
class LabelledInstance(InstanceLabels):
    """A certified instance: its labels (the fields of ``simulator.types.InstanceLabels``; ``seed`` is its slot's
    stream ``[stage seed, size, index]``, ``needs_wait`` as in the module docstring), and, keyword-only:

    Fields:
        instance: the map, starts and goals.
        plan: a makespan-optimal joint plan (the certificate).

    Equal only to itself (its labels alone do not say which map it is).
    """

    instance: Instance = field(kw_only=True)
    plan: JointPlan = field(kw_only=True)

    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def to_dict(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "index": self.index,
            "seed": self.seed,
            **self.instance.to_dict(),
            "optimal_makespan": self.optimal_makespan,
            "optimal_sum_of_costs": self.optimal_sum_of_costs,
            "sum_of_distances": self.sum_of_distances,
            "needs_wait": self.needs_wait,
            "plan": self.plan.sequences(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LabelledInstance":
        """The record as ``to_dict`` writes it. Types are exact: a label is an integer (not 4.7, "4" or true) in
        its range, ``needs_wait`` is true or false (not "false"); anything else is a ConfigError naming the key."""
        if not isinstance(data, dict):
            raise ConfigError("instance record", type(data).__name__, "a JSON object")
        try:
            labels = {name: _record_int(data[name], name, high) for name, high in _LABEL_RANGES.items()}
            if not isinstance(data["needs_wait"], (bool, np.bool_)):
                raise ConfigError("instance record.needs_wait", data["needs_wait"], "true or false (a JSON boolean)")
            return cls(
                instance=Instance.from_dict(data),
                needs_wait=bool(data["needs_wait"]),
                plan=JointPlan.from_sequences(data["plan"]),
                **labels,
            )
        except KeyError as exc:
            raise ConfigError(f"instance record.{exc.args[0]}", None, "present") from None
        except (TypeError, ValueError) as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError("instance record", "malformed", "integers where the format has them", str(exc)) from None


@dataclass
class SizeReport:
    """What generation achieved for one map size."""

    size: int
    count: int
    requested_hole_ratio: float
    achieved_hole_ratio: float
    requested_wait_ratio: float
    achieved_wait_ratio: float
    candidates: int  # candidates drawn in all (accepted + rejected)
    rejected_unsolvable: int
    rejected_solver_limit: int
    rejected_wait_label: int
    rejected_makespan: int = 0  # outside the size's min_makespan..max_makespan
    rejected_protected: int = 0  # equal by content to an instance of the protected set (``exclude``)


@dataclass
class GeneratedStage:
    """The instances of a stage (sizes ascending, slots in order) and a report per size."""

    instances: list[LabelledInstance]
    reports: dict[int, SizeReport] = field(default_factory=dict)

    def checksum(self) -> str:
        """sha256 of the canonical JSON-lines bytes: equal checksums mean identical instances and labels."""
        return hashlib.sha256(to_jsonl(self.instances)).hexdigest()


def to_jsonl(instances: list[LabelledInstance]) -> bytes:
    """Canonical JSON lines (sorted keys, no spaces): the file format of ``mapf-lake gen --out``."""
    return b"".join(
        json.dumps(item.to_dict(), sort_keys=True, separators=(",", ":")).encode() + b"\n" for item in instances
    )


def read_jsonl(path: str | os.PathLike[str], flag: str = "") -> list[LabelledInstance]:
    """Load a ``gen --out`` file; a bad line raises :class:`ConfigError` with the file and line number."""
    return read_jsonl_digest(path, flag)[0]


def read_jsonl_digest(path: str | os.PathLike[str], flag: str = "",
                      certify: bool = False) -> tuple[list[LabelledInstance], str]:
    """The instances of a ``gen --out`` file and the sha256 of its bytes, read once through
    :func:`simulator.files.open_regular` (a FIFO or device is refused, never waited on): lines of at most
    ``MAX_INSTANCE_BYTES``, the file at most ``MAX_INSTANCES_BYTES``, each line a JSON object read with the
    documents' number rules and typed exactly (:meth:`LabelledInstance.from_dict`). Anything else raises
    :class:`ConfigError` naming the file, the line, the key and the value. With ``certify``, each record is
    checked by :func:`certify_labelled` as it is read (the first disagreement names its line)."""
    from simulator.files import MAX_INSTANCE_BYTES, MAX_INSTANCES_BYTES, cut, decode_text, load_json, open_regular

    what = "a JSON-lines file of instances (gen --out)"
    name = os.fspath(path)
    out = []
    digest = hashlib.sha256()
    total = 0
    with open_regular(path, what, flag) as handle:
        for number in itertools.count(1):
            line = handle.readline(MAX_INSTANCE_BYTES + 1)
            if not line:
                break
            total += len(line)
            digest.update(line)
            if total > MAX_INSTANCES_BYTES:
                raise ConfigError(name, f"more than {MAX_INSTANCES_BYTES:,} bytes", f"{what} of at most "
                                  f"{MAX_INSTANCES_BYTES:,} bytes")
            where = f"{name} line {number}"
            if len(line) > MAX_INSTANCE_BYTES:
                raise ConfigError(where, f"more than {MAX_INSTANCE_BYTES:,} bytes", f"an instance record of at "
                                  f"most {MAX_INSTANCE_BYTES:,} bytes")
            if not (line.removeprefix(b"\xef\xbb\xbf") if number == 1 else line).strip():
                continue  # a blank line (the first one may hold a byte-order mark alone)
            text = decode_text(line, what, where).rstrip("\r\n")
            data = load_json(text, name, "an instance record", line=number, object_only=True)
            try:
                out.append(LabelledInstance.from_dict(data))
            except ConfigError as exc:
                key = exc.field.removeprefix("instance record").lstrip(".") or "record"
                raise ConfigError(f"{where}: {key}", exc.value if isinstance(exc.value, (int, float, bool, type(None)))
                                  else cut(str(exc.value)), exc.allowed) from None
            if certify:
                certify_labelled(out[-1], where)
    return out, digest.hexdigest()


CERTIFIED_LABELS = ("optimal_makespan", "optimal_sum_of_costs", "sum_of_distances", "needs_wait")


def certify_labels(instance: Instance, size: int, labels: Any, where: str,
                   solver_nodes: int = DEFAULT_SOLVER_NODES, seed: int = 0, index: int = 0) -> None:
    """Check a record's ``size`` (the map's longer side) and its labels (:data:`CERTIFIED_LABELS`, read by name from
    the mapping ``labels``) against the generator's own labelling (:func:`label_instance`). ConfigError naming
    ``where``, the first field that disagrees, the record's value and the certified one; an instance the solver
    cannot certify within ``solver_nodes`` is refused too."""
    side = max(instance.height, instance.width)
    if size != side:
        raise ConfigError(f"{where}: size", size, f"the map's longer side, {side}")
    labelled, status, reason = label_instance(instance, size=size, seed=seed, index=index, solver_nodes=solver_nodes)
    if labelled is None:
        raise ConfigError(f"{where}: instance", status, "an instance the solver certifies solvable within "
                          f"{solver_nodes:,} nodes", reason)
    for name in CERTIFIED_LABELS:
        mine, certified = labels[name], getattr(labelled, name)
        if mine != certified:
            shown = str(certified).lower() if isinstance(certified, bool) else certified
            raise ConfigError(f"{where}: {name}", mine, f"the certified value, {shown}")


def certify_labelled(item: LabelledInstance, where: str, solver_nodes: int = DEFAULT_SOLVER_NODES) -> None:
    """Check an instance record that came from outside the generator against the generator's own labelling
    (:func:`label_instance`: the solver's optimal makespan and sum of costs, the bare distances, needs-wait) and
    its plan against the judge (valid, of the optimal makespan). ConfigError naming ``where``, the first field
    that disagrees, the record's value and the certified one; a record the solver cannot certify within
    ``solver_nodes`` is refused too."""
    from simulator.judge import judge_plan

    instance = item.instance
    certify_labels(instance, item.size, {name: getattr(item, name) for name in CERTIFIED_LABELS}, where,
                   solver_nodes, seed=item.seed, index=item.index)
    if item.plan.n_agents != instance.n_agents:
        raise ConfigError(f"{where}: plan", f"moves for {item.plan.n_agents} agents",
                          f"one list of moves per agent ({instance.n_agents} agents)")
    try:
        verdict = judge_plan(instance, item.plan)
    except ConfigError as error:  # a plan the judge cannot take: named by the record's line
        raise ConfigError(f"{where}: plan", error.value, error.allowed) from None
    if not verdict.valid:
        raise ConfigError(f"{where}: plan", f"{verdict.failure_name} at step {verdict.fail_step}",
                          "a valid plan of the instance (the certificate)")
    if verdict.makespan != item.optimal_makespan:  # equal to the certified one (checked above)
        raise ConfigError(f"{where}: plan", f"makespan {verdict.makespan}",
                          f"a plan of the optimal makespan, {item.optimal_makespan}")


def bare_distances(instance: Instance) -> np.ndarray:
    """``(K,) int64`` each agent's shortest distance to its goal on the bare map (-1 when unreachable)."""
    width = instance.width
    nbr = grid_kernels.bare_neighbor_table(instance.grid)
    out = np.empty(instance.n_agents, np.int64)
    for k, ((sr, sc), (gr, gc)) in enumerate(zip(instance.starts.tolist(), instance.goals.tolist())):
        d = int(grid_kernels.distances_from(nbr, gr * width + gc)[sr * width + sc])
        out[k] = d if d < grid_kernels.INF else -1
    return out


@njit(cache=True)
def _component_labels(grid_flat: Int8Array, side: int) -> Int32Array:
    """``(side*side,) int32`` connected-component id of each ice cell (4-connected), -1 for holes.

    Its own flood fill rather than ``grid_kernels.neighbor_table`` + ``bfs_distances``: it runs once per
    candidate, and through the shared kernels (a table to build, a distance map to reset per region) it measured
    1.3x slower per call and about 1.1x slower generation."""
    cells = side * side
    labels = np.full(cells, -1, np.int32)
    queue = np.empty(cells, np.int32)
    next_label = 0
    for seed_cell in range(cells):
        if grid_flat[seed_cell] != _ICE or labels[seed_cell] >= 0:
            continue
        labels[seed_cell] = next_label
        queue[0] = seed_cell
        head, tail = 0, 1
        while head < tail:
            cell = queue[head]
            head += 1
            r = cell // side
            c = cell - r * side
            for nr, nc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
                if 0 <= nr < side and 0 <= nc < side:
                    other = nr * side + nc
                    if grid_flat[other] == _ICE and labels[other] < 0:
                        labels[other] = next_label
                        queue[tail] = other
                        tail += 1
        next_label += 1
    return labels


@njit(cache=True)
def _place_agents(labels: Int32Array, uniforms: Float64Array, n_agents: int, starts_out: Int64Array,
                  goals_out: Int64Array) -> bool:
    """Pick starts and goals from ``uniforms`` (consumed in order); False when the regions leave no room."""
    cells = labels.shape[0]
    region_sizes = np.zeros(cells + 1, np.int64)
    for cell in range(cells):
        if labels[cell] >= 0:
            region_sizes[labels[cell]] += 1
    usable = np.empty(cells, np.int64)
    n_usable = 0
    for cell in range(cells):
        if labels[cell] >= 0 and region_sizes[labels[cell]] >= 2:
            usable[n_usable] = cell
            n_usable += 1
    if n_usable < n_agents:
        return False
    used = 0
    # starts: a partial Fisher-Yates shuffle of the usable cells
    for k in range(n_agents):
        j = k + int(uniforms[used] * (n_usable - k))
        used += 1
        usable[k], usable[j] = usable[j], usable[k]
        starts_out[k] = usable[k]
    options = np.empty(cells, np.int64)
    for k in range(n_agents):
        start = starts_out[k]
        n_options = 0
        for cell in range(cells):
            if labels[cell] != labels[start] or cell == start:
                continue
            taken = False
            for j in range(k):
                if goals_out[j] == cell:
                    taken = True
            if not taken:
                options[n_options] = cell
                n_options += 1
        if n_options == 0:
            return False
        goals_out[k] = options[int(uniforms[used] * n_options)]
        used += 1
    return True


def _sample_candidate(rng: np.random.Generator, side: int, n_holes: int, n_agents: int) -> Instance | None:
    """A random candidate whose every goal lies in its start's connected region, or None if the holes leave no
    room (too few cells with a partner in their region).

    Holes: a uniform random set of ``n_holes`` cells. Starts: uniform over ice cells that share their region
    with at least one other cell. Goals: agent by agent, uniform over the cells of its start's region that are
    not its start and not an earlier agent's goal. Conditioning on reachability up front, instead of rejecting
    unreachable candidates, saves most of the solver calls at high hole ratios.
    """
    cells = side * side
    grid = np.zeros(cells, np.int8)
    # argsort of uniform keys rather than Generator.permutation: random() streams are the most stable across
    # NumPy releases, and the suites' checksums depend on them.
    grid[np.argsort(rng.random(cells), kind="stable")[:n_holes]] = C.HOLE
    labels = _component_labels(grid, side)
    starts = np.empty(n_agents, np.int64)
    goals = np.empty(n_agents, np.int64)
    if not _place_agents(labels, rng.random(2 * n_agents), n_agents, starts, goals):
        return None
    return Instance(
        grid=grid.reshape(side, side),
        starts=np.stack(np.divmod(starts, side), axis=1),
        goals=np.stack(np.divmod(goals, side), axis=1),
    )


def _slot_rng(seed: int, size: int, index: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, size, index])))


def generate(
    config: StageConfig,
    seed: int | None = None,
    *,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    solver_nodes: int = DEFAULT_SOLVER_NODES,
    progress: Callable[[int], None] | None = None,
    exclude: Collection[bytes] | None = None,
) -> GeneratedStage:
    """Generate the stage's instances (see the module docstring).

    Args:
        config: the stage config.
        seed: overrides ``config.seed`` when given.
        max_attempts: candidates per instance before giving up, 1..1_000_000.
        solver_nodes: the solver's node budget per candidate.
        progress: called with the number of instances finished so far (for progress bars).
        exclude: content keys (``Instance.content_key``) no generated instance may have (rule 6).
    """
    if not isinstance(config, StageConfig):
        raise ConfigError("config", type(config).__name__, "a simulator.config.StageConfig")
    seed = config.seed if seed is None else seed
    if not is_integer(seed) or not 0 <= seed < 2**63:
        raise ConfigError("seed", seed, "an integer in 0..2**63-1")
    seed = int(seed)  # a NumPy integer seeds the same streams (SeedSequence reads its value)
    if not is_python_int(max_attempts) or not 1 <= max_attempts <= 1_000_000:
        raise ConfigError("max_attempts", max_attempts, "an integer in 1..1_000_000")
    stage = GeneratedStage([])
    done = 0
    agent_counts = config.agent_counts()
    for size, count in config.size_counts().items():
        if count == 0:
            continue
        spec = config.sizes[size]
        n_holes = spec.hole_count(size)
        n_wait = int(np.floor(spec.wait_ratio * count + 0.5))
        wait_keys = _slot_rng(seed, size, 2**31).random(count)  # which slots need a wait: a seeded shuffle
        wants_wait = np.zeros(count, bool)
        order = np.argsort(wait_keys, kind="stable")
        if min(agent_counts) == 1 and n_wait:  # a lone agent never waits: wait slots go to slots with 2+ agents
            crowded = np.array([agent_counts[i % len(agent_counts)] >= 2 for i in range(count)])
            order = order[crowded[order]]
            if n_wait > order.size:
                raise ConfigError(f"sizes.{size}.wait_ratio", spec.wait_ratio,
                                  f"at most {order.size / count:.4g} here: only {order.size} of the {count} "
                                  f"{size}x{size} instances have 2+ agents, and a lone agent never needs a wait")
        wants_wait[order[:n_wait]] = True
        report = SizeReport(size, count, spec.hole_ratio, 0.0, spec.wait_ratio, 0.0, 0, 0, 0, 0)
        for index in range(count):
            n_agents = agent_counts[index % len(agent_counts)]
            item = _generate_slot(
                seed, size, index, n_agents, n_holes, bool(wants_wait[index]), max_attempts, solver_nodes, report,
                spec, exclude or None,
            )
            stage.instances.append(item)
            done += 1
            if progress is not None:
                progress(done)
        items = stage.instances[-count:]
        report.achieved_hole_ratio = float(np.mean([(it.instance.grid == C.HOLE).mean() for it in items]))
        report.achieved_wait_ratio = float(np.mean([it.needs_wait for it in items]))
        stage.reports[size] = report
    return stage


def _generate_slot(seed: int, size: int, index: int, n_agents: int, n_holes: int, wants_wait: bool,
                   max_attempts: int, solver_nodes: int, report: SizeReport, spec: SizeSpec,
                   exclude: Collection[bytes] | None = None) -> LabelledInstance:
    rng = _slot_rng(seed, size, index)
    counts = {"unsolvable": 0, "limit": 0, "label": 0, "makespan": 0, "short": 0, "protected": 0}
    least, most = spec.makespan_bounds()
    bounded = spec.min_makespan is not None or spec.max_makespan is not None
    for _attempt in range(max_attempts):
        report.candidates += 1
        instance = _sample_candidate(rng, size, n_holes, n_agents)
        if instance is None:
            counts["unsolvable"] += 1
            report.rejected_unsolvable += 1
            continue
        if exclude is not None and instance.content_key() in exclude:
            counts["protected"] += 1
            report.rejected_protected += 1
            continue
        # The makespan is at least the farthest agent's distance: with a top bound, that prunes before the wait
        # search and the solver (a few BFS: the cheapest check, so an impossible band is refused in seconds).
        distances = bare_distances(instance) if bounded else None
        if distances is not None and int(distances.max()) > most:
            counts["makespan"] += 1
            report.rejected_makespan += 1
            continue
        # And at most the makespan of any valid plan: with a floor, a prioritized plan that already ends before it
        # proves the candidate short, again before the wait search and the solver. Only candidates whose farthest
        # agent is nearer than the floor need one; without a plan (None) the solver decides as before.
        if spec.min_makespan is not None and distances is not None and int(distances.max()) < least:
            upper = makespan_upper_bound(instance)
            if upper is not None and upper < least:
                counts["makespan"] += 1
                counts["short"] += 1
                report.rejected_makespan += 1
                continue
        # The wait label is cheaper than the solver: check it first and solve only candidates that fit. A search
        # over its budget (None) leaves the label to the solver's sum of costs, which decides it exactly.
        label, _ = needs_wait_search(instance)
        if label is not None and label != wants_wait:
            counts["label"] += 1
            report.rejected_wait_label += 1
            continue
        solution = solve(instance, max_nodes=solver_nodes)
        plan = solution.plan  # given exactly when solved
        if solution.status != "solved" or plan is None:
            key = "unsolvable" if solution.status == "unsolvable" else "limit"
            counts[key] += 1
            if key == "unsolvable":
                report.rejected_unsolvable += 1
            else:
                report.rejected_solver_limit += 1
            continue
        if label is None:
            if distances is None:
                distances = bare_distances(instance)
            label = solution.sum_of_costs > int(distances.sum())
            if label != wants_wait:
                counts["label"] += 1
                report.rejected_wait_label += 1
                continue
        if bounded and not least <= solution.makespan <= most:
            counts["makespan"] += 1
            counts["short"] += solution.makespan < least
            report.rejected_makespan += 1
            continue
        return LabelledInstance(
            instance=instance,
            size=size,
            seed=seed,
            index=index,
            optimal_makespan=solution.makespan,
            optimal_sum_of_costs=solution.sum_of_costs,
            sum_of_distances=int((bare_distances(instance) if distances is None else distances).sum()),
            needs_wait=label,
            plan=plan,
        )
    kind = "needs a wait" if wants_wait else "needs no wait"
    value: object  # the rejected value the ConfigError names: a size, a bound or a ratio
    if counts["protected"] > max_attempts // 2:
        field_name, value, allowed = (
            f"sizes.{size}", f"{size}x{size}",
            f"a map size with instances outside the protected (test and evidence) sets: {counts['protected']} of "
            f"{max_attempts} candidates ({size}x{size}, {n_agents} agents, {n_holes} holes) were protected ones",
        )
    elif counts["makespan"] >= max(counts["unsolvable"], counts["limit"], counts["label"]):
        bound = "min_makespan" if 2 * counts["short"] > counts["makespan"] else "max_makespan"
        field_name, value, allowed = (
            f"sizes.{size}.{bound}",
            getattr(spec, bound),
            f"makespan bounds this map size can meet: {counts['makespan']} of {max_attempts} candidates "
            f"({size}x{size}, {n_agents} agents, {n_holes} holes, {kind}) had an optimal makespan outside the band "
            + (f"{least}..{most}" if spec.min_makespan and spec.max_makespan else
               f"of at least {least}" if spec.min_makespan else f"of at most {most}"),
        )
    elif counts["label"] >= max(counts["unsolvable"], counts["limit"]) and not wants_wait and spec.wait_ratio == 0:
        field_name, value, allowed = (  # the wait ratio cannot go lower: the map is too crowded to avoid waits
            f"sizes.{size}.hole_ratio",
            spec.hole_ratio,
            f"fewer holes or agents: {counts['label']} of {max_attempts} candidates ({size}x{size}, {n_agents} "
            f"agents) needed a wait, and the wait ratio is already 0",
        )
    elif counts["label"] >= max(counts["unsolvable"], counts["limit"]):
        field_name, value, allowed = (
            f"sizes.{size}.wait_ratio",
            spec.wait_ratio,
            f"a ratio this map size can meet: no solvable {size}x{size} instance with {n_agents} agents and "
            f"{n_holes} holes that {kind} turned up in {max_attempts} candidates",
        )
    else:
        field_name, value, allowed = (
            f"sizes.{size}.hole_ratio",
            spec.hole_ratio,
            f"fewer holes: {counts['unsolvable']} of {max_attempts} candidates ({size}x{size}, {n_agents} agents) "
            f"were unsolvable and {counts['limit']} over the solver budget",
        )
    raise ConfigError(field_name, value, allowed, f"instance {index} of size {size}")


def label_instance(
    instance: Instance,
    *,
    size: int | None = None,
    seed: int = 0,
    index: int = 0,
    solver_nodes: int = DEFAULT_SOLVER_NODES,
) -> tuple[LabelledInstance | None, str, str]:
    """Certify an instance that did not come from the generator (a user's map, an imported scenario) and label it
    as the generator labels its own: ``(labelled, status, reason)`` with the solver's status (``"solved"``,
    ``"unsolvable"`` or ``"limit"``) and its reason; ``labelled`` is None unless solved.

    Args:
        instance: the instance.
        size: recorded as ``LabelledInstance.size`` (the table column it falls in); default the longer side,
            ``max(height, width)``, which is the map side for square maps.
        seed: recorded as it is (the generator's slot seed; 0 for an importer).
        index: recorded as it is (the generator's slot index; an importer's scenario bucket).
        solver_nodes: the solver's node budget.
    """
    if not isinstance(instance, Instance):
        raise ConfigError("instance", type(instance).__name__, "a simulator.types.Instance")
    solution = solve(instance, max_nodes=solver_nodes)
    plan = solution.plan  # given exactly when solved
    if solution.status != "solved" or plan is None:
        return None, solution.status, solution.reason
    distances = int(bare_distances(instance).sum())
    labelled = LabelledInstance(
        instance=instance,
        size=max(instance.height, instance.width) if size is None else int(size),
        seed=int(seed),
        index=int(index),
        optimal_makespan=solution.makespan,
        optimal_sum_of_costs=solution.sum_of_costs,
        sum_of_distances=distances,
        needs_wait=solution.sum_of_costs > distances,  # exact (simulator.needs_wait), and no second search
        plan=plan,
    )
    return labelled, solution.status, ""
