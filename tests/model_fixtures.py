"""Model folders shared by test_models.py and test_backends.py, built once per test process.

Building the Qwen3 tokenizer takes a few seconds; a cache here (not a per-file session fixture) builds it once
even when both files run. Folders live in one temporary directory removed at exit.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

_ROOT = Path(tempfile.mkdtemp(prefix="mapf-lake-test-models-"))
atexit.register(shutil.rmtree, _ROOT, ignore_errors=True)


@functools.cache
def tiny_model_dir() -> Path:
    from policy.models import init_tiny_model

    return init_tiny_model(_ROOT / "tiny", seed=0)


@functools.cache
def qwen3_tokenizer_dir() -> Path:
    from policy.models import init_qwen3_tokenizer

    return init_qwen3_tokenizer(_ROOT / "qwen3-tokenizer")


@functools.cache
def tiny_qwen3_dir() -> Path:
    from policy.models import init_tiny_qwen3

    return init_tiny_qwen3(_ROOT / "tiny-qwen3", qwen3_tokenizer_dir(), seed=0)


@functools.cache
def qwen3_tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(qwen3_tokenizer_dir()), local_files_only=True)
