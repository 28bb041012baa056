"""The run manifest (``manifest.json``) as typed, frozen records: the run config the run was made with (a
:class:`~curriculum.config.RunConfig`), the library versions, the machine and the facts that chose its CPU
kernels, and each later extension of the run.

:class:`curriculum.loop.folder.RunFolder` writes the manifest through
:func:`~curriculum.loop.records.write_record` with :meth:`RunManifest.from_dict` as the reader, so nothing it writes
is refused when read back; ``report`` and ``compare`` read it (:func:`curriculum.reports.load.load_run`).

Manifests written before a fact was recorded read back without it: no ``protocol`` (a folder of protocol 1:
None), no ``run_id`` (""), no ``versions`` ({}), no ``machine`` (None) or a machine without the kernel facts
(``Machine.kernels`` None). A run config written before one of its fields existed reads that field's default,
which is what the run ran with (:meth:`RunConfig.from_dict`); the fields :data:`RECORDED_RUN_FIELDS` were in every
run config ``mapf-lake train`` wrote, so a manifest without one is damaged, not old.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from curriculum.config import RunConfig
from simulator.documents import check_value, read_key
from simulator.errors import ConfigError, short_repr
from simulator.fields import allowed_of

RUN_ID_CHARS = 16

RECORDED_RUN_FIELDS = ("model", "seed", "engineer.spec")
"""Run-config fields every manifest holds (they have existed since the first run config) and the report prints: a
default in their place would name a model, seed or engineer the run may not have had."""


def read_run_id(document: Mapping[str, Any], where: str) -> str:
    """A record's ``run_id`` ("" when it has none: written before run ids); anything but hex digits of the
    length :func:`curriculum.loop.folder.new_run_id` writes is a ConfigError naming ``where``."""
    value = document.get("run_id")
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) != RUN_ID_CHARS or value.strip("0123456789abcdef"):
        raise ConfigError(f"{where}: run_id", short_repr(value), f"{RUN_ID_CHARS} hex digits (the id mapf-lake "
                          "train gave the run)")
    return value


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _text(data: Mapping[str, Any], key: str, where: str) -> str | None:
    """``data[key]``: a string, or None when missing or null."""
    value = read_key(data, key, where, "str", optional=True)
    return None if value is None else str(value)


def _integer(data: Mapping[str, Any], key: str, where: str) -> int | None:
    """``data[key]``: an integer, or None when missing or null."""
    value = read_key(data, key, where, "int", optional=True)
    return None if value is None else int(value)


def _as_declared(data: Mapping[str, Any], key: str, where: str, name: str) -> Any:
    """``data[key]`` as RunConfig's field ``name`` declares it (its bounds, not a copy of them), or None when
    missing or null."""
    value = data.get(key)
    allowed = allowed_of(RunConfig, name)
    if value is not None and not allowed.admits(value):
        raise ConfigError(_at(where, key), value, str(allowed))
    return value


def _texts(data: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
    """``data[key]``: a mapping of names to strings ({} when missing or null)."""
    mapping = read_key(data, key, where, "mapping", optional=True) or {}
    return {str(name): check_value(value, f"{_at(where, key)}.{short_repr(name, 40)}", "str")
            for name, value in mapping.items()}


def _versions(data: Mapping[str, Any], where: str) -> dict[str, str | None]:
    """``data["versions"]``: {package: version, None where it was not installed} ({} when missing or null)."""
    versions = read_key(data, "versions", where, "mapping", optional=True) or {}
    out: dict[str, str | None] = {}
    for name, version in versions.items():
        if version is not None and not isinstance(version, str):
            raise ConfigError(f"{_at(where, 'versions')}.{short_repr(name, 40)}", version,
                              "a version string, or null (not installed)")
        out[str(name)] = version
    return out


@dataclass(frozen=True)
class CpuKernels:
    """What chose a run's CPU kernels: per-seed figures depend on them (AVX-512/AMX and AVX2 kernels round
    differently)."""

    torch_cpu_capability: str | None
    """The CPU kernels torch dispatched to (``AVX512``, ``AVX2``, ``DEFAULT``, ...); None where torch was not
    installed."""
    kernel_env: Mapping[str, str]
    """Each variable of :data:`curriculum.loop.folder.KERNEL_ENV` that was set (``ONEDNN_MAX_CPU_ISA``,
    ``OMP_NUM_THREADS``, ...), by name."""


@dataclass(frozen=True)
class Machine:
    """The manifest's ``machine``: what the run ran on, with no user or host names (``folder._machine``)."""

    system: str | None = None
    """``platform.system()``: ``Linux``, ..."""
    machine: str | None = None
    """``platform.machine()``: ``x86_64``, ..."""
    processor: str | None = None
    cpus: int | None = None
    """``os.cpu_count()``."""
    cpu_model: str | None = None
    """The first processor's model name in ``/proc/cpuinfo``."""
    cpu_flags: tuple[str, ...] = ()
    """Its AMX and AVX-512 flags, sorted."""
    kernels: CpuKernels | None = None
    """None for a manifest written before the kernel facts were recorded (no ``torch_cpu_capability`` key)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"system": self.system, "machine": self.machine, "processor": self.processor,
                               "cpus": self.cpus, "cpu_model": self.cpu_model, "cpu_flags": list(self.cpu_flags)}
        if self.kernels is not None:
            out.update(torch_cpu_capability=self.kernels.torch_cpu_capability, kernel_env=dict(self.kernels.kernel_env))
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "machine") -> "Machine":
        check_value(data, where, "mapping")
        kernel_env = _texts(data, "kernel_env", where)  # checked wherever it is, as before the facts were read
        flags = read_key(data, "cpu_flags", where, "list", optional=True) or []
        return cls(system=_text(data, "system", where), machine=_text(data, "machine", where),
                   processor=_text(data, "processor", where), cpus=_integer(data, "cpus", where),
                   cpu_model=_text(data, "cpu_model", where),
                   cpu_flags=tuple(check_value(flag, f"{where}.cpu_flags[{index}]", "str")
                                   for index, flag in enumerate(flags)),
                   kernels=CpuKernels(_text(data, "torch_cpu_capability", where), kernel_env)
                   if "torch_cpu_capability" in data else None)


def _machine(data: Mapping[str, Any], where: str) -> Machine | None:
    value = data.get("machine")
    return None if value is None else Machine.from_dict(value, _at(where, "machine"))


@dataclass(frozen=True)
class Extension:
    """One entry of the manifest's ``extended``: the run given more stages later (``train --resume RUN --set
    stages=N``), perhaps on another installation."""

    from_stages: int | None = None
    to_stages: int | None = None
    versions: Mapping[str, str | None] = field(default_factory=dict)
    """The library versions of the extension ({} when not recorded)."""
    machine: Machine | None = None
    git_commit: str | None = None
    at: str | None = None
    """When it was extended (UTC, ``2026-12-06T16:08:33Z``)."""

    def to_dict(self) -> dict[str, Any]:
        return {"from_stages": self.from_stages, "to_stages": self.to_stages, "versions": dict(self.versions),
                "machine": None if self.machine is None else self.machine.to_dict(), "git_commit": self.git_commit,
                "at": self.at}

    @classmethod
    def from_dict(cls, data: Any, where: str = "extended") -> "Extension":
        check_value(data, where, "mapping")
        return cls(from_stages=_as_declared(data, "from_stages", where, "stages"),
                   to_stages=_as_declared(data, "to_stages", where, "stages"), versions=_versions(data, where),
                   machine=_machine(data, where), git_commit=_text(data, "git_commit", where),
                   at=_text(data, "at", where))


def _under(error: ConfigError, where: str) -> ConfigError:
    """``error`` of a field inside the document at ``where``: the same error naming ``where.FIELD``."""
    moved = ConfigError(f"{where}.{error.field}", error.value, error.allowed)
    moved.args = (f"{where}.{error.args[0]}",)  # the message whole, detail included
    return moved


def read_run_config(data: Any, where: str = "run_config") -> RunConfig:
    """A recorded run config (a manifest's ``run_config``) as the :class:`RunConfig` it was: every field checked by
    its declaration, a field added since read as its default; one of :data:`RECORDED_RUN_FIELDS` missing, or any
    field refused, is a ConfigError naming ``where.FIELD``."""
    check_value(data, where, "mapping")
    for dotted in RECORDED_RUN_FIELDS:
        *sections, name = dotted.split(".")
        inner = data
        for section in sections:
            inner = inner.get(section) if isinstance(inner, Mapping) else None
        if isinstance(inner, Mapping) and name not in inner:
            raise ConfigError(f"{where}.{dotted}", None, "present (every run config mapf-lake train wrote has it)")
    try:
        return RunConfig.from_dict(data)
    except ConfigError as error:
        raise _under(error, where) from None


@dataclass(frozen=True)
class RunManifest:
    """``manifest.json``: the run config and the installation a run was made with (the module docstring says what
    an older manifest reads as)."""

    run_config: RunConfig
    protocol: int | None = None
    """The run-folder protocol (:data:`curriculum.loop.folder.RUN_PROTOCOL`); None: made before protocols (1)."""
    versions: Mapping[str, str | None] = field(default_factory=dict)
    """The library versions the run was made with, by package (None: not installed)."""
    machine: Machine | None = None
    seed: int | None = None
    """The run's seed, as the run config has it."""
    git_commit: str | None = None
    created: str | None = None
    """When the folder was made (UTC, ``2026-12-06T16:08:33Z``)."""
    run_id: str = ""
    """What the run's stage records and checkpoint states carry ("" before run ids)."""
    extended: tuple[Extension, ...] = ()
    """Each later extension, oldest first."""

    def to_dict(self) -> dict[str, Any]:
        return {"protocol": self.protocol, "run_config": self.run_config.to_dict(), "versions": dict(self.versions),
                "machine": None if self.machine is None else self.machine.to_dict(), "seed": self.seed,
                "git_commit": self.git_commit, "created": self.created, "run_id": self.run_id or None,
                "extended": [entry.to_dict() for entry in self.extended]}

    @classmethod
    def from_dict(cls, data: Any, where: str = "") -> "RunManifest":
        """Read the manifest document; keys a later writer adds are left."""
        check_value(data, where or "manifest", "mapping")
        extended = read_key(data, "extended", where, "list", optional=True) or []
        return cls(run_config=read_run_config(read_key(data, "run_config", where, "mapping"), _at(where, "run_config")),
                   protocol=_integer(data, "protocol", where), versions=_versions(data, where),
                   machine=_machine(data, where), seed=_as_declared(data, "seed", where, "seed"),
                   git_commit=_text(data, "git_commit", where), created=_text(data, "created", where),
                   run_id=read_run_id(data, where or "manifest"),
                   extended=tuple(Extension.from_dict(entry, f"{_at(where, 'extended')}[{index}]")
                                  for index, entry in enumerate(extended)))


__all__ = ["RECORDED_RUN_FIELDS", "RUN_ID_CHARS", "CpuKernels", "Extension", "Machine", "RunManifest",
           "read_run_config", "read_run_id"]
