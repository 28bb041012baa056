"""The verifiers environment against the real package: the dataset is the export's records, the rubric's
verdicts are policy.score's, and bad arguments are refused by name."""

from __future__ import annotations

import asyncio
import json

import pytest

from policy.prompts import get_style
from policy.score import check_record, score
from policy.scripted import make_scripted
from simulator.config import StageConfig
from simulator.errors import ConfigError
from simulator.generator import generate

vf = pytest.importorskip("verifiers")
verifiers_env = pytest.importorskip("policy.verifiers_env")  # skips where verifiers lacks SingleTurnEnv (0.4)

KNOBS = {"sizes": [3, 4], "agents": [2, 3], "hole_ratio": 0.2, "wait_ratio": 0.5, "samples": 8, "seed": 7}


def _score_rows(env, rows, answers):
    """The rubric's reward and metrics for each (row, answer), through verifiers' own init_state and score_group."""
    async def run():
        states = []
        for row, answer in zip(rows, answers):
            state = await env.init_state(row, vf.ClientConfig(), "any-model")
            state["completion"] = [{"role": "assistant", "content": answer}]
            states.append(state)
        await env.rubric.score_group(states)
        return [(state["reward"], state["metrics"]) for state in states]

    return asyncio.run(run())


def test_load_environment__dataset_is_the_exported_stage_and_the_rubric_agrees_with_the_scorer():
    env = verifiers_env.load_environment(**KNOBS)
    assert isinstance(env, vf.SingleTurnEnv)
    dataset = env.get_dataset()
    assert {"prompt", "answer", "info"} <= set(dataset.column_names) and len(dataset) == 8
    items = generate(StageConfig.from_dict(verifiers_env.stage_document(**KNOBS))).instances
    style = get_style("natural")
    rows = [dataset[i] for i in range(len(dataset))]
    for row, item in zip(rows, items):
        record = check_record(row["info"])
        assert record["instance"] == item.instance.to_dict() and record["style"] == "natural"
        assert row["prompt"] == style.prompt(item.instance) and row["answer"] == style.answer(item.plan)
    greedy = make_scripted("greedy").plans(items, seed=1)
    noise = make_scripted("random").plans(items, seed=2)
    pairs = [(row, answer) for row, item, g, r in zip(rows, items, greedy, noise)
             for answer in (row["answer"], style.answer(g), style.answer(r), "no plan here")]
    scored = _score_rows(env, [row for row, _ in pairs], [answer for _, answer in pairs])
    verdicts = [score(row["info"], answer) for row, answer in pairs]
    for (reward, metrics), verdict in zip(scored, verdicts):
        assert reward == pytest.approx(verdict["reward"])
        for name in ("valid", "optimal", "format", "progress"):
            assert metrics[f"mapf_{name}"] == pytest.approx(verdict[name])
    assert all(reward == pytest.approx(1.6) for reward, _ in scored[::4])  # the reference is optimal
    assert all(reward == 0.0 for reward, _ in scored[3::4])  # garbage earns nothing
    assert any(v["category"] not in ("none", "parse_error") for v in verdicts)  # some plans fail in the judge
    again = verifiers_env.load_environment(**KNOBS).get_dataset()
    assert [again[i]["info"] for i in range(len(again))] == [row["info"] for row in rows]  # same arguments, same data


def test_load_environment__config_document_text_style_and_reward_weights(tmp_path):
    document = {"agents": 2, "samples": 3, "seed": 2, "sizes": {3: {"data_ratio": 1.0, "hole_ratio": 0.1,
                                                                    "wait_ratio": 0.0}}}
    path = tmp_path / "stage.json"
    path.write_text(json.dumps(document))
    env = verifiers_env.load_environment(config=str(path), prompt_style="compact-nb", rewards={"valid": 1.0})
    row = env.get_dataset()[0]
    assert row["prompt"] == [{"role": "user", "content": check_record(row["info"])["prompt"]}]  # one user turn
    assert check_record(row["info"])["source"] == "config:stage.json"
    (optimal, _), (garbage, _) = _score_rows(env, [row, row], [row["answer"], "A0 ?"])
    assert (optimal, garbage) == (1.0, 0.0)  # valid only, as weighed
    from_document = verifiers_env.load_environment(config=document, prompt_style="compact-nb").get_dataset()
    assert check_record(from_document[0]["info"])["instance"] == check_record(row["info"])["instance"]


@pytest.mark.parametrize("kwargs, field", [
    ({"size": [3]}, "size"),
    ({"prompt_style": "verbose"}, "prompt_style"),
    ({"suite": "paper", "config": {"agents": 1}}, "suite"),
    ({"suite": "paper", "sizes": [3]}, "sizes"),
    ({"sizes": []}, "sizes"),
    ({"sizes": [3, 3]}, "sizes"),
    ({"sizes": [2]}, "sizes.2"),
    ({"hole_ratio": 0.99, "sizes": [3]}, "sizes.3.hole_ratio"),
    ({"agents": 0}, "agents"),
    ({"samples": 0}, "samples"),
    ({"rewards": {"speed": 1.0}}, "rewards.speed"),
    ({"rewards": {"valid": "high"}}, "rewards.valid"),
    ({"config": "/no/such/stage.yaml"}, "config"),
    ({"eval_suite": "nope"}, "eval_suite"),
])
def test_load_environment__bad_arguments_are_config_errors_naming_them(kwargs, field):
    with pytest.raises(ConfigError) as error:
        verifiers_env.load_environment(**kwargs)
    assert error.value.field == field
