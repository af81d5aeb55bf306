"""Axis kinds: one record per kind of A/B axis (a switch, none, python, flaggems, image ...).

Every difference between kinds lives in its record (one module of this package each): the side
variables it reads and their validation, what each side's runs get (an environment, an
interpreter, an image, a FlagGems tree), its tuning and baseline defaults, its liveness rule,
its plan and report text. Callers ask the record; nothing outside this package compares a
kind's name. A new kind is one module and one line of KIND_MODULES.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from harness import stats
from harness.axes.steps import Step, StepsGiven
from harness.backends import Backend
from harness.errors import UsageError

# The kinds; an AXIS is resolved by those selected by their own name first, then the others
# in this order.
KIND_MODULES = ("none", "python", "flaggems", "image", "switch", "env")
SWITCH = "switch"  # the kind of a stored axis whose name is no kind's own: a variable's switch

# A side variable as read: (value, where it came from); and how the user spelt one given there.
SideValues = Mapping[str, tuple[Any, str]]
Label = Callable[[str, str], str]
Identities = Mapping[str, Sequence[Mapping[str, Any]]]
# A liveness decision: (liveness {"status", "detail"} or None, notes, caliber additions).
Found = tuple[dict[str, str] | None, list[str], dict[str, Any]]


@dataclass(frozen=True)
class Axis:
    """The axis under test: the name the user gave, the variable it sets (None: no switch), and
    its value on side A (off) and side B (on)."""

    name: str
    variable: str | None
    a: str = "0"
    b: str = "1"
    given_tune: str | None = None  # TUNE as given; None: the axis kind's default (tune)

    @property
    def kind(self) -> AxisKind:
        return kind_of(self.name)

    def env(self, value: str) -> dict[str, str]:
        return {self.variable: value} if self.variable else {}

    def value(self, side: str) -> str:
        """The axis's value on `side` (A or B)."""
        return self.a if side == "A" else self.b

    def side_env(self, side: str) -> dict[str, str]:
        """What `side`'s runs get in their environment."""
        return {} if self.stacks else self.env(self.value(side))

    @property
    def stacks(self) -> bool:
        """The sides are two stacks (interpreters, images or FlagGems commits), not a switch's
        values."""
        return self.kind.stacks

    def image(self, side: str) -> str | None:
        """The image `side`'s pytest runs in where the sides are two images, else None."""
        return self.value(side) if self.kind.side_images else None

    def python(self, side: str) -> str | None:
        """The interpreter that runs `side` where the sides are two interpreters, else None
        (both run the harness's own)."""
        return self.value(side) if self.kind.side_pythons else None

    @property
    def tune(self) -> str:
        """TUNE where given, else the axis kind's default (AxisKind.tune)."""
        return self.given_tune or self.kind.tune


@dataclass(frozen=True)
class Evidence:
    """What a finished campaign shows about its axis: its rows' statistics, each side's run
    identities over every operator (their whole caches' artifacts among them), the operators
    whose side B compiled what side A never did, and the interpreter of the campaign."""

    axis: Axis
    rows: Sequence[stats.RowStats]
    every: Identities
    differ: Sequence[str]
    python: str


def _no_hint(name: str, backend: Backend) -> str:
    return ""


def _no_choices(backend: Backend) -> Sequence[str]:
    return ()


def _not_code_only(axis: Axis, backend: Backend) -> bool:
    return False


def _side_label(axis: Axis, side: str) -> str:
    return f"{side}={axis.value(side)}"


@dataclass(frozen=True)
class AxisKind:
    """One kind of axis. `sides` turns the side variables it reads (`variables`, looked up
    with where each came from) into A's and B's values, or raises UsageError naming the
    spelling the user wrote; `match` resolves an AXIS spelling to an Axis of this kind, or
    None. The flags say what a side's runs are made of; the rest are its defaults and texts."""

    name: str
    variables: tuple[str, ...]  # the side variables (A_*/B_*) it reads
    sides: Callable[[SideValues, Label, str], tuple[str, str]]
    match: Callable[[str, Backend], Axis | None]
    liveness: Callable[[Evidence], Found]
    plan_text: Callable[[Axis, Path], str]  # a dry run's "axis: NAME -> TEXT"
    reaches_torch: Callable[[Axis, Backend], bool]  # BASELINE=auto: every where True, else once
    by_name: bool = True  # AXIS=<name> selects it (not a switch's variable)
    # Its exact spellings on a backend, where they are not its own name (by_name).
    choices: Callable[[Backend], Sequence[str]] = _no_choices
    pattern: str | None = None  # a spelling it takes besides its choices, in words
    hint: Callable[[str, Backend], str] = _no_hint  # for a refused spelling
    aa: bool = False  # both sides are the same: the campaign measures the noise floor
    stacks: bool = False  # the sides are two stacks, not one variable's two values
    side_pythons: bool = False  # A and B are interpreters: each side's pytest runs in its own
    side_images: bool = False  # A and B are images: each side's pytest runs in a container
    side_commits: bool = False  # A and B are FlagGems commits: each side runs its own tree
    # Whether the sides differ in nothing but the code FlagGems' kernels compile to (or in
    # nothing at all): sides that compiled the same code, replaying one set of winners, ran the
    # same operator. ROUNDS=auto stops such a campaign's operators at their first look.
    code_only: Callable[[Axis, Backend], bool] = _not_code_only
    side_label: Callable[[Axis, str], str] = _side_label  # a side named in an error
    tune: str = "replay"  # TUNE's default: replay (A/r0's winners) or each (a side its own)
    strict_replay: bool = True  # a key missing from the replayed winners fails the operator
    least_rounds: int = 2  # the fewest ROUNDS that can decide anything
    artifact_words: tuple[str, str] = ("equal", "differ")  # an operator's compiled code
    report_text: str | None = None  # ab.md's words for two stacks (None: a switch's values)
    shows_stacks: bool = False  # ab.md lists each side's stack
    # A bisection's steps from what it was given (GOOD first, BAD last); None: not bisected.
    steps: Callable[[StepsGiven], tuple[Step, ...]] | None = None

    @property
    def side_variables(self) -> tuple[str, str]:
        """The variables that hold side A's and side B's values: the first two it reads."""
        return self.variables[0], self.variables[1]

    @property
    def side_preflight(self) -> bool:
        """Each side is preflighted on its own: in its interpreter or in its FlagGems tree (an
        image's stack is checked in it, by its run)."""
        return self.side_pythons or self.side_commits


def named(name: str) -> Callable[[str, Backend], Axis | None]:
    """A kind's `match` where AXIS=<name> selects it and its sides set no variable."""
    def match(given: str, backend: Backend) -> Axis | None:
        return Axis(name, None) if given == name else None
    return match


class Registry:
    """The kinds in resolution order, by name; registering a name twice is an error."""

    def __init__(self) -> None:
        self._kinds: dict[str, AxisKind] = {}

    def register(self, kind: AxisKind) -> AxisKind:
        if kind.name in self._kinds:
            raise ValueError(f"axis kind {kind.name!r} is registered twice")
        self._kinds[kind.name] = kind
        return kind

    def names(self) -> list[str]:
        return list(self._kinds)

    def all(self) -> list[AxisKind]:
        return list(self._kinds.values())

    def get(self, name: str) -> AxisKind:
        try:
            return self._kinds[name]
        except KeyError:
            raise UsageError(f"axis kind {name!r} is not known; expected one of: "
                             f"{', '.join(self._kinds)}") from None

    @cached_property
    def by_name(self) -> dict[str, AxisKind]:
        return {k.name: k for k in self._kinds.values() if k.by_name}


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


def get(name: str) -> AxisKind:
    """A kind by its name; an unknown name lists the names known."""
    return registry().get(name)


def kind_of(axis: str) -> AxisKind:
    """The kind of an axis as given or stored (AXIS, an Axis's name, ab.json's caliber axis):
    the kind of that name, else a switch (a backend's, or env:NAME's variable)."""
    reg = registry()
    return reg.by_name.get(axis) or reg.get(SWITCH)


def resolve(name: str, backend: Backend) -> Axis:
    """The axis AXIS=`name` names on `backend`: the first kind that matches it. Anything else
    is refused with the closest names: a misspelled switch would otherwise set a variable
    nothing reads, and every row would read the same."""
    kinds = sorted(registry().all(), key=lambda k: not k.by_name)  # named kinds first
    for kind in kinds:
        if (axis := kind.match(name, backend)) is not None:
            return axis
    choices = [c for kind in kinds
               for c in ((kind.name,) if kind.by_name else kind.choices(backend))]
    close = difflib.get_close_matches(name, choices, n=3)
    hint = (f"did you mean {' or '.join(close)}? " if close else "") + "".join(
        kind.hint(name, backend) for kind in kinds)
    patterns = "".join(f", or {kind.pattern}" for kind in kinds if kind.pattern)
    raise UsageError(f"AXIS={name!r} is not a switch BACKEND={backend.name} knows; {hint}"
                     f"expected one of: {', '.join(choices)}{patterns}")

