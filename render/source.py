"""Where the viewers get episodes: one replay file or a folder of them, behind one global episode index.

Opening reads only each file's header and index (``replays.reader.ReplayReader`` is lazy), so a file of 10,000
episodes opens in milliseconds; an episode's arrays are decoded when it is shown. Every problem is the replay
reader's :class:`ReplayError`, raised by :class:`ReplaySource` and :meth:`ReplaySource.load` before any window
opens (the CLI turns it into one line on stderr).
"""

from __future__ import annotations

import os
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from replays.errors import ReplayError
from replays.reader import ReplayReader, iter_replay_files
from replays.types import Episode, ReplayHeader
from render.timeline import EpisodeTimeline
from simulator import constants as C
from simulator.text import counted


@dataclass
class LoadedEpisode:
    """One episode decoded and ready to show.

    Fields:
        index: its global index in the source.
        path: the file it came from; ``local_index``: its index in that file.
        header: that file's header.
        episode: the episode (arrays decoded and checked).
        timeline: its scenes.
    """

    index: int
    path: str
    local_index: int
    header: ReplayHeader
    episode: Episode
    timeline: EpisodeTimeline

    @property
    def n_steps(self) -> int:
        return self.timeline.n_steps


class ReplaySource:
    """The episodes of ``path`` (a replay file, or a folder's ``*.mlr`` files in name order), indexed 0..N-1.

    Raises:
        ReplayError: the path does not exist, a folder holds no replay file, a file is not a readable replay
            file, or there are no episodes at all.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        files = list(iter_replay_files(path))
        if not files:
            raise ReplayError(self.path, "file", "no replay files (*.mlr) in this folder")
        self.readers: list[ReplayReader] = []
        try:
            for file in files:
                self.readers.append(ReplayReader(file))
        except BaseException:
            self.close()
            raise
        counts = [len(reader) for reader in self.readers]
        self._starts: list[int] = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64).tolist()  # (files + 1,)
        if self._starts[-1] == 0:
            self.close()
            raise ReplayError(self.path, "file", "no episodes to show (the replay files are empty)")
        self._failures: list[int] | None = None

    def __len__(self) -> int:
        return self._starts[-1]

    def locate(self, index: int) -> tuple[ReplayReader, int]:
        """The reader holding global episode ``index`` and the episode's index in it."""
        if not 0 <= index < len(self):
            raise IndexError(f"episode {index} of {len(self)}")
        file = bisect_right(self._starts, index) - 1
        return self.readers[file], index - self._starts[file]

    def load(self, index: int) -> LoadedEpisode:
        """Episode ``index`` decoded in full (ReplayError when its record breaks the format)."""
        reader, local = self.locate(index)
        episode = reader[local]
        for name in ("instance", "positions", "events", "plan"):  # decode and check now, not in the middle of a draw
            getattr(episode, name)
        timeline = EpisodeTimeline.from_episode(episode)
        return LoadedEpisode(index, reader.path, local, reader.header, episode, timeline)

    def failure_indices(self) -> list[int]:
        """Global indices of the episodes that are not valid (read once, then cached).

        Only each record's outcome is needed, so the arrays are never decoded: a pass over 10,000 episodes
        takes a fraction of a second.
        """
        if self._failures is None:
            failures: list[int] = []
            for file, reader in enumerate(self.readers):
                base = self._starts[file]
                failures.extend(base + i for i, episode in enumerate(reader) if not episode.outcome.valid)
            self._failures = failures
        return self._failures

    def close(self) -> None:
        for reader in self.readers:
            reader.close()

    def __enter__(self) -> "ReplaySource":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- what the side panels say ---------------------------------------------------------------------------------
Fact = tuple[str, str, str]  # (label, value, tone): tone is "", "good" or "bad"


def _short_number(value: float) -> str:
    """Two decimals at most, no trailing zeros (``1``, ``0.5``, ``0.33``): the reward parts fit a panel line."""
    return f"{value:.2f}".rstrip("0").rstrip(".") or "0"


def episode_facts(loaded: LoadedEpisode, step: int, total: int) -> list[Fact]:
    """The metadata lines of the side panel for ``loaded`` at ``step`` (shared by pygame and Textual)."""
    episode, header = loaded.episode, loaded.header
    outcome = episode.outcome
    instance = episode.instance
    policy = header.policy
    policy_text = str(policy.get("name", "?"))
    spec = policy.get("spec")
    if spec is not None and str(spec) != policy_text:
        policy_text += f" ({spec})"
    holes = int((instance.grid == C.HOLE).sum())
    if outcome.valid:
        result, tone = ("valid, optimal" if outcome.optimal else "valid, not optimal"), "good"
    else:
        result, tone = "invalid", "bad"
    failure = C.FAILURE_NAMES[outcome.failure] if 0 <= outcome.failure < len(C.FAILURE_NAMES) else str(outcome.failure)
    if outcome.failure != C.NO_FAILURE and outcome.fail_step >= 0:
        failure += f" at step {outcome.fail_step}"
        if outcome.fail_agent >= 0:
            failure += f", agent {outcome.fail_agent}"
    labels = episode.labels
    makespan = str(outcome.makespan) if outcome.valid else "-"
    if labels is not None:
        makespan += f" (optimal {labels.optimal_makespan})"
    # no reward recorded (scripted rollouts, eval without rewards): nothing to show rather than a false 0.000
    recorded = bool(episode.reward) or bool(episode.reward_components)
    facts: list[Fact] = [
        ("episode", f"{loaded.index + 1} / {total}   ({Path(loaded.path).name} #{loaded.local_index})", ""),
        ("stage", f"{header.stage} ({header.split})", ""),
        ("policy", policy_text, ""),
        ("map", f"{instance.height}x{instance.width}, {counted(holes, 'hole')}", ""),
        ("agents", str(instance.n_agents), ""),
        ("result", result, tone),
        ("failure", failure, "bad" if outcome.failure != C.NO_FAILURE else ""),
        ("makespan", makespan, ""),
    ]
    if recorded:
        facts.append(("reward", f"{episode.reward:.3f}", ""))
    if episode.reward_components:  # a line of its own, so a narrow panel does not cut the total
        facts.append(("reward parts", " ".join(f"{name} {_short_number(value)}" for name, value in
                                               episode.reward_components.items()), ""))
    facts.append(("step", f"{step} / {loaded.n_steps}", ""))
    actions = loaded.timeline.joint_action(step)
    if actions is not None:
        facts.append(("actions", "  ".join(f"{k}:{C.ACTION_LETTERS[int(a)]}" for k, a in enumerate(actions)), ""))
    if episode.parse_error:
        facts.append(("parse error", episode.parse_error, "bad"))
    return facts
