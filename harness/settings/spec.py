"""Settings of a run: every variable of DESIGN.md, read from flags and environment, validated."""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import backends
from harness.backends import Backend
from harness.errors import UsageError
from harness.settings import variables
from harness.settings.inputs import Inputs as Inputs  # the snapshot of what the user gave
from harness.settings.options import add_flag
from harness.settings.variables import CLUSTER_RUNNERS as CLUSTER_RUNNERS
from harness.settings.variables import SETTINGS, Var, group

IN_IMAGE_VAR = "ZL_IN_IMAGE"  # set by the vendor images: RUNNER resolves to host inside one
PACKAGE_DIR = Path(__file__).resolve().parents[1]  # harness/, this module being in settings/
REPO_ROOT = PACKAGE_DIR.parent  # the checkout when run from one; site-packages when installed
# An installed harness carries the cpu suite inside the package (pyproject.toml maps it there);
# a checkout holds it in examples/, where the packaged copy never exists.
_PACKAGED_SUITE = PACKAGE_DIR / "cpu_suite"
EMBEDDED_SUITE = (_PACKAGED_SUITE if _PACKAGED_SUITE.is_dir()
                  else REPO_ROOT / "examples" / "cpu_suite")


def checkout_root() -> Path | None:
    """The harness checkout this package runs from; None for an installed package."""
    return REPO_ROOT if (REPO_ROOT / "pyproject.toml").is_file() else None


# A run's settings: the variables spec.resolve reads into Settings (DESIGN.md's Variables).
VARS: tuple[Var, ...] = group(SETTINGS)
VARS_BY_MAKE = {v.make: v for v in VARS}


@dataclass(frozen=True)
class Settings:
    """Validated settings of one run; `sources` says where each value came from."""

    backend: Backend
    op: str | None
    op_file: str | None
    test_node: str | None
    level: str
    shape_mode: str
    shape_file: Path | None
    dtypes: tuple[str, ...]  # () : the benchmark's own
    mode: str
    timer: str  # what MODE resolves to on this backend: "graph" or "direct"
    graph_timer: str  # GRAPH_TIMER: the graph timer's algorithm (boundary.GRAPH_TIMERS)
    warmup_ms: int | None  # FlagGems' --warmup; None: the benchmark's own
    iter_ms: int | None  # FlagGems' --iter; None: the benchmark's own
    repeat: int
    baseline: str  # BASELINE as given: auto, every, once or off (see timed_baseline)
    isolate_tuner_cache: bool
    record: bool  # write autotune_records/ (always with a private tuner cache)
    replay_from: Path | None
    replay_strict: bool
    use_flagtune: bool
    parallel_warmup_gpus: int | None
    warmup_share: tuple[int, int] | None  # (I, N): a parallel warmup's shard; see WARMUP_SHARE
    compile_workers: int  # 0: candidates compile one by one as they are timed
    tune_screen: bool  # a sweep's candidates timed briefly first (harness.tuning.screen)
    devices: tuple[str, ...]
    flaggems_dir: Path | None
    runner: str
    out: Path
    dry_run: bool
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)  # not a value
    # A dry run's plan of what runs in the backend's image (RUNNER docker or podman), made on
    # the host: what the image's FlagGems and stack decide is checked there, not here.
    planned_for_image: bool = field(default=False, compare=False)

    @property
    def times_baseline(self) -> bool:
        """Whether this run times torch's reference: every BASELINE but off (a campaign turns
        once into every for its round 0, both sides, and off for the rest:
        campaign.ab.side_settings)."""
        return self.baseline != "off"

    def caliber(self) -> dict[str, object]:
        """The settings that make two runs comparable or not (the run header's core)."""
        return {
            "backend": self.backend.name,
            "level": self.level,
            "shape_mode": self.shape_mode,
            "shape_file": str(self.shape_file) if self.shape_file else None,
            "dtypes": ",".join(self.dtypes) or None,
            "timer": self.timer,
            "graph_timer": self.graph_timer,
            "warmup_ms": self.warmup_ms,
            "iter_ms": self.iter_ms,
            "mode": self.mode,
            "repeat": self.repeat,
            "baseline": self.baseline,
            "tuner_cache": "isolated" if self.isolate_tuner_cache else "shared",
            "autotune_mode": "flagtune" if self.use_flagtune else "default",
            "replay_from": str(self.replay_from) if self.replay_from else None,
            "replay_strict": self.replay_strict,
            "compile_workers": self.compile_workers,
            "tune_screen": self.tune_screen,
        }


def add_arguments(parser: argparse.ArgumentParser, names: tuple[str, ...] | None = None) -> None:
    """Add the flags of `names` (Make names of VARS; all when None) to a subcommand parser.

    A subcommand of the CLI takes its flags from `options.add_arguments(parser, command)`.
    """
    settings = parser.add_argument_group(SETTINGS)
    for var in VARS:
        if names is None or var.make in names:
            add_flag(settings, var)


def _check_choice(var: Var, value: str, source: str) -> str:
    if var.choices and value not in var.choices:
        raise UsageError(f"{var.label(source)}={value!r} is not accepted; "
                         f"expected one of: {', '.join(var.choices)}")
    return value


def given(name: str, flags: Mapping[str, object], env: Mapping[str, str]) -> str | None:
    """Variable `name`'s value where one was given (flag, else environment), checked against
    its choices as `resolve` checks it; None where it was not given."""
    var = VARS_BY_MAKE[name]
    value, source = var.lookup(flags, env)
    return None if source == "default" or value is None else _check_choice(var, value, source)


def resolve_runner(value: str | None, backend: Backend, env: Mapping[str, str],
                   which: Callable[[str], str | None]) -> str:
    """RUNNER as DESIGN.md says: host inside an image and for non-accelerators, else an engine."""
    if value:
        return value
    if env.get(IN_IMAGE_VAR) == "1" or not backend.is_accelerator:
        return "host"
    for engine in ("docker", "podman"):
        if which(engine):
            return engine
    raise UsageError(f"RUNNER: neither docker nor podman is installed to run BACKEND="
                     f"{backend.name!r} in its image; set RUNNER=host to run on this host")


def _read_vars(flags: Mapping[str, object], env: Mapping[str, str]
               ) -> tuple[dict[str, str | None], dict[str, str]]:
    """Every variable's raw value and where it came from, closed sets checked;
    ZL_ENABLE_CUDAGRAPH=0 read as MODE=direct where MODE is not given."""
    raw: dict[str, str | None] = {}
    sources: dict[str, str] = {}
    for var in VARS:
        value, source = var.lookup(flags, env)
        raw[var.make], sources[var.make] = value, source
        if value is not None:
            _check_choice(var, value, source)
    if sources["MODE"] == "default" and env.get("ZL_ENABLE_CUDAGRAPH") == "0":
        raw["MODE"], sources["MODE"] = "direct", "env"
    return raw, sources


def _timer(mode: str, backend: Backend) -> str:
    """The timer MODE gives on `backend`: auto is graph where the backend can capture."""
    if mode == "graph" and not backend.can_capture:
        raise UsageError(f"MODE='graph' is not accepted on BACKEND={backend.name!r}, which "
                         "cannot capture graphs; expected one of: direct, auto")
    return "graph" if mode == "graph" or (mode == "auto" and backend.can_capture) else "direct"


def _check_shapes(shape_mode: str, shape_file: Path | None) -> None:
    """SHAPE_FILE is given exactly when SHAPE_MODE reads one."""
    if shape_mode == "file" and shape_file is None:
        raise UsageError("SHAPE_MODE='file' needs SHAPE_FILE (a shape YAML)")
    if shape_mode != "file" and shape_file is not None:
        raise UsageError(f"SHAPE_FILE={str(shape_file)!r} is only read with SHAPE_MODE=file, "
                         f"not {shape_mode}")


def _isolate(values: Mapping[str, Any], sources: Mapping[str, str]) -> bool:
    """ISOLATE_TUNER_CACHE, forced on by REPLAY_FROM (refused when set to 0 by the user)."""
    isolate = bool(values["isolate_tuner_cache"])
    if values["replay_from"]:
        if sources["ISOLATE_TUNER_CACHE"] != "default" and not isolate:
            raise UsageError("REPLAY_FROM needs a private tuner cache; ISOLATE_TUNER_CACHE=0 "
                             "would mix the replayed winners with the shared cache's")
        isolate = True  # pinned winners go into a cache that holds nothing else
    return isolate


def resolve(flags: Mapping[str, object], env: Mapping[str, str] | None = None,
            which: Callable[[str], str | None] | None = None) -> Settings:
    """Build Settings from parsed flags (by dest) and the environment; a flag beats the env.

    Each variable with a field is read by its kind (variables.TABLE); what follows are the
    rules between settings: the backend detected where none is given, the timer MODE gives on
    it, a shape file exactly with SHAPE_MODE=file, REPLAY_FROM's private cache, one warmup
    shard at a time, the embedded suite on a non-accelerator, RUNNER's default.
    """
    env = variables.environ() if env is None else env
    which = shutil.which if which is None else which
    raw, sources = _read_vars(flags, env)
    # Any: each field has its own type, checked by its kind and by Settings' annotations
    values: dict[str, Any] = {var.field: var.kind.parse(var.label(sources[var.make]),
                                                             raw[var.make])
                              for var in VARS if var.field}
    backend = values["backend"] or backends.detect(which)
    _check_shapes(values["shape_mode"], values["shape_file"])
    isolate = _isolate(values, sources)
    if values["parallel_warmup_gpus"] and values["warmup_share"]:
        raise UsageError(f"WARMUP_SHARE={raw['WARMUP_SHARE']!r} marks a parallel warmup's "
                         "shard, which cannot shard again; unset PARALLEL_WARMUP_GPUS or it")
    flaggems_dir = values["flaggems_dir"]
    if flaggems_dir is None and not backend.is_accelerator:
        flaggems_dir = EMBEDDED_SUITE
    return Settings(**{
        **values, "backend": backend, "timer": _timer(values["mode"], backend),
        "isolate_tuner_cache": isolate, "record": isolate or values["record"],
        "flaggems_dir": flaggems_dir,
        "runner": resolve_runner(values["runner"], backend, env, which),
    }, sources=sources)
