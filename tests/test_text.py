"""Text rendering of instances and states."""

from simulator import constants as C
from simulator.text import describe_agents, render_instance, render_state
from simulator.types import Instance


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
