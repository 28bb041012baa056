"""The multi-turn mode as an OpenEnv environment (openenv-core's base types): episodes over exported records,
played in process and through OpenEnv's own FastAPI app."""

from __future__ import annotations

import json

import pytest

from policy.prompts import get_style
from policy.score import make_record
from simulator import constants as C
from simulator.config import StageConfig
from simulator.errors import ConfigError
from simulator.generator import generate

pytest.importorskip("openenv", reason="needs openenv-core (extra: openenv)")
from policy import openenv_env  # noqa: E402

MapfAction, MapfObservation = openenv_env.MapfAction, openenv_env.MapfObservation
MapfOpenEnv, MapfState, load_records = openenv_env.MapfOpenEnv, openenv_env.MapfState, openenv_env.load_records

CONFIG = StageConfig.from_dict({"agents": 2, "samples": 4, "seed": 9, "sizes": {
    3: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.5},
    4: {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.5}}})


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    items = generate(CONFIG).instances
    records = [make_record(item, get_style("compact"), "config:test") for item in items]
    path = tmp_path_factory.mktemp("export") / "records.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return items, path


def test_mapf_openenv__solver_plan_played_step_by_step_is_optimal(exported):
    from openenv.core.env_server.interfaces import Environment

    items, path = exported
    env = MapfOpenEnv(load_records(path), style="compact")
    assert isinstance(env, Environment)
    for index, item in enumerate(items):
        first = env.reset(index=index)
        assert isinstance(first, MapfObservation) and not first.done and first.prompt.startswith("n=")
        for t in range(item.plan.actions.shape[1]):
            observation = env.step(MapfAction(message="".join(C.ACTION_LETTERS[a] for a in item.plan.actions[:, t])))
            if observation.done:
                break
            assert observation.reward == 0.0 and observation.prompt.startswith("=")
        assert observation.done and observation.reward == pytest.approx(1.6)
        assert observation.outcome["optimal"] == 1.0 and observation.outcome["makespan"] == item.optimal_makespan
        state = env.state
        assert isinstance(state, MapfState) and state.turns == item.optimal_makespan
        assert state.positions == item.instance.goals.tolist() and state.record_id.endswith(f"/{item.index}")
    env.reset(seed=5)
    assert env.state.record_id == env.records[5 % len(items)]["id"]
    bad = env.step(MapfAction(message="jump"))
    assert bad.done and bad.reward == 0.0 and bad.outcome["category"] == "parse_error" and bad.metadata["parse_error"]
    with pytest.raises(ConfigError, match="index"):
        env.reset(index=99)
    with pytest.raises(ConfigError, match="records"):
        MapfOpenEnv([])


def test_mapf_openenv__served_by_openenv_http_app(exported):
    from fastapi.testclient import TestClient
    from openenv.core.env_server import create_fastapi_app

    _, path = exported
    records = load_records(path)
    app = create_fastapi_app(lambda: MapfOpenEnv(records, style="natural"), MapfAction, MapfObservation)
    client = TestClient(app)
    reply = client.post("/reset", json={"seed": 1})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["done"] is False and body["observation"]["prompt"][0]["role"] == "system"
    assert "After 0 steps" in body["observation"]["prompt"][1]["content"]
    schema = client.get("/schema").json()
    assert "message" in json.dumps(schema["action"])
