"""What a run was made on, as ``compare`` pairs runs by it: the library versions (:func:`run_installation`) and the
facts that chose its CPU kernels (:func:`run_kernels`), each over the run's extensions, and what differs between two
runs (:func:`installation_difference`, :func:`kernel_difference`). Every name and value read from a manifest is
escaped (:func:`~simulator.text.printable`): a newline in a version would forge a line of the comparison."""

from __future__ import annotations

from curriculum.loop.manifest import CpuKernels
from curriculum.reports.load import RunRecord
from simulator.text import printable


def run_installation(run: RunRecord) -> dict[str, str | None]:
    """The library versions a run was made with: its manifest's ``versions`` ({name: version}; None = not
    installed; {} when the manifest has none, an old or hand-made run). A run extended later under other versions
    (the manifest's ``extended``) was made on several installations: each package whose version changed reads
    ``"2.12.0 then 2.13.0"``, so such a run matches only a run extended across the same change."""
    history = [run.manifest.versions] + [entry.versions for entry in run.manifest.extended]
    names = list(dict.fromkeys(name for versions in history for name in versions))
    out: dict[str, str | None] = {}
    for name in names:
        seen = list(dict.fromkeys(versions.get(name, "unknown") for versions in history))
        version = seen[0] if len(seen) == 1 else " then ".join(str(version) for version in seen)
        out[printable(name)] = None if version is None else printable(version)
    return out


def installation_difference(arm: dict[str, str | None], reference: dict[str, str | None]) -> list[str]:
    """What differs between two :func:`run_installation` results, e.g. ``["torch 2.13.0 vs 2.12.0"]`` (empty when
    they are the same; a side without versions reads as unknown)."""
    if arm == reference:
        return []
    if not arm or not reference:
        return [f"versions {'recorded' if arm else 'unknown'} vs {'recorded' if reference else 'unknown'}"]
    return [f"{name} {arm.get(name, 'unknown')} vs {reference.get(name, 'unknown')}"
            for name in dict.fromkeys([*arm, *reference]) if arm.get(name, "unknown") != reference.get(name, "unknown")]


def _kernel_facts(kernels: CpuKernels) -> dict[str, str]:
    return {"torch_cpu_capability": str(kernels.torch_cpu_capability or "unknown"), **kernels.kernel_env}


def run_kernels(run: RunRecord) -> dict[str, str] | None:
    """What chose a run's CPU kernels, from its manifest's ``machine`` (:class:`~curriculum.loop.manifest.CpuKernels`):
    ``torch_cpu_capability`` (torch's CPU kernels: ``AVX512``, ``AVX2``, ...; ``unknown`` without torch) and each
    kernel variable of :data:`curriculum.loop.folder.KERNEL_ENV` that was set (``ONEDNN_MAX_CPU_ISA``,
    ``OMP_NUM_THREADS``, ...). Per-seed figures depend on them (AVX-512/AMX and AVX2 kernels round differently).
    None for a run begun before they were recorded: such a run compares on its versions alone, as before. A run
    extended later on other kernels reads ``"AVX512 then AVX2"``, as :func:`run_installation` reads versions (an
    extension that recorded none adds nothing)."""
    manifest = run.manifest
    if manifest.machine is None or manifest.machine.kernels is None:
        return None
    history = [manifest.machine] + [entry.machine for entry in manifest.extended]
    facts = [_kernel_facts(machine.kernels) for machine in history if machine is not None and machine.kernels is not None]
    out: dict[str, str] = {}
    for name in dict.fromkeys(name for fact in facts for name in fact):
        seen = list(dict.fromkeys(fact.get(name, "unset") for fact in facts))
        out[printable(name)] = printable(" then ".join(seen))
    return out


def kernel_difference(arm: dict[str, str] | None, reference: dict[str, str] | None) -> list[str]:
    """What differs between two :func:`run_kernels` results, e.g. ``["torch_cpu_capability AVX512 vs AVX2",
    "ONEDNN_MAX_CPU_ISA unset vs AVX2"]``; empty when they agree or either run did not record them."""
    if arm is None or reference is None:
        return []
    return [f"{name} {arm.get(name, 'unset')} vs {reference.get(name, 'unset')}"
            for name in dict.fromkeys([*arm, *reference]) if arm.get(name, "unset") != reference.get(name, "unset")]


__all__ = ["installation_difference", "kernel_difference", "run_installation", "run_kernels"]
