"""The command's help: a version, an example under each everyday command that still parses, no escaped percent."""

import argparse
import shlex
import subprocess
import sys

import pytest

from curriculum.cli import build_parser, package_version, walk_parsers

EVERYDAY_COMMANDS = ("gen", "rollout", "watch", "play", "solve", "summarize", "eval")


def _parsers() -> dict[str, argparse.ArgumentParser]:
    return {parser.prog: parser for parser in walk_parsers(build_parser())}


def _example_commands(epilog: str) -> list[str]:
    """The ``mapf-lake ...`` commands of an epilog's example lines (split at ``&&`` and pipes, comments dropped)."""
    commands = []
    for line in epilog.splitlines():
        if not line.startswith("  "):
            continue
        code = line.split("  #")[0]
        for part in code.replace("&&", "|").split("|"):
            if part.strip().startswith("mapf-lake "):
                commands.append(part.strip())
    return commands


def test_cli_help__version_names_the_installed_distribution():
    result = subprocess.run([sys.executable, "-m", "curriculum.cli", "--version"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"mapf-lake {package_version()}"
    assert package_version() != "unknown"


def test_cli_help__no_help_text_shows_a_doubled_percent():
    shown = {prog: parser.format_help() for prog, parser in _parsers().items()}
    assert len(shown) > 20
    assert [prog for prog, text in shown.items() if "%%" in text] == []


@pytest.mark.parametrize("command", EVERYDAY_COMMANDS)
def test_cli_help__everyday_command_shows_an_example_that_parses(command):
    parser = _parsers()[f"mapf-lake {command}"]
    text = parser.format_help()
    assert "examples:" in text
    examples = _example_commands(parser.epilog or "")
    assert any(words.startswith(f"mapf-lake {command} ") for words in examples), examples
    for example in examples:
        build_parser().parse_args(shlex.split(example)[1:])  # an unknown flag or a bad value exits (status 2)
        assert example in text  # the example line is printed whole, not rewrapped


def test_cli_help__examples_keep_their_lines_and_descriptions_still_wrap():
    text = _parsers()["mapf-lake gen"].format_help()
    assert "\n  mapf-lake gen --size 4 5 6 --n 300 --out train.jsonl\n" in text
    description = text[text.index("Generate instances:"):text.index("options:")]
    assert len(description.splitlines()) > 1 and max(len(line) for line in description.splitlines()) <= 100


def test_cli_help__train_preset_help_names_every_preset():
    from curriculum.config import PRESETS

    preset_flag = next(action for action in _parsers()["mapf-lake train"]._actions if "--preset" in action.option_strings)
    assert [name for name in PRESETS if f"{name} (" not in preset_flag.help] == []


@pytest.mark.parametrize("command", ["eval --policy oracle", "export --out x.jsonl"])
def test_cli__every_registered_suite_is_a_choice(command):
    """The suites come from the registry (``simulator.suites.SUITES``): a hand-written list refused ``test-small``."""
    from simulator.suites import SUITES

    for suite in SUITES:
        build_parser().parse_args([*shlex.split(command), "--suite", suite])
