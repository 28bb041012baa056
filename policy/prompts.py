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

``compact-nb`` (tiny models, the ``tiny`` preset): ``compact`` plus each agent's four start neighbours after its
line, ``H`` where the move is blocked (a hole or off the map) and ``.`` where it is open::

    A0 3,2>2,3 U.DHL.R.   <- up open, down blocked, left open, right open

The same alphabet and the same answers. A character model has to find the cells next to its start in the map
rows by counting; the tiny model mostly could not, and 150 of its 221 hole failures on a validation set were its
first move. Spelled out, its warm start validates ~7 points higher (docs/results/tiny.md, "The tiny run, measured").

``compact-nb-rev`` (tiny models): ``compact-nb`` with the agents' lines from the last agent to the first, so
that the line an answer line needs (its agent's start, goal and neighbours) sits the same number of lines above it
whatever the agent count: ``2k + 2`` lines above agent ``k``'s answer line (in ``compact-nb`` it is ``n + 1``, which
moves with the count ``n``). A tiny model trained on 2 agents finds its agent's line by that distance: on 3-agent
boards its answer line for agent 0 walked agent 1's route far more often than its own
(docs/results/transfer/README.md). The answers are the same.

``compact-nb-shuf`` (tiny models): ``compact-nb`` with the agents' lines in an order drawn from the instance's
content (:func:`shuffled_order`: the same board always gets the same order, any two boards independent ones), while
the answer lines stay in agent order ``A0``, ``A1``, ... No distance between an answer line and its agent's prompt
line holds across boards, so a model trained on it can only find the line by its label, which is what a board
with more agents than it was trained on needs. The answers are the same.

``compact-nb-copy`` (tiny models): the ``compact-nb`` prompt, and each answer line first copies its agent's prompt
line, then writes the actions: ``A0 3,2>2,3 U.DHL.R. UUL``. The actions are written right after what they depend
on, whatever the agent count, and finding the next agent's line is finding the line after the one just copied (the
parser skips the copied part, :data:`policy.parsing._RESTATED`).

``compact-xy`` (tiny models): the same alphabet, but the map as a list of its holes' cells and each answer as a
trace of the cells it visits, so that what a character model must look up is a short string, not a position in a
drawn grid. A cell is its row then its column, each in as many digits as the map's largest index needs (one on
maps up to 10x10: ``32`` is row 3, column 2)::

    n=4          <- map side (rows,columns for non-square maps)
    H02 13 21    <- the holes' cells (``H`` alone: no holes)
    A0 32>23     <- agent 0: start cell > goal cell
    A1 00>11
    ?

and the answer writes each action with the cell it leads to: ``A0 U22R23`` / ``A1 D10R11`` (``W`` with the cell it
waits on). The parser reads the actions and ignores the cells (:func:`policy.parsing.parse_plan`), so a wrong cell
costs nothing by itself: the cells are the model's own record of where each agent is, which it can match against
the hole list and the goal instead of counting along map rows.

The style is recorded in replays (the policy descriptor's ``prompt_style``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from simulator import constants as C
from simulator.errors import ConfigError
from simulator.text import describe_agents, legend, render_instance, render_state
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


def natural_messages(instance: Instance) -> list[dict[str, Any]]:
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


_NEIGHBOURS = (("U", -1, 0), ("D", 1, 0), ("L", 0, -1), ("R", 0, 1))


def start_neighbours(instance: Instance, row: int, col: int) -> str:
    """``U.DHL.R.``: for each move from (row, col), ``H`` when it is blocked (a hole or off the map), else ``.``."""
    marks = []
    for letter, dr, dc in _NEIGHBOURS:
        r, c = row + dr, col + dc
        blocked = not (0 <= r < instance.height and 0 <= c < instance.width) or instance.grid[r][c] == C.HOLE
        marks.append(letter + (C.SYMBOL_HOLE if blocked else C.SYMBOL_ICE))
    return "".join(marks)


def _side_header(instance: Instance) -> str:
    """``n=4`` for a square map, ``n=3,5`` (rows, columns) otherwise: the first line of the compact styles."""
    return f"n={instance.height}" if instance.height == instance.width else f"n={instance.height},{instance.width}"


def shuffled_order(instance: Instance) -> list[int]:
    """The agents' order in a ``compact-nb-shuf`` prompt: a permutation drawn with the instance's content key as
    its seed, so it is the same in every process and on every machine."""
    rng = np.random.default_rng(int.from_bytes(instance.content_key()[:8], "little"))
    return [int(k) for k in rng.permutation(instance.n_agents)]


def last_first_order(instance: Instance) -> list[int]:
    """The agents' order in a ``compact-nb-rev`` prompt: the last agent first."""
    return list(range(instance.n_agents))[::-1]


def compact_prompt(instance: Instance, neighbours: bool = False,
                   order: Callable[[Instance], list[int]] | None = None) -> str:
    """The compact raw-text prompt (see the module docstring); ``neighbours``: the ``compact-nb`` variant;
    ``order``: the agents' lines in the order it gives (:func:`last_first_order` for ``compact-nb-rev``,
    :func:`shuffled_order` for ``compact-nb-shuf``; None: agent order)."""
    rows = ["".join(C.SYMBOL_HOLE if tile == C.HOLE else C.SYMBOL_ICE for tile in row) for row in instance.grid]
    agents = [
        f"A{k} {s[0]},{s[1]}>{g[0]},{g[1]}" + (f" {start_neighbours(instance, s[0], s[1])}" if neighbours else "")
        for k, (s, g) in enumerate(zip(instance.starts.tolist(), instance.goals.tolist()))
    ]
    if order is not None:
        agents = [agents[k] for k in order(instance)]
    return _side_header(instance) + "\n" + "\n".join(rows) + "\n" + "\n".join(agents) + "\n?\n"


def compact_nb_prompt(instance: Instance) -> str:
    """The ``compact-nb`` prompt: compact plus each agent's start neighbours (see the module docstring)."""
    return compact_prompt(instance, neighbours=True)


def copy_answer_for(instance: Instance, plan: JointPlan) -> str:
    """``plan`` in the ``compact-nb-copy`` answer form: each agent's prompt line copied, then its actions
    (``A0 0,1>0,2 UHD.LHR. R``; the parser skips the copied part)."""
    lines = []
    for k, (start, goal, seq) in enumerate(zip(instance.starts.tolist(), instance.goals.tolist(), plan.sequences())):
        moves = "".join(C.ACTION_LETTERS[a] for a in seq)
        lines.append(f"A{k} {start[0]},{start[1]}>{goal[0]},{goal[1]} {start_neighbours(instance, start[0], start[1])}"
                     + (f" {moves}" if moves else ""))
    return "\n".join(lines) + "\n"


def compact_nb_rev_prompt(instance: Instance) -> str:
    """The ``compact-nb-rev`` prompt: ``compact-nb`` with the agents' lines last agent first (module docstring)."""
    return compact_prompt(instance, neighbours=True, order=last_first_order)


def compact_nb_shuf_prompt(instance: Instance) -> str:
    """The ``compact-nb-shuf`` prompt: ``compact-nb`` with the agents' lines in :func:`shuffled_order`."""
    return compact_prompt(instance, neighbours=True, order=shuffled_order)


def compact_answer(plan: JointPlan) -> str:
    return "\n".join(
        f"A{k} " + "".join(C.ACTION_LETTERS[a] for a in seq) for k, seq in enumerate(plan.sequences())
    ) + "\n"


def cell_digits(instance: Instance) -> int:
    """Digits per coordinate in the ``compact-xy`` style: enough for the map's largest row or column index."""
    return len(str(max(instance.height, instance.width) - 1))


def xy_cell(row: int, col: int, digits: int) -> str:
    """A cell as the ``compact-xy`` style writes it: row then column, each ``digits`` wide (``0102``)."""
    return f"{row:0{digits}d}{col:0{digits}d}"


def compact_xy_prompt(instance: Instance) -> str:
    """The ``compact-xy`` prompt: the holes as cells, then each agent's start and goal cells (module docstring)."""
    digits = cell_digits(instance)
    holes = [xy_cell(r, c, digits) for r, row in enumerate(instance.grid) for c, tile in enumerate(row) if tile == C.HOLE]
    agents = [
        f"A{k} {xy_cell(s[0], s[1], digits)}>{xy_cell(g[0], g[1], digits)}"
        for k, (s, g) in enumerate(zip(instance.starts.tolist(), instance.goals.tolist()))
    ]
    return f"{_side_header(instance)}\n{C.SYMBOL_HOLE}" + " ".join(holes) + "\n" + "\n".join(agents) + "\n?\n"


def xy_answer_for(instance: Instance, plan: JointPlan) -> str:
    """``plan`` in the ``compact-xy`` answer form: each action followed by the cell it leads to on ``instance``,
    whatever lies there (a hole too); a move off the map is written without a cell. Cells follow the actions as
    written, also past an agent's arrival (the judge ignores those actions)."""
    digits = cell_digits(instance)
    lines = []
    for k, seq in enumerate(plan.sequences()):
        row, col = (int(v) for v in instance.starts[k])
        steps = []
        for action in seq:
            dr, dc = C.ACTION_DELTAS[action]
            row, col = row + dr, col + dc
            on_map = 0 <= row < instance.height and 0 <= col < instance.width
            steps.append(C.ACTION_LETTERS[action] + (xy_cell(row, col, digits) if on_map else ""))
        lines.append(f"A{k} " + "".join(steps))
    return "\n".join(lines) + "\n"


# --- multi-turn: the first prompt and the env's text after each turn ---------------------------------------

def compact_observation(instance: Instance, positions: np.ndarray, t: int, neighbours: bool = False) -> str:
    cells = []
    for r, c in positions.tolist():
        cells.append(f"{r},{c}" + (f" {start_neighbours(instance, r, c)}" if neighbours else ""))
    return "=" + " ".join(cells) + "\n"


def xy_observation(instance: Instance, positions: np.ndarray, t: int) -> str:
    digits = cell_digits(instance)
    return "=" + " ".join(xy_cell(r, c, digits) for r, c in positions.tolist()) + "\n"


def natural_observation(instance: Instance, positions: np.ndarray, t: int) -> str:
    agents = ", ".join(f"agent {k} at ({r},{c})" + (" (on its goal)" if (r, c) == tuple(instance.goals[k]) else "")
                       for k, (r, c) in enumerate(positions.tolist()))
    steps = f"{t} step" + ("" if t == 1 else "s")
    return (f"After {steps}:\n{render_state(instance, positions)}\nAgents (row, column): {agents}.\n"
            f"Your joint action for step {t + 1}: one letter per agent, in agent order, between {ANSWER_OPEN} and "
            f"{ANSWER_CLOSE}.")


def natural_turn_prompt(instance: Instance) -> list[dict[str, Any]]:
    example = " ".join(("R", "W", "D", "L")[k % 4] for k in range(instance.n_agents))
    user = (
        f"Map ({instance.height} rows x {instance.width} columns; {legend()}):\n{render_instance(instance)}\n\n"
        f"Agents (row, column):\n{describe_agents(instance)}\n\n"
        "You play one step at a time. Each turn, answer with one action per agent, in agent order: U (up), D (down), "
        f"L (left), R (right) or W (wait), between {ANSWER_OPEN} and {ANSWER_CLOSE}, for example "
        f"{ANSWER_OPEN}{example}{ANSWER_CLOSE}. You then see where the agents are and answer the next step.\n\n"
        + natural_observation(instance, instance.starts, 0)
    )
    return [{"role": "system", "content": RULES}, {"role": "user", "content": user}]


@dataclass(frozen=True)
class PromptStyle:
    """A named way to show an instance to a model and to write an answer in it."""

    name: str
    chat: bool  # True: ``prompt`` returns chat messages; False: raw text
    prompt: Callable[[Instance], str | list[dict[str, Any]]]
    answer: Callable[[JointPlan], str]  # the answer from the plan alone (compact-xy: without its cells)
    answer_for: Callable[[Instance, JointPlan], str] | None = None
    """The answer written with the instance at hand (styles whose answers show where the agents go); None: the
    answer depends on the plan alone. Callers use :meth:`write_answer`."""
    turn_prompt: Callable[[Instance], str | list[dict[str, Any]]] | None = None
    """Multi-turn (``policy.multiturn``): rules, map, agents and the first observation."""
    observation: Callable[[Instance, np.ndarray, int], str] | None = None
    """Multi-turn: the env's text after a turn, ``(instance, positions (K, 2), steps taken) -> text`` (a user
    message in a chat style)."""

    def write_answer(self, instance: Instance, plan: JointPlan) -> str:
        """How a correct answer to ``instance`` looks in this style (SFT targets, scripted policies)."""
        return self.answer_for(instance, plan) if self.answer_for is not None else self.answer(plan)


def _neighbour_turns(prompt: Callable[[Instance], str]) -> tuple[Callable[[Instance], str],
                                                                  Callable[[Instance, np.ndarray, int], str]]:
    """The multi-turn form of a ``compact-nb`` style whose single-turn prompt is ``prompt``: that prompt and the
    first observation, then one observation per turn with each agent's neighbours."""
    return (lambda inst: prompt(inst) + compact_observation(inst, inst.starts, 0, True),
            lambda inst, pos, t: compact_observation(inst, pos, t, True))


PROMPT_STYLES: dict[str, PromptStyle] = {
    "natural": PromptStyle("natural", True, natural_messages, natural_answer, None, natural_turn_prompt,
                           natural_observation),
    "compact": PromptStyle("compact", False, compact_prompt, compact_answer, None,
                           lambda inst: compact_prompt(inst) + compact_observation(inst, inst.starts, 0),
                           compact_observation),
    "compact-nb": PromptStyle("compact-nb", False, compact_nb_prompt, compact_answer, None,
                              *_neighbour_turns(compact_nb_prompt)),
    "compact-nb-rev": PromptStyle("compact-nb-rev", False, compact_nb_rev_prompt, compact_answer, None,
                                  *_neighbour_turns(compact_nb_rev_prompt)),
    "compact-nb-shuf": PromptStyle("compact-nb-shuf", False, compact_nb_shuf_prompt, compact_answer, None,
                                   *_neighbour_turns(compact_nb_shuf_prompt)),
    "compact-nb-copy": PromptStyle("compact-nb-copy", False, compact_nb_prompt, compact_answer, copy_answer_for,
                                   *_neighbour_turns(compact_nb_prompt)),
    "compact-xy": PromptStyle("compact-xy", False, compact_xy_prompt, compact_answer, xy_answer_for,
                              lambda inst: compact_xy_prompt(inst) + xy_observation(inst, inst.starts, 0),
                              xy_observation),
}


STYLE_FILE = "prompt_style.json"
"""Written into every checkpoint folder a run saves: the style the model was trained on, so evaluating the folder
later (``mapf-lake eval --policy hf:FOLDER``) prompts it the same way without being told."""


def save_checkpoint_style(folder: str | os.PathLike[str], name: str) -> None:
    import json
    from pathlib import Path

    from simulator.atomic import atomic_write

    atomic_write(Path(folder) / STYLE_FILE, json.dumps({"prompt_style": name}))


def checkpoint_style(spec: str) -> str | None:
    """The style recorded in a ``hf:`` / ``vllm:`` folder's :data:`STYLE_FILE`; None when there is none (hub
    names, folders from elsewhere, unreadable files)."""
    from pathlib import Path

    kind, _, target = spec.partition(":")
    if kind not in ("hf", "vllm") or not target:
        return None
    from simulator.files import MAX_CONFIG_BYTES, load_json, read_text_bounded

    try:  # a FIFO or a huge file under the name is no style file (never waited on, never loaded whole)
        name = load_json(read_text_bounded(Path(target) / STYLE_FILE, MAX_CONFIG_BYTES, "a prompt style file"),
                         STYLE_FILE).get("prompt_style")
    except (ValueError, AttributeError):  # ConfigError is a ValueError
        return None
    return name if name in PROMPT_STYLES else None


def get_style(name: str) -> PromptStyle:
    if name not in PROMPT_STYLES:
        raise ConfigError("prompt_style", name, f"one of {sorted(PROMPT_STYLES)}")
    return PROMPT_STYLES[name]


def prompt_text(prompt: str | list[dict[str, Any]]) -> str:
    """A prompt as one string, for replays and logs (chat messages joined with their roles)."""
    if isinstance(prompt, str):
        return prompt
    return "\n\n".join(f"[{m.get('role', '?')}]\n{m.get('content', '')}" for m in prompt)
