"""Subcommands run inside the backend's pinned image: the `<engine> run` line around them."""

from __future__ import annotations

import contextlib
import shlex
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

from harness.errors import UsageError
from harness.executors import device_lock
from harness.executors.devices import select_devices
from harness.run import keeper
from harness.run.identity import IMAGE_DIGEST_VAR
from harness.run.images import ImagePins, Run, check_engine, notes, pins_for
from harness.settings import spec, variables
from harness.settings.spec import IN_IMAGE_VAR, REPO_ROOT, VARS_BY_MAKE, Settings

IMAGE_VAR = "ZL_IMAGE"  # the local tag the container runs, beside the base digest
# Host variables that reach the harness inside: its own (DESIGN.md's table) and these families.
PASS_PREFIXES = ("ZL_", "FLAGTREE_", "FLAGGEMS_", "TRITON_")
# Settings the container itself stands for: it is the runner, exposes exactly DEVICES (numbered
# from 0 inside) and is only printed under DRY_RUN. Neither their flags nor their variables
# reach the inner command.
STRIPPED_VARS = tuple(VARS_BY_MAKE[name] for name in ("RUNNER", "DEVICES", "DRY_RUN"))
STRIPPED_FLAGS = tuple(flag for var in STRIPPED_VARS for flag in (var.flag_name, *var.aliases))
KNOWN_FLAGS = frozenset(flag for var in spec.VARS for flag in (var.flag_name, *var.aliases))
# Never passed in: the container decides them itself (or they name host paths and devices).
NOT_PASSED = frozenset({IN_IMAGE_VAR, IMAGE_DIGEST_VAR, IMAGE_VAR, "FLAGGEMS_DIR",
                        *(var.env_name for var in STRIPPED_VARS)})


def _stripped(name: str) -> str | None:
    """The stripped flag that `name` spells, in full or as the abbreviation argparse took for
    it (the parse already refused an ambiguous one); None for any other token."""
    if name in STRIPPED_FLAGS:
        return name
    if len(name) < 3 or not name.startswith("--") or name in KNOWN_FLAGS:
        return None
    return next((flag for flag in STRIPPED_FLAGS if flag.startswith(name)), None)


def inner_argv(argv: Sequence[str]) -> list[str]:
    """The subcommand and flags as given, less those the container itself stands for."""
    out: list[str] = []
    tokens = list(argv)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        flag = _stripped(token.split("=", 1)[0])
        i += 1
        if flag is None:
            out.append(token)
        elif "=" not in token and i < len(tokens):
            if flag != VARS_BY_MAKE["DRY_RUN"].flag or tokens[i] in ("0", "1"):
                i += 1  # the flag's separate value
    return out


def passthrough_env(env: Mapping[str, str], given: Sequence[str] = ()) -> dict[str, str]:
    """Harness variables set on the host, less those a flag in `given` already carries."""
    flagged = {v.env_name for v in spec.VARS
               if any(t.split("=", 1)[0] == v.flag for t in given)}
    names = {v.env_name for v in spec.VARS} | {n for n in env if n.startswith(PASS_PREFIXES)}
    return {n: env[n] for n in sorted(names - NOT_PASSED - flagged) if env.get(n)}


def _host_path(value: Path, cwd: Path) -> Path:
    return (cwd / value).resolve()


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def mounts(settings: Settings, cwd: Path, root: Path = REPO_ROOT) -> list[tuple[Path, bool]]:
    """(host path, writable) bind mounts, each at the same path inside: the checkout read-only,
    OUT writable (results land on the host), and inputs named by path outside the checkout."""
    out = _host_path(settings.out, cwd)
    found: list[tuple[Path, bool]] = [(root, False), (out, True)]
    if not _under(cwd, root):
        found.append((cwd, False))
    shape_dir = settings.shape_file.parent if settings.shape_file else None
    for value in filter(None, (shape_dir, settings.replay_from, settings.flaggems_dir)):
        path = _host_path(value, cwd)
        if not any(_under(path, m) for m, _ in found):
            found.append((path, False))
    return found


def container_command(engine: str, settings: Settings, pins: ImagePins, inner: Sequence[str],
                      *, env: Mapping[str, str], cwd: Path, interactive: bool = False,
                      image_id: str | None = None, name: str | None = None) -> list[str]:
    """The full `<engine> run` line that runs `inner` in the backend's image (named `name`,
    which its run owns: keeper.owned)."""
    device_args = settings.backend.container_device_args
    if device_args is None:
        raise UsageError(f"BACKEND={settings.backend.name!r} has no container device flags; "
                         "set RUNNER=host to run on this host")
    tag = pins.local_tag()
    cache = _host_path(settings.out, cwd) / ".cache" / tag.replace(":", "-")
    argv = [engine, "run", "--rm", "--init", "--ipc=host", *(["-it"] if interactive else []),
            *(["--name", name] if name else []), *device_args(engine, settings.devices)]
    for path, writable in mounts(settings, cwd):
        argv += ["-v", f"{path}:{path}" + ("" if writable else ":ro")]
    argv += ["-w", str(cwd)]
    fixed = {
        IN_IMAGE_VAR: "1",
        IMAGE_DIGEST_VAR: pins.base if pins.digest else None,
        IMAGE_VAR: f"{tag}@{image_id}" if image_id else tag,
        "PYTHONPATH": str(REPO_ROOT),  # the checkout's harness, so receipts hash what ran
        "PYTHONDONTWRITEBYTECODE": "1",
        # git refuses a checkout owned by another user; the harness only reads its commit
        "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*",
        # the shared tuner caches outlive the container (ISOLATE_TUNER_CACHE=1 overrides them)
        "FLAGGEMS_CACHE_DIR": str(cache / "flaggems"), "TRITON_CACHE_DIR": str(cache / "triton"),
    }
    passed = passthrough_env(env, inner)
    for name, value in {**fixed, **passed}.items():
        if value is not None:
            argv += ["-e", f"{name}={value}"]
    return [*argv, tag, *inner]


def _image_id(engine: str, pins: ImagePins, run: Run) -> str:
    tag = pins.local_tag()
    proc = run([engine, "image", "inspect", "--format", "{{.Id}}", tag],
               capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise UsageError(f"image {tag!r} is not built (new pins or Dockerfile, or never built); "
                         f"run: make image BACKEND={pins.backend}")
    return proc.stdout.strip()


def run_in_image(settings: Settings, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
                 cwd: Path | None = None, shell: bool = False,
                 write_line: Callable[[str], None] = print,
                 which: Callable[[str], str | None] = shutil.which, run: Run = subprocess.run
                 ) -> int:
    """Run `harness <argv>` in the backend's image (argv less the flags the container stands
    for), or `bash` with `shell`; under DRY_RUN print the command line instead.

    Generic over subcommands: preflight, run, batch and ab hand over their own argv.
    """
    env = variables.environ() if env is None else env
    cwd = Path.cwd() if cwd is None else cwd
    pins = pins_for(settings.backend.name)
    inner = ["bash"] if shell else ["harness", *inner_argv(argv), "--runner=host"]
    image_id = None
    check_engine(settings.runner, which, run, probe=not settings.dry_run)
    if not settings.dry_run:
        image_id = _image_id(settings.runner, pins, run)
    command = container_command(settings.runner, settings, pins, inner, env=env, cwd=cwd,
                                interactive=shell, image_id=image_id)
    if settings.dry_run:
        for line in [*notes(pins), shlex.join(command)]:
            write_line(line)
        return 0
    _host_path(settings.out, cwd).mkdir(parents=True, exist_ok=True)
    # The devices are held here, not inside (the container's temporary folder is no host's):
    # the run inside is their holder's child (device_lock.HELD_VAR); a shell holds none.
    name = keeper.container_name()
    devices: AbstractContextManager[dict[str, str]] = contextlib.nullcontext({})
    if not shell:
        devices = device_lock.holding(settings.backend, select_devices(settings, env) or [None],
                                      out=write_line)
    with devices as held, keeper.owned(settings.runner, name, keeper.STOP_GRACE_S, run):
        command = container_command(settings.runner, settings, pins, inner,
                                    env={**env, **held}, cwd=cwd, interactive=shell,
                                    image_id=image_id, name=name)
        return run(command).returncode


def _mountable(runner: str, mounted: Sequence[tuple[Path, bool]], bad: str) -> None:
    for path, _ in mounted:
        if any(c in str(path) for c in bad):
            raise UsageError(f"RUNNER={runner!r} cannot mount {str(path)!r}: a path with "
                             f"{' or '.join(repr(c) for c in bad)} cannot be named in a mount "
                             "list")


def cluster_mounts(runner: str, mounted: Sequence[tuple[Path, bool]]) -> list[str]:
    """`path:path[:ro]` of each (path, writable) for a cluster runner's mount list, parents
    first (a read-only parent named after its writable child would hide it); a path that
    such a list cannot name is refused."""
    _mountable(runner, mounted, ",:")
    ordered = sorted(mounted, key=lambda m: len(m[0].parts))
    return [f"{p}:{p}" + ("" if writable else ":ro") for p, writable in ordered]


def cluster_exec(runner: str, image: str, settings: Settings, paths: Sequence[str], cwd: Path,
                 env: Mapping[str, str], args: Sequence[str]) -> list[str]:
    """`python3 <args>` in `image` on a cluster node, `env` set inside: a one-task job step
    (pyxis, `srun --container-image`) or `apptainer exec`; `paths` the mount list (from
    cluster_mounts). What an array task runs in the task image and what one run's pytest runs
    in an A/B side's image are both this line."""
    inner = ["env", *(f"{k}={v}" for k, v in env.items()), "python3", *args]
    if runner == "pyxis":
        return ["srun", "--ntasks=1", f"--container-image={image}",
                "--container-mounts=" + ",".join(paths), f"--container-workdir={cwd}", *inner]
    binds = [a for p in paths for a in ("--bind", p)]
    return ["apptainer", "exec", *settings.backend.apptainer_flags, *binds, "--pwd", str(cwd),
            f"docker://{image}", *inner]


def _on_cluster(runner: str, image: str, settings: Settings, argv: Sequence[str], cwd: Path,
                env: Mapping[str, str], hidden: Path | None) -> list[str]:
    """One run's pytest as a job step in `image`, or `apptainer exec` of it: the task's
    devices are the step's, and the run's variables are set by `env` inside."""
    paths = cluster_mounts(runner, mounts(settings, cwd))
    if hidden is not None:  # an empty folder over it, last: neither runner has a tmpfs mount
        empty = _host_path(settings.out, cwd) / ".empty"
        if not settings.dry_run:
            empty.mkdir(parents=True, exist_ok=True)
        paths.append(f"{empty}:{hidden}:ro")
    return cluster_exec(runner, image, settings, paths, cwd, dict(sorted(env.items())),
                        argv[1:])


def pytest_in_image(engine: str, image: str, settings: Settings, argv: Sequence[str],
                    cwd: Path, env: Mapping[str, str], name: str | None = None) -> list[str]:
    """The line that runs one run's pytest (`argv`: python -m pytest ...) in `image` (an A/B
    side that is an image): `<engine> run` for docker and podman, a job step (pyxis) or
    `apptainer exec` for a cluster runner. Its inputs and outputs are mounted at the same
    paths inside, the harness checkout read-only (its plugins), the run's variables passed;
    the checkout's `src/` is hidden so that FlagGems' pythonpath finds the image's own
    flag_gems. The device is the container's only one: no visibility variable is passed.
    `name`: the container's, which the run owns (keeper.owned)."""
    hidden = set(settings.backend.visibility_vars)
    src = settings.flaggems_dir / "src" if settings.flaggems_dir is not None else None
    src = src.resolve() if src is not None and src.is_dir() else None
    if engine in spec.CLUSTER_RUNNERS:
        return _on_cluster(engine, image, settings, argv, cwd,
                           {k: v for k, v in env.items() if k not in hidden}, src)
    device_args = settings.backend.container_device_args
    if device_args is None and settings.backend.is_accelerator:
        raise UsageError(f"BACKEND={settings.backend.name!r} has no container device flags; "
                         "AXIS=image needs them")
    line = [engine, "run", "--rm", "--init", "--ipc=host", *(["--name", name] if name else []),
            *(device_args(engine, settings.devices) if device_args else ())]
    _mountable(engine, mounts(settings, cwd), ":")
    for path, writable in mounts(settings, cwd):
        line += ["-v", f"{path}:{path}" + ("" if writable else ":ro")]
    if src is not None:
        line += ["--tmpfs", str(src)]
    line += ["-w", str(cwd)]
    for name, value in sorted(env.items()):
        if name not in hidden:
            line += ["-e", f"{name}={value}"]
    return [*line, image, "python3", *argv[1:]]
