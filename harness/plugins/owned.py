"""The modules a worker's pytest session owns: imported afresh by each, forgotten after it;
and the session's own plugin that fingerprints what its collection imported."""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import types
from pathlib import Path

import pytest

from harness.plugins import leftovers

# Imported once, by the worker: the harness's other plugins are imported afresh each session.
KEPT_PLUGINS = tuple(f"harness.plugins.{m}" for m in (
    "worker", "owned", "leftovers", "held", "descendants", "memo"))
PLUGINS_PACKAGE = "harness.plugins."


def session_plugins(args: list[str], env: dict[str, str]) -> set[str]:
    """The plugin modules a session names (`-p NAME`, PYTEST_PLUGINS): their state is the
    session's, as the harness's own plugins' is."""
    named = {p.strip() for p in env.get("PYTEST_PLUGINS", "").split(",") if p.strip()}
    named |= {value for flag, value in zip(args, args[1:], strict=False) if flag == "-p"}
    named |= {arg[2:] for arg in args if arg.startswith("-p") and len(arg) > 2}
    return {name for name in named if not name.startswith("no:")}


_RESOLVED: dict[str, str] = {}  # a module file's resolved path: looked up every session


def resolved(file: str) -> str:
    """`Path(file).resolve()` as text, once per file a worker sees: resolving each of some
    2,000 modules' files took 0.1 s, twice a session."""
    found = _RESOLVED.get(file)
    if found is None:
        found = _RESOLVED[file] = str(Path(file).resolve())
    return found


def _under(path: str, roots: tuple[str, ...]) -> bool:
    """Whether the resolved `path` lies in one of the resolved `roots`: compared as text, since
    pathlib's is_relative_to took 0.2 s over 5,600 modules on Python 3.12, twice a session."""
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def session_modules(roots: list[Path], plugins: set[str]) -> list[str]:
    """The modules a session's fresh process would import again: those whose file lies under
    one of `roots` (the tests' own trees: test modules, conftest, FlagGems' benchmark helpers),
    the harness's plugins but the worker's own (KEPT_PLUGINS), and the `plugins` the session
    named (with their submodules)."""
    found, under = [], tuple(str(root) for root in roots)
    for name, module in list(sys.modules.items()):
        if (name.startswith(PLUGINS_PACKAGE) and name not in KEPT_PLUGINS) or any(
                name == p or name.startswith(p + ".") for p in plugins):
            found.append(name)
            continue
        file = getattr(module, "__file__", None)
        if file and _under(resolved(file), under):
            found.append(name)
    return found


def forget(names: list[str]) -> None:
    """Remove the modules `names` as a fresh process never had them: from sys.modules and
    from the attribute of their package that the import bound to each."""
    for name in names:
        module = sys.modules.pop(name, None)
        parent, _, child = name.rpartition(".")
        package = sys.modules.get(parent) if parent else None
        # Left bound, the package's name held the old module, and the next session's import
        # rebinding it read as a change to a module that stays (harness.plugins.timing).
        if module is not None and package is not None \
                and vars(package).get(child) is module:
            with contextlib.suppress(AttributeError, TypeError):
                delattr(package, child)


def test_roots(args: list[str], cwd: Path) -> list[Path]:
    """The top folder of each test path among pytest's arguments, resolved under `cwd`."""
    roots = []
    for arg in args:
        if arg.startswith("-"):
            continue
        first = Path(arg.split("::", 1)[0])
        top = first.parts[0] if not first.is_absolute() and first.parts else None
        if top not in (None, ".", ".."):
            roots.append((cwd / str(top)).resolve())
    return roots


def plugin_modules(manager: pytest.PytestPluginManager) -> set[str]:
    """The modules of a session's pytest plugins that are modules: each one's name and those of
    the modules its hook functions come from. pytest-mock's entry point registers the package
    `pytest_mock`; its hooks, and the asserts they patch into unittest.mock, are
    `pytest_mock.plugin`'s."""
    found = set()
    for plugin in manager.get_plugins():
        if not isinstance(plugin, types.ModuleType):
            continue
        found.add(str(vars(plugin).get("__name__")))
        for caller in manager.get_hookcallers(plugin) or ():
            found |= {str(getattr(impl.function, "__module__", None))
                      for impl in caller.get_hookimpls() if impl.plugin is plugin}
    return found


class Probe:
    """A session's own plugin: the fingerprint of the modules its collection imported first,
    taken before its first test, so that what its tests then change in them is seen too."""

    def __init__(self, known: set[str], roots: list[Path], plugins: set[str]) -> None:
        self.known, self.roots, self.plugins = known, roots, plugins
        self.collected: leftovers.Fingerprint | None = None
        self.plugin_modules: set[str] = set()  # the session's pytest plugins, as modules

    @pytest.hookimpl(trylast=True)  # trylast: after every other plugin's collection hooks
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        ours = set(session_modules(self.roots, self.plugins))
        self.collected = leftovers.take(lambda n: n not in self.known and n not in ours)
        self.plugin_modules = plugin_modules(session.config.pluginmanager)
        # What collection imported lives as long as the session (see Worker.session); its
        # garbage is collected first, or it would stay, device memory too, until the end.
        gc.collect()
        gc.freeze()
