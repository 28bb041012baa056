"""The multi-turn mode: a model plays an instance one joint action per turn, and TRL's GRPO trains it.

Each turn the model sees the agents' current positions and answers one joint action (one move letter per agent,
in agent order: ``UD``, or ``R W`` inside ``<answer>`` ... ``</answer>``); the step-by-step env
(``simulator.env.MapfEnv``, which holds the rules) steps, and its next observation follows, until the episode
ends (every agent on its goal, a failure, an answer that does not parse) or the turn limit.

Turn styles (``TURN_STYLES``), one per prompt style of ``policy.prompts``:

``compact`` / ``compact-nb``  raw text: the style's prompt, then one line per turn: ``=`` and each agent's
                              ``row,col`` (``compact-nb``: plus its four neighbours, ``U.DHL.R.``), and the model's
                              answer line::

                                  n=3         <- the compact prompt (map, A0 1,2>1,0, ...)
                                  ...
                                  ?
                                  =1,2 1,0    <- the env: positions after 0 steps
                                  LW          <- the model: agent 0 left, agent 1 waits
                                  =1,1 1,0
``compact-xy``                the same with cells written as the style writes them (``0102``: row 1, column 2, digits
                              enough for the map's side): ``=0102 0100``.
``natural``                   chat: the natural style's rules and map, then one user message per turn with the
                              positions; the model answers ``<answer>L W</answer>``.

:class:`TextGame` is the env as text (``reset() -> prompt``, ``step(text) -> TurnResult``): the part an OpenEnv
server or any agent loop drives (``policy.openenv_env`` wraps it in OpenEnv's types). :func:`episode_outcome`
scores an episode with the GRPO reward's components (``policy.rewards``): ``format`` (every turn parsed),
``valid`` (every agent on its goal, no failure), ``optimal`` (valid in the optimal makespan), ``progress`` (share
of agents on their goal; 0 after an answer that did not parse) and ``default`` (``1.0 valid + 0.5 optimal +
0.1 format``); with ``slip == 0`` they equal the single-turn reward of the played plan.

:class:`MultiTurnRollout` is a TRL ``rollout_func``::

    rollout = MultiTurnRollout(items, "compact-nb", max_turns=12)
    trainer = GRPOTrainer(model=..., args=GRPOConfig(...), train_dataset=rollout.dataset(),
                          reward_funcs=rollout.reward_funcs(), rollout_func=rollout, processing_class=tokenizer)

TRL 1.16 hands it each prompt already repeated ``num_generations`` times; it plays every episode of the batch in
lockstep (one batched ``generate`` per turn, on the trainer's model through TRL's
``unwrap_model_for_generation``, with the trainer's sampling settings) and returns ``prompt_ids`` (the first
prompt), ``completion_ids`` (the model's turns with the env's observations between them, then an end-of-text
token), ``logprobs`` (the sampling log-probabilities of the model's tokens; 0 on the env's), ``env_mask`` (1 on
the model's tokens, 0 on the env's: TRL leaves the env's tokens out of the loss) and ``episode`` (each
episode's outcome, which the reward functions read). A completion stops taking turns once it holds
``max_completion_length`` tokens (the episode is then cut: goal not reached). Generation is transformers'
``generate``; the vLLM path of TRL is not used by this rollout.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from policy.parsing import _SEPARATORS, _WORDS, _answer_region, _tokens, parse_plan
from policy.prompts import PROMPT_STYLES
from policy.rewards import DEFAULT_WEIGHTS, reward_columns
from simulator import constants as C
from simulator.config import MAX_SEED
from simulator.documents import is_integer, is_python_int
from simulator.env import MapfEnv, check_slip, default_horizon
from simulator.errors import ConfigError
from simulator.rules import first_failure
from simulator.types import EnvState, Instance

if TYPE_CHECKING:
    from datasets import Dataset

    from simulator.generator import LabelledInstance

COMPONENTS = ("format", "valid", "optimal", "progress", "default")


# --- turn styles ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TurnStyle:
    """How a multi-turn episode is shown to a model: the first prompt and the env's text after each turn."""

    name: str
    chat: bool  # True: the prompt is chat messages and each observation is a user message
    prompt: Callable[[Instance], str | list[dict[str, Any]]]  # rules, map, agents and the first observation
    observation: Callable[[Instance, np.ndarray, int], str]  # (instance, positions (K, 2), steps taken) -> text


TURN_STYLES: dict[str, TurnStyle] = {
    name: TurnStyle(name, style.chat, style.turn_prompt, style.observation) for name, style in PROMPT_STYLES.items()
    if style.turn_prompt is not None and style.observation is not None
}
"""The turn styles, read off ``policy.prompts.PROMPT_STYLES`` (each prompt style carries its multi-turn form)."""


def get_turn_style(name: str) -> TurnStyle:
    if name not in TURN_STYLES:
        raise ConfigError("prompt_style", name, f"one of {sorted(TURN_STYLES)}")
    return TURN_STYLES[name]


# --- one joint action from text -------------------------------------------------------------------------------

def parse_joint_action(text: str, n_agents: int) -> tuple[np.ndarray | None, str | None]:
    """``(actions (K,) int8, None)`` or ``(None, reason)``. Accepts ``UD``, ``U D``, ``up, down`` (one action per
    agent in agent order) or agent lines with one action each (``A0 U`` / ``agent 1: D``), after any thinking and
    inside the last ``<answer>`` block when there is one (the rules of ``policy.parsing``)."""
    if not isinstance(text, str) or not text.strip():
        return None, "the answer is empty"
    labelled = parse_plan(text, n_agents, horizon=1)
    if labelled.plan is not None:
        silent = [agent for agent, length in enumerate(labelled.plan.lengths.tolist()) if length != 1]
        if silent:  # a turn moves every agent: a missing move is no wait
            return None, f"agent {silent[0]} has no action (one action per agent each turn)"
        return labelled.plan.actions[:, 0].astype(np.int8), None
    region = _answer_region(text)
    if region is None:
        return None, "a <think> block is never closed, so there is no answer after it"
    for token in _SEPARATORS.split(region):
        word = token.rstrip(".:")
        # one turn's letters run together as the prompt writes them ("UD"); a lower-case word is a word ("dull")
        if len(word) > 1 and word.isalpha() and not word.isupper() and word.lower() not in _WORDS:
            return None, f"not an action: {token[:40]!r}"
    actions = _tokens(region)
    if isinstance(actions, str):
        return None, f"not an action: {actions!r}"
    if len(actions) != n_agents:
        return None, f"{len(actions)} actions for {n_agents} agents"
    return np.asarray(actions, np.int8), None


# --- the env as text ------------------------------------------------------------------------------------------

class TurnResult(NamedTuple):
    observation: str  # the env's text for the next turn ("" once the episode is over)
    done: bool
    reward: float  # the episode's default reward on its last turn, else 0
    info: dict[str, Any]  # "actions" (the joint action played, or None), "parse_error", "events"; "outcome" when done


def check_optimal_makespan(value: Any, name: str = "optimal_makespan") -> int | None:
    """``value`` if it is None or an integer in 0..MAX_PLAN_LENGTH; else ConfigError naming ``name``. Checked when a
    game is made: a bad value used to raise only at an episode's last step, when ``optimal`` was scored."""
    if value is None:
        return None
    if not is_integer(value) or not 0 <= value <= C.MAX_PLAN_LENGTH:
        raise ConfigError(name, value, f"None or an integer in 0..{C.MAX_PLAN_LENGTH}")
    return int(value)


class TextGame:
    """One instance played one joint action per turn, through text.

    Args:
        instance: the instance.
        style: a turn style name (``TURN_STYLES``).
        optimal_makespan: the instance's optimal makespan (for ``optimal``); None scores ``optimal`` as 0.
        max_turns: the turn limit (default ``simulator.env.default_horizon``), 1..4096.
        slip: slippery ice (``MapfEnv``).
    """

    def __init__(self, instance: Instance, style: str, *, optimal_makespan: int | None = None,
                 max_turns: int | None = None, slip: float = 0.0) -> None:
        self.style = get_turn_style(style)
        self.env = MapfEnv(instance, horizon=max_turns, slip=slip)
        self.instance = instance
        self.optimal_makespan = check_optimal_makespan(optimal_makespan)
        self.turns = 0
        self.parse_error: str | None = None
        self.played: list[np.ndarray] = []  # the joint actions played, in order
        self._started = False
        self._cut = False

    @property
    def done(self) -> bool:
        return self.parse_error is not None or self._cut or self.env.done

    def reset(self, seed: int | None = None) -> str | list[dict[str, Any]]:
        """Start the episode; returns the first prompt (text, or chat messages for chat styles)."""
        self.env.reset(seed)
        self.turns = 0
        self.parse_error = None
        self.played = []
        self._started = True
        self._cut = False
        return self.style.prompt(self.instance)

    def step(self, text: str) -> TurnResult:
        """Play the model's answer ``text`` for this turn."""
        if not self._started or self.done:
            raise ConfigError("game.step", "episode finished" if self._started else "not reset", "call reset() first")
        self.turns += 1
        actions, error = parse_joint_action(text, self.instance.n_agents)
        events = np.zeros(self.instance.n_agents, np.int8)
        if actions is None:  # then ``error`` says why
            self.parse_error = error
        else:
            self.played.append(actions)
            events = self.env.step(actions).events
        info: dict[str, Any] = {"actions": None if actions is None else actions.tolist(), "parse_error": error,
                                "events": events.tolist()}
        if self.done:
            info["outcome"] = self.outcome()
            return TurnResult("", True, info["outcome"]["default"], info)
        state = self.env.state
        return TurnResult(self.style.observation(self.instance, state.pos, state.t), False, 0.0, info)

    def truncate(self) -> dict[str, Any]:
        """End the episode now (a completion out of tokens): goal not reached unless it already ended."""
        self._cut = True
        return self.outcome()

    def outcome(self) -> dict[str, Any]:
        """:func:`episode_outcome` of the episode so far."""
        return episode_outcome(self.env.state, self.instance.n_agents, self.parse_error, self.optimal_makespan,
                               self.turns)


def episode_outcome(state: EnvState, n_agents: int, parse_error: str | None, optimal_makespan: int | None,
                    turns: int) -> dict[str, Any]:
    """The components of ``policy.rewards`` for an episode ending in ``state`` (a ``simulator.types.EnvState``),
    plus ``category`` (``simulator.constants.FAILURE_NAMES``), ``makespan`` / ``sum_of_costs`` (valid episodes;
    else None), ``turns`` and ``parse_error``."""
    failure, _ = first_failure(state.events)
    on_goal = int((state.status == C.ON_GOAL).sum())
    if parse_error is not None:
        category = C.PARSE_ERROR
    elif failure != C.NO_FAILURE:
        category = failure
    else:
        category = C.NO_FAILURE if on_goal == n_agents else C.GOAL_NOT_REACHED
    valid = category == C.NO_FAILURE
    makespan = int(state.arrival.max()) if valid else None
    out: dict[str, Any] = {"format": float(parse_error is None), "valid": float(valid),
                           "optimal": float(valid and optimal_makespan is not None
                                            and makespan == int(optimal_makespan)),
                           "progress": 0.0 if parse_error is not None else on_goal / n_agents}
    out["default"] = sum(weight * out[name] for name, weight in DEFAULT_WEIGHTS.items())
    out.update(category=C.FAILURE_NAMES[category], makespan=makespan,
               sum_of_costs=int(state.arrival.sum()) if valid else None, turns=int(turns), parse_error=parse_error)
    return out


# --- TRL's rollout_func ---------------------------------------------------------------------------------------

def _prompt_key(prompt: Any) -> str:
    return prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True)


def _episode_reward(name: str) -> Callable[..., list[float]]:
    def reward(prompts: Any = None, completions: Sequence[Any] = (), episode: Sequence[Mapping[str, Any]] = (),
               **_columns: Any) -> list[float]:
        if len(episode) != len(completions):
            raise ValueError(f"{len(episode)} episode outcomes for {len(completions)} completions: use the reward "
                             "functions with MultiTurnRollout as the trainer's rollout_func")
        return [float(outcome[name]) for outcome in episode]

    reward.__name__ = f"mapf_episode_{name}_reward"
    reward.__doc__ = f"The episode's ``{name}`` component (``policy.multiturn.episode_outcome``), TRL signature."
    return reward


EPISODE_REWARDS: dict[str, Callable[..., list[float]]] = {name: _episode_reward(name) for name in COMPONENTS}


class MultiTurnRollout:
    """A TRL ``rollout_func`` that plays instances one joint action per turn (module docstring).

    Args:
        items: the stage's ``LabelledInstance`` s (the dataset rows are their first prompts).
        style: a turn style name (``TURN_STYLES``).
        max_turns: turn limit per episode (default: each instance's ``default_horizon``).
        turn_tokens: most tokens the model writes in one turn (default: agents + 4 for text styles, 64 for chat).
        slip: slippery ice; episode ``i`` of the ``n``-th call draws from seed ``(seed, n, i)``.
        seed: see ``slip``.
    """

    def __init__(self, items: Sequence[LabelledInstance], style: str, *, max_turns: int | None = None,
                 turn_tokens: int | None = None, slip: float = 0.0, seed: int = 0) -> None:
        self.style = get_turn_style(style)
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
            raise ConfigError("items", type(items).__name__, "a list of simulator.generator.LabelledInstance")
        if not items:
            raise ConfigError("items", len(items), "at least one instance")
        for name, value in (("max_turns", max_turns), ("turn_tokens", turn_tokens)):
            if value is not None and (not is_python_int(value) or not 1 <= value <= C.MAX_PLAN_LENGTH):
                raise ConfigError(name, value, f"None or an integer in 1..{C.MAX_PLAN_LENGTH}")
        # Every item, the slip and the seed are checked here, not when an episode reaches them.
        for index, item in enumerate(items):
            if not isinstance(getattr(item, "instance", None), Instance):
                raise ConfigError(f"items[{index}]", item, "a LabelledInstance (with .instance and .optimal_makespan)")
            check_optimal_makespan(getattr(item, "optimal_makespan", None), f"items[{index}].optimal_makespan")
        self.items = list(items)
        self.max_turns = max_turns
        self.turn_tokens = turn_tokens
        self.slip = check_slip(slip)
        if not is_integer(seed) or not 0 <= seed <= MAX_SEED:
            raise ConfigError("seed", seed, f"an integer 0 <= seed <= {MAX_SEED}")
        self.seed = int(seed)
        self.calls = 0
        self._by_prompt = {_prompt_key(self.style.prompt(item.instance)): item for item in self.items}

    def dataset(self) -> Dataset:
        """TRL prompt rows: ``prompt`` (the first prompt) and the single-turn reward columns."""
        from datasets import Dataset

        return Dataset.from_list([
            {"prompt": self.style.prompt(item.instance),
             **reward_columns(item.instance, item.optimal_makespan, default_horizon(item.instance))}
            for item in self.items])

    def reward_funcs(self, weights: dict[str, float] | None = None) -> list[Callable[..., list[float]]]:
        """The episode reward functions for ``GRPOTrainer(reward_funcs=...)``: ``default`` alone (the GRPO default
        reward), or one function per component in ``weights`` (pass the weights as ``GRPOConfig.reward_weights``)."""
        if weights is None:
            return [EPISODE_REWARDS["default"]]
        unknown = [name for name in weights if name not in EPISODE_REWARDS]
        if unknown or not weights:
            raise ConfigError("rewards", weights, f"a mapping with names among {', '.join(COMPONENTS)}")
        return [EPISODE_REWARDS[name] for name in weights]

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:  # trainer: TRL's GRPOTrainer
        """TRL's ``rollout_func(prompts, trainer)``: play every prompt with the trainer's model."""
        from trl.models import unwrap_model_for_generation

        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator,
                                         gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
                                         generation_kwargs=trainer.generation_kwargs) as model:
            return self.play(prompts, model, trainer.processing_class, generation_kwargs=trainer.generation_kwargs,
                             max_completion_length=trainer.max_completion_length,
                             chat_template_kwargs=getattr(trainer, "chat_template_kwargs", None) or {})

    def play(self, prompts: list[Any], model: Any, tokenizer: Any, *, generation_kwargs: dict[str, Any] | None = None,
             max_completion_length: int = 256, chat_template_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
        """Play one episode per prompt with ``model`` (module docstring for what it returns)."""
        import torch

        chat_kwargs = dict(chat_template_kwargs or {})
        self.calls += 1
        games: list[TextGame] = []
        messages: list[list[dict[str, Any]]] = []  # chat styles: each game's chat so far
        prompt_ids: list[list[int]] = []
        for index, prompt in enumerate(prompts):
            item = self._by_prompt.get(_prompt_key(prompt))
            if item is None:
                raise ConfigError(f"prompts[{index}]", prompt, "a first prompt of this rollout's dataset()")
            game = TextGame(item.instance, self.style.name, optimal_makespan=item.optimal_makespan,
                            max_turns=self.max_turns, slip=self.slip)
            first = game.reset(seed=self.seed * 1_000_003 + self.calls * 10_007 + index if self.slip > 0 else None)
            games.append(game)
            if self.style.chat:
                assert isinstance(first, list)  # a chat style's first prompt is its messages
                messages.append(list(first))
                text = tokenizer.apply_chat_template(first, add_generation_prompt=True, tokenize=False, **chat_kwargs)
                prompt_ids.append(tokenizer(text, add_special_tokens=False)["input_ids"])
            else:
                prompt_ids.append(tokenizer(text=first)["input_ids"])
        eos = tokenizer.eos_token_id
        stops = {eos} | set(_as_list((generation_kwargs or {}).get("eos_token_id")))
        if not self.style.chat:
            newline = tokenizer("\n", add_special_tokens=False)["input_ids"]
            if len(newline) == 1:  # a text turn ends at its line's end (a tokenizer that merges newlines: at eos)
                stops.add(newline[0])
        stops.discard(None)
        per_turn = self.turn_tokens or (max(g.instance.n_agents for g in games) + 4 if not self.style.chat else 64)
        completion: list[list[int]] = [[] for _ in games]  # token ids
        mask: list[list[int]] = [[] for _ in games]  # 1: the model's token, 0: the env's
        logprobs: list[list[float]] = [[] for _ in games]
        outcomes: list[dict[str, Any] | None] = [None] * len(games)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
        from transformers import GenerationConfig

        sampling = {key: value for key, value in (generation_kwargs or {"do_sample": True}).items()
                    if key not in ("max_new_tokens", "eos_token_id", "pad_token_id", "bos_token_id")}
        device = next(model.parameters()).device
        while True:
            active = []
            for i, game in enumerate(games):
                if outcomes[i] is not None:
                    continue
                if len(completion[i]) >= max_completion_length:
                    outcomes[i] = game.truncate()
                    self._close(i, completion, mask, logprobs, game, tokenizer, eos)
                else:
                    active.append(i)
            if not active:
                break
            contexts = [prompt_ids[i] + completion[i] for i in active]
            width = max(len(ids) for ids in contexts)
            input_ids = torch.full((len(active), width), pad, dtype=torch.long)
            attention = torch.zeros((len(active), width), dtype=torch.long)
            for row, ids in enumerate(contexts):  # left padding: every row's next token is at the end
                input_ids[row, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
                attention[row, width - len(ids):] = 1
            budget = [min(per_turn, max_completion_length - len(completion[i])) for i in active]
            config = GenerationConfig(**sampling, max_new_tokens=max(budget), eos_token_id=sorted(stops),
                                      pad_token_id=pad, return_dict_in_generate=True, output_scores=True,
                                      disable_compile=True)
            with torch.no_grad():
                out = model.generate(input_ids=input_ids.to(device), attention_mask=attention.to(device),
                                     generation_config=config)
            chosen = out.sequences[:, width:]
            # the sampling log-probabilities: scores are the logits after temperature / top-k / top-p
            scores = torch.stack([torch.log_softmax(step.float(), dim=-1).gather(1, chosen[:, n:n + 1]).squeeze(1)
                                  for n, step in enumerate(out.scores)], dim=1).cpu()  # (B, T)
            new_tokens = chosen.cpu()
            for row, i in enumerate(active):
                tokens = new_tokens[row].tolist()[:budget[row]]
                end = next((n + 1 for n, token in enumerate(tokens) if token in stops), len(tokens))
                tokens = tokens[:end]
                completion[i] += tokens
                mask[i] += [1] * len(tokens)
                logprobs[i] += scores[row, :len(tokens)].tolist()
                turn_text = tokenizer.decode(tokens, skip_special_tokens=True)
                result = games[i].step(turn_text)
                if result.done:
                    outcomes[i] = result.info["outcome"]
                    self._close(i, completion, mask, logprobs, games[i], tokenizer, eos)
                    continue
                if self.style.chat:
                    observation = self._chat_delta(messages[i], turn_text, result.observation, tokenizer, chat_kwargs,
                                                   ended=bool(tokens) and tokens[-1] in stops)
                else:
                    observation = ("\n" if not tokens or tokens[-1] not in stops else "") + result.observation
                ids = tokenizer(observation, add_special_tokens=False)["input_ids"]
                completion[i] += ids
                mask[i] += [0] * len(ids)
                logprobs[i] += [0.0] * len(ids)
        return {"prompt_ids": prompt_ids, "completion_ids": completion, "logprobs": logprobs, "env_mask": mask,
                "episode": outcomes}

    @staticmethod
    def _close(i: int, completion: list[list[int]], mask: list[list[int]], logprobs: list[list[float]],
               game: TextGame, tokenizer: Any, eos: int) -> None:
        """End completion ``i``: the last board (text styles) and an end-of-text token, both the env's."""
        ids = []
        if not game.style.chat:
            state = game.env.state
            ids = tokenizer(("\n" if completion[i] and tokenizer.decode(completion[i][-1:]) != "\n" else "")
                            + game.style.observation(game.instance, state.pos, state.t), add_special_tokens=False)["input_ids"]
        if not completion[i] or completion[i][-1] != eos:
            ids = ids + [eos]
        completion[i] += ids
        mask[i] += [0] * len(ids)
        logprobs[i] += [0.0] * len(ids)

    @staticmethod
    def _chat_delta(history: list[dict[str, Any]], turn_text: str, observation: str, tokenizer: Any,
                    chat_kwargs: dict[str, Any], ended: bool) -> str:
        """The chat template's text between the model's turn and its next one: the end of the assistant message,
        the user message with ``observation``, the next assistant header. Rendered with a marker as the assistant's
        content, so templates that rewrite earlier turns (Qwen3 drops their thinking) do not shift it."""
        marker = "\u0000mapf-turn\u0000"
        rendered: str = tokenizer.apply_chat_template(
            history + [{"role": "assistant", "content": marker}, {"role": "user", "content": observation}],
            add_generation_prompt=True, tokenize=False, **chat_kwargs)
        delta = rendered[rendered.index(marker) + len(marker):]
        eos_text = tokenizer.eos_token or ""
        if ended and eos_text and delta.startswith(eos_text):
            delta = delta[len(eos_text):]  # the model's own end-of-turn token is already in the completion
        history += [{"role": "assistant", "content": turn_text}, {"role": "user", "content": observation}]
        return delta


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


__all__ = ["COMPONENTS", "EPISODE_REWARDS", "MultiTurnRollout", "TURN_STYLES", "TextGame", "TurnResult", "TurnStyle",
           "episode_outcome", "get_turn_style", "parse_joint_action"]
