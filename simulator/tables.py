"""The paper's results table as text: rows (agent counts, runs, methods), columns = map sizes, cells =
valid% / optimal%, plus the mean over the sizes a row has.

Every table of rates the project prints (``mapf-lake demo``, ``mapf-lake eval``, ``mapf-lake compare``) is made
here, so they read alike.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence, Union

# (valid_rate, optimal_rate), fractions in [0, 1]
Rates = tuple[float, float]
# (label, {size: rates}) or (label, {size: rates}, (valid_mean, optimal_mean))
RateRow = Union[tuple[str, Mapping[int, Rates]], tuple[str, Mapping[int, Rates], Rates]]


def rate_cell(valid_rate: float, optimal_rate: float, decimals: int = 0) -> str:
    """``"valid/optimal"`` in percent, e.g. ``"100/95"`` (rates are fractions in [0, 1])."""
    return f"{100 * valid_rate:.{decimals}f}/{100 * optimal_rate:.{decimals}f}"


def format_rate_table(
    title: str,
    corner: str,
    rows: Iterable[RateRow],
    sizes: Sequence[int],
    *,
    cell_width: int = 11,
    mean_decimals: int = 0,
) -> str:
    """The table as lines of text.

    Args:
        title: the first line.
        corner: the header's first column, already padded to the width of the row labels (e.g. ``"agents "``).
        rows: ``(label, {size: (valid_rate, optimal_rate)})`` per row, or ``(label, cells, (valid_mean,
            optimal_mean))`` from a caller that reports the same mean elsewhere (else the mean of the row's cells
            is shown); the label is printed as given (padded by the caller); a size a row lacks shows ``-``.
        sizes: the map sides, one column each (``3`` is the ``3x3`` column).
        cell_width: characters per column, right-aligned.
        mean_decimals: decimals of the mean column (cells have none).
    """
    lines = [title, corner + "".join(f"{f'{s}x{s}':>{cell_width}}" for s in sizes) + f"{'mean':>{cell_width}}"]
    for label, cells, *given_mean in rows:
        present = [cells[size] for size in sizes if size in cells]
        row = "".join(f"{rate_cell(*cells[size]) if size in cells else '-':>{cell_width}}" for size in sizes)
        mean = "-"
        if given_mean:
            mean = rate_cell(*given_mean[0], decimals=mean_decimals)
        elif present:
            valid_mean = 100 * sum(v for v, _ in present) / len(present)
            optimal_mean = 100 * sum(o for _, o in present) / len(present)
            mean = f"{valid_mean:.{mean_decimals}f}/{optimal_mean:.{mean_decimals}f}"
        lines.append(f"{label}{row}{mean:>{cell_width}}")
    return "\n".join(lines)
