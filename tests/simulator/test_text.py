"""Text rendering of instances and states."""

import numpy as np
import pytest

from simulator import constants as C
from simulator.text import describe_agents, figure, percent, render_instance, render_state
from simulator.types import Instance


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda: percent(0.7416666666666667), "74.2%"),  # the run log printed this share raw once
        (lambda: percent(0.5, 0), "50%"),
        (lambda: percent(1), "100.0%"),
        (lambda: percent(None), "n/a"),
        (lambda: percent(None, missing="not measured"), "not measured"),
        (lambda: percent(True), "n/a"),  # a flag is not a share
        (lambda: percent(np.float64(0.25)), "25.0%"),
        (lambda: figure(0.123456), "0.12"),
        (lambda: figure(3, 1), "3.0"),
        (lambda: figure(np.int64(7), 0), "7"),
        (lambda: figure("0.5"), "n/a"),
        (lambda: figure(None, missing="-"), "-"),
    ],
)
def test_percent_and_figure__numbers_as_a_person_reads_them(call, expected):
    assert call() == expected


def test_render_instance__labels_agents_goals_and_holes():
    inst = Instance(grid=[[0, 1, 0], [0, 0, 0]], starts=[[0, 0], [1, 2]], goals=[[1, 0], [0, 2]])
    assert render_instance(inst) == "A0 H  G1\nG0 .  A1"


def test_render_state__fallen_agent_and_agent_on_goal():
    inst = Instance(grid=[[0, 1, 0]], starts=[[0, 0], [0, 2]], goals=[[0, 2], [0, 0]])
    assert render_state(inst, [[0, 1], [0, 0]], [C.FALLEN, C.ON_GOAL]) == "A1 X0 G0"


def test_render__wide_labels_keep_columns_aligned():
    starts = [[0, c] for c in range(12)]
    goals = [[1, c] for c in range(12)]
    inst = Instance(grid=[[0] * 12, [0] * 12], starts=starts, goals=goals)
    rows = render_instance(inst).splitlines()
    assert rows[0].split() == [f"A{k}" for k in range(12)]
    assert len(rows[0]) == len(rows[1])


def test_describe_agents__one_line_per_agent():
    inst = Instance(grid=[[0, 0]], starts=[[0, 0]], goals=[[0, 1]])
    assert describe_agents(inst) == "agent 0: start (0,0) -> goal (0,1)"


# What ``mapf-lake gen`` prints: a ``#`` header, the map, one line per agent (the map alone hides a goal under
# another agent's start: here the two agents swap), the optimal plan; the report closes the output.
GEN_ONE = """# size 3 #0: 2 agents, optimal makespan 4, optimal sum of costs 6, shortest-distance sum 4, needs_wait true
.  .  .
A1 .  A0
.  H  H
agent 0: start (1,2) -> goal (1,0)
agent 1: start (1,0) -> goal (1,2)
optimal plan:
agent 0: L L
agent 1: U R D R

size 3: 1 instance, holes 0.222 (asked 0.2), needs_wait 1.000 (asked 0.3), 7 candidates (rejected: 1 no room/unsolvable, 0 over budget, 4 wrong wait label)
checksum 00ad198378245f7624d5c53a1a4e51fe418b598647836433512005e61044bcef
"""
GEN_TWO = GEN_ONE.split("\nsize 3:")[0] + """
# size 3 #1: 2 agents, optimal makespan 1, optimal sum of costs 1, shortest-distance sum 1, needs_wait false
H  G1 A1
.  A0 .
.  .  H
agent 0: start (1,1) -> goal (1,1)
agent 1: start (0,2) -> goal (0,1)
optimal plan:
agent 0: (stays)
agent 1: L

size 3: 2 instances, holes 0.222 (asked 0.2)
checksum 00ad
"""


@pytest.mark.parametrize("text, starts, goals", [
    ("A0 .\n. G0\n", [[[0, 0]]], [[[1, 1]]]),  # bare map text, as before
    ("A0 .\n\n. G0\n", [[[0, 0]]], [[[1, 1]]]),  # blank lines inside a map are still ignored
    ("# a comment\nA0 .\n. G0\n", [[[0, 0]]], [[[1, 1]]]),
    ("A0 A1\n. .\nagent 0: start (0,0) -> goal (0,1)\nagent 1: start (0,1) -> goal (0,0)\n",
     [[[0, 0], [0, 1]]], [[[0, 1], [0, 0]]]),  # goals hidden under starts, given by the agent lines
    (GEN_ONE, [[[1, 2], [1, 0]]], [[[1, 0], [1, 2]]]),
    (GEN_ONE.replace("1 instance,", "1 instances,"), [[[1, 2], [1, 0]]], [[[1, 0], [1, 2]]]),  # before the plural fix
    (GEN_TWO, [[[1, 2], [1, 0]], [[1, 1], [0, 2]]], [[[1, 0], [1, 2]], [[1, 1], [0, 1]]]),
])
def test_parse_instances__reads_what_gen_prints(text, starts, goals):
    from simulator.text import parse_instances

    instances = parse_instances(text)
    assert [instance.starts.tolist() for instance in instances] == starts
    assert [instance.goals.tolist() for instance in instances] == goals


def test_parse_instance__reads_back_render_instance_and_describe_agents():
    from simulator.text import parse_instance

    swap = Instance(grid=[[0, 0, 1], [0, 0, 0]], starts=[[0, 0], [1, 2]], goals=[[1, 2], [0, 0]])
    assert parse_instance(render_instance(swap) + "\n" + describe_agents(swap)) == swap


@pytest.mark.parametrize("text, message", [
    (GEN_TWO, "2 instances"),  # one instance wanted: say how many there are
    ("# only a comment\n", "at least one row"),
    ("A0 .\nagent 0: R\n", "line 2"),  # plan lines only after 'optimal plan:'; the real line number
    ("# x\nA0 . Q\n", "line 2 token 3"),
    ("A0 .\n. G0\nagent 0: start (0,0) -> goal (0,1)\n", "line 3"),  # the line and the map disagree on the goal
    ("A0 .\n. .\nagent 0: start (1,0) -> goal (0,1)\n", "line 3"),  # ... on the start
    ("A0 .\n. .\nagent 1: start (0,0) -> goal (0,1)\n", "line 3"),  # an agent not on the map
    ("A0 A1\n. .\nagent 0: start (0,0) -> goal (0,1)\n", "agent 1"),  # a line per agent, or none
    ("agent 0: start (0,0) -> goal (0,1)\nA0 .\n", "line 1"),  # agent lines come after their map
])
def test_parse_instance__refusals_name_the_line(text, message):
    from simulator.errors import ConfigError
    from simulator.text import parse_instance

    with pytest.raises(ConfigError, match=message):
        parse_instance(text)


def test_counted__one_thing_reads_singular_in_gen_play_and_their_errors(capsys, tmp_path):
    """'1 agents', '1 instances', '1 candidates', 'solved in 1 steps', '1 game(s)', 'the file has 1 instances'."""
    from curriculum.cli import main
    from render.game import PlayGame, load_instance
    from simulator.errors import ConfigError
    from simulator.text import parse_instances

    assert main(["gen", "--size", "4", "--agents", "1", "--wait-ratio", "0", "--n", "1"]) == 0
    out = capsys.readouterr().out
    assert ": 1 agent," in out and "size 4: 1 instance," in out and "), 1 candidate (" in out
    (tmp_path / "one.txt").write_text(out)
    assert parse_instances(out)  # gen's report in the singular is still skipped by the reader
    with pytest.raises(ConfigError, match=r"the file has 1 instance\)"):
        load_instance(tmp_path / "one.txt", 3)
    game = PlayGame(Instance(grid=[[0, 0]], starts=[[0, 0]], goals=[[0, 1]]), optimal_makespan=1)
    assert game.verdict() == "in play: the agent is on its way"
    game.set_action(C.RIGHT)
    game.commit()
    assert game.verdict().startswith("solved in 1 step (")
