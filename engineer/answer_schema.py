"""The JSON Schema of an engineer's answer, ``{"rationale": str, "config": <stage config>}``, which the backends
that can hold generation to a schema do (a grammar library on ``hf:``, guided decoding on ``vllm:``,
``response_format`` on ``openai:``; see :mod:`engineer.llm`).

``config`` is the stage config document's schema (:func:`simulator.config.config_json_schema`, itself read from
the declared fields of :class:`~simulator.config.StageConfig` and :class:`~simulator.config.SizeSpec`), bounded
further where a schema can say it:

* map sides: only those the run may use, each listed as its own optional property (``"3"``, ``"4"``, ...), so a
  side cannot be invented or written twice, and the sizes mapping ends once the listed sides are used up (an
  unbounded mapping let a 135M model write sides 8, 9, 10, 11, ... until its token limit);
* the rationale: a string of at most ``rationale_chars`` characters;
* numbers (the ratios and ``slip``): at most two decimal places (``multipleOf`` :data:`NUMBER_STEP`), so a number
  ends. With no step a grammar admits ``0.000000...`` without end, and the ``smol-self`` trainee wrote exactly that
  at every boundary of its first declared seed (721) until its 600-token limit, so no answer reached a config.
  Grammar libraries read the step as decimal digits (llguidance: ``0.07`` yes, ``0.001`` no; OpenAI's structured
  outputs support it); a float-dividing validator may call ``0.07`` no multiple of ``0.01``, which is why
  nothing in the loop validates answers that way (:func:`engineer.proposal.decide_from_answer` reads the document
  and the config checks it);
* ratios, agents, samples, makespans: the declared ranges; no extra keys anywhere; the required keys required.

What a schema cannot say stays with :func:`engineer.proposal.repair_proposal` and the config's own checks, which
record what they repaired or why they refused: data ratios summing to 1, ``min_makespan <= max_makespan``, enough
free cells for the agents, waits needing two agents, a band the generator can fill. The schema is a subset check:
every answer it admits is a document :func:`engineer.proposal.decide_from_answer` reads; not every such document
is a valid config.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from simulator.config import MAX_SIZE, MIN_SIZE, StageConfig, config_json_schema
from simulator.documents import is_python_int
from simulator.errors import ConfigError

BENCHMARK_SIDES = tuple(range(3, 11))
"""The published benchmark's map sides (3x3..10x10, as ``simulator.suites``' paper suites): with the current
config's own sides, the sides an answer may list unless the engineer's ``sides`` option says otherwise."""
RATIONALE_CHARS = 600
"""Default bound on the rationale's length (about three sentences; :data:`engineer.proposal.MAX_RATIONALE_CHARS`
is what a record keeps of a free-text one)."""
ANSWER_KEYS = ("rationale", "config")
NUMBER_STEP = 0.01
"""The step of every number an answer writes (``multipleOf``): two decimal places, enough for every ratio and
``slip`` (a config's own finer values are rounded by the engineer that keeps them; its repairs rescale the data
ratios to sum to 1)."""


def _bounded_numbers(schema: Any) -> None:
    """Give every ``"type": "number"`` schema inside ``schema`` the step :data:`NUMBER_STEP` (in place)."""
    if isinstance(schema, dict):
        if schema.get("type") == "number":
            schema["multipleOf"] = NUMBER_STEP
        for value in schema.values():
            _bounded_numbers(value)
    elif isinstance(schema, list):
        for value in schema:
            _bounded_numbers(value)


def check_sides(sides: Any) -> tuple[int, ...]:
    """``sides`` (a list or tuple of map sides) as a tuple; else ConfigError naming ``llm.sides``."""
    allowed = f"None, or a non-empty list of map sides (integers in [{MIN_SIZE}, {MAX_SIZE}])"
    if not isinstance(sides, (list, tuple)) or not sides:
        raise ConfigError("llm.sides", sides, allowed)
    for side in sides:
        if not is_python_int(side) or not MIN_SIZE <= side <= MAX_SIZE:
            raise ConfigError("llm.sides", list(sides), allowed)
    return tuple(sides)


def answer_sides(config: StageConfig, sides: Iterable[int] | None = None) -> tuple[int, ...]:
    """The map sides an answer may list, ascending: ``sides`` when given (:func:`check_sides`), else
    :data:`BENCHMARK_SIDES`; the current config's own sides always (an answer may keep what it has)."""
    chosen = BENCHMARK_SIDES if sides is None else check_sides(tuple(sides))
    return tuple(sorted(set(chosen) | set(config.sizes)))


def answer_json_schema(config: StageConfig, sides: Iterable[int] | None = None,
                       rationale_chars: int = RATIONALE_CHARS) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of an answer to an engineer prompt whose current config is ``config``
    (see the module docstring; ``sides`` as :func:`answer_sides` takes it). A fresh dict on every call."""
    document = config_json_schema()
    document.pop("$schema", None)
    document.pop("title", None)
    _bounded_numbers(document)
    agents = document["properties"]["agents"]
    # The two forms (a count, a [min, max] list) have different types, so "anyOf" says the same as "oneOf";
    # grammar compilers and strict response formats take anyOf as it is, oneOf only approximately or not at all.
    agents["anyOf"] = agents.pop("oneOf")
    sizes = document["properties"]["sizes"]
    size_spec = sizes.pop("additionalProperties")
    sizes.pop("propertyNames", None)
    listed = answer_sides(config, sides)
    sizes["properties"] = {str(side): {"$ref": "#/$defs/size"} for side in listed}  # one definition, not N copies
    sizes["additionalProperties"] = False
    sizes["description"] = (f"Map side length as a string key, one of {', '.join(map(str, listed))}, each at most "
                            "once -> how that size is sampled. Maps are square.")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "MAPF-FrozenLake engineer answer",
        "description": "The engineer's reasons, then the complete config of the next training stage.",
        "type": "object",
        "additionalProperties": False,
        "required": list(ANSWER_KEYS),
        "properties": {
            "rationale": {"type": "string", "maxLength": rationale_chars,
                          "description": f"Why this config, in at most {rationale_chars} characters."},
            "config": document,
        },
        "$defs": {"size": size_spec},
    }


__all__ = ["ANSWER_KEYS", "BENCHMARK_SIDES", "NUMBER_STEP", "RATIONALE_CHARS", "answer_json_schema", "answer_sides",
           "check_sides"]
