"""Settings of a run: every variable of DESIGN.md, read from flags and environment, validated."""

from __future__ import annotations

import argparse
import os
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness import backends
from harness.backends import Backend
from harness.contract.warmup_share import parse_share
from harness.errors import UsageError
from harness.settings import variables
from harness.settings.inputs import Inputs as Inputs  # the snapshot of what the user gave
from harness.settings.options import add_flag
from harness.settings.variables import CLUSTER_RUNNERS as CLUSTER_RUNNERS
from harness.settings.variables import (
    DEFAULT_CAP,
    MAX_WORKERS,
    SETTINGS,
    Var,
    group,
)

# An operator names directories (runs/<op>, ab/<axis>-<op>), so no separators and a length well
# within a file name's 255 bytes; FlagGems' longest operator names are under 40 characters.
OP_NAME_MAX = 100
OP_NAME = re.compile(rf"[A-Za-z0-9_][A-Za-z0-9_.-]{{0,{OP_NAME_MAX - 1}}}")
OP_NAME_TEXT = (f"letters, digits, '_', '.', '-', not starting with '.' or '-', at most "
                f"{OP_NAME_MAX} characters")
MAX_REPEAT = 1000  # timing repeats per shape: REPEAT=99999999999999999999 ran until it was killed
NAME_MAX = 255  # bytes of one path component on the file systems a run writes to
IN_IMAGE_VAR = "ZL_IN_IMAGE"  # set by the vendor images: RUNNER resolves to host inside one
PACKAGE_DIR = Path(__file__).resolve().parents[1]  # harness/, this module being in settings/
REPO_ROOT = PACKAGE_DIR.parent  # the checkout when run from one; site-packages when installed
# An installed harness carries the cpu suite inside the package (pyproject.toml maps it there);
# a checkout holds it in examples/, where the packaged copy never exists.
_PACKAGED_SUITE = PACKAGE_DIR / "cpu_suite"
EMBEDDED_SUITE = (_PACKAGED_SUITE if _PACKAGED_SUITE.is_dir()
                  else REPO_ROOT / "examples" / "cpu_suite")
# torch's dtype names (torch.<name> is a torch.dtype), read without importing torch; whether
# the benchmark measures one is checked in preflight, against what it declares.
TORCH_DTYPES = ("bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32",
                "int64", "float16", "bfloat16", "float32", "float64", "complex32", "complex64",
                "complex128", "half", "float", "double", "short", "int", "long", "cfloat",
                "cdouble", "chalf", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
                "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2")
# A device index, or a UUID as vendor tools print them: GPU-<hex>-..., 0x<hex>, bare hex.
DEVICE_ID = re.compile(r"[0-9]+|[A-Za-z]+(?:-[0-9A-Fa-f]+)+"
                       r"|(?:0x)?[0-9A-Fa-f]{8,}(?:-[0-9A-Fa-f]+)*")


def default_workers(cores: int | None = None) -> int:
    """The host's usable cores, at most DEFAULT_CAP: COMPILE_WORKERS where none is given."""
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # no affinity call on this platform
            cores = os.cpu_count() or 1
    return max(1, min(DEFAULT_CAP, cores))


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
    graph_timer: str  # GRAPH_TIMER: the graph timer's algorithm, upstream or steady
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
        once into every for its A/r0 and off for the rest: campaign.ab.side_settings)."""
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
            "mode": self.mode,
            "repeat": self.repeat,
            "baseline": self.baseline,
            "tuner_cache": "isolated" if self.isolate_tuner_cache else "shared",
            "autotune_mode": "flagtune" if self.use_flagtune else "default",
            "replay_from": str(self.replay_from) if self.replay_from else None,
            "replay_strict": self.replay_strict,
            "compile_workers": self.compile_workers,
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


def positive_int(var: Var, value: str, source: str, most: int | None = None) -> int:
    if not re.fullmatch(r"[0-9]+", value.strip()) or not 1 <= int(value) <= (most or int(value)):
        expected = f"from 1 to {most}" if most else "of at least 1"
        raise UsageError(f"{var.label(source)}={value!r} is not accepted; "
                         f"expected a whole number {expected}")
    return int(value)


def _op(var: Var, value: str | None, source: str) -> str | None:
    if value is not None and not OP_NAME.fullmatch(value):
        raise UsageError(f"{var.label(source)}={value!r} is not accepted; expected an operator "
                         f"name: {OP_NAME_TEXT}")
    return value


def _workers(var: Var, value: str | None, source: str) -> int:
    if value is None:
        return default_workers()
    if not re.fullmatch(r"[0-9]+", value.strip()) or int(value) > MAX_WORKERS:
        raise UsageError(f"{var.label(source)}={value!r} is not accepted; expected a whole "
                         f"number from 0 (off) to {MAX_WORKERS}")
    return int(value)


def _dtypes(var: Var, value: str | None, source: str) -> tuple[str, ...]:
    items = tuple(item.strip() for item in (value or "").split(",") if item.strip())
    unknown = [item for item in items if item not in TORCH_DTYPES]
    if unknown:
        raise UsageError(f"{var.label(source)}={value!r} is not accepted: "
                         f"{', '.join(map(repr, unknown))} is not a torch dtype name; expected "
                         "comma-separated torch dtype names, e.g. float16,bfloat16,float32")
    return tuple(dict.fromkeys(items))


def _devices(var: Var, value: str | None, source: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items = tuple(item.strip() for item in value.split(","))
    if not all(DEVICE_ID.fullmatch(item) for item in items):
        raise UsageError(f"{var.label(source)}={value!r} is not accepted; expected "
                         "comma-separated device indices (whole numbers, e.g. 0,1) or the "
                         "UUIDs the vendor tool prints")
    return items


def _out(var: Var, value: str, source: str) -> Path:
    """OUT must be a directory or a path one can become: not a file, nor under one, and no
    component longer than a file name may be."""
    path = Path(value)
    long = next((part for part in path.parts if len(os.fsencode(part)) > NAME_MAX), None)
    if long is not None:
        raise UsageError(f"{var.label(source)}={value!r} is not accepted: its component "
                         f"{long[:40]!r}... is {len(os.fsencode(long))} bytes; expected a path "
                         f"whose every component is at most {NAME_MAX} bytes")
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            if not candidate.is_dir():
                where = "is" if candidate == path else f"is under {str(candidate)!r}, which is"
                raise UsageError(f"{var.label(source)}={value!r} is not accepted: it {where} "
                                 "not a directory; expected a directory for run outputs")
            break
    return path


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


def _timer(mode: str, backend: Backend) -> tuple[str, str]:
    """(MODE, the timer it gives on `backend`): auto is graph where the backend can capture."""
    if mode == "graph" and not backend.can_capture:
        raise UsageError(f"MODE='graph' is not accepted on BACKEND={backend.name!r}, which "
                         "cannot capture graphs; expected one of: direct, auto")
    timer = "graph" if mode == "graph" or (mode == "auto" and backend.can_capture) else "direct"
    return mode, timer


def _shapes(raw: Mapping[str, str | None]) -> tuple[str, Path | None]:
    """(SHAPE_MODE, SHAPE_FILE): a file exactly when the mode reads one."""
    shape_mode = raw["SHAPE_MODE"] or "upstream"
    shape_file = Path(raw["SHAPE_FILE"]) if raw["SHAPE_FILE"] else None
    if shape_mode == "file" and shape_file is None:
        raise UsageError("SHAPE_MODE='file' needs SHAPE_FILE (a shape YAML)")
    if shape_mode != "file" and shape_file is not None:
        raise UsageError(f"SHAPE_FILE={str(shape_file)!r} is only read with SHAPE_MODE=file, "
                         f"not {shape_mode}")
    return shape_mode, shape_file


def _isolate(raw: Mapping[str, str | None], sources: Mapping[str, str]) -> bool:
    """ISOLATE_TUNER_CACHE, forced on by REPLAY_FROM (refused when set to 0 by the user)."""
    isolate = raw["ISOLATE_TUNER_CACHE"] == "1"
    if raw["REPLAY_FROM"]:
        if sources["ISOLATE_TUNER_CACHE"] != "default" and not isolate:
            raise UsageError("REPLAY_FROM needs a private tuner cache; ISOLATE_TUNER_CACHE=0 "
                             "would mix the replayed winners with the shared cache's")
        isolate = True  # pinned winners go into a cache that holds nothing else
    return isolate


def resolve(flags: Mapping[str, object], env: Mapping[str, str] | None = None,
            which: Callable[[str], str | None] | None = None) -> Settings:
    """Build Settings from parsed flags (by dest) and the environment; a flag beats the env."""

    env = variables.environ() if env is None else env
    which = shutil.which if which is None else which
    raw, sources = _read_vars(flags, env)
    backend = backends.get(raw["BACKEND"]) if raw["BACKEND"] else backends.detect(which)
    mode, timer = _timer(raw["MODE"] or "auto", backend)
    shape_mode, shape_file = _shapes(raw)
    isolate = _isolate(raw, sources)
    pwg = raw["PARALLEL_WARMUP_GPUS"]
    if pwg and raw["WARMUP_SHARE"]:
        raise UsageError(f"WARMUP_SHARE={raw['WARMUP_SHARE']!r} marks a parallel warmup's "
                         "shard, which cannot shard again; unset PARALLEL_WARMUP_GPUS or it")
    flaggems_dir = raw["FLAGGEMS_DIR"]
    if flaggems_dir is None and not backend.is_accelerator:
        flaggems_dir = str(EMBEDDED_SUITE)
    return Settings(
        backend=backend,
        op=_op(VARS_BY_MAKE["OP"], raw["OP"], sources["OP"]),
        op_file=raw["OP_FILE"],
        test_node=raw["TEST_NODE"],
        level=raw["LEVEL"] or "core",
        shape_mode=shape_mode,
        shape_file=shape_file,
        dtypes=_dtypes(VARS_BY_MAKE["DTYPES"], raw["DTYPES"], sources["DTYPES"]),
        mode=mode,
        timer=timer,
        graph_timer=raw["GRAPH_TIMER"] or "upstream",
        repeat=positive_int(VARS_BY_MAKE["REPEAT"], raw["REPEAT"] or "1", sources["REPEAT"],
                            most=MAX_REPEAT),
        baseline=raw["BASELINE"] or "auto",
        isolate_tuner_cache=isolate,
        record=isolate or raw["RECORD"] == "1",
        replay_from=Path(raw["REPLAY_FROM"]) if raw["REPLAY_FROM"] else None,
        replay_strict=raw["REPLAY_STRICT"] == "1",
        use_flagtune=raw["USE_FLAGTUNE"] == "1",
        parallel_warmup_gpus=(positive_int(VARS_BY_MAKE["PARALLEL_WARMUP_GPUS"], pwg,
                                            sources["PARALLEL_WARMUP_GPUS"]) if pwg else None),
        warmup_share=parse_share(raw["WARMUP_SHARE"] or ""),
        compile_workers=_workers(VARS_BY_MAKE["COMPILE_WORKERS"], raw["COMPILE_WORKERS"],
                                 sources["COMPILE_WORKERS"]),
        devices=_devices(VARS_BY_MAKE["DEVICES"], raw["DEVICES"], sources["DEVICES"]),
        flaggems_dir=Path(flaggems_dir) if flaggems_dir else None,
        runner=resolve_runner(raw["RUNNER"], backend, env, which),
        out=_out(VARS_BY_MAKE["OUT"], raw["OUT"] or "runs", sources["OUT"]),
        dry_run=raw["DRY_RUN"] == "1",
        sources=sources,
    )
