"""The analysis scripts under docs/results read real replay files the way the README's tables say."""

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _module(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rollout(tmp_path: Path, policy: str) -> Path:
    out = tmp_path / policy
    subprocess.run([sys.executable, "-m", "curriculum.cli", "rollout", "--policy", policy, "--out", str(out),
                    "--size", "3", "4", "--holes", "0.1", "--wait-ratio", "0.5", "--n", "60", "--seed", "3"],
                   check=True, capture_output=True, cwd=ROOT)
    (replay,) = out.glob("*.mlr")
    return replay


def test_ceiling__counts_solved_and_waiting_answers_per_size_and_half(tmp_path):
    from replays.mining import summarize_paths
    from simulator.documents import key_text

    ceiling = _module(ROOT / "docs" / "results" / "small-rft" / "ceiling.py")
    oracle, greedy = _rollout(tmp_path, "oracle"), _rollout(tmp_path, "greedy")
    for replay in (oracle, greedy):
        rows = ceiling.tally(str(replay))
        summary = summarize_paths([replay])
        # the same instances and verdicts as the failure summary the engineer reads
        assert {key: (row["episodes"], row["valid"]) for key, row in rows.items()} == {
            key_text(key): (group.episodes, group.valid) for key, group in summary.by_size_wait.items()}
    rows = ceiling.tally(str(oracle))
    waiting = [row for key, row in rows.items() if key.endswith("needs_wait")]
    assert all(row["valid"] == row["episodes"] for row in rows.values())  # the solver's plans are all valid
    # some optimal plans of instances that need a wait write a wait (others detour), none writes one elsewhere
    assert 0 < sum(row["writes_a_wait"] for row in waiting) <= sum(row["episodes"] for row in waiting)
    assert sum(row["writes_a_wait"] for key, row in rows.items() if key.endswith("no_wait")) == 0
    assert sum(row["valid"] for row in ceiling.tally(str(greedy)).values()) < 60  # the greedy policy fails some


def test_record_layer__every_get_in_the_library_is_sorted_and_few_read_in_memory_records():
    """docs/results/record-layer/gets.py sorts every ``.get(`` by its receiver; a new one that no rule sorts fails
    here (a file some rule covers included: no rule takes a whole file), and reads of fixed-field dicts made in the
    process stay at the 9 its README lists (issue 61: under 10)."""
    gets = _module(ROOT / "docs" / "results" / "record-layer" / "gets.py")
    found = gets.calls()
    assert len(found) > 100  # the scan sees the packages
    assert [call[:3] for call in found if call.category == "unsorted"] == []
    assert sum(call.category == "record" for call in found) <= 9
    assert gets.classify("curriculum/loop/validation.py", "model.descriptor") == "record"
    assert gets.classify("curriculum/loop/records.py", "data") == "document"
    assert gets.classify("render/draw.py", "somewhere_new") == "unsorted"
    # a receiver no rule names is unsorted in a file whose other calls are sorted
    for path in ("curriculum/loop/curriculum.py", "engineer/context.py", "curriculum/reports/report.py",
                 "curriculum/training/common.py", "curriculum/plugins/verl_sampler.py"):
        assert gets.classify(path, "somewhere_new") == "unsorted", path
    # receivers come from the syntax tree: two on one line apart, nested and multi-line calls, strings ignored
    source = ('a = x.get("k") or self.y.get("k")\n'
              'b = (first(1,\n      2)).get("k").get("j")\n'
              'c = "z.get(1)"\n')
    assert gets.receivers(source) == [(1, "x"), (1, "self.y"), (3, "first(1, 2)"), (3, '(first(1, 2)).get("k")')]


def test_protocol3_table__pairs_by_seed_and_pools_the_two_protocols(tmp_path):
    import json

    table = _module(ROOT / "docs" / "results" / "protocol3" / "table.py")
    earlier = ROOT / "docs" / "results" / "protocol" / "primary-s101-106.json"
    document = json.loads(earlier.read_text())
    for arm in document["arms"].values():  # the same figures under seeds 301-306: the twelve's stand-in
        arm["per_seed"] = {str(int(seed) + 200): figures for seed, figures in arm["per_seed"].items()}
        arm["seeds"] = [seed + 200 for seed in arm["seeds"]]
    later = tmp_path / "later.json"
    later.write_text(json.dumps(document))
    out = tmp_path / "table.json"
    assert table.main([str(later), "--earlier", str(earlier), "--json", str(out)]) == 0
    results = json.loads(out.read_text())
    six, twelve = results["twelve"], results["eighteen"]
    assert six["seeds"] == [301, 302, 303, 304, 305, 306] and len(twelve["seeds"]) == 12
    # protocol 2's published paired difference: +3.08 points over its six seeds, every seed up
    assert round(100 * six["difference"]["mean"], 2) == 3.08 and six["band_ahead"] == 6
    assert twelve["difference"]["mean"] == six["difference"]["mean"]
    assert twelve["difference"]["half_width"] < six["difference"]["half_width"]  # twice the seeds, same spread
    try:
        table.main([str(earlier), "--earlier", str(earlier)])
    except SystemExit as stop:
        assert "share seeds" in str(stop)
    else:
        raise AssertionError("overlapping seeds were pooled")


def test_ceiling_table__three_paired_differences_the_share_and_the_wins_by_stage(tmp_path):
    import json
    from dataclasses import replace

    from engineer.decision import EngineerDecision
    from engineer.lookahead import Candidate
    from simulator.config import StageConfig

    table = _module(ROOT / "docs" / "results" / "ceiling" / "table.py")
    document = json.loads((ROOT / "docs" / "results" / "protocol" / "primary-s101-106.json").read_text())
    arm = document["arms"]["drop"]  # protocol 2's third arm, standing in for the ceiling's figures
    for seed, figures in arm["per_seed"].items():
        figures["test"] = document["arms"]["band"]["per_seed"][seed]["test"] + 0.02 * (int(seed) % 3)
    document["arms"] = {"fixed": document["arms"]["fixed"], "band": document["arms"]["band"], "lookahead": arm}
    document["holm_arms"] = {metric: ["lookahead" if name == "drop" else name for name in names]
                             for metric, names in document["holm_arms"].items()}
    comparison = tmp_path / "compare.json"
    comparison.write_text(json.dumps(document))
    config = StageConfig.from_dict({"agents": 2, "samples": 40, "sizes": {3: {"data_ratio": 1.0, "hole_ratio": 0.2,
                                                                              "wait_ratio": 0.3}}})
    runs = []
    for run, rates in (("a", (0.30, 0.40, 0.35)), ("b", (0.50, 0.45, 0.45))):
        folder = tmp_path / run
        rows = [Candidate(config, ("fixed",), rates[0]), Candidate(replace(config, samples=80), ("gap", "rule"), rates[1]),
                Candidate(replace(config, samples=60), ("bandit",), rates[2])]
        for stage, details in (("stage-01", {"candidates": [row.to_dict() for row in rows]}), ("stage-02", {})):
            (folder / stage).mkdir(parents=True)
            decision = EngineerDecision("lookahead", True, "r", None, None, [], config, config, [], "", "", 0.0,
                                        details=details)
            (folder / stage / "decision.json").write_text(json.dumps(decision.to_dict()))
        runs.append(folder)
    out = tmp_path / "table.json"
    assert table.main([str(comparison), "--runs", *map(str, runs), "--json", str(out)]) == 0
    results = json.loads(out.read_text())
    assert results["seeds"] == [101, 102, 103, 104, 105, 106]
    pairs = results["differences"]
    assert round(100 * pairs["band - fixed"]["difference"]["mean"], 2) == 3.08  # protocol 2's published figure
    assert round(100 * pairs["lookahead - band"]["difference"]["mean"], 2) == 2.0  # 0, 2, 4 points in turn
    assert all(row["p_holm"] >= row["p"] for row in pairs.values())
    share = results["band_share"]
    assert abs(share["share"] - 3.08 / 5.08) < 0.01 and share["interval"][0] < share["share"] < share["interval"][1]
    stage = results["stages"]["stage-01"]
    assert stage["runs"] == 2 and stage["wins"] == {"fixed": 1, "gap": 1, "rule": 1}  # b: fixed best
    assert abs(stage["margin_over_fixed"]["bandit"] - (0.05 - 0.05) / 2) < 1e-9
    assert [round(lead, 9) for lead in stage["winner_lead"]] == [0.1, 0.0]  # a: gap/rule by 10 points; b: fixed
    assert "stage-02" not in results["stages"] and "headroom left" in results["verdict"]


def test_transfer_sweep__warm_start_mix_has_its_share_of_3_agent_boards_and_none_of_the_test_set():
    from curriculum.config import preset
    from curriculum.loop.sets import test_keys

    sweep = _module(ROOT / "docs" / "results" / "transfer" / "sweep.py")
    config = preset("small").with_overrides(**{"warm_start.config.samples": 40, "evaluation_suite": "test-small-quick"})
    for share, three in ((0.0, 0), (0.1, 4), (0.5, 20)):
        items = sweep.warm_start_items(config, share)
        assert len(items) == 40 and sum(item.instance.n_agents == 3 for item in items) == three
        assert not {item.instance.content_key() for item in items} & test_keys("test-small-quick")
    assert set(sweep.ARMS) >= {"two", "mix05", "rev-two", "copy-two"}
    for share, overrides in sweep.ARMS.values():  # every arm's overrides make a valid run config
        assert 0 <= share <= 0.5 and preset("small").with_overrides(**overrides).prompt_style


def test_transfer_align__the_oracle_walks_its_own_agents_route_on_every_line(tmp_path):
    align = _module(ROOT / "docs" / "results" / "transfer" / "align.py")
    replay = _rollout(tmp_path, "oracle")
    parsed, counts = align.tally(replay)
    assert parsed == 60
    own = sum(n for (line, agent), n in counts.items() if line == agent)
    assert own == 2 * parsed  # every line of an optimal plan reaches its own agent's goal alone (2 agents)


def test_ceiling_second_evidence__spearman_matches_the_closed_form_without_ties():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    second = _module(ROOT / "docs" / "results" / "ceiling" / "second_evidence.py")

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.integers(-1000, 1000), min_size=3, max_size=12, unique=True), st.randoms())
    def check(values, rng):
        other = list(values)
        rng.shuffle(other)
        n, ra, rb = len(values), second.ranks(values), second.ranks(other)
        closed = 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb)) / (n * (n * n - 1))
        assert abs(second.spearman(values, other) - closed) < 1e-9
        assert abs(second.spearman(values, [3 * v + 1 for v in values]) - 1) < 1e-9  # monotone: rank order kept
        assert abs(second.spearman(values, [-v for v in values]) + 1) < 1e-9

    check()
    assert second.ranks([0.3, 0.1, 0.3, 0.2]) == [3.5, 1.0, 3.5, 2.0]  # ties share their mean rank
    assert second.spearman([1, 1, 1], [1, 2, 3]) is None and second.spearman([1, 2], [2, 1]) is None


def test_paired_table__declared_family_is_holm_adjusted_and_reproduces_protocol_2(tmp_path):
    import json

    table = _module(ROOT / "docs" / "results" / "paired_table.py")
    source = ROOT / "docs" / "results" / "protocol" / "primary-s101-106.json"
    out = tmp_path / "table.json"
    assert table.main([str(source), "--family", "band", "fixed", "--family", "drop", "fixed",
                       "--also", "band", "drop", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["test"]["comparisons"]
    band, drop, between = rows["band - fixed"], rows["drop - fixed"], rows["band - drop"]
    assert round(100 * band["difference"]["mean"], 2) == 3.08 and band["seeds"] == [101, 102, 103, 104, 105, 106]
    # Holm over the two: the smaller p doubled, the larger kept (and never below the smaller's adjusted value)
    low, high = sorted([band, drop], key=lambda row: row["p"])
    assert low["p_holm"] == min(1.0, 2 * low["p"]) and high["p_holm"] == max(high["p"], low["p_holm"])
    assert between.get("outside_family") and "p_holm" not in between
    # the share of a gain: (band - drop) / (band - fixed), read only where band - fixed's interval lies above 0
    assert table.main([str(source), "--family", "band", "fixed", "--share", "band", "drop", "band", "fixed",
                       "--json", str(out)]) == 0
    ratio = json.loads(out.read_text())["test"]["share"]
    assert ratio["reported"] and ratio["low"] <= ratio["share"] <= ratio["high"]
    assert round(ratio["share"], 3) == round((3.0833 - 3.25) / 3.0833, 3)
    try:
        table.main([str(source), "--family", "nobody", "fixed"])
    except SystemExit as stop:
        assert "nobody" in str(stop)
    else:
        raise AssertionError("an arm without runs was compared")


def test_paired_table__several_compare_files_read_as_one(tmp_path):
    """Seeds compared in two sessions meet in one table: the halves give the whole's figures; a seed the two files
    give different figures is refused, naming both."""
    import json

    table = _module(ROOT / "docs" / "results" / "paired_table.py")
    whole = json.loads((ROOT / "docs" / "results" / "protocol" / "primary-s101-106.json").read_text())
    halves = []
    for index, seeds in enumerate((("101", "102", "103"), ("104", "105", "106"))):
        part = json.loads(json.dumps(whole))
        for entry in part["arms"].values():
            entry["per_seed"] = {seed: figures for seed, figures in entry["per_seed"].items() if seed in seeds}
            entry["seeds"] = [seed for seed in entry["seeds"] if str(seed) in seeds]
        halves.append(tmp_path / f"half-{index}.json")
        halves[-1].write_text(json.dumps(part))
    out, joined = tmp_path / "whole.json", tmp_path / "joined.json"
    args = ["--family", "band", "fixed", "--family", "drop", "fixed"]
    assert table.main([str(ROOT / "docs" / "results" / "protocol" / "primary-s101-106.json"), *args,
                       "--json", str(out)]) == 0
    assert table.main([*map(str, halves), *args, "--json", str(joined)]) == 0
    assert json.loads(joined.read_text()) == json.loads(out.read_text())
    clash = json.loads(halves[1].read_text())
    clash["arms"]["band"]["per_seed"]["101"] = {"test": 0.5}
    halves[1].write_text(json.dumps(clash))
    try:
        table.main([*map(str, halves), *args])
    except SystemExit as stop:
        assert "seed 101" in str(stop) and "half-0.json" in str(stop) and "half-1.json" in str(stop)
    else:
        raise AssertionError("two files disagreeing on a seed's figure were read as one")


def test_evidence_size__choices_on_subsets_are_valued_on_the_other_draw(tmp_path):
    """``size_figures``: a candidate better on both draws is chosen from large subsets and its lead read on B; equal
    candidates keep ``fixed``'s (index 0), whose lead is 0; subsets take a quarter of ``n`` from each side."""
    import numpy as np

    module = _module(ROOT / "docs" / "results" / "evidence-size" / "evidence_size.py")
    rng = np.random.default_rng(0)
    sides = np.repeat([3, 4, 5, 6], 500)
    fixed, better = rng.random(2000) < 0.3, rng.random(2000) < 0.6
    a = np.stack([fixed, fixed.copy(), better])
    b = np.stack([rng.random(2000) < 0.3, rng.random(2000) < 0.3, rng.random(2000) < 0.6])
    figures = module.size_figures(a, b, sides, 0, 400, 200, np.random.default_rng(1))
    assert figures["n"] == 400 and figures["chose_b_best"] == 1.0
    assert abs(figures["lead_on_b"] - (b[2].mean() - b[0].mean())) < 1e-12 and figures["spearman"] is not None
    level = np.stack([fixed, fixed.copy()])  # a tie keeps fixed's candidate, as the lookahead does
    assert module.size_figures(level, b[:2], sides, 0, 40, 50, np.random.default_rng(2))["lead_on_b"] == 0.0
    assert module.choose(np.array([0.3, 0.3, 0.2])) == 0 and module.choose(np.array([0.3, 0.31, 0.2])) == 1
    assert module.choose(np.array([0.3, 0.3, 0.2]), fixed=1) == 1 and module.choose(np.array([0.3, 0.2, 0.2]), 1) == 0
    import pytest

    with pytest.raises(SystemExit, match="raise --per-side"):
        module.size_figures(a, b, sides, 0, 2400, 1, np.random.default_rng(3))  # 600 a side of 500



def test_evidence_size__parts_scored_in_sessions_pool_as_one(tmp_path):
    """``--join``: files of runs scored in different sessions pool to the figures of all the runs at once; a part
    written with other settings, or the same run twice, is refused with one line."""
    import json

    import numpy as np
    import pytest

    module = _module(ROOT / "docs" / "results" / "evidence-size" / "evidence_size.py")
    rng = np.random.default_rng(0)
    sides = np.repeat([3, 4, 5, 6], 100)
    sizes = [40, 80]

    def run(name: str) -> dict:
        boundaries = []
        for stage in (1, 2):
            a, b = rng.random((3, 400)) < 0.3, rng.random((3, 400)) < [[0.3], [0.35], [0.4]]
            rows = [module.size_figures(a, b, sides, 0, n, 50, rng) for n in sizes]
            for row in rows:
                row["evidence_seconds"] = 0.01 * row["n"] * 3
            boundaries.append({"stage": stage, "sizes": rows, "trial_training_seconds": 10.0 * stage})
        return {"run": name, "boundaries": boundaries}

    runs = [run("esize-lookahead-s801"), run("esize-lookahead-s802")]
    settings = {"draw_seeds": module.DRAW_SEEDS, "per_side": 100, "resamples": 50, "seed": 0}
    parts = []
    for one in runs:
        parts.append(tmp_path / f"part-{one['run']}.json")
        parts[-1].write_text(json.dumps({**settings, "pooled": module.pooled([one], sizes), "runs": [one]}))
    out = tmp_path / "figures.json"
    args = ["--per-side", "100", "--resamples", "50", "--sizes", "40,80", "--json", str(out)]
    assert module.main([*(f"--join={part}" for part in parts), *args]) == 0
    pooled = json.loads(out.read_text())
    assert pooled["pooled"] == json.loads(json.dumps(module.pooled(runs, sizes)))
    assert [one["run"] for one in pooled["runs"]] == ["esize-lookahead-s801", "esize-lookahead-s802"]
    with pytest.raises(SystemExit, match="resamples is 50, this pooling's is 60"):
        module.main([f"--join={parts[0]}", *args[:2], "--resamples", "60", *args[4:]])
    with pytest.raises(SystemExit, match="sizes"):
        module.main([f"--join={parts[0]}", *args[:4], "--sizes", "40,160", *args[6:]])
    with pytest.raises(SystemExit):  # argparse's error: the same run pooled twice
        module.main([f"--join={parts[0]}", f"--join={parts[0]}", *args])

def test_smol_self_warmstart__settings_are_checked(tmp_path):
    import argparse

    import pytest

    module = _module(ROOT / "docs" / "results" / "smol-self" / "warmstart.py")
    assert module.parse_setting("3e-4:100") == (3e-4, 100)
    for bad in ("3e-4", "fast:100", "0:100", "1:100", "3e-4:0", "3e-4:1e9"):
        with pytest.raises(argparse.ArgumentTypeError, match="--setting"):
            module.parse_setting(bad)


def test_answer_study__a_finished_study_prints_its_table_from_the_file_with_left_out_seconds(tmp_path, capsys):
    import json

    boundaries = _module(ROOT / "docs" / "results" / "constrained-answers" / "boundaries.py")
    config = {"agents": 2, "samples": 400, "seed": 1, "sizes": {
        "3": {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.3},
        "4": {"data_ratio": 0.5, "hole_ratio": 0.2, "wait_ratio": 0.3}}}
    rows, runs = [], []
    for name, seconds in (("run-a", [10.0, 20.0, 900.0]), ("run-b", [30.0, 40.0, 50.0])):
        (tmp_path / name / "stage-01").mkdir(parents=True)
        (tmp_path / name / "stage-01" / "decision.json").write_text(json.dumps(
            {"context_text": "evidence", "previous": config}))
        runs.append(str(tmp_path / name))
        rows += [{"run": name, "decision": "stage-01", "mode": "constrained", "seed": seed, "parsed": True,
                  "no_repair": seed == 0, "changed": True, "fillable": True, "seconds": value,
                  "repairs": [] if seed == 0 else ["seed: missing; kept the previous 1"] if seed == 1 else
                  ["seed: missing; kept the previous 1", "horizon: missing"]}
                 for seed, value in enumerate(seconds)]
    answers, left_out = tmp_path / "answers.json", tmp_path / "left-out.json"
    answers.write_text(json.dumps(rows))
    left_out.write_text(json.dumps([{"run": "run-a", "decision": "stage-01", "mode": "constrained", "seed": 2,
                                     "why": "the machine was paused"}]))
    # every answer is there: nothing is asked, no model is loaded (hf:@nothing would fail to load)
    assert boundaries.main([*runs, "--model", "hf:@nothing", "--modes", "constrained", "--json", str(answers),
                            "--seconds-left-out", str(left_out)]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    # prompts: run-a (10 + 20) / 2 = 15 (900 s left out), run-b 40: mean 27.5
    assert line.split()[:7] == ["constrained", "6", "100%", "33%", "67%", "100%", "100%"]
    assert "27.5" in line and "the seconds of 1 answer left out" in line


def test_session_scripts__refuse_a_seed_outside_their_declaration(tmp_path):
    """The per-session scripts of the multi-session studies run only the declared seeds: another seed, or none, is
    refused with one line before anything runs (no run folder is made)."""
    scripts = {"controls/pair.sh": ("602", "601, 603, 605"), "smol-self/seed.sh": ("723", "724, 725, 726"),
               "evidence-size/seed.sh": ("800", "801, 802, 803")}
    for script, (seed, allowed) in scripts.items():
        path = ROOT / "docs" / "results" / script
        done = subprocess.run(["bash", str(path), seed, str(tmp_path / "runs")], capture_output=True, text=True)
        assert done.returncode == 2 and allowed in done.stderr and seed in done.stderr, (script, done.stderr)
        done = subprocess.run(["bash", str(path)], capture_output=True, text=True)
        assert done.returncode != 0 and "usage:" in done.stderr, (script, done.stderr)
        assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
    assert not (tmp_path / "runs").exists()
