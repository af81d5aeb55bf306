"""Backend registry: one frozen record per vendor; every vendor difference lives here."""

from __future__ import annotations

import enum
import importlib
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from harness.errors import UsageError

_VENDOR_MODULES = ("cuda", "musa", "rocm", "ascend", "cpu")


class CaptureVerdict(enum.Enum):
    """What a graph-capture failure means for the measurement."""

    RECOVERABLE = "recoverable"  # the op refused capture: time this shape directly
    FATAL = "fatal"  # the kernel itself failed on the device: re-raise
    POISONED = "poisoned"  # the context is unusable: stop the operator


@dataclass(frozen=True)
class CaptureRule:
    """A capture-failure wording (case-insensitive substring) and its verdict."""

    pattern: str
    verdict: CaptureVerdict


@dataclass(frozen=True)
class Device:
    """One accelerator as the vendor's management tool reports it."""

    index: int
    name: str
    uuid: str | None = None
    driver: str | None = None
    memory_mib: int | None = None
    sm_clock_mhz: int | None = None


@dataclass(frozen=True)
class Clocks:
    """One reading of a device's clocks and power state; None where the tool has no answer.

    `throttle` is the vendor's bit mask of reasons the clocks are held below their maximum,
    holding only the bits that slow kernels down (thermal, hardware, power brake): 0 is not
    throttled.
    """

    sm_mhz: int | None
    mem_mhz: int | None
    temp_c: int | None
    pstate: int | None
    throttle: int | None

    def to_dict(self) -> dict[str, int | None]:
        return {"sm_mhz": self.sm_mhz, "mem_mhz": self.mem_mhz, "temp_c": self.temp_c,
                "pstate": self.pstate, "throttle": self.throttle}


# A device's clock reader: given the visibility variable's value (None: unset) and the ordinal
# of the device the process uses, a callable that reads its clocks, or the one line that says
# why there is none (no management library, no such device).
ClockReader = Callable[[], Clocks]
ClockOpener = Callable[[str | None, int], "ClockReader | str"]


def no_clocks(visible: str | None, ordinal: int) -> ClockReader | str:
    """The opener of a backend whose devices report no clocks: none, and no line about it."""
    return ""


# What every Triton-based stack reads only in the compiler of FlagGems' kernels: Triton's and
# FlagTree's knobs. FlagGems' own (FLAGGEMS_*) are read by its Python too.
CODEGEN_VARIABLES = ("TRITON_", "FLAGTREE_", "MLIR_ENABLE_")
COMPILER_VARIABLES = (*CODEGEN_VARIABLES, "FLAGGEMS_")


def _named(variable: str, names: Sequence[str]) -> bool:
    """Whether `variable` is one of `names`, or starts with one that ends in "_" (a prefix)."""
    return any(variable.startswith(n) if n.endswith("_") else variable == n for n in names)


@dataclass(frozen=True)
class Backend:
    """Everything the harness needs to know about one vendor's stack.

    `parse_devices` turns the stdout of `smi_command` into devices; it is pure so that it can
    be tested on recorded output. `capture_rules` are tried in order; the first match wins and
    an unmatched message gets `unknown_capture_verdict`.
    """

    name: str
    aliases: tuple[str, ...]
    vendor: str | None  # flag_gems.vendor_name expected on this backend; None: no flag_gems
    torch_device: str  # the torch device type (torch.<torch_device> is the device module)
    visibility_vars: tuple[str, ...]  # first one is set for DEVICES; all are read
    smi_command: tuple[str, ...] = ()
    parse_devices: Callable[[str], list[Device]] | None = None
    graph_class: str | None = None  # dotted path of the graph class; None: no capture
    # A graph timer the vendor's Triton ships and FlagGems' own `--mode cudagraph` calls: used
    # verbatim so the harness's numbers match FlagGems'; None: the harness's own algorithm
    # through the device interface.
    upstream_graph_bench: str | None = None
    capture_rules: tuple[CaptureRule, ...] = ()
    unknown_capture_verdict: CaptureVerdict = CaptureVerdict.FATAL
    capture_deny_ops: frozenset[str] = frozenset()
    compat_plugins: tuple[str, ...] = ()
    python_modules: tuple[str, ...] = ("torch",)
    # The command that installs python_modules where a plain pip install can (the cpu stack);
    # None where they come with the vendor's stack or image.
    install_hint: str | None = None
    is_accelerator: bool = True
    # Compiler switches by short AXIS name -> the environment variable this stack reads.
    switches: Mapping[str, str] = field(default_factory=dict)
    # Further variables (a name, or a prefix ending in "_") read only by the compiler of
    # FlagGems' kernels: a switch among them changes nothing but the code those compile to.
    compiler_variables: tuple[str, ...] = ()
    # Variables an AXIS may name on this stack besides its compiler's: read by torch or the
    # runtime too, so a switch among them may change torch's reference.
    axis_variables: tuple[str, ...] = ()
    # Engine flags (`docker`/`podman` first) that give a container exactly the DEVICES given, or
    # every device when none is; inside, they are numbered from 0. None: no vendor image.
    container_device_args: Callable[[str, Sequence[str]], tuple[str, ...]] | None = None
    # What a Slurm array task takes: "gpu" where Slurm sets this stack's visibility variable
    # for a `--gres=gpu:1` task (one device, one unit), "node" where it does not (a whole
    # node, its units spread over its devices by the harness).
    slurm_unit: str = "gpu"
    apptainer_flags: tuple[str, ...] = ()  # `apptainer exec` flags that bring the devices in
    # Opens a reader of a device's clocks and power state, read beside each row's timing
    # (no_clocks: the backend has none; "" for the reason says so without a line in run.log).
    open_clocks: ClockOpener = no_clocks

    @property
    def can_capture(self) -> bool:
        """True when the backend has a graph class to capture with."""
        return self.graph_class is not None

    def is_compiler_switch(self, variable: str) -> bool:
        """Whether `variable` reaches only the compiler of FlagGems' kernels or FlagGems (its
        switches, COMPILER_VARIABLES, its compiler_variables), never torch's own kernels."""
        return self.is_codegen_switch(variable) or _named(variable, COMPILER_VARIABLES)

    def is_codegen_switch(self, variable: str) -> bool:
        """Whether `variable` reaches nothing but the code FlagGems' kernels compile to (its
        switches, CODEGEN_VARIABLES, its compiler_variables): where the two sides compiled the
        same code, they ran the same operator."""
        return _named(variable, (*self.switches.values(), *CODEGEN_VARIABLES,
                                 *self.compiler_variables))

    def axis_switches(self) -> dict[str, str]:
        """Every AXIS this stack knows, by short name or in full, and the variable it sets: its
        switches, its compiler variables named in full (not a prefix), its axis_variables."""
        named = [n for n in (*self.compiler_variables, *self.axis_variables)
                 if not n.endswith("_")]
        return {**self.switches, **{v: v for v in (*self.switches.values(), *named)}}

    def _match_capture_rule(self, message: str) -> CaptureVerdict | None:
        lowered = message.lower()
        for rule in self.capture_rules:
            if rule.pattern.lower() in lowered:
                return rule.verdict
        return None

    def classify_capture_failure(self, message: str) -> CaptureVerdict:
        """Return the verdict for an exception message raised during capture or replay."""
        verdict = self._match_capture_rule(message)
        return self.unknown_capture_verdict if verdict is None else verdict

    def classify_capture_exception(self, exc: BaseException) -> CaptureVerdict:
        """Return the verdict for an exception and the ones it was raised from."""
        return self.explain_capture_exception(exc)[0]

    def explain_capture_exception(self, exc: BaseException) -> tuple[CaptureVerdict, str]:
        """The verdict for an exception chain and the message that decided it.

        The innermost recognised cause decides, except that FATAL anywhere wins. torch's graph
        context manager reports its own capture_end failure ("operation failed due to a previous
        error during capture") with the op's refusal only in `__context__`, so the refusal is
        also the reason worth reporting. Unrecognised: the outermost message.
        """
        chain: list[BaseException] = []
        current: BaseException | None = exc
        while current is not None and all(current is not seen for seen in chain):
            chain.append(current)
            current = current.__cause__ or current.__context__
        matched = [(v, str(e)) for e in reversed(chain)
                   if (v := self._match_capture_rule(str(e))) is not None]
        fatal = [m for m in matched if m[0] is CaptureVerdict.FATAL]
        if fatal:
            return fatal[0]
        return matched[0] if matched else (self.unknown_capture_verdict, str(exc))

    def visibility_env(self, devices: Sequence[str]) -> dict[str, str]:
        """Environment that makes exactly `devices` visible (empty: leave visibility alone)."""
        if not devices or not self.visibility_vars:
            return {}
        return {self.visibility_vars[0]: ",".join(devices)}

    def enumerate_devices(self, run: Callable[..., subprocess.CompletedProcess] | None = None
                          ) -> list[Device]:
        """Ask the vendor tool for the devices; [] when the tool is absent or fails."""
        if not self.smi_command or self.parse_devices is None:
            return []
        if run is None:
            if shutil.which(self.smi_command[0]) is None:
                return []
            run = subprocess.run
        try:
            proc = run(list(self.smi_command), capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return []
        if proc.returncode != 0:
            return []
        return self.parse_devices(proc.stdout)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready view for `harness backends --json`."""
        return {
            "name": self.name,
            "aliases": list(self.aliases),
            "vendor": self.vendor,
            "torch_device": self.torch_device,
            "visibility_vars": list(self.visibility_vars),
            "smi_command": list(self.smi_command),
            "graph_class": self.graph_class,
            "can_capture": self.can_capture,
            "upstream_graph_bench": self.upstream_graph_bench,
            "capture_rules": [
                {"pattern": r.pattern, "verdict": r.verdict.value} for r in self.capture_rules
            ],
            "unknown_capture_verdict": self.unknown_capture_verdict.value,
            "capture_deny_ops": sorted(self.capture_deny_ops),
            "compat_plugins": list(self.compat_plugins),
            "python_modules": list(self.python_modules),
            "is_accelerator": self.is_accelerator,
            "switches": dict(self.switches),
            "axis_switches": self.axis_switches(),
            "slurm_unit": self.slurm_unit,
            "apptainer_flags": list(self.apptainer_flags),
        }


class Registry:
    """Backends by name and alias; lookups return the frozen record itself."""

    def __init__(self) -> None:
        self._by_name: dict[str, Backend] = {}
        self._aliases: dict[str, str] = {}

    def register(self, backend: Backend) -> Backend:
        for key in (backend.name, *backend.aliases):
            if key in self._by_name or key in self._aliases:
                raise ValueError(f"backend name {key!r} is registered twice")
        self._by_name[backend.name] = backend
        for alias in backend.aliases:
            self._aliases[alias] = backend.name
        return backend

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def accepted(self) -> list[str]:
        """Every name and alias that `get` accepts, sorted."""
        return sorted([*self._by_name, *self._aliases])

    def get(self, name: str) -> Backend:
        key = name.strip().lower()
        key = self._aliases.get(key, key)
        try:
            return self._by_name[key]
        except KeyError:
            raise UsageError(
                f"BACKEND={name!r} is not accepted; expected one of: {', '.join(self.accepted())}"
            ) from None

    def all(self) -> list[Backend]:
        return [self._by_name[n] for n in self.names()]


_REGISTRY: Registry | None = None


def registry() -> Registry:
    """The process-wide registry, built on first use (vendor modules probe nothing on import)."""
    global _REGISTRY
    if _REGISTRY is None:
        reg = Registry()
        for module in _VENDOR_MODULES:
            reg.register(importlib.import_module(f"{__name__}.{module}").BACKEND)
        _REGISTRY = reg
    return _REGISTRY


def get(name: str) -> Backend:
    """Look a backend up by name or alias; an unknown name lists the accepted ones."""
    return registry().get(name)


def detect(which: Callable[[str], str | None] = shutil.which) -> Backend:
    """The first accelerator backend whose management tool is on PATH; cpu otherwise."""
    for backend in registry().all():
        if backend.is_accelerator and backend.smi_command and which(backend.smi_command[0]):
            return backend
    return registry().get("cpu")
