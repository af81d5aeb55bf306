"""Where child runs happen: a plan of tasks in, their ends back as events; one record per kind.

Every difference between executor kinds (this host's processes, a cluster's job arrays ...)
lives in its record: the variables of its own settings and their validation, the RUNNER values
its tasks take, its preflight, how its executor is built, what a campaign keeps of it between
runs and what a resume finds of earlier ones, the facts a task's end carries, its receipt
fields. Callers ask the record; nothing outside this package compares a kind's name. A new kind
is one module (or package) and one line of KIND_MODULES.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import UsageError, choice_error
from harness.executors.base import Ended, Executor
from harness.settings import variables
from harness.settings.spec import Settings

# The kinds, each a module of this package that holds its KIND.
KIND_MODULES = ("local", "slurm.kind")
DEFAULT = "local"  # EXECUTOR's default, and the kind of a campaign that kept no executor

Flags = Mapping[str, object]
Env = Mapping[str, str]
Mounts = list[tuple[Path, bool]]  # (host path, writable), each at the same path inside


@dataclass
class ExecutorDoc:
    """What a campaign keeps of the executor that runs it: its kind's name, the variables given
    it (by flag dest; a resume's, unless given again) and its own state between runs (a
    cluster's submissions, which a resume re-attaches to)."""

    name: str = DEFAULT
    settings: dict[str, str] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "settings": dict(self.settings), "state": self.state}


@dataclass(frozen=True)
class Launch:
    """What a task run on another machine needs of the layers above the executors: the paths
    its container sees (`mounts` of the settings, the plan's directory and the working
    directory), and the line that runs the harness's arguments in an image under a cluster
    runner (`in_image` of the settings, the image, the mounts, the working directory, the
    arguments)."""

    mounts: Callable[[Settings, Path, Path], Mounts]
    in_image: Callable[[Settings, str, Sequence[tuple[Path, bool]], Path, Sequence[str]],
                       list[str]]


@dataclass(frozen=True)
class Build:
    """What building an executor for one plan takes: the run settings, the kind's own settings
    (ExecutorKind.config), the directory the plan's files live in, the kind's state in the
    caller's document (kept there; `saved` is called after each change to it), where lines go,
    the environment, WORKERS, and the run layer's part (Launch)."""

    settings: Settings
    config: Any
    directory: Path
    launch: Launch
    state: dict[str, Any] = field(default_factory=dict)
    saved: Callable[[], object] = lambda: None
    out: Callable[[str], None] = print
    env: Env | None = None
    workers: str = "0"


def _no_config(settings: Settings, flags: Flags, env: Env, task_image: bool) -> None:
    return None


def _no_preflight(config: Any, out_dir: Path, warn: Callable[[str], None], dry_run: bool
                  ) -> None:
    return None


def _nothing_settled(directory: Path, placed: Mapping[str, str | None], doc: ExecutorDoc,
                     follows: bool) -> list[Ended]:
    return []


def _no_receipt(state: Mapping[str, Any] | None) -> dict[str, Any]:
    return {}


def _never_kept(doc: Mapping[str, Any]) -> ExecutorDoc | None:
    return None


@dataclass(frozen=True)
class ExecutorKind:
    """One kind of executor. `config` validates its own settings (flags first, then the
    environment; `task_image` False where each run's pytest runs in a side's image of its own),
    `flags` settles RUNNER for its tasks, `preflight` checks what must hold before a directory
    is claimed for it (a dry run only says what the real run would stop at), `build` makes its
    executor. The rest say what a campaign keeps of it and what its tasks' ends carry."""

    name: str
    build: Callable[[Build], Executor]
    flags: Callable[[Flags, Env], dict[str, object]]
    variables: tuple[str, ...] = ()  # the variables of its own settings, which a campaign keeps
    config: Callable[[Settings, Flags, Env, bool], Any] = _no_config
    preflight: Callable[[Any, Path, Callable[[str], None], bool], None] = _no_preflight
    own_runners: tuple[str, ...] = ()  # RUNNER values only its tasks take
    runs: str = ""  # what those runners run, in words, for a refusal elsewhere
    remote: bool = False  # its tasks run on other machines: this host needs no accelerator
    # It keeps state between runs (its arrays): a campaign it ran resumes on it unless EXECUTOR
    # says otherwise, and a run of that campaign elsewhere leaves its document as it is.
    keeps: bool = False
    # What a resume finds of the earlier runs (a unit id -> where it was handed, of the units
    # still submitted): the ends to record and never run again; `follows`: the resume runs on
    # this kind too. UsageError where a task of it may still write into the campaign unseen.
    settled: Callable[[Path, Mapping[str, str | None], ExecutorDoc, bool], list[Ended]] = \
        _nothing_settled
    facts: tuple[str, ...] = ()  # the keys of Ended.facts its tasks' ends carry
    receipt: Callable[[Mapping[str, Any] | None], dict[str, Any]] = _no_receipt
    before: Callable[[Mapping[str, Any]], ExecutorDoc | None] = _never_kept  # an older doc's
    task_command: str | None = None  # the internal subcommand one of its tasks runs
    run_task: Callable[[Path, Env, Callable[[str], None]], int] | None = None

    def given(self, flags: Flags, env: Env) -> dict[str, str]:
        """Its variables given as flags or in the environment, by flag dest: a campaign keeps
        them, so that a resume runs as the campaign did."""
        return {var.dest: value for var in map(variables.named, self.variables)
                if (value := var.given(flags, env)) is not None}


@dataclass(frozen=True)
class Chosen:
    """The executor kind a run uses, its settings validated, and the variables given it that a
    campaign keeps."""

    kind: ExecutorKind
    config: Any = None
    given: dict[str, str] = field(default_factory=dict)


class Registry:
    """The kinds by name, in KIND_MODULES order; registering a name twice is an error."""

    def __init__(self) -> None:
        self._kinds: dict[str, ExecutorKind] = {}

    def register(self, kind: ExecutorKind) -> ExecutorKind:
        if kind.name in self._kinds:
            raise ValueError(f"executor kind {kind.name!r} is registered twice")
        self._kinds[kind.name] = kind
        return kind

    def names(self) -> list[str]:
        return list(self._kinds)

    def all(self) -> list[ExecutorKind]:
        return list(self._kinds.values())

    def get(self, name: str) -> ExecutorKind:
        try:
            return self._kinds[name]
        except KeyError:
            raise choice_error("EXECUTOR", name, self.names()) from None


_REGISTRY: Registry | None = None


def registry() -> Registry:
    """The process-wide registry, built on first use from KIND_MODULES."""
    global _REGISTRY
    if _REGISTRY is None:
        reg = Registry()
        for module in KIND_MODULES:
            reg.register(importlib.import_module(f"{__name__}.{module}").KIND)
        _REGISTRY = reg
    return _REGISTRY


def get(name: str) -> ExecutorKind:
    """A kind by its name; an unknown one is refused naming EXECUTOR and the names known."""
    return registry().get(name)


def named(flags: Flags, env: Env, default: str = DEFAULT) -> ExecutorKind:
    """The kind EXECUTOR names (flag first), else `default`'s."""
    return get(variables.named("EXECUTOR").given(flags, env) or default)


def choose(settings: Settings, flags: Flags, env: Env, task_image: bool = True) -> Chosen:
    """The kind EXECUTOR names, its settings validated from the flags and the environment."""
    kind = named(flags, env)
    return Chosen(kind, kind.config(settings, flags, env, task_image), kind.given(flags, env))


def resumed(doc: ExecutorDoc, settings: Settings, flags: Flags, env: Env,
            task_image: bool = True) -> Chosen:
    """A resume's kind: EXECUTOR where given, else the campaign's; on the campaign's own kind,
    the settings it kept, any given now replacing them."""
    kind = named(flags, env, doc.name)
    kept = {**(doc.settings if kind.name == doc.name else {}), **kind.given(flags, env)}
    return Chosen(kind, kind.config(settings, {**flags, **kept}, {}, task_image), kept)


def task_flags(flags: Flags, env: Env) -> dict[str, object]:
    """The flags as the tasks of the kind EXECUTOR names take them (RUNNER's default there);
    UsageError for a runner they cannot use."""
    return named(flags, env).flags(flags, env)


def refuse_owned_runner(flags: Flags, env: Env, kind: ExecutorKind) -> None:
    """UsageError where RUNNER is one that only another kind's tasks take."""
    runner = variables.named("RUNNER").given(flags, env)
    for other in registry().all():
        if other is not kind and runner in other.own_runners:
            raise UsageError(f"RUNNER={runner!r} {other.runs}; it needs "
                             f"EXECUTOR={other.name}")


def fact_names() -> tuple[str, ...]:
    """Every kind's task facts, in registry order: the columns a batch's ops_status.csv has."""
    return tuple(dict.fromkeys(f for kind in registry().all() for f in kind.facts))


def receipt_fields(doc: ExecutorDoc) -> dict[str, Any]:
    """What a campaign's receipt says of its executor: each kind's fields, of `doc`'s state
    for its own kind and empty for the others."""
    found: dict[str, Any] = {}
    for kind in registry().all():
        found.update(kind.receipt(doc.state if kind.name == doc.name else None))
    return found


def doc_from_json(doc: Mapping[str, Any]) -> ExecutorDoc:
    """The executor document of a campaign.json; UsageError naming the field that is wrong."""
    name, settings, state = doc.get("name"), doc.get("settings") or {}, doc.get("state") or {}
    if not isinstance(name, str) or name not in registry().names():
        raise UsageError(f"executor.name is {name!r}; expected one of: "
                         f"{', '.join(registry().names())}")
    if not isinstance(settings, dict) or not all(isinstance(v, str) for v in settings.values()):
        raise UsageError(f"executor.settings is {settings!r}; expected strings by name")
    if not isinstance(state, dict):
        raise UsageError(f"executor.state is {state!r}; expected a JSON object")
    return ExecutorDoc(name, dict(settings), dict(state))


def doc_before(campaign: Mapping[str, Any]) -> ExecutorDoc:
    """The executor document of a campaign.json written before campaigns kept one: what a
    kind's own fields there held, else the default kind's."""
    for kind in registry().all():
        if (found := kind.before(campaign)) is not None:
            return found
    return ExecutorDoc()
