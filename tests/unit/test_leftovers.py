"""The fingerprint a worker compares around each session: what counts as a difference, and
what a fresh process would have too (a lazy cache filled, a library's own import-time patch)."""

from __future__ import annotations

import sys
import types

import pytest

from harness.plugins import leftovers


class Kernel:
    def run(self) -> str:
        return "run"


@pytest.fixture
def lib(monkeypatch):
    """A library module holding a function, a class, a counter and a lazy cache."""
    module = types.ModuleType("zl_fake_lib")
    module.__dict__.update(fn=lambda: 1, Kernel=Kernel, calls=0, cache=None)
    monkeypatch.setitem(sys.modules, "zl_fake_lib", module)
    monkeypatch.setattr(Kernel, "run", Kernel.run)  # undone whatever the test sets
    return module


def changed(before: leftovers.Fingerprint, imported: set[str] = frozenset()) -> list[str]:
    return leftovers.differences(before, {}, imported.__contains__, lambda name: False)


def watched(name: str) -> bool:
    return name == "zl_fake_lib"


def test_a_function_replaced_or_a_method_shadowed_is_a_difference(lib, monkeypatch):
    before = leftovers.take(watched)
    lib.fn = lambda: 2
    monkeypatch.setattr(Kernel, "run", lambda self: "slow")
    assert changed(before) == ["zl_fake_lib.Kernel.run", "zl_fake_lib.fn"]


def test_a_counter_a_filled_cache_and_an_added_name_are_not(lib):
    before = leftovers.take(watched)
    lib.calls, lib.cache, lib.submodule = 5, {"k": 1}, types.ModuleType("zl_fake_lib.sub")
    assert changed(before) == []


def test_a_value_of_a_library_first_imported_since_is_its_import_not_a_patch(lib):
    before = leftovers.take(watched)
    plugin = types.ModuleType("zl_device_plugin")
    exec("def run(self):\n    return 'device'\n", plugin.__dict__)
    Kernel.run = plugin.run  # as a device plugin's import sets its own methods
    assert changed(before, {"zl_device_plugin"}) == []
    assert changed(before) == ["zl_fake_lib.Kernel.run"]  # set by anyone else: a patch


def test_code_swapped_in_place_and_a_module_replaced_in_sys_modules_are_differences(
        lib, monkeypatch, tmp_path):
    (tmp_path / "zl_fake_lib.py").write_text("")  # a name an import reaches
    monkeypatch.syspath_prepend(tmp_path)

    def original() -> int:
        return 1

    lib.original = original
    before = leftovers.take(watched)
    original.__code__ = (lambda: 2).__code__
    assert changed(before) == ["zl_fake_lib.original"]
    monkeypatch.setitem(sys.modules, "zl_fake_lib", types.ModuleType("zl_fake_lib"))
    assert changed(before) == ["sys.modules['zl_fake_lib'] replaced", "zl_fake_lib.original"]


def test_a_switch_names_its_two_values_and_a_set_its_members():
    before = leftovers.Fingerprint(switches={"torch.get_default_dtype()": "torch.float32",
                                             "torch.library._impls": frozenset({"a"})})
    now = {"torch.get_default_dtype()": "torch.float64",
           "torch.library._impls": frozenset({"a", "aten/tanh/CPU"})}
    assert leftovers.differences(before, now, lambda n: False, lambda n: False) == [
        "torch.get_default_dtype(): 'torch.float32' -> 'torch.float64'",
        "torch.library._impls: +aten/tanh/CPU"]


def test_an_empty_container_filled_and_a_none_deleted_are_lazy_state_not_a_difference(lib):
    # torch.cuda.default_generators is () until the device's first use; FlagGems' use_gems()
    # sets current_work_registrar on entry and deletes it on exit (None at import)
    lib.generators, lib.registrar = (), None
    before = leftovers.take(watched)
    lib.generators = ("generator of device 0",)
    del lib.registrar
    assert changed(before) == []


def test_a_container_that_held_something_replaced_and_a_value_deleted_still_are(lib):
    lib.hooks, lib.handler = ("a hook",), lambda: 1
    before = leftovers.take(watched)
    lib.hooks = ("another hook",)
    del lib.handler
    assert changed(before) == ["zl_fake_lib.handler (deleted)", "zl_fake_lib.hooks"]


def test_new_operators_and_their_kernels_are_not_a_difference_a_kernel_of_an_old_one_is():
    defs, impls = frozenset({"aten::tanh"}), frozenset({"aten/tanh/CPU"})
    before = leftovers.Fingerprint(switches={leftovers.LIBRARY_DEFS: defs,
                                             leftovers.LIBRARY_IMPLS: impls})
    # what torch registers at the first use of its sparse Triton kernels, seen on an H200
    lazy = {leftovers.LIBRARY_DEFS: defs | {"triton::_triton_bsr_dense_mm_out"},
            leftovers.LIBRARY_IMPLS: impls | {"triton/_triton_bsr_dense_mm_out/SparseCsrCUDA"}}
    assert leftovers.differences(before, lazy, lambda n: False, lambda n: False) == []
    patched = {**lazy, leftovers.LIBRARY_IMPLS: lazy[leftovers.LIBRARY_IMPLS]
               | {"aten/tanh/CUDA"}}  # a kernel for an operator defined before: a patch
    assert leftovers.differences(before, patched, lambda n: False, lambda n: False) == [
        "torch.library._impls: +aten/tanh/CUDA"]
    gone = {**lazy, leftovers.LIBRARY_DEFS: frozenset({"triton::_triton_bsr_dense_mm_out"})}
    assert leftovers.differences(before, gone, lambda n: False, lambda n: False) == [
        "torch.library._defs: +triton::_triton_bsr_dense_mm_out -aten::tanh"]


def test_what_a_pytest_plugin_set_at_configure_and_took_back_is_no_difference(lib):
    # pytest-mock wraps AsyncMock's asserts at configure and deletes them at unconfigure; the
    # fingerprint of the modules a session imported is taken after configure
    plugin = types.ModuleType("zl_pytest_plugin")
    exec("def wrapped(self):\n    return 'wrapped'\n", plugin.__dict__)
    Kernel.assert_run = plugin.wrapped
    collected = leftovers.take(watched)
    del Kernel.assert_run
    assert leftovers.differences(collected, {}, lambda n: False,
                                 {"zl_pytest_plugin"}.__contains__, own_back=True) == []
    assert leftovers.differences(collected, {}, lambda n: False, lambda n: False,
                                 own_back=True) == ["zl_fake_lib.Kernel.assert_run (deleted)"]


def test_a_module_loaded_by_path_under_a_name_no_import_reaches_may_be_replaced(
        lib, monkeypatch, tmp_path):
    # Triton loads every kernel's launcher from its cache by path, each as __triton_launcher:
    # seen on an H200, the one cause of a worker retired after every session
    monkeypatch.setitem(sys.modules, "zl_launcher", types.ModuleType("zl_launcher"))
    before = leftovers.take(lambda name: name in ("zl_fake_lib", "zl_launcher"))
    monkeypatch.setitem(sys.modules, "zl_launcher", types.ModuleType("zl_launcher"))
    assert changed(before) == []
    (tmp_path / "zl_launcher.py").write_text("")  # the same name, now on sys.path
    monkeypatch.syspath_prepend(tmp_path)
    assert changed(before) == ["sys.modules['zl_launcher'] replaced"]
    monkeypatch.delitem(sys.modules, "zl_launcher")
    assert changed(before) == ["sys.modules['zl_launcher'] removed"]


def test_a_module_loaded_by_path_under_a_name_no_import_reaches_may_change_its_names(
        lib, monkeypatch, tmp_path):
    # Seen on an H100: a session's launcher loaded by path updated the one module that holds
    # __triton_launcher (its launch, __spec__ and __loader__), which retired the worker after
    # every session of reciprocal (6-7 s for the next unit's new worker).
    import importlib.machinery

    module = types.ModuleType("zl_launcher")
    module.__spec__ = importlib.machinery.ModuleSpec("zl_launcher", None)
    module.__loader__, module.__file__ = object(), str(tmp_path / "launcher.so")
    module.launch = print
    monkeypatch.setitem(sys.modules, "zl_launcher", module)
    before = leftovers.take(lambda name: name in ("zl_fake_lib", "zl_launcher"))
    module.__spec__ = importlib.machinery.ModuleSpec("zl_launcher", None)
    module.__loader__ = object()
    module.__file__ = str(tmp_path / "launcher-again.so")
    module.launch = repr
    assert changed(before) == []
    fresh = leftovers.take(lambda name: name == "zl_launcher")
    module.launch = print  # the same load: a patch, not a load by path
    assert changed(fresh) == ["zl_launcher.launch"]
    module.launch = repr
    (tmp_path / "zl_launcher.py").write_text("")  # a name an import reaches: a difference
    monkeypatch.syspath_prepend(tmp_path)
    assert changed(before) == ["zl_launcher.__loader__", "zl_launcher.__spec__",
                               "zl_launcher.launch"]


class Memoizing:
    """As SQLAlchemy's classes write their traversal functions at their first use."""


def test_a_private_memo_a_library_adds_to_its_own_class_is_not_a_difference(monkeypatch):
    holder = types.ModuleType("zl_memo_lib.sql")
    Memoizing.__module__ = "zl_memo_lib.sql"
    holder.Memoizing = Memoizing
    monkeypatch.setitem(sys.modules, "zl_memo_lib.sql", holder)
    sentinel_module = types.ModuleType("zl_memo_lib.util")
    exec("class Symbol:\n    pass\nNO_CACHE = Symbol()\n", sentinel_module.__dict__)
    sentinel_module.Symbol.__module__ = "zl_memo_lib.util"
    before = leftovers.take("zl_memo_lib.sql".__eq__)
    generated: dict[str, object] = {}
    exec("def _generated_cache_key_traversal(self):\n    return ()\n", generated)
    Memoizing._generated_cache_key_traversal = generated["_generated_cache_key_traversal"]
    Memoizing._no_cache = sentinel_module.NO_CACHE  # its own value
    try:
        assert changed(before) == []
        Memoizing.public = generated["_generated_cache_key_traversal"]  # a public name
        Memoizing._patched = Kernel.run  # a private name, another package's value
        # an operator, even with the library's own or generated code: 5 + 2 could read -3
        Memoizing.__add__ = generated["_generated_cache_key_traversal"]
        assert changed(before) == ["zl_memo_lib.sql.Memoizing.__add__ (added)",
                                   "zl_memo_lib.sql.Memoizing._patched (added)",
                                   "zl_memo_lib.sql.Memoizing.public (added)"]
    finally:
        for name in ("_generated_cache_key_traversal", "_no_cache", "public", "_patched",
                     "__add__"):
            if name in vars(Memoizing):
                delattr(Memoizing, name)


class Module:
    def _call_impl(self) -> str:
        return "forward"


class Linear(Module):
    """As torch.nn.Linear inherits torch.nn.Module._call_impl."""


def test_a_private_name_that_shadows_a_base_classs_method_is_a_patch(monkeypatch):
    holder = types.ModuleType("zl_nn.linear")
    Linear.__module__ = Module.__module__ = "zl_nn.linear"
    holder.Linear, holder.Module = Linear, Module
    monkeypatch.setitem(sys.modules, "zl_nn.linear", holder)
    before = leftovers.take("zl_nn.linear".__eq__)
    relu = types.FunctionType((lambda self: "relu").__code__, {"__name__": "zl_nn.functional"})
    Linear._call_impl = relu  # the library's own function, over the method every call runs
    try:
        assert changed(before) == ["zl_nn.linear.Linear._call_impl (added)"]
    finally:
        del Linear._call_impl
