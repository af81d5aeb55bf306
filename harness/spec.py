"""Settings of a run: every variable of DESIGN.md, read from flags and environment, validated."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness import backends
from harness.autotune import parse_share
from harness.backends import Backend
from harness.errors import UsageError

LEVELS = ("core", "comprehensive")
SHAPE_MODES = ("upstream", "file")
MODES = ("auto", "graph", "direct")
CLUSTER_RUNNERS = ("pyxis", "apptainer")  # run a Slurm task in the image; EXECUTOR=slurm only
RUNNERS = ("host", "docker", "podman", *CLUSTER_RUNNERS)
IN_IMAGE_VAR = "ZL_IN_IMAGE"  # set by the vendor images: RUNNER resolves to host inside one
REPO_ROOT = Path(__file__).resolve().parent.parent
EMBEDDED_SUITE = REPO_ROOT / "examples" / "cpu_suite"


@dataclass(frozen=True)
class Var:
    """One user-facing variable: its Make name, environment name and subcommand flag."""

    make: str
    env: str
    flag: str
    help: str
    default: str | None = None
    choices: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()  # further flags, e.g. --gpus for --devices

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def label(self, source: str) -> str:
        """How an error names the variable: by the spelling the user actually wrote."""
        if source == "flag":
            return f"{self.make} ({self.flag})"
        return self.env if source == "env" else self.make


VARS: tuple[Var, ...] = (
    Var("BACKEND", "ZL_BACKEND", "--backend", "a backend of `harness backends`, or an alias"),
    Var("OP", "OP", "--op", "operator to run, resolved to a FlagGems benchmark node"),
    Var("OP_FILE", "OP_FILE", "--op-file", "benchmark file that holds OP"),
    Var("TEST_NODE", "TEST_NODE", "--node", "pytest node, e.g. benchmark/test_mm.py::test_mm"),
    Var("LEVEL", "BENCH_LEVEL", "--level", "benchmark level", "core", LEVELS),
    Var("SHAPE_MODE", "SHAPE_MODE", "--shape-mode", "shape source", "upstream", SHAPE_MODES),
    Var("SHAPE_FILE", "SHAPE_FILE", "--shape-file", "shape YAML for SHAPE_MODE=file"),
    Var("DTYPES", "ZL_DTYPES", "--dtypes", "dtypes to measure, comma-separated torch names "
        "(FlagGems' --dtypes); default: the benchmark's own"),
    Var("MODE", "ZL_TIMER", "--mode", "timer: graph, direct or auto", "auto", MODES),
    Var("REPEAT", "ZL_DIRECT_REPEAT", "--repeat", "timing repeats per shape", "1"),
    Var("ISOLATE_TUNER_CACHE", "ZL_ISOLATE_TUNER_CACHE", "--isolate-tuner-cache",
        "1: private FlagGems and Triton caches for this run", "0", ("0", "1")),
    Var("RECORD", "ZL_RECORD", "--record", "1: record the autotune winners this run used",
        "0", ("0", "1")),
    Var("REPLAY_FROM", "REPLAY_FROM", "--replay-from", "run whose autotune winners are pinned"),
    Var("REPLAY_STRICT", "REPLAY_STRICT", "--replay-strict",
        "1: a key missing from the replayed records fails the operator", "0", ("0", "1")),
    Var("USE_FLAGTUNE", "USE_FLAGTUNE", "--use-flagtune", "1: FlagGems' exhaustive search",
        "0", ("0", "1")),
    Var("PARALLEL_WARMUP_GPUS", "PARALLEL_WARMUP_GPUS", "--parallel-warmup-gpus",
        "shard the autotune sweep over N devices"),
    Var("WARMUP_SHARE", "ZL_WARMUP_SHARE", "--warmup-share",
        "I/N: this run is share I of a parallel warmup's N: it tunes its share of each "
        "tuner's configs (those it claims first, else I, I+N, ...) and times nothing (set by "
        "the warmup for its shards; 0/1 times a whole sweep)"),
    Var("DEVICES", "ZL_DEVICES", "--devices", "device ids to use (default: all visible)",
        aliases=("--gpus",)),
    Var("FLAGGEMS_DIR", "FLAGGEMS_DIR", "--flaggems-dir", "FlagGems checkout holding benchmark/"),
    Var("AXIS", "ZL_AXIS", "--axis", "ab: the switch (a short name, a variable name, or none)"),
    Var("A", "ZL_A", "--a", "ab: the switch's value on side A (off)", "0"),
    Var("B", "ZL_B", "--b", "ab: the switch's value on side B (on)", "1"),
    Var("ROUNDS", "ZL_ROUNDS", "--rounds", "ab: interleaved rounds", "3"),
    Var("NOISE_FROM", "ZL_NOISE_FROM", "--noise-from",
        "ab: an A/A campaign whose measured noise floor applies"),
    Var("RUNNER", "ZL_RUNNER", "--runner", "docker, podman or host; with EXECUTOR=slurm "
        "also pyxis or apptainer", None, RUNNERS),
    Var("OUT", "ZL_OUT", "--out", "root of run outputs", "runs"),
    Var("DRY_RUN", "ZL_DRY_RUN", "--dry-run", "print what would run, run nothing", "0", ("0", "1")),
)
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
    repeat: int
    isolate_tuner_cache: bool
    record: bool  # write autotune_records/ (always with a private tuner cache)
    replay_from: Path | None
    replay_strict: bool
    use_flagtune: bool
    parallel_warmup_gpus: int | None
    warmup_share: tuple[int, int] | None  # (I, N): a parallel warmup's shard; see WARMUP_SHARE
    devices: tuple[str, ...]
    flaggems_dir: Path | None
    runner: str
    out: Path
    dry_run: bool
    sources: Mapping[str, str] = field(default_factory=dict)

    def caliber(self) -> dict[str, object]:
        """The settings that make two runs comparable or not (the run header's core)."""
        return {
            "backend": self.backend.name,
            "level": self.level,
            "shape_mode": self.shape_mode,
            "shape_file": str(self.shape_file) if self.shape_file else None,
            "dtypes": ",".join(self.dtypes) or None,
            "timer": self.timer,
            "mode": self.mode,
            "repeat": self.repeat,
            "tuner_cache": "isolated" if self.isolate_tuner_cache else "shared",
            "autotune_mode": "flagtune" if self.use_flagtune else "default",
            "replay_from": str(self.replay_from) if self.replay_from else None,
            "replay_strict": self.replay_strict,
        }


def add_arguments(parser: argparse.ArgumentParser, names: tuple[str, ...] | None = None) -> None:
    """Add the flags of `names` (Make names; all when None) to a subcommand parser."""
    group = parser.add_argument_group("settings (each also read from its environment variable)")
    for var in VARS:
        if names is not None and var.make not in names:
            continue
        help_text = f"{var.help} [{var.env}]"
        if var.flag == "--dry-run":
            group.add_argument(var.flag, dest=var.dest, nargs="?", const="1", default=None,
                               metavar="0|1", help=help_text)
        else:
            group.add_argument(var.flag, *var.aliases, dest=var.dest, default=None,
                               metavar=var.make, help=help_text)


def _raw(var: Var, flags: Mapping[str, object], env: Mapping[str, str]) -> tuple[str | None, str]:
    value = flags.get(var.dest)
    if value not in (None, ""):
        return str(value), "flag"
    value = env.get(var.env)
    if value not in (None, ""):
        return str(value), "env"
    return var.default, "default"


def _check_choice(var: Var, value: str, source: str) -> str:
    if var.choices and value not in var.choices:
        raise UsageError(f"{var.label(source)}={value!r} is not accepted; "
                         f"expected one of: {', '.join(var.choices)}")
    return value


def _positive_int(var: Var, value: str, source: str) -> int:
    if not re.fullmatch(r"[0-9]+", value.strip()) or int(value) < 1:
        raise UsageError(f"{var.label(source)}={value!r} is not accepted; "
                         "expected a whole number of at least 1")
    return int(value)


def _dtypes(var: Var, value: str | None, source: str) -> tuple[str, ...]:
    items = tuple(item.strip() for item in (value or "").split(",") if item.strip())
    if not all(re.fullmatch(r"[a-z][a-z0-9_]*", item) for item in items):
        raise UsageError(f"{var.label(source)}={value!r} is not accepted; expected "
                         "comma-separated torch dtype names, e.g. float16,bfloat16")
    return tuple(dict.fromkeys(items))


def _devices(var: Var, value: str | None, source: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items = tuple(item.strip() for item in value.split(","))
    if not all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", item) for item in items):
        raise UsageError(f"{var.label(source)}={value!r} is not accepted; expected "
                         "comma-separated device indices or UUIDs, e.g. 0,1")
    return items


@dataclass(frozen=True)
class AbSpec:
    """The campaign variables of `harness ab`, validated."""

    axis: str
    a: str
    b: str
    rounds: int
    noise_from: Path | None


def resolve_ab(flags: Mapping[str, object], env: Mapping[str, str] | None = None) -> AbSpec:
    """AXIS (required), A, B, ROUNDS and NOISE_FROM from flags and the environment."""
    env = os.environ if env is None else env
    values = {name: _raw(VARS_BY_MAKE[name], flags, env)
              for name in ("AXIS", "A", "B", "ROUNDS", "NOISE_FROM")}
    axis, _ = values["AXIS"]
    if not axis:
        raise UsageError("AXIS is required: a switch's short name (e.g. RLC_ENHANCE), a "
                         "variable name, or none for an A/A campaign")
    rounds = _positive_int(VARS_BY_MAKE["ROUNDS"], *values["ROUNDS"])
    noise = values["NOISE_FROM"][0]
    return AbSpec(axis, values["A"][0] or "0", values["B"][0] or "1", rounds,
                  Path(noise) if noise else None)


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


def resolve(flags: Mapping[str, object], env: Mapping[str, str] | None = None,
            which: Callable[[str], str | None] | None = None) -> Settings:
    """Build Settings from parsed flags (by dest) and the environment; a flag beats the env."""
    import shutil

    env = os.environ if env is None else env
    which = shutil.which if which is None else which
    raw: dict[str, str | None] = {}
    sources: dict[str, str] = {}
    for var in VARS:
        raw[var.make], sources[var.make] = _raw(var, flags, env)
        if raw[var.make] is not None:
            _check_choice(var, raw[var.make], sources[var.make])

    if sources["MODE"] == "default" and env.get("ZL_ENABLE_CUDAGRAPH") == "0":
        raw["MODE"], sources["MODE"] = "direct", "env"
    backend = backends.get(raw["BACKEND"]) if raw["BACKEND"] else backends.detect(which)
    mode = raw["MODE"] or "auto"
    timer = "graph" if mode == "graph" or (mode == "auto" and backend.can_capture) else "direct"
    if mode == "graph" and not backend.can_capture:
        raise UsageError(f"MODE='graph' is not accepted on BACKEND={backend.name!r}, which "
                         "cannot capture graphs; expected one of: direct, auto")

    shape_mode = raw["SHAPE_MODE"] or "upstream"
    shape_file = Path(raw["SHAPE_FILE"]) if raw["SHAPE_FILE"] else None
    if shape_mode == "file" and shape_file is None:
        raise UsageError("SHAPE_MODE='file' needs SHAPE_FILE (a shape YAML)")
    if shape_mode == "upstream" and shape_file is not None:
        raise UsageError(f"SHAPE_FILE={str(shape_file)!r} is only read with SHAPE_MODE=file")

    isolate = raw["ISOLATE_TUNER_CACHE"] == "1"
    if raw["REPLAY_FROM"]:
        if sources["ISOLATE_TUNER_CACHE"] != "default" and not isolate:
            raise UsageError("REPLAY_FROM needs a private tuner cache; ISOLATE_TUNER_CACHE=0 "
                             "would mix the replayed winners with the shared cache's")
        isolate = True  # pinned winners go into a cache that holds nothing else
    pwg = raw["PARALLEL_WARMUP_GPUS"]
    if pwg and raw["WARMUP_SHARE"]:
        raise UsageError(f"WARMUP_SHARE={raw['WARMUP_SHARE']!r} marks a parallel warmup's "
                         "shard, which cannot shard again; unset PARALLEL_WARMUP_GPUS or it")
    flaggems_dir = raw["FLAGGEMS_DIR"]
    if flaggems_dir is None and not backend.is_accelerator:
        flaggems_dir = str(EMBEDDED_SUITE)
    return Settings(
        backend=backend,
        op=raw["OP"],
        op_file=raw["OP_FILE"],
        test_node=raw["TEST_NODE"],
        level=raw["LEVEL"] or "core",
        shape_mode=shape_mode,
        shape_file=shape_file,
        dtypes=_dtypes(VARS_BY_MAKE["DTYPES"], raw["DTYPES"], sources["DTYPES"]),
        mode=mode,
        timer=timer,
        repeat=_positive_int(VARS_BY_MAKE["REPEAT"], raw["REPEAT"] or "1", sources["REPEAT"]),
        isolate_tuner_cache=isolate,
        record=isolate or raw["RECORD"] == "1",
        replay_from=Path(raw["REPLAY_FROM"]) if raw["REPLAY_FROM"] else None,
        replay_strict=raw["REPLAY_STRICT"] == "1",
        use_flagtune=raw["USE_FLAGTUNE"] == "1",
        parallel_warmup_gpus=(_positive_int(VARS_BY_MAKE["PARALLEL_WARMUP_GPUS"], pwg,
                                            sources["PARALLEL_WARMUP_GPUS"]) if pwg else None),
        warmup_share=parse_share(raw["WARMUP_SHARE"] or ""),
        devices=_devices(VARS_BY_MAKE["DEVICES"], raw["DEVICES"], sources["DEVICES"]),
        flaggems_dir=Path(flaggems_dir) if flaggems_dir else None,
        runner=resolve_runner(raw["RUNNER"], backend, env, which),
        out=Path(raw["OUT"] or "runs"),
        dry_run=raw["DRY_RUN"] == "1",
        sources=sources,
    )
