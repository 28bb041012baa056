"""Reports of runs, by the names they have always had here: the modules of :mod:`curriculum.reports` by job are
:mod:`~curriculum.reports.load` (reading a run folder), :mod:`~curriculum.reports.text` (one run as text),
:mod:`~curriculum.reports.plots` (PNG plots), :mod:`~curriculum.reports.installation` (what a run was made on) and
:mod:`~curriculum.reports.compare` (the table across runs and the comparison of arms over seeds)."""

from __future__ import annotations

from curriculum.reports.compare import (COMPARE_METRICS, TEST_METRICS, ArmComparison, MixedPairs, PairedDifference,
                                        SeedComparison, compare_table, render_seed_comparison, run_arm, run_figures,
                                        run_seed, seed_comparison)
from curriculum.reports.installation import installation_difference, kernel_difference, run_installation, run_kernels
from curriculum.reports.load import Rates, RunRecord, load_run
from curriculum.reports.plots import write_curves, write_plots
from curriculum.reports.text import render_report

__all__ = ["COMPARE_METRICS", "TEST_METRICS", "ArmComparison", "MixedPairs", "PairedDifference", "Rates", "RunRecord",
           "SeedComparison", "compare_table", "installation_difference", "kernel_difference", "load_run",
           "render_report", "render_seed_comparison", "run_arm", "run_figures", "run_installation", "run_kernels",
           "run_seed", "seed_comparison", "write_curves", "write_plots"]
