"""The open-loop controls of ``band`` (docs/results/controls/README.md): the ``replay-decisions`` and ``first-only``
engineers and the control arms of ``mapf-lake train --compare``.

Every run here is a curriculum closed by the scripted greedy policy (no model is trained): its boundaries validate the
policy on the evidence set and ask the engineer, which is all the controls act on.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from curriculum.config import RunConfig, preset
from curriculum.loop.curriculum import Curriculum
from simulator.config import load_config
from simulator.errors import ConfigError
from tests.cli_runner import mapf_lake
from tests.small_run import SMALL

# band's options, with the evidence thresholds lowered to the reduced evidence set (12 validation instances)
BAND = {"engineer.spec": "gap", "engineer.options": {"remedy": "drop", "lengths": "frontier", "min_episodes": 1,
                                                     "min_length_episodes": 1}, "engineer.plan_first": True}
DECISIONS = ("warm_start", "stage-01", "stage-02")  # a plan before stage 1, then one decision after each stage


def _config(out: Path, name: str, seed: int, **extra) -> RunConfig:
    return preset("tiny").with_overrides(name=name, output_dir=str(out), seed=seed,
                                         **{**SMALL, "initial_config.samples": 64, **extra})


def _run(config: RunConfig, until: int | None = None) -> Curriculum:
    """The curriculum of ``config`` closed by the greedy policy, through every stage (or up to stage ``until``)."""
    from policy.policies import make_policy

    curriculum = Curriculum(config, log=lambda line: None).open()
    policy = make_policy("greedy", style=config.prompt_style)
    curriculum.begin(policy)
    while not curriculum.finished and (until is None or curriculum.stage <= until):
        curriculum.end_stage(policy)
    return curriculum


def _decision(config: RunConfig, where: str) -> dict:
    return json.loads((config.run_dir / where / "decision.json").read_text())


def _unseeded(document: dict) -> dict:
    return {key: value for key, value in document.items() if key != "seed"}


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, RunConfig]:
    """Recorded runs of seed 7 to replay: ``band`` (its plan changes stage 1, the greedy policy never moves after it)
    and ``random`` (a new config at every decision), both planning stage 1."""
    out = tmp_path_factory.mktemp("controls")
    made = {"band": _config(out, "band-s7", 7, **BAND),
            "random": _config(out, "random-s7", 7, **{"engineer.spec": "random", "engineer.plan_first": True})}
    for config in made.values():
        _run(config)
    return made


def _replay(sources, name: str, seed: int, source: str = "random-s{seed}", pairing: str = "swap",
            **extra) -> RunConfig:
    return _config(Path(sources["random"].output_dir), name, seed, **{
        "engineer.spec": "replay-decisions", "engineer.options": {"source": source, "pairing": pairing},
        "engineer.plan_first": True, **extra})


def test_replay_decisions__writes_the_paired_seed_s_recorded_config_at_every_decision(sources):
    control = _replay(sources, "replay-s8", 8)  # swap: seed 8 reads seed 7's run
    _run(control)
    source = sources["random"]
    for where in DECISIONS:
        theirs, mine = _decision(source, where), _decision(control, where)
        assert _unseeded(mine["config"]) == _unseeded(theirs["config"]), where
        assert mine["engineer"] == "replay-decisions" and mine["reason"].endswith(
            str(source.run_dir / where / "decision.json")), mine["reason"]
        assert not [line for line in mine["diff"] if line.startswith("seed")]  # the seed is this run's own
        assert "this run's evidence is not read" in mine["rationale"]
    for stage in ("stage-01", "stage-02"):  # what each stage trained on: the source's configs, this run's seeds
        theirs, mine = (load_config(config.run_dir / stage / "config.yaml") for config in (source, control))
        assert _unseeded(mine.to_dict()) == _unseeded(theirs.to_dict()) and mine.seed != theirs.seed


def test_replay_decisions__the_same_seed_replays_band_byte_for_byte(sources):
    control = _replay(sources, "same-s7", 7, source="band-s{seed}", pairing="same")
    _run(control)
    band = sources["band"]
    assert _decision(control, "warm_start")["diff"] == _decision(band, "warm_start")["diff"] != []  # the plan moved
    for stage in ("stage-01", "stage-02"):
        assert (control.run_dir / stage / "config.yaml").read_bytes() == (band.run_dir / stage / "config.yaml").read_bytes()


def _refusal(config: RunConfig, **run) -> str:
    with pytest.raises(ConfigError) as caught:
        _run(config, **run)
    message = str(caught.value)
    assert "\n" not in message, message
    return message


def test_replay_decisions__a_missing_foreign_or_damaged_source_stops_the_run_with_one_line(sources, tmp_path):
    out = Path(sources["random"].output_dir)
    # no run of the paired seed (10 reads 9): refused at the plan before stage 1, not kept as a fallback
    message = _refusal(_replay(sources, "no-source-s10", 10))
    assert str(out / "random-s9" / "run.yaml") in message and "missing" in message
    # a folder named for the paired seed (10 reads 9) that holds a run of seed 7
    shutil.copytree(sources["random"].run_dir, out / "other-s9")
    message = _refusal(_replay(sources, "foreign-seed-s10", 10, source="other-s{seed}"))
    assert "seed = 7" in message and "9, the seed whose run this one replays" in message
    # a run of other settings (another evidence set size)
    message = _refusal(_replay(sources, "foreign-settings-s8", 8, **{"validation.samples": 16}))
    assert "a run of other settings" in message and "validation.samples" in message
    # a run without a plan before stage 1 when this run plans: refused as other settings too
    message = _refusal(_replay(sources, "no-plan-s8", 8, **{"engineer.plan_first": False}))
    assert "plan_first" in message
    # a damaged record
    shutil.copytree(sources["random"].run_dir, out / "damaged-s7")
    (out / "damaged-s7" / "stage-01" / "decision.json").write_text('{"config": {"agents": "many"')
    message = _refusal(_replay(sources, "damaged-s8", 8, source="damaged-s{seed}"))
    assert str(out / "damaged-s7" / "stage-01" / "decision.json") in message
    # a decision the source has not reached (a source of 2 stages, a control of 3)
    message = _refusal(_replay(sources, "longer-s8", 8, stages=3))
    assert str(sources["random"].run_dir / "stage-03" / "decision.json") in message and "missing" in message
    # outside a run nothing hands a source over
    from engineer.engineers import make_engineer

    with pytest.raises(ConfigError, match="inside a run"):
        make_engineer("replay-decisions").propose(None, sources["random"].stage_one)  # type: ignore[arg-type]


@pytest.mark.parametrize("source", ["runs/band", "s{seed}{other}", "s{seed", "", "{seed}" + "x" * 1000, None])
def test_replay_decisions__a_source_without_one_seed_field_is_refused_when_the_config_is(source):
    with pytest.raises(ConfigError, match=r"engineer\.options\.source = .* a run folder path"):
        preset("tiny").with_overrides(**{"engineer.spec": "replay-decisions", "engineer.options.source": source})


def test_replay_decisions__a_resumed_run_reads_its_decisions_back_without_the_source(sources, tmp_path):
    control = _replay(sources, "resumed-s8", 8)
    stopped = _run(control, until=1)  # the decision after stage 1 is written, stage 2 is not done
    assert stopped.stage == 2 and not stopped.finished
    moved = tmp_path / "moved"
    shutil.move(str(sources["random"].run_dir), moved)  # every decision made so far is read back, not replayed
    try:
        reopened = Curriculum(control, log=lambda line: None).open()
        from policy.policies import make_policy

        reopened.begin(make_policy("greedy", style=control.prompt_style))
        assert reopened.stage == 2 and reopened.current == stopped.current
        with pytest.raises(ConfigError, match="random-s7"):  # the next decision needs the source again
            reopened.end_stage(make_policy("greedy", style=control.prompt_style))
    finally:
        shutil.move(str(moved), sources["random"].run_dir)
    _run(control)  # with the source back, the run finishes as an uninterrupted one would
    assert _unseeded(_decision(control, "stage-02")["config"]) == _unseeded(_decision(sources["random"],
                                                                                      "stage-02")["config"])


def test_first_only__plans_stage_one_as_band_does_then_keeps_that_config(sources):
    out = Path(sources["band"].output_dir)
    first = _config(out, "first-only-s7", 7, **{**BAND, "engineer.spec": "first-only"})
    _run(first)
    plan, band_plan = _decision(first, "warm_start"), _decision(sources["band"], "warm_start")
    assert plan["config"] == band_plan["config"] and plan["diff"] and plan["engineer"] == "first-only"
    for stage in ("stage-01", "stage-02"):
        decision = _decision(first, stage)
        assert decision["outcome"] == "kept" and decision["config"]["sizes"] == plan["config"]["sizes"]
        assert decision["reason"] == "first-only: keeps the first decision's config"
    # without a plan before stage 1 the first decision is the one after stage 1
    late = _config(out, "first-only-late-s7", 7, **{**BAND, "engineer.spec": "first-only", "engineer.plan_first": False})
    _run(late)
    assert _decision(late, "stage-01")["reason"].startswith("first-only (after stage 1, the gap engineer decides")
    assert _decision(late, "stage-02")["outcome"] == "kept"
    from engineer.engineers import make_engineer

    with pytest.raises(ConfigError, match="inside a run"):
        make_engineer("first-only").propose(None, first.stage_one)  # type: ignore[arg-type]


def test_first_only__a_resumed_run_decides_as_an_uninterrupted_one(sources, tmp_path):
    settings = {**BAND, "engineer.spec": "first-only"}
    whole = _config(Path(sources["band"].output_dir), "first-only-s7", 7, **settings)
    if not whole.run_dir.exists():
        _run(whole)
    resumed = _config(tmp_path, "first-only-s7", 7, **settings)
    stopped = _run(resumed, until=1)  # the plan and the decision after stage 1 are written, stage 2 is not done
    assert stopped.stage == 2 and not (resumed.run_dir / "stage-02" / "decision.json").exists()
    _run(resumed)  # reopened: the plan is read back as the first decision, so stage 2's decision keeps it
    for where in DECISIONS:
        decision, uninterrupted = _decision(resumed, where), _decision(whole, where)
        assert (decision["outcome"], decision["reason"]) == (uninterrupted["outcome"], uninterrupted["reason"])
        assert _unseeded(decision["config"]) == _unseeded(uninterrupted["config"])
    assert _decision(resumed, "stage-02")["reason"] == "first-only: keeps the first decision's config"


def test_control_arms__resolve_to_band_s_settings_less_one_piece_and_stay_out_of_the_default_set():
    from curriculum.commands import CONTROL_ARMS, _arm_variant, _parse_arms, default_arms
    from engineer.engineers import ENGINEERS, candidate_engineers

    band = default_arms()["gap-band"]
    assert not set(CONTROL_ARMS) & set(default_arms()) and _parse_arms(None) == default_arms()
    arms = _parse_arms(["fixed", "gap-band", *CONTROL_ARMS])
    assert list(arms) == ["fixed", "gap-band", *CONTROL_ARMS]
    small = preset("small")
    engineers = {name: _arm_variant(small, name, 601, overrides, True).engineer for name, overrides in arms.items()}
    assert (engineers["gap-band"].spec, engineers["gap-band"].options, engineers["gap-band"].plan_first) == (
        "gap", {"remedy": "drop", "lengths": "frontier"}, True)
    expected = {
        "band-replay": ("replay-decisions", {"source": "small-gap-band-s{seed}", "pairing": "swap"}, True),
        "band-first-only": ("first-only", {"remedy": "drop", "lengths": "frontier"}, True),
        "band-no-remedy": ("gap", {"lengths": "frontier"}, True),
        "band-no-lengths": ("gap", {"remedy": "drop"}, True),
        "band-no-plan-first": ("gap", {"remedy": "drop", "lengths": "frontier"}, False),
    }
    assert {name: (e.spec, e.options, e.plan_first) for name, e in engineers.items() if name in expected} == expected
    assert band == {"engineer.spec": "gap", "engineer.options.remedy": "drop", "engineer.options.lengths": "frontier",
                    "engineer.plan_first": True}
    # band-replay of seed 601 reads the gap-band run of seed 602 that the same comparison writes beside it
    from engineer.engineers import make_engineer

    replay = make_engineer("replay-decisions", **engineers["band-replay"].options)
    assert replay.source_folder(601) == _arm_variant(small, "gap-band", 602, band, True).name
    assert replay.source_folder(606) == _arm_variant(small, "gap-band", 605, band, True).name
    # the controls are no default arm and no lookahead candidate
    controls = [name for name, kind in ENGINEERS.items() if kind.control]
    assert controls == ["replay-decisions", "first-only"]
    assert not set(controls) & set(candidate_engineers()) and not set(controls) & set(default_arms())


def test_engineers_command__documents_the_controls_options():
    replay = " ".join(mapf_lake("engineers", "replay-decisions").stdout.split())
    assert "source" in replay and "small-gap-band-s{seed}" in replay and "pairing" in replay and "swap" in replay
    first = " ".join(mapf_lake("engineers", "first-only").stdout.split())
    assert "remedy" in first and "lengths" in first and "frontier" in first


def test_share_warm_start__leaves_the_plan_before_stage_one_to_each_arm(tmp_path):
    from curriculum.loop.sharing import share_warm_start

    source, target = tmp_path / "a", tmp_path / "b"
    (source / "warm_start").mkdir(parents=True)
    (source / "warm_start" / "summary.json").write_text("{}")
    (source / "warm_start" / "decision.json").write_text("{}")
    share_warm_start(source, target)
    assert sorted(path.name for path in (target / "warm_start").iterdir()) == ["summary.json"]


# The controls page's commands 1 and 2 (docs/results/controls/README.md) at a reduced budget, with a real trainer.
CONTROLS_REDUCED = ["stages=2", "warm_start.steps=4", "warm_start.samples=64", "warm_start.batch_size=16",
                    "training.steps=2", "training.prompts_per_step=4", "training.rft_min_kept=1",
                    "initial_config.samples=16", "validation.samples=24", "evaluation_suite=test-small-quick",
                    "cpu_threads=1"]


@pytest.mark.slow
def test_controls_commands__band_replay_trains_on_the_paired_seed_s_band_configs_end_to_end(tmp_path):
    """The two commands as the page runs them, through ``mapf-lake train --compare`` and its trainer: each
    ``band-replay`` run reads its partner seed's ``gap-band`` run beside it and trains on its configs (the pairing
    itself, on sources whose configs differ at every decision, is tested above with the scripted policy)."""
    common = ["train", "--preset", "small", "--compare", "--seeds", "2", "--set", "seed=601", "--output-dir",
              str(tmp_path), "--set", *CONTROLS_REDUCED]
    mapf_lake(*common, "--arm", "gap-band", timeout=1800)  # command 1 (its fixed arm left out here)
    result = mapf_lake(*common, "--arm", "gap-band", "--arm", "band-replay", timeout=1800)  # command 2
    assert "band-replay" in result.stdout
    for seed, paired in ((601, 602), (602, 601)):
        replay, band = tmp_path / f"small-band-replay-s{seed}", tmp_path / f"small-gap-band-s{paired}"
        for where in ("warm_start", "stage-01"):  # the plan before stage 1, then the decision after stage 1
            decision = json.loads((replay / where / "decision.json").read_text())
            source = json.loads((band / where / "decision.json").read_text())
            assert _unseeded(decision["config"]) == _unseeded(source["config"]), (seed, where)
            assert f"small-gap-band-s{paired}" in decision["reason"] and decision["engineer"] == "replay-decisions"
        assert json.loads((replay / "final" / "table.json").read_text())["suite"] == "test-small-quick"
