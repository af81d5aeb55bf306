"""The pinned vendor images: pins.yaml, the engines, `make image` and `make pin`."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from harness.errors import HarnessError, UsageError, choice_error
from harness.fsutil import atomic_write_text
from harness.settings import variables
from harness.settings.spec import REPO_ROOT, Settings

PINS_FILE = REPO_ROOT / "containers" / "pins.yaml"
ENGINES = ("docker", "podman")

Run = Callable[..., subprocess.CompletedProcess]


@dataclass(frozen=True)
class ImagePins:
    """One backend's entry of pins.yaml, merged over `common`."""

    backend: str
    image: str
    tag: str
    digest: str | None
    build_args: Mapping[str, str]  # Dockerfile ARG -> value, in pins.yaml order
    dockerfile: Path

    @property
    def base(self) -> str:
        """The base by digest (`repo:tag@sha256:...`), or by tag alone while unpinned."""
        ref = f"{self.image}:{self.tag}"
        return f"{ref}@{self.digest}" if self.digest else ref

    def local_tag(self) -> str:
        """The tag `make image` gives the build: it changes with any pin or the Dockerfile."""
        h = hashlib.sha256(json.dumps(dict(self.build_args), sort_keys=True).encode())
        if self.dockerfile.exists():
            h.update(self.dockerfile.read_bytes())
        return f"zl-flaggems-{self.backend}:{h.hexdigest()[:12]}"


def _merge(common: Mapping, entry: Mapping) -> dict:
    merged = {k: dict(v) if isinstance(v, Mapping) else v for k, v in common.items()}
    for key, value in entry.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key].update(value)
        else:
            merged[key] = value
    return merged


def build_args(entry: Mapping) -> dict[str, str]:
    """Dockerfile ARGs from a merged entry, by the naming rule in pins.yaml's header."""
    base = entry.get("base") or {}
    args = {"BASE_IMAGE": f"{base['image']}:{base['tag']}"}
    if base.get("digest"):
        args["BASE_DIGEST"] = str(base["digest"])
    for name, value in (entry.get("versions") or {}).items():
        if value is not None:
            args[f"{name.upper()}_VERSION"] = str(value)
    for name, value in (entry.get("flaggems") or {}).items():
        if value is not None:
            args[f"FLAGGEMS_{name.upper()}"] = str(value)
    for name, value in (entry.get("indexes") or {}).items():
        if value is not None:
            args[f"{name.upper()}_INDEX_URL"] = str(value)
    return args


def load_pins(path: Path = PINS_FILE) -> dict[str, ImagePins | None]:
    """Every backend listed in pins.yaml; None for one listed as not pinned yet."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    common = doc.get("common") or {}
    pins: dict[str, ImagePins | None] = {}
    for name, entry in (doc.get("backends") or {}).items():
        if entry is None:
            pins[name] = None
            continue
        merged = _merge(common, entry)
        base = merged["base"]
        digest = base.get("digest") or None
        if digest is not None and not re.fullmatch(r"sha256:[0-9a-f]{64}", str(digest)):
            raise UsageError(f"{path}: backends.{name}.base.digest={digest!r} is not accepted; "
                             "expected sha256:<64 hex digits> or null")
        pins[name] = ImagePins(name, str(base["image"]), str(base["tag"]), digest,
                               build_args(merged), path.parent / name / "Dockerfile")
    return pins


def pins_for(backend: str, path: Path = PINS_FILE) -> ImagePins:
    """The pins of `backend`; a backend without pins is a usage error naming the pinned ones."""
    pins = load_pins(path)
    found = pins.get(backend)
    if found is None:
        pinned = sorted(name for name, p in pins.items() if p is not None)
        state = "is not pinned yet" if backend in pins else "has no entry"
        raise UsageError(f"BACKEND={backend!r} {state} in {path.name}, so it has no image; "
                         f"pinned: {', '.join(pinned)}; set RUNNER=host to run on this host")
    return found


# --- engines ---------------------------------------------------------------------------------

def check_engine(engine: str, which: Callable[[str], str | None] = shutil.which,
                 run: Run = subprocess.run, *, probe: bool = True) -> None:
    """Raise one line, suggesting RUNNER=host, unless `engine` is an engine that is installed
    and answers; with probe=False (a dry run) only the name is checked."""
    if engine not in ENGINES:
        raise choice_error("RUNNER", engine, ENGINES,
                           hint="RUNNER=host runs the targets on this host")
    if not probe:
        return
    if which(engine) is None:
        raise UsageError(f"RUNNER={engine!r}: {engine} is not installed here; "
                         "set RUNNER=host to run on this host")
    try:
        proc = run([engine, "info"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        detail = str(exc)
    else:
        if proc.returncode == 0:
            return
        detail = ((proc.stderr or proc.stdout).strip().splitlines() or ["no output"])[-1]
    raise UsageError(f"RUNNER={engine!r}: no {engine} engine answers here ({engine} info: "
                     f"{detail}); set RUNNER=host to run on this host")


def _allow_unpinned(env: Mapping[str, str]) -> bool:
    return variables.named("ALLOW_UNPINNED").given({}, env) == "1"


def build_command(engine: str, pins: ImagePins, root: Path = REPO_ROOT) -> list[str]:
    """`<engine> build` of the backend's Dockerfile with every pin as a build argument."""
    argv = [engine, "build", "-f", str(pins.dockerfile), "-t", pins.local_tag(),
            "--label", f"zl.base={pins.base}"]
    for name, value in pins.build_args.items():
        argv += ["--build-arg", f"{name}={value}"]
    return [*argv, str(root)]


def notes(pins: ImagePins) -> list[str]:
    """Comment lines that go before a printed command."""
    dockerfile = (pins.dockerfile.relative_to(REPO_ROOT)
                  if pins.dockerfile.is_relative_to(REPO_ROOT) else pins.dockerfile)
    lines = [f"# image {pins.local_tag()} = {dockerfile} FROM {pins.base}"]
    if not pins.digest:
        lines.append(f"# base {pins.image}:{pins.tag} has no digest in containers/pins.yaml "
                     f"(make pin); receipts record no image digest")
    return lines

def build_image(settings: Settings, *, env: Mapping[str, str] | None = None,
                write_line: Callable[[str], None] = print,
                which: Callable[[str], str | None] = shutil.which, run: Run = subprocess.run
                ) -> int:
    """`make image`: build the backend's image from its pins (refuses an unpinned base)."""
    env = variables.environ() if env is None else env
    pins = pins_for(settings.backend.name)
    if not pins.digest and not _allow_unpinned(env):
        raise UsageError(f"base {pins.image}:{pins.tag} of BACKEND={pins.backend!r} has no digest "
                         "in containers/pins.yaml; run make pin, or set ALLOW_UNPINNED=1 to "
                         "build from the moving tag")
    check_engine(settings.runner, which, run, probe=not settings.dry_run)
    command = build_command(settings.runner, pins)
    for line in [*notes(pins), shlex.join(command)]:
        write_line(line)
    return 0 if settings.dry_run else run(command).returncode


# --- make pin ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Resolver:
    """A tool that turns `repo:tag` into the registry's digest."""

    name: str
    probe: tuple[str, ...]  # succeeds when the tool is usable
    command: Callable[[str], list[str]]
    parse: Callable[[str], str]


def _json_digest(text: str) -> str:
    return str(json.loads(text)["digest"])


RESOLVERS = (
    Resolver("docker buildx imagetools", ("docker", "buildx", "version"),
             lambda ref: ["docker", "buildx", "imagetools", "inspect", ref,
                          "--format", "{{json .Manifest}}"], _json_digest),
    Resolver("skopeo", ("skopeo", "--version"),
             lambda ref: ["skopeo", "inspect", "--format", "{{.Digest}}", f"docker://{ref}"],
             str.strip),
    Resolver("crane", ("crane", "version"), lambda ref: ["crane", "digest", ref], str.strip),
)


def find_resolver(which: Callable[[str], str | None] = shutil.which, run: Run = subprocess.run
                  ) -> Resolver:
    for resolver in RESOLVERS:
        if which(resolver.probe[0]) is None:
            continue
        try:
            if run(list(resolver.probe), capture_output=True, timeout=30).returncode == 0:
                return resolver
        except (OSError, subprocess.TimeoutExpired):
            continue
    raise UsageError("make pin needs one of: " + ", ".join(r.name for r in RESOLVERS)
                     + "; none is usable here")


def rewrite_digest(text: str, backend: str, digest: str, note: str) -> str:
    """pins.yaml with the `digest:` line of `backend` replaced; every other byte kept."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if re.match(rf"  {re.escape(backend)}:", line)),
                 None)
    if start is None:
        raise UsageError(f"BACKEND={backend!r} has no entry in {PINS_FILE.name}")
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if re.match(r"  ?\S", line) and not line.lstrip().startswith("#"):
            break  # the next backend, or the end of `backends`
        m = re.match(r"(\s+)digest:", line)
        if m:
            lines[i] = f"{m.group(1)}digest: {digest}  # {note}\n"
            new = "".join(lines)
            if yaml.safe_load(new)["backends"][backend]["base"]["digest"] != digest:
                break
            return new
    raise UsageError(f"{PINS_FILE.name}: no base.digest line under backends.{backend}")


def pin(backends: Sequence[str] | None, *, dry_run: bool, path: Path = PINS_FILE,
        write_line: Callable[[str], None] = print,
        which: Callable[[str], str | None] = shutil.which, run: Run = subprocess.run) -> int:
    """`make pin`: resolve each base tag to its digest and rewrite pins.yaml atomically."""
    pins = load_pins(path)
    names = list(backends) if backends else sorted(n for n, p in pins.items() if p is not None)
    targets = [pins_for(name, path) for name in names]
    try:
        resolver = find_resolver(which, run)
    except UsageError:
        if not dry_run:
            raise
        resolver = RESOLVERS[0]
        write_line(f"# no resolver is usable here; with {resolver.name}:")
    text = path.read_text(encoding="utf-8")
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
    for p in targets:
        ref = f"{p.image}:{p.tag}"
        command = resolver.command(ref)
        if dry_run:
            write_line(shlex.join(command))
            continue
        proc = run(command, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise HarnessError(f"{resolver.name} could not resolve {ref}: {last[0]}")
        digest = resolver.parse(proc.stdout)
        if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
            raise HarnessError(f"{resolver.name} gave {digest!r} for {ref}; expected sha256:...")
        text = rewrite_digest(text, p.backend, digest, f"make pin: {resolver.name}, {stamp}")
        change = "unchanged" if digest == p.digest else f"was {p.digest or 'null'}"
        write_line(f"{p.backend} {ref}@{digest} ({change})")
    if not dry_run:
        atomic_write_text(path, text)
    return 0
