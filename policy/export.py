"""``mapf-lake export``: a suite or a stage config as a dataset file other trainers read.

Every row carries a record (``policy.score``: the instance, its labels, the horizon, a reference answer, the
format version), so an answer can be scored later anywhere with ``policy.score.score`` or verl's
``compute_score``. Layouts (``--layout``):

``records``   the records themselves, one per row.
``verl``      verl's RL dataset rows: ``data_source`` (``"mapf-lake"``), ``prompt`` (chat messages; a text style's
              prompt becomes one user message), ``ability`` (``"planning"``), ``reward_model`` (``{style:
              "rule", ground_truth: the record as JSON}``) and ``extra_info`` (``{id, index, split, size,
              agents}``); score with ``custom_reward_function.path=policy/score.py`` (``compute_score``).
``openrlhf``  OpenRLHF's prompt datasets: ``prompt`` and ``label`` (the record as JSON), for ``--input_key prompt
              --label_key label`` and the reward function in ``policy/openrlhf_reward.py``.

Formats (``--format``): ``jsonl`` (one JSON object per line), ``parquet`` (pyarrow) or ``hf`` (a Hugging Face
``datasets`` folder, ``save_to_disk``). Every format is written under a temporary name and renamed, so a killed
export leaves no half file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulator.errors import ConfigError

if TYPE_CHECKING:
    from simulator.generator import LabelledInstance

LAYOUTS = ("records", "verl", "openrlhf")
FORMATS = ("jsonl", "parquet", "hf")
DATA_SOURCE = "mapf-lake"


def layout_row(record: dict[str, Any], layout: str, index: int, split: str) -> dict[str, Any]:
    """One dataset row of ``record`` in ``layout`` (module docstring)."""
    if layout == "records":
        return record
    truth = json.dumps(record, separators=(",", ":"))
    prompt = record["prompt"]
    if layout == "verl":
        messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        return {"data_source": DATA_SOURCE, "prompt": messages, "ability": "planning",
                "reward_model": {"style": "rule", "ground_truth": truth},
                "extra_info": {"id": record["id"], "index": index, "split": split,
                               "size": record["labels"]["size"], "agents": record["labels"]["agents"]}}
    if layout == "openrlhf":
        return {"prompt": prompt, "label": truth}
    raise ConfigError("--layout", layout, f"one of {', '.join(LAYOUTS)}")


def write_rows(rows: Iterable[dict[str, Any]], out: str | os.PathLike[str], fmt: str, force: bool = False) -> int:
    """Write ``rows`` to ``out`` in ``fmt`` atomically; returns the number of rows. An existing ``out`` is refused
    unless ``force`` (then it is replaced whole, once the new file or folder is complete)."""
    from simulator.atomic import AtomicWriter, atomic_folder

    out = Path(out)
    if (out.exists() or out.is_symlink()) and not force:
        raise ConfigError("--out", str(out), "a new file or folder (it exists: pick another name, or pass --force "
                          "to replace it)")
    if fmt == "jsonl":
        count = 0
        with AtomicWriter(out) as writer:
            for row in rows:
                writer.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")
                count += 1
        return count
    rows = list(rows)
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        with AtomicWriter(out) as writer:
            pq.write_table(pa.Table.from_pylist(rows), writer.handle)
        return len(rows)
    if fmt == "hf":
        from datasets import Dataset

        if out.exists() and not out.is_dir():
            raise ConfigError("--out", str(out), "a new folder for the datasets export (a file is there)")
        from datasets.utils.logging import disable_progress_bar

        disable_progress_bar()  # the export's own bar is the one progress line
        with atomic_folder(out, replace=force) as building:
            Dataset.from_list(rows).save_to_disk(str(building))
        return len(rows)
    raise ConfigError("--format", fmt, f"one of {', '.join(FORMATS)}")


def size_on_disk(path: str | os.PathLike[str]) -> int:
    """Bytes of a written export: the file, or every file in the folder."""
    path = Path(path)
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


def export_items(source: str, items: Iterable[LabelledInstance], style_name: str) -> Iterator[dict[str, Any]]:
    """Records of ``items`` (LabelledInstances) in the style, in order."""
    from policy.prompts import get_style
    from policy.score import make_record

    style = get_style(style_name)
    for item in items:
        yield make_record(item, style, source)


__all__ = ["DATA_SOURCE", "FORMATS", "LAYOUTS", "export_items", "layout_row", "size_on_disk", "write_rows"]
