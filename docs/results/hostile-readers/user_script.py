"""The plug-in families of the hostile-readers corpus: a user's training script, one hostile input per run.

``corpus.py`` runs this file as a subprocess per case, as a user's TRL or verl script meets a damaged checkpoint, a
hostile dataset column or a misused ``Curriculum``. Each action below is what such a script does with the project's
public API (``curriculum.loop.curriculum.Curriculum``, ``curriculum.plugins.trl_hooks``,
``curriculum.plugins.verl_sampler``). A refusal is the ``ConfigError`` the API raises: printed as the CLI prints
one (``error: ...``, one line, exit status 2), so the corpus classes it like every other case; any other exception
escapes as a traceback (a bug); success prints one line and exits 0.

    python docs/results/hostile-readers/user_script.py setup ROOT      # the fixtures, once (about a minute)
    python docs/results/hostile-readers/user_script.py ACTION ARG...   # one case

The fixtures (under ``ROOT``): ``run.yaml`` (the ``tiny`` preset at the test suite's reduced size, two stages, no
warm start), ``begun`` (a run folder begun, with a TRL checkpoint ``trl/checkpoint-2`` and its curriculum state),
``stage1`` (a run folder whose stage 1 is closed), ``other`` (another run of the same name and another seed, stage 1
closed), ``finished`` (both stages closed), ``verl.json`` (a verl loader state and two rows as the dataset served
them).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # a user's script that keeps its stderr for errors
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

from curriculum.config import load_run_config, preset, save_run_config  # noqa: E402
from simulator.errors import ConfigError  # noqa: E402

REDUCED = {"stages": 2, "training.steps": 2, "training.prompts_per_step": 2, "training.generations": 4,
           "warm_start.enabled": False, "validation.samples": 12, "evaluation_suite": "train-2agent-quick",
           "cpu_threads": None, "engineer.spec": "rule"}
STAGE_STEPS = 2
SECRET = "sk-hostile-0123456789abcdef"  # the API key the hostile endpoint quotes back


def quiet(line: str) -> None:
    pass


def fixtures() -> Path:
    """The fixtures' folder: ``setup``'s argument, and for each case the ``HOSTILE_FIXTURES`` variable."""
    return Path(os.environ["HOSTILE_FIXTURES"])


def start_model() -> str:
    return str(fixtures() / "model")


def curriculum_of(folder: Path, seed: int | None = None):
    from curriculum.loop.curriculum import Curriculum

    config = load_run_config(fixtures() / "run.yaml").with_overrides(name=folder.name,
                                                                        output_dir=str(folder.parent))
    if seed is not None:
        config = config.with_overrides(seed=seed)
    return Curriculum(config, log=quiet).open()


def begun(folder: Path, seed: int | None = None):
    curriculum = curriculum_of(folder, seed)
    curriculum.begin(start_model())
    return curriculum


def close_stage(curriculum) -> None:
    from curriculum.loop.records import TrainingReport

    curriculum.sample(4)
    curriculum.end_stage(start_model(), TrainingReport(steps=STAGE_STEPS))


# ------------------------------------------------------------------------------------------------ fixtures
def setup(root: Path) -> None:
    """The run folders the cases copy and damage (each run is its own folder, ``name`` = the folder's name)."""
    from curriculum.plugins.trl_hooks import STATE_FILE, CurriculumCallback
    from policy.rewards import StageReward

    from policy.models import init_tiny_model

    root.mkdir(parents=True, exist_ok=True)
    os.environ["HOSTILE_FIXTURES"] = str(root)
    init_tiny_model(root / "model", seed=0)
    save_run_config(preset("tiny").with_overrides(name="x", output_dir=str(root), **REDUCED), root / "run.yaml")
    # a TRL run at step 2 of stage 1, as on_save leaves it (the callback's state beside TRL's checkpoint)
    curriculum = begun(root / "begun")
    curriculum.sample(4)
    callback = CurriculumCallback(curriculum, STAGE_STEPS, reward=StageReward({"default": 1.0}, 4))
    (root / "begun" / "trl" / "checkpoint-2").mkdir(parents=True)

    class Args:
        output_dir = str(root / "begun" / "trl")

    class State:
        global_step = 2
        log_history: list = []

    callback.on_save(Args(), State(), None)
    assert (root / "begun" / "trl" / "checkpoint-2" / STATE_FILE).is_file()
    close_stage(begun(root / "stage1"))
    close_stage(begun(root / "other", seed=99))
    finished = begun(root / "finished")
    close_stage(finished)
    close_stage(finished)
    # verl: a loader state and two rows as the dataset served them
    dataset = verl_dataset(root / "verl")
    served = [dataset._row(item) for item in dataset.curriculum.sample(2)]
    state = json.loads(json.dumps(dataset.state_dict()))
    (root / "verl.json").write_text(json.dumps({"state": state, "served": served}))
    # a trainer row (the tool environment's instance column) and a file of verl rows (export --layout verl)
    row = dataset.curriculum.training_row(dataset.curriculum.sample(1)[0])
    (root / "row.json").write_text(json.dumps(row))
    from curriculum.cli import main as cli

    cli(["export", "--suite", "test-small-quick", "--layout", "verl", "--out", str(root / "rows.jsonl")])
    print(f"fixtures in {root}")


# ------------------------------------------------------------------------------------------------ actions
def trl_resume(folder: str) -> str:
    """A TRL run resumed from ``trl/checkpoint-2`` (the Trainer calls on_train_begin with global_step 2)."""
    from curriculum.plugins.trl_hooks import CurriculumCallback
    from policy.rewards import StageReward

    curriculum = begun(Path(folder))
    callback = CurriculumCallback(curriculum, STAGE_STEPS, reward=StageReward({"default": 1.0}, 4))

    class Args:
        output_dir = str(Path(folder) / "trl")

    class State:
        global_step = 2

    callback.on_train_begin(Args(), State(), None)
    curriculum.sample(2)
    return f"resumed at stage {curriculum.stage}, drawn {curriculum.state_dict()['drawn']}"


def load_state(folder: str, state_file: str) -> str:
    """``Curriculum.load_state_dict`` of a state a script kept as JSON (Python's json: NaN and big integers read)."""
    curriculum = begun(Path(folder))
    curriculum.load_state_dict(json.loads(Path(state_file).read_text()))
    items = curriculum.sample(2)
    return f"stage {curriculum.stage}, drew {len(items)}"


def begin(folder: str) -> str:
    """``Curriculum.begin`` on a run folder whose records were damaged."""
    curriculum = begun(Path(folder))
    return f"begun at stage {curriculum.stage}"


def sample(folder: str, n: str) -> str:
    curriculum = begun(Path(folder))
    items = curriculum.sample(json.loads(n))
    return f"drew {len(items)}"


def evaluate(folder: str, when: str) -> str:
    """``Curriculum.evaluate`` before ``begin`` or in the middle of the run."""
    curriculum = curriculum_of(Path(folder))
    if when == "mid-run":
        curriculum.begin(start_model())
    table = curriculum.evaluate(start_model())
    return f"scored {table}"


def tool_reset(instance_file: str) -> str:
    """The TRL tool environment's ``reset`` with a dataset row's ``instance`` column (JSON: a string or not)."""
    from curriculum.plugins.trl_hooks import environment_factory

    env = environment_factory(None)()
    observation = env.reset(instance=json.loads(Path(instance_file).read_text()), optimal_makespan=3)
    return f"reset: {len(observation)} characters"


def verl_dataset(folder: Path, data_files=None, **options):
    from transformers import AutoTokenizer

    from curriculum.plugins.verl_sampler import CURRICULUM_FILES, MapfCurriculumDataset

    config = {"train_batch_size": 2, "dataloader_num_workers": 0, "curriculum": {
        "run_config": str(fixtures() / "run.yaml"), "run_folder": str(folder), "start_model": start_model(),
        "checkpoint_dir": str(folder / "verl-checkpoints"), "stage_steps": STAGE_STEPS, "final_evaluation": False,
        **options}}
    tokenizer = AutoTokenizer.from_pretrained(start_model())
    return MapfCurriculumDataset(data_files or CURRICULUM_FILES, tokenizer=tokenizer, config=config, log=quiet)


def verl_state(folder: str, state_file: str) -> str:
    """verl's saved loader state (``data.pt``) handed to the dataset on resume."""
    dataset = verl_dataset(Path(folder))
    dataset.load_state_dict(json.loads(Path(state_file).read_text()))
    return f"resumed: {dataset[0]['extra_info']['id']}"


def verl_files(folder: str, data_file: str) -> str:
    """A dataset over a file of rows (``data.val_files``: an export of a suite)."""
    dataset = verl_dataset(Path(folder), data_files=[data_file])
    return f"{len(dataset)} rows, first {dataset[0]['extra_info'].get('id')}"


def verl_folder(working: str, run_folder: str) -> str:
    """A dataset whose ``run_folder`` option is relative, from the user's working folder."""
    os.chdir(working)
    dataset = verl_dataset(Path(working) / "unused", run_folder=run_folder)
    return f"row {dataset[0]['extra_info']['id']}"


def verl_row(folder: str) -> str:
    """A fresh verl dataset asked for a row."""
    dataset = verl_dataset(Path(folder))
    return f"row {dataset[0]['extra_info']['id']}"


class _Quoting(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint whose every answer quotes the request's API key."""

    def _send(self, document: dict) -> None:
        body = json.dumps(document).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802 (http.server's name)
        self._send({"object": "list", "data": [{"id": "m", "object": "model"}], "echo": self.headers.get(
            "Authorization", "")})

    def do_POST(self):  # noqa: N802
        length = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(length)
        key = self.headers.get("Authorization", "").removeprefix("Bearer ")
        text = f"my key is {key}. sizes: 3, 4. ```yaml\nagents: 2\n```\n{key}"
        self._send({"id": "x", "object": "chat.completion", "model": "m", "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    def log_message(self, *args) -> None:
        pass


def quoting_endpoint(*argv: str) -> str:
    """``mapf-lake ARGV`` against an endpoint that quotes the key back; the corpus then looks for the key in every
    output and file of the case."""
    from curriculum.cli import main

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Quoting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    os.environ["MAPF_LAKE_OPENAI_BASE_URL"] = f"http://127.0.0.1:{server.server_port}/v1"
    os.environ["MAPF_LAKE_OPENAI_API_KEY"] = SECRET
    try:
        status = main(list(argv))
    except SystemExit as stop:
        status = stop.code if isinstance(stop.code, int) else 1
    server.shutdown()
    sys.exit(status)


ACTIONS = {"trl-resume": trl_resume, "load-state": load_state, "begin": begin, "sample": sample,
           "evaluate": evaluate, "tool-reset": tool_reset, "verl-state": verl_state, "verl-files": verl_files,
           "verl-folder": verl_folder, "verl-row": verl_row, "openai": quoting_endpoint}


def main() -> int:
    action, args = sys.argv[1], sys.argv[2:]
    if action == "setup":
        setup(Path(args[0]))
        return 0
    try:
        print(ACTIONS[action](*args))
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
