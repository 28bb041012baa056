"""SmolLM2-135M-Instruct's supervised step on this CPU: full fine-tuning against LoRA, measured in one process.

    MAPF_LAKE_MODELS=MODELS python docs/results/smol-self/steptime.py full lora

Each mode trains 12 steps of TRL's ``SFTTrainer`` (batch 16, ``compact-nb`` prompts and solver plans of 2-agent
boards of sides 3-6, the ``smol-self`` warm start's shape) from the same start folder (``hf:@smollm2``) and prints
its mean seconds per step after the first two, and the process's peak resident memory so far. LoRA: rank 16 on every
linear layer, as ``training.lora`` configures GRPO.
"""

from __future__ import annotations

import resource
import sys
import time


def main(modes: list[str]) -> None:
    import torch
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import SFTConfig, SFTTrainer

    from curriculum.training.common import sft_dataset
    from policy.pretrained import resolve_target
    from policy.prompts import PROMPT_STYLES
    from simulator.config import StageConfig
    from simulator.generator import generate

    torch.set_num_threads(2)
    folder = resolve_target("@smollm2")
    sizes = {side: {"data_ratio": 0.25, "hole_ratio": 0.2, "wait_ratio": 0.3} for side in (3, 4, 5, 6)}
    items = generate(StageConfig.from_dict({"agents": 2, "samples": 400, "seed": 1, "sizes": sizes})).instances
    tokenizer = AutoTokenizer.from_pretrained(folder)
    for mode in modes:
        class Timer(TrainerCallback):
            def __init__(self) -> None:
                self.times: list[float] = []

            def on_step_begin(self, args, state, control, **kwargs):
                self.started = time.perf_counter()

            def on_step_end(self, args, state, control, **kwargs):
                self.times.append(time.perf_counter() - self.started)

        args = SFTConfig(output_dir=f"/tmp/steptime-{mode}", max_steps=12, per_device_train_batch_size=16,
                         learning_rate=1e-4, use_cpu=True, report_to=[], save_strategy="no", logging_steps=100,
                         max_length=128, disable_tqdm=True)
        extra = ({"peft_config": LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM")}
                 if mode == "lora" else {})
        trainer = SFTTrainer(model=AutoModelForCausalLM.from_pretrained(folder), args=args,
                             train_dataset=sft_dataset(items, PROMPT_STYLES["compact-nb"]), processing_class=tokenizer,
                             callbacks=[timer := Timer()], **extra)
        trainer.train()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
        times = timer.times[2:]
        print(f"{mode}: {sum(times) / len(times):.1f} s/step (steps 3-12), peak RSS so far {peak:.1f} GB",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["full", "lora"])
