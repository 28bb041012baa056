"""Prompt and answer lengths in SmolLM2's tokens, per prompt style and map side.

    MAPF_LAKE_MODELS=MODELS python docs/results/smol-self/tokens.py

For 20 generated 2-agent instances of sides 3 and 6, each style's prompt (a chat style through the model's chat
template, with the generation prompt) and its answer to the solver's plan, tokenized by ``hf:@smollm2``'s tokenizer.
"""

from __future__ import annotations


def main() -> None:
    from transformers import AutoTokenizer

    from policy.pretrained import resolve_target
    from policy.prompts import PROMPT_STYLES
    from simulator.config import StageConfig
    from simulator.generator import generate

    tokenizer = AutoTokenizer.from_pretrained(resolve_target("@smollm2"))
    for side in (3, 6):
        config = StageConfig.from_dict({"agents": 2, "samples": 20, "seed": 1, "sizes": {
            side: {"data_ratio": 1.0, "hole_ratio": 0.2, "wait_ratio": 0.3}}})
        items = generate(config).instances
        for name in ("natural", "compact-nb"):
            style = PROMPT_STYLES[name]
            prompts, answers = [], []
            for item in items:
                prompt = style.prompt(item.instance)
                if style.chat:
                    prompt = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
                prompts.append(len(tokenizer(prompt)["input_ids"]))
                answers.append(len(tokenizer(style.write_answer(item.instance, item.plan))["input_ids"]))
            print(f"side {side} {name:>10}: prompt {sum(prompts) / len(prompts):.1f} tokens, answer "
                  f"{sum(answers) / len(answers):.1f} (at most {max(answers)})")


if __name__ == "__main__":
    main()
