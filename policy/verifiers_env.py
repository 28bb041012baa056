"""MAPF-FrozenLake as a ``verifiers`` environment (prime-rl's environment library; extra: ``adapters``).

:func:`load_environment` is the entry point ``verifiers`` and prime-rl look for in an environment module::

    from policy.verifiers_env import load_environment

    env = load_environment(sizes=[3, 4, 5], agents=2, samples=256, seed=1)      # a stage config from knobs
    env = load_environment(config="stage.yaml")                                   # or a stage config file
    env = load_environment(suite="train-2agent-quick", prompt_style="compact-nb")  # or a benchmark suite

It returns a ``vf.SingleTurnEnv``: one prompt, one answer with the whole joint plan. The dataset rows are the
export's records (``policy.export``, ``policy.score.make_record``): ``prompt`` (chat messages, as in the verl
layout: a text style's prompt is one user message), ``answer`` (the solver's makespan-optimal reference),
and ``info`` (the whole record as JSON: instance, labels, horizon); the environment's ``env_id`` is
``"mapf-lake"``.

The ``vf.Rubric`` scores with ``policy.score`` (the GRPO reward's own parse and batched plan judge): reward
functions ``mapf_valid``, ``mapf_optimal`` and ``mapf_format`` weighted as the GRPO default reward
(``policy.rewards.DEFAULT_WEIGHTS``: 1.0, 0.5, 0.1, so the rubric's reward is ``policy.score``'s ``reward``),
and ``mapf_progress`` (share of agents on their goal) as a metric of weight 0. ``rewards={"valid": 1.0}``
weighs the components differently (names: ``valid``, ``optimal``, ``format``, ``progress``).

Keyword arguments (all optional; the knobs build a stage config, ``simulator.config.StageConfig``):

==================  =================================================================================================
``suite``           a benchmark suite name (``simulator.suites``); excludes ``config`` and the knobs
``config``          a stage config: a YAML/JSON file path or a document (mapping); excludes ``suite`` and the knobs
``sizes``           map sides, equal shares (``[3, 4, 5]``), or the config's ``sizes`` block (default ``[3, 4, 5]``)
``agents``          agents per instance, an int or ``[min, max]`` (default 2)
``hole_ratio``      share of cells that are holes, for every listed side (default 0.2)
``wait_ratio``      share of instances whose solution needs a wait (default 0.3; 0 with one agent)
``samples``         instances in the stage (default 64)
``seed``            generator seed (default 0): same arguments, same dataset
``prompt_style``    a prompt style named in ``policy.prompts.PROMPT_STYLES`` (default ``natural``)
``eval_suite``      a benchmark suite for the environment's eval dataset (default none)
``rewards``         component weights (see above)
==================  =================================================================================================

Every bad value raises ``simulator.errors.ConfigError`` naming the argument. Written against the classic
``verifiers`` API (``SingleTurnEnv``, ``Rubric``: 0.1.9 to 0.3.x; 0.4 removed it).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

try:
    import verifiers as vf

    if not hasattr(vf, "SingleTurnEnv"):  # the classic API; verifiers 0.4 dropped it
        raise ImportError(f"verifiers {getattr(vf, '__version__', '?')} has no SingleTurnEnv")
except ImportError as error:  # the adapter is an optional extra; say how to get it
    raise ImportError("the verifiers adapter needs verifiers 0.1.9 to 0.3.x: "
                      f"pip install 'mapf-frozenlake[adapters]' ({error})") from None

from policy.export import export_items, layout_row
from policy.prompts import PROMPT_STYLES
from policy.rewards import DEFAULT_WEIGHTS
from policy.score import check_record, score
from simulator.errors import ConfigError

if TYPE_CHECKING:
    from simulator.generator import LabelledInstance

TASK_NAME = "mapf-lake"
COMPONENTS = ("valid", "optimal", "format", "progress")
KNOBS = {"sizes": [3, 4, 5], "agents": 2, "hole_ratio": 0.2, "wait_ratio": 0.3, "samples": 64, "seed": 0}
ARGUMENTS = ("suite", "config", *KNOBS, "prompt_style", "eval_suite", "rewards")


def stage_document(sizes: Any, agents: Any, hole_ratio: Any, wait_ratio: Any, samples: Any,
                   seed: Any) -> dict[str, Any]:
    """The stage config document of the knobs (module docstring); the StageConfig checks the values."""
    if isinstance(sizes, Mapping):
        table = dict(sizes)
    elif isinstance(sizes, (list, tuple)) and sizes and not isinstance(sizes, str):
        for side in sizes:
            if isinstance(side, (list, dict, set)):  # unhashable: a side is one integer
                raise ConfigError("sizes", sizes, "a list of map sides, each an integer")
        if len(set(map(str, sizes))) != len(sizes):
            raise ConfigError("sizes", sizes, "each map side listed once")
        wait = wait_ratio if agents != 1 else 0.0  # a lone agent never waits
        table = {side: {"data_ratio": 1 / len(sizes), "hole_ratio": hole_ratio, "wait_ratio": wait} for side in sizes}
    else:
        raise ConfigError("sizes", sizes, "a non-empty list of map sides or a mapping side -> "
                          "{data_ratio, hole_ratio, wait_ratio}")
    return {"agents": list(agents) if isinstance(agents, tuple) else agents, "samples": samples, "seed": seed,
            "sizes": table}


def _stage_items(suite: str | None, config: Any, knobs: dict[str, Any]) -> tuple[str, list[LabelledInstance]]:
    """``(source, instances)`` of the suite, the config or the knobs."""
    from simulator.config import StageConfig, load_config
    from simulator.generator import generate
    from simulator.suites import generate_suite

    given = sorted(name for name, value in knobs.items() if value is not None)
    if suite is not None and config is not None:
        raise ConfigError("suite", suite, "either suite or config, not both")
    if (suite is not None or config is not None) and given:
        raise ConfigError(given[0], knobs[given[0]], "unset when suite or config is given (they fix the instances)")
    if suite is not None:
        from simulator.suites import SUITES

        _named("suite", suite, SUITES)
        return f"suite:{suite}", [item for _, stage in generate_suite(suite) for item in stage.instances]
    if config is not None:
        if isinstance(config, Mapping):
            return "config:document", generate(StageConfig.from_dict(config)).instances
        if isinstance(config, str) or hasattr(config, "__fspath__"):
            from pathlib import Path

            if not Path(config).is_file():
                raise ConfigError("config", str(config), "a stage config file (YAML or JSON) that exists")
            return f"config:{Path(config).name}", generate(load_config(config)).instances
        raise ConfigError("config", config, "a stage config file path or a stage config document (mapping)")
    values = {name: KNOBS[name] if value is None else value for name, value in knobs.items()}
    document = stage_document(**values)
    return "config:arguments", generate(StageConfig.from_dict(document)).instances


def dataset_rows(records: list[dict[str, Any]], split: str) -> list[dict[str, Any]]:
    """The verifiers rows of export records (module docstring)."""
    return [{"prompt": layout_row(record, "verl", index, split)["prompt"], "answer": record["reference"],
             "info": json.dumps(record, separators=(",", ":"))}
            for index, record in enumerate(records)]


@functools.lru_cache(maxsize=4096)
def _verdict(record_json: str, text: str) -> dict[str, Any]:
    """``policy.score.score`` of one answer; cached, so the rubric's four functions judge each answer once."""
    return score(record_json, text)


def _record_json(info: Any) -> str:
    """The record of a row's ``info`` (a JSON string in the dataset, a dict once verifiers decoded it)."""
    record = check_record(info, "info")
    return info if isinstance(info, str) else json.dumps(record, separators=(",", ":"), sort_keys=True)


def _text(completion: Any, parser: Any) -> str:
    if isinstance(completion, str):
        return completion
    answer = parser.parse_answer(completion) if parser is not None else None
    return answer if isinstance(answer, str) else ""


def _component(name: str) -> Callable[..., float]:
    def reward(completion: Any, info: Any, parser: Any = None, **_kwargs: Any) -> float:
        return float(_verdict(_record_json(info), _text(completion, parser))[name])

    reward.__name__ = f"mapf_{name}"
    reward.__doc__ = f"The ``{name}`` verdict of ``policy.score`` on the last assistant message."
    return reward


REWARD_FUNCS = {name: _component(name) for name in COMPONENTS}


def _finite(value: int | float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer past the float range
        return False


def _named(name: str, value: Any, names: Collection[str]) -> None:
    """``value`` must be one of ``names`` (a string first: a list or dict is not even hashable)."""
    if not isinstance(value, str) or value not in names:
        raise ConfigError(name, value, f"one of {sorted(names)}")


def make_rubric(rewards: Mapping[str, float] | None = None) -> "vf.Rubric":
    """The rubric (module docstring): every component, weighted by ``rewards`` (default: the GRPO default
    reward's weights, progress 0)."""
    weights = dict(DEFAULT_WEIGHTS) if rewards is None else rewards
    if not isinstance(weights, Mapping) or not weights:
        raise ConfigError("rewards", rewards, f"a mapping of component names ({', '.join(COMPONENTS)}) to weights")
    for name, weight in weights.items():
        if name not in COMPONENTS:
            raise ConfigError(f"rewards.{name}", weight, f"a component among {', '.join(COMPONENTS)}")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not _finite(weight):
            raise ConfigError(f"rewards.{name}", weight, "a finite number")  # NaN or inf made every reward NaN
    return vf.Rubric(funcs=[REWARD_FUNCS[name] for name in COMPONENTS],
                     weights=[float(weights.get(name, 0.0)) for name in COMPONENTS], parser=vf.Parser())


def load_environment(**kwargs: Any) -> "vf.SingleTurnEnv":
    """The MAPF-FrozenLake ``vf.SingleTurnEnv`` (keyword arguments: module docstring)."""
    unknown = sorted(set(kwargs) - set(ARGUMENTS))
    if unknown:
        raise ConfigError(unknown[0], kwargs[unknown[0]], f"an argument among {', '.join(ARGUMENTS)}")
    style = kwargs.get("prompt_style", "natural")
    _named("prompt_style", style, PROMPT_STYLES)
    rubric = make_rubric(kwargs.get("rewards"))
    from datasets import Dataset

    source, items = _stage_items(kwargs.get("suite"), kwargs.get("config"), {name: kwargs.get(name) for name in KNOBS})
    train = Dataset.from_list(dataset_rows(list(export_items(source, items, style)), "train"))
    evaluation = None
    if kwargs.get("eval_suite") is not None:
        from simulator.suites import SUITES

        _named("eval_suite", kwargs["eval_suite"], SUITES)
        eval_source, eval_items = _stage_items(kwargs["eval_suite"], None, {name: None for name in KNOBS})
        evaluation = Dataset.from_list(dataset_rows(list(export_items(eval_source, eval_items, style)), "test"))
    return vf.SingleTurnEnv(dataset=train, eval_dataset=evaluation, rubric=rubric, parser=rubric.parser,
                            env_id=TASK_NAME, env_args=json.loads(json.dumps(kwargs, default=str)))


__all__ = ["COMPONENTS", "REWARD_FUNCS", "TASK_NAME", "dataset_rows", "load_environment", "make_rubric",
           "stage_document"]
