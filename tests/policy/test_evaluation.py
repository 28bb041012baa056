"""Paper-style evaluation: table values, resumability, replays recorded, parse errors kept."""

from __future__ import annotations

import pytest

from policy.evaluation import cell_file, evaluate
from policy.policies import Answers, make_policy
from replays.reader import read_replay
from simulator.suites import suite_cells


def test_evaluate__oracle_is_perfect_and_resumes(tmp_path):
    table = evaluate(make_policy("oracle"), "train-2agent-quick", tmp_path)
    assert all(v == 1.0 and o == 1.0 for v, o, _ in table.rates.values())
    assert table.reused_cells == 0
    again = evaluate(make_policy("oracle"), "train-2agent-quick", tmp_path)
    assert again.reused_cells == len(suite_cells("train-2agent-quick"))
    assert again.rates == table.rates
    header, episodes = read_replay(cell_file(tmp_path, 2, 5))
    assert header.split == "eval" and header.policy["spec"] == "oracle" and len(episodes) == 10
    assert all(ep.reward == pytest.approx(1.6) and ep.completion.startswith("<answer>") for ep in episodes)


def test_evaluate__a_damaged_cell_file_is_run_again(tmp_path):
    evaluate(make_policy("greedy"), "train-2agent-quick", tmp_path)
    path = cell_file(tmp_path, 2, 3)
    path.write_bytes(path.read_bytes()[:50])
    table = evaluate(make_policy("greedy"), "train-2agent-quick", tmp_path)
    assert table.reused_cells == len(suite_cells("train-2agent-quick")) - 1
    assert len(read_replay(path)[1]) == 10


class GarbagePolicy:
    descriptor = {"name": "garbage", "spec": "garbage", "kind": "test"}

    def answer(self, items, seed=0):
        texts = ["", "x" * 100_000, "agent 0: fly"] * (len(items) // 3 + 1)
        from policy.policies import _parse_all

        plans, errors = _parse_all(items, texts[: len(items)])
        return Answers(plans, errors, texts[: len(items)], ["p"] * len(items), [1] * len(items), [2] * len(items))


def test_evaluate__garbage_answers_are_parse_errors_with_zero_reward(tmp_path):
    table = evaluate(GarbagePolicy(), "train-2agent-quick", tmp_path)
    assert table.failures["parse_error"] == 80
    _, episodes = read_replay(cell_file(tmp_path, 2, 4))
    assert all(ep.reward == 0.0 and ep.parse_error and ep.plan is None for ep in episodes)
    assert episodes[0].completion_tokens == 2


def test_judge_answers__parse_failures_are_invalid_and_optimal_needs_the_optimal_makespan():
    from simulator.config import StageConfig
    from simulator.generator import generate
    from simulator.types import JointPlan
    from policy.rollout import judge_answers

    items = generate(StageConfig.from_dict({"agents": 2, "samples": 3, "seed": 7, "sizes": {
        4: {"data_ratio": 1.0, "hole_ratio": 0.0, "wait_ratio": 0.0}}})).instances
    longer = JointPlan.from_sequences([list(seq[: n]) + [0] for seq, n in zip(items[1].plan.actions, items[1].plan.lengths)])
    verdicts = judge_answers(items, [items[0].plan, longer, None])
    assert verdicts.valid.tolist() == [True, True, False]
    assert verdicts.optimal.tolist()[0] is True and verdicts.optimal.tolist()[2] is False
    assert verdicts.makespan[0] == items[0].optimal_makespan and verdicts.makespan[2] == 0


@pytest.mark.parametrize("first, second, differs", [
    (dict(policy="greedy"), dict(policy="random"), "policy"),
    (dict(policy="greedy", style=None), dict(policy="greedy", style="compact"), "policy"),
    (dict(policy="random", seed=0), dict(policy="random", seed=1), "seed"),
])
def test_evaluate__a_folder_of_another_policy_or_decoding_is_refused(tmp_path, first, second, differs):
    from simulator.errors import ConfigError

    evaluate(make_policy(first["policy"], first.get("style")), "train-2agent-quick", tmp_path,
             seed=first.get("seed", 0))
    before = cell_file(tmp_path, 2, 3).read_bytes()
    with pytest.raises(ConfigError) as caught:
        evaluate(make_policy(second["policy"], second.get("style")), "train-2agent-quick", tmp_path,
                 seed=second.get("seed", 0))
    message = str(caught.value)
    assert str(tmp_path) in message and differs in message and "--out" in message
    assert cell_file(tmp_path, 2, 3).read_bytes() == before  # the other policy's replays are left as they were


def test_evaluate__a_folder_of_another_suite_is_refused(tmp_path):
    from simulator.errors import ConfigError

    evaluate(make_policy("greedy"), "train-2agent-quick", tmp_path)
    with pytest.raises(ConfigError, match="suite"):
        evaluate(make_policy("greedy"), "paper-quick", tmp_path)


def test_eval_cli__a_second_policy_into_the_same_folder_is_one_line_and_status_2(tmp_path, capsys):
    from curriculum.cli import main

    assert main(["eval", "--policy", "greedy", "--suite", "train-2agent-quick", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["eval", "--policy", "random", "--suite", "train-2agent-quick", "--out", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert "random on" not in captured.out
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mapf-lake: error:") and "greedy" in lines[0], captured.err


def test_evaluate__ignored_policy_keys_let_a_moved_checkpoint_reuse_its_cells(tmp_path):
    first, moved = GarbagePolicy(), GarbagePolicy()
    first.descriptor = {**GarbagePolicy.descriptor, "spec": "hf:/old/place/stage-01/model"}
    moved.descriptor = {**GarbagePolicy.descriptor, "spec": "hf:/new/place/stage-01/model"}
    evaluate(first, "train-2agent-quick", tmp_path)
    table = evaluate(moved, "train-2agent-quick", tmp_path, ignored_policy_keys=("spec",))
    assert table.reused_cells == len(suite_cells("train-2agent-quick"))
