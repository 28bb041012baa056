"""The README's commands stay true: CI runs the README's test command; the main job's command is run at a reduced
size in ``test_compare.py``."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _bash_blocks(text: str) -> list[str]:
    blocks, inside, current = [], False, []
    for line in text.splitlines():
        if line.strip() == "```bash":
            inside, current = True, []
        elif line.strip() == "```" and inside:
            inside = False
            blocks.append("\n".join(current).strip())
        elif inside:
            current.append(line)
    return blocks


def main_job_command() -> list[str]:
    """The main job's ``mapf-lake`` command as the README's first block runs it (after its set-up steps)."""
    import shlex

    main_job = _bash_blocks((ROOT / "README.md").read_text())[0]
    step = [part.strip() for part in main_job.split("&&")][-1]
    words = shlex.split(step)
    assert words[0].endswith("mapf-lake"), step
    return ["mapf-lake", *words[1:]]


def test_readme__starts_with_two_commands_and_ci_runs_the_test_one():
    blocks = _bash_blocks((ROOT / "README.md").read_text())
    main_job, tests = blocks[0], blocks[1]
    assert "mapf-lake" in main_job and "pytest" in tests
    ci_lines = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert tests in ci_lines
