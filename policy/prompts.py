"""Prompts: an instance as a model's input, in named styles (``PROMPT_STYLES``), and answers in each style.

``natural`` (real models): chat messages. The system message states the rules in plain words; the user message
gives the map (``simulator.text`` symbols), each agent's start and goal, and the answer format: one line per
agent with its whole action sequence, inside ``<answer>`` ... ``</answer>``.

``compact`` (tiny models): raw text over a 25-character alphabet (digits, ``. H n = A , > ?``, ``U D L R W``,
space, newline)::

    n=4          <- map side (rows,columns for non-square maps: n=3,5)
    ..H.         <- map rows: . ice, H hole
    ....
    .H..
    ....
    A0 3,2>2,3   <- agent 0: start row,col > goal row,col
    A1 0,0>1,1
    ?            <- the answer follows

and the answer is ``A0 UUL`` / ``A1 DR``: one line per agent, letters only.

The style is recorded in replays (the policy descriptor's ``prompt_style``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from simulator import constants as C
from simulator.errors import ConfigError
from simulator.text import describe_agents, legend, render_instance
from simulator.types import Instance, JointPlan

ANSWER_OPEN = "<answer>"
ANSWER_CLOSE = "</answer>"

RULES = (
    "You are planning for several agents on a frozen lake (a grid of ice and holes). Each agent must reach its own "
    "goal. At every step all agents move at the same time; each one moves up, down, left or right by one cell, or "
    "waits. A plan fails if an agent moves off the grid, moves into a hole, two agents end a step in the same "
    "cell, or two agents swap cells in one step. An agent may move into a cell that another agent leaves in the "
    "same step. An agent that reaches its goal stays there for good and ignores the rest of its actions, so no "
    "other agent may enter that cell afterwards. Every agent must end on its goal. Use as few steps as possible: "
    "the plan is judged by the step at which the last agent arrives."
)


def natural_messages(instance: Instance) -> list[dict]:
    """Chat messages (system + user) for ``instance`` in the natural style."""
    example = "\n".join(f"agent {k}: R D W" for k in range(min(instance.n_agents, 2)))
    user = (
        f"Map ({instance.height} rows x {instance.width} columns; {legend()}):\n"
        f"{render_instance(instance)}\n\n"
        f"Agents (row, column):\n{describe_agents(instance)}\n\n"
        "Give each agent's whole action sequence using U (up), D (down), L (left), R (right) and W (wait). Write "
        f"your final answer between {ANSWER_OPEN} and {ANSWER_CLOSE}, one line per agent, for example:\n"
        f"{ANSWER_OPEN}\n{example}\n{ANSWER_CLOSE}"
    )
    return [{"role": "system", "content": RULES}, {"role": "user", "content": user}]


def natural_answer(plan: JointPlan) -> str:
    lines = [
        f"agent {k}: " + " ".join(C.ACTION_LETTERS[a] for a in seq) for k, seq in enumerate(plan.sequences())
    ]
    return f"{ANSWER_OPEN}\n" + "\n".join(lines) + f"\n{ANSWER_CLOSE}"


def compact_prompt(instance: Instance) -> str:
    """The compact raw-text prompt (see the module docstring)."""
    side = str(instance.height) if instance.height == instance.width else f"{instance.height},{instance.width}"
    rows = ["".join(C.SYMBOL_HOLE if tile == C.HOLE else C.SYMBOL_ICE for tile in row) for row in instance.grid]
    agents = [
        f"A{k} {s[0]},{s[1]}>{g[0]},{g[1]}"
        for k, (s, g) in enumerate(zip(instance.starts.tolist(), instance.goals.tolist()))
    ]
    return f"n={side}\n" + "\n".join(rows) + "\n" + "\n".join(agents) + "\n?\n"


def compact_answer(plan: JointPlan) -> str:
    return "\n".join(
        f"A{k} " + "".join(C.ACTION_LETTERS[a] for a in seq) for k, seq in enumerate(plan.sequences())
    ) + "\n"


@dataclass(frozen=True)
class PromptStyle:
    """A named way to show an instance to a model and to write an answer in it."""

    name: str
    chat: bool  # True: ``prompt`` returns chat messages; False: raw text
    prompt: Callable[[Instance], str | list[dict]]
    answer: Callable[[JointPlan], str]  # how a correct answer looks (SFT targets, scripted policies)


PROMPT_STYLES: dict[str, PromptStyle] = {
    "natural": PromptStyle("natural", True, natural_messages, natural_answer),
    "compact": PromptStyle("compact", False, compact_prompt, compact_answer),
}


def get_style(name: str) -> PromptStyle:
    if name not in PROMPT_STYLES:
        raise ConfigError("prompt_style", name, f"one of {sorted(PROMPT_STYLES)}")
    return PROMPT_STYLES[name]


def prompt_text(prompt: str | list[dict]) -> str:
    """A prompt as one string, for replays and logs (chat messages joined with their roles)."""
    if isinstance(prompt, str):
        return prompt
    return "\n\n".join(f"[{m.get('role', '?')}]\n{m.get('content', '')}" for m in prompt)
