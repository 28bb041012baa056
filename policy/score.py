"""Score answers from any trainer: exported records and a standalone scorer (numpy and numba only, no torch).

A **record** is one exported instance with everything needed to score an answer to it later, in any process:

=================  =============================================================================================
``format``         ``"mapf-lake-record"``
``version``        :data:`RECORD_VERSION` (1)
``id``             ``"<source>/<agents>x<size>/<index>"``, unique within an export
``source``         what produced it: ``"suite:paper"``, ``"config:stage.yaml"``
``style``          the prompt style (``policy.prompts.PROMPT_STYLES``) the ``prompt`` is written in
``prompt``         the prompt: a string, or chat messages ``[{role, content}]`` for chat styles
``instance``       ``{grid, starts, goals}`` (``simulator.types.Instance.to_dict``)
``labels``         ``{size, agents, optimal_makespan, optimal_sum_of_costs, sum_of_distances, needs_wait}``
``horizon``        the most steps a plan may have (``simulator.env.default_horizon``)
``reference``      a makespan-optimal answer in the style (the solver's certificate)
=================  =============================================================================================

:func:`score` / :func:`score_batch` judge completions against records with the same parse and the same batched
plan judge as the GRPO reward (``policy.rewards.reward_breakdown``): the verdicts are the TRL reward's, by
construction. :func:`compute_score` is verl's custom-reward signature over the same.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from simulator import constants as C
from simulator.documents import checked_int
from simulator.errors import ConfigError
from simulator.files import decode_text, load_json

if TYPE_CHECKING:
    from policy.prompts import PromptStyle
    from simulator.generator import LabelledInstance

RECORD_FORMAT = "mapf-lake-record"
RECORD_VERSION = 1
_LABELS = ("size", "agents", "optimal_makespan", "optimal_sum_of_costs", "sum_of_distances", "needs_wait")


def make_record(item: LabelledInstance, style: PromptStyle, source: str) -> dict[str, Any]:
    """The record (module docstring) of a ``LabelledInstance`` in a ``PromptStyle``."""
    from simulator.env import default_horizon

    inst = item.instance
    return {
        "format": RECORD_FORMAT,
        "version": RECORD_VERSION,
        "id": f"{source}/{inst.n_agents}x{item.size}/{item.index}",
        "source": source,
        "style": style.name,
        "prompt": style.prompt(inst),
        "instance": inst.to_dict(),
        "labels": {"size": item.size, "agents": inst.n_agents, "optimal_makespan": item.optimal_makespan,
                   "optimal_sum_of_costs": item.optimal_sum_of_costs, "sum_of_distances": item.sum_of_distances,
                   "needs_wait": bool(item.needs_wait)},
        "horizon": default_horizon(inst),
        "reference": style.write_answer(inst, item.plan),
    }


def check_record(record: Any, where: str = "record") -> Mapping[str, Any]:
    """``record`` if it is a record this version can score (a JSON string is decoded first); else ConfigError
    naming the field."""
    if isinstance(record, bytes):
        record = decode_text(record, "a mapf-lake record", where)
    if isinstance(record, str):  # the documents' number rules: no 4,300-digit integer, NaN or 1e309; depth bounded
        record = load_json(record, where, "a mapf-lake record (a JSON object)", typed_later=True)
    if not isinstance(record, Mapping):
        raise ConfigError(where, type(record).__name__, "a mapf-lake record (a JSON object)")
    if record.get("format") != RECORD_FORMAT or record.get("version") != RECORD_VERSION:
        raise ConfigError(f"{where}.format", f"{record.get('format')!r} v{record.get('version')!r}",
                          f"{RECORD_FORMAT!r} version {RECORD_VERSION}")
    for key in ("instance", "labels", "horizon"):
        if key not in record:
            raise ConfigError(f"{where}.{key}", None, "present")
    labels = record["labels"]
    if not isinstance(labels, Mapping) or any(key not in labels for key in _LABELS):
        raise ConfigError(f"{where}.labels", labels if not isinstance(labels, Mapping) else sorted(labels, key=str),
                          f"a mapping with {', '.join(_LABELS)}")
    # Each number in its range, so that scoring never meets a string, NaN, 1e309 or 2**70 (they raised ValueError,
    # OverflowError or TypeError, or were cut to an integer: an optimal makespan of 2.5 scored as 2).
    checked_int(record["horizon"], f"{where}.horizon", 1, C.MAX_PLAN_LENGTH)
    for key, low, high in (("size", 1, C.MAX_SIDE), ("agents", 1, C.MAX_AGENTS),
                           ("optimal_makespan", 0, C.MAX_PLAN_LENGTH),
                           ("optimal_sum_of_costs", 0, C.MAX_AGENTS * C.MAX_PLAN_LENGTH),
                           ("sum_of_distances", 0, C.MAX_AGENTS * C.MAX_PLAN_LENGTH)):
        checked_int(labels[key], f"{where}.labels.{key}", low, high)
    if not isinstance(labels["needs_wait"], (bool, np.bool_)):
        raise ConfigError(f"{where}.labels.needs_wait", labels["needs_wait"], "true or false")
    return record


def _instance_json(record: Mapping[str, Any], where: str) -> str:
    try:
        return json.dumps(record["instance"], separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as error:  # a set, NaN, or a structure nested too deeply
        reason = "nested too deeply" if isinstance(error, RecursionError) else str(error)
        raise ConfigError(f"{where}.instance", record["instance"], "an instance {grid, starts, goals} as JSON",
                          reason) from None


def score_batch(records: Sequence[Any], completions: Sequence[Any]) -> list[dict[str, Any]]:
    """One verdict per ``(record, completion)``: ``format``, ``valid``, ``optimal`` (0/1), ``progress`` (share of
    agents on their goal), ``reward`` (the GRPO default reward), ``category`` (``"none"`` when valid, else the
    first failure: ``parse_error``, ``illegal_move``, ``hole``, ``vertex_conflict``, ``edge_conflict``,
    ``goal_not_reached``), ``makespan`` and ``sum_of_costs`` (None without a parsed plan) and ``parse_error``
    (why the answer did not parse, or None). Completions are strings or chat messages; one judge call in all."""
    from policy.rewards import reward_breakdown

    for name, value in (("records", records), ("completions", completions)):
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
            raise ConfigError(name, type(value).__name__, "a list (one entry per answer)")
    if len(records) != len(completions):
        raise ConfigError("completions", len(completions), f"one per record ({len(records)})")
    checked = [check_record(record, f"record {index}") for index, record in enumerate(records)]
    parts = reward_breakdown(
        list(completions),
        [_instance_json(record, f"record {index}") for index, record in enumerate(checked)],
        [int(record["labels"]["optimal_makespan"]) for record in checked],
        [int(record["horizon"]) for record in checked],
    )
    out = []
    for i in range(len(checked)):
        parsed = parts["makespan"][i] >= 0
        out.append({
            "format": int(parts["format"][i]),
            "valid": int(parts["valid"][i]),
            "optimal": int(parts["optimal"][i]),
            "progress": float(parts["progress"][i]),
            "reward": float(parts["default"][i]),
            "category": C.FAILURE_NAMES[int(parts["failure"][i])],
            "makespan": int(parts["makespan"][i]) if parsed else None,
            "sum_of_costs": int(parts["sum_of_costs"][i]) if parsed else None,
            "parse_error": parts["parse_error"][i],
        })
    return out


def score(record: Any, completion: Any) -> dict[str, Any]:
    """The verdict on one completion (see :func:`score_batch`)."""
    return score_batch([record], [completion])[0]


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: Any = None) -> float:
    """verl's custom reward entry point (``custom_reward_function.path=policy/score.py``, ``name=compute_score``):
    the default GRPO reward of ``solution_str`` against ``ground_truth``, the record as JSON (the export's
    ``reward_model.ground_truth``). A malformed ground truth raises ConfigError, naming the field."""
    reward: float = score(ground_truth, solution_str)["reward"]
    return reward


__all__ = ["RECORD_FORMAT", "RECORD_VERSION", "check_record", "compute_score", "make_record", "score", "score_batch"]
