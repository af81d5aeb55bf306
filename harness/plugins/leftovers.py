"""What a pytest session left in its process that a fresh one would not have: state and children.

A worker fingerprints, before and after each session, what a later session would import or
call: the attributes of every module it had imported (torch, torch.nn.functional, triton,
flag_gems, ...) and of their classes (torch.Tensor's methods), each Python function's code,
the entries of sys.modules, and global switches read through getters (torch's default dtype,
grad mode, torch.backends flags, modes and dispatch sets left pushed, Python kernels registered
with torch.library, module hooks, the profiler, the CPU affinity). A difference retires the
worker, named in its log. Nothing is undone: a fingerprint cannot be fooled by a patch its undo
would miss. What a session left running, harness.plugins.descendants stops.

What is not a difference: a name added to a module (a submodule imported, a lazy import); a
scalar rebound (a counter, a device module's `_initialized`), a None or an empty container filled
in (a lazy cache; the device generators a device's first use creates) or a None deleted (a flag a
context sets on entry and deletes on exit: FlagGems' `current_work_registrar`); an operator newly
defined with torch.library, and its kernels (torch registers its sparse Triton kernels at first
use), where a kernel registered for an operator that was defined before stays a difference; what
a library imported during the session set at its import, where the value is the library's own (a
device plugin's Tensor methods): a fresh process that imports it gets the same; and what a pytest
plugin set at the session's configure and took back at its end (pytest-mock's wrapped asserts);
a private name a library added to a class of its own, holding its own value or code generated at
run time, and shadowing no method of a base (SQLAlchemy writes its classes'
`_generated_*_traversal` functions at their first use), where a dunder never is;
and a module replaced in sys.modules, or loaded again with its names rebound, under a name
that no import reaches (Triton loads each kernel's launcher from its cache by path, every one
as `__triton_launcher`).
"""

from __future__ import annotations

import gc
import operator
import os
import sys
import threading
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

SCALARS = (bool, int, float, complex, str, bytes, type(None))
# Modules whose rebinding is the interpreter's or the worker's own (sys.argv, sys.last_value).
UNWATCHED_MODULES = ("__main__", "__mp_main__", "sys")
# pytest's own: it sets and undoes its classes' attributes per session (legacypath), and runs
# the sessions rather than being called by their benchmarks.
UNWATCHED_PACKAGES = ("_pytest", "pytest", "pluggy", "iniconfig")
# Names the interpreter itself adds to a class (copy and pickle cache __slotnames__).
UNWATCHED_CLASS_NAMES = frozenset({"__slotnames__", "__annotations__", "__annotations_cache__"})
# torch._C's getters of global switches; those a build lacks are skipped. Besides these, every
# `_get_*_preferred_backend` a build has (BLAS, linalg, a vendor's attention).
TORCH_GETTERS = (
    "_get_cudnn_enabled", "_get_cudnn_benchmark", "_get_cudnn_deterministic",
    "_get_cudnn_allow_tf32", "_get_cublas_allow_tf32", "_get_cublas_allow_fp16_accumulation",
    "_get_cublas_allow_fp16_reduced_precision_reduction",
    "_get_cublas_allow_bf16_reduced_precision_reduction",
    "_get_cpu_allow_fp16_reduced_precision_reduction", "_get_mkldnn_enabled",
    "_get_mkldnn_deterministic", "_get_nnpack_enabled", "_get_onednn_allow_tf32",
    "_get_flash_sdp_enabled", "_get_mem_efficient_sdp_enabled", "_get_math_sdp_enabled",
    "_get_cudnn_sdp_enabled", "_get_fa3_sdp_enabled", "_get_overrideable_sdp_enabled",
    "_get_math_sdp_allow_fp16_bf16_reduction", "_get_sdp_priority_order",
    "_get_deterministic_algorithms", "_get_deterministic_algorithms_warn_only",
    "_get_deterministic_fill_uninitialized_memory", "_get_float32_matmul_precision",
    "_get_default_device", "_get_qengine", "_get_torch_function_state",
    "_get_autograd_fallback_mode", "_get_sm_carveout_experimental", "_get_tracing_state",
    "_len_torch_function_stack", "_len_torch_dispatch_stack",
    "_dispatch_tls_local_include_set", "_dispatch_tls_local_exclude_set",
)
TORCH_CALLS = ("get_default_dtype", "is_grad_enabled", "is_inference_mode_enabled",
               "is_anomaly_enabled", "is_anomaly_check_nan_enabled", "get_num_threads")
HOOKS_MODULE = "torch.nn.modules.module"  # its _global_* dicts: hooks every Module call runs
CONTAINERS = (tuple, list, dict, set, frozenset)
LIBRARY_DEFS, LIBRARY_IMPLS = "torch.library._defs", "torch.library._impls"


def _plain(value: object) -> object:
    """A value that compares as the state it stands for (a set by its sorted members)."""
    if isinstance(value, (set, frozenset)):
        return frozenset(map(str, value))
    return value if isinstance(value, SCALARS) else repr(value)


def _read(getter: Callable[[], object]) -> object:
    try:
        return _plain(getter())
    except Exception as exc:  # noqa: BLE001 - an unreadable switch is a state of its own
        return f"unreadable: {type(exc).__name__}"


def switches(torch: Any, device: str | None) -> dict[str, object]:
    """Global switches a later session would run under, by name, read through their getters."""
    found: dict[str, object] = {
        "sys.getprofile()": _read(sys.getprofile), "sys.gettrace()": _read(sys.gettrace),
        "threading profile": _read(lambda: getattr(threading, "_profile_hook", None)),
        "threading trace": _read(lambda: getattr(threading, "_trace_hook", None)),
        "sys.meta_path": _read(lambda: tuple(sys.meta_path)),
        "sys.path_hooks": _read(lambda: tuple(sys.path_hooks)),
        "sys.stdout": _read(lambda: sys.stdout), "sys.stderr": _read(lambda: sys.stderr),
        "sys.getrecursionlimit()": sys.getrecursionlimit(),
        "sys.getswitchinterval()": sys.getswitchinterval(),
        "gc.isenabled()": gc.isenabled(), "gc.get_threshold()": gc.get_threshold(),
        "os.sched_getaffinity(0)": _read(lambda: frozenset(os.sched_getaffinity(0))),
        "os.getpriority()": _read(lambda: os.getpriority(os.PRIO_PROCESS, 0)),
    }
    if torch is None:
        return found
    for name in TORCH_CALLS:
        if hasattr(torch, name):
            found[f"torch.{name}()"] = _read(getattr(torch, name))
    preferred = [n for n in dir(torch._C) if n.startswith("_get_")
                 and n.endswith("_preferred_backend")]
    for name in (*TORCH_GETTERS, *preferred):
        if hasattr(torch._C, name):
            found[f"torch._C.{name}()"] = _read(getattr(torch._C, name))
    if device is not None:
        found["torch.is_autocast_enabled()"] = _read(lambda: torch.is_autocast_enabled(device))
    library = sys.modules.get("torch.library")
    for name in ("_impls", "_defs"):
        found[f"torch.library.{name}"] = _plain(set(getattr(library, name, ())))
    hooks = sys.modules.get(HOOKS_MODULE)
    for name, value in sorted(vars(hooks).items() if hooks else ()):
        if name.startswith("_global_") and isinstance(value, dict):
            found[f"{HOOKS_MODULE}.{name}"] = _plain(set(map(id, value.values())))
    return found


@dataclass
class Fingerprint:
    """The state of the watched modules at one moment (references, not copies, of values)."""

    modules: dict[str, tuple[types.ModuleType, type, dict[str, Any]]] = field(
        default_factory=dict)
    classes: dict[int, tuple[type, str, dict[str, Any]]] = field(default_factory=dict)
    codes: dict[int, tuple[types.FunctionType, str, Any]] = field(default_factory=dict)
    switches: dict[str, object] = field(default_factory=dict)


def _unwatched(module: str) -> bool:
    return module in UNWATCHED_MODULES or module.split(".", 1)[0] in UNWATCHED_PACKAGES


def _scan(print_: Fingerprint, label: str, namespace: dict[str, Any]) -> None:
    for name, value in list(namespace.items()):
        kind = type(value)
        if kind is types.FunctionType and id(value) not in print_.codes:
            print_.codes[id(value)] = (value, f"{label}.{name}", value.__code__)
        elif issubclass(kind, type) and id(value) not in print_.classes \
                and not _unwatched(str(vars(value).get("__module__"))):
            own = dict(vars(value))
            print_.classes[id(value)] = (value, f"{label}.{name}", own)
            _scan(print_, f"{label}.{name}", {k: v for k, v in own.items()
                                              if type(v) is types.FunctionType})


def take(watched: Callable[[str], bool], torch: Any = None, device: str | None = None
         ) -> Fingerprint:
    """The fingerprint of every module in sys.modules that `watched` names, their classes and
    functions, and (with `torch`) the global switches."""
    print_ = Fingerprint()
    for name, module in list(sys.modules.items()):
        if _unwatched(name) or not isinstance(module, types.ModuleType) or not watched(name):
            continue
        namespace = dict(vars(module))
        print_.modules[name] = (module, type(module), namespace)
        _scan(print_, name, namespace)
    print_.switches = switches(torch, device) if torch is not None else {}
    return print_


def _owner(value: object) -> str | None:
    """The module a value comes from: a module's own name, a class's or function's
    `__module__`, else its type's (read without calling anything the value defines)."""
    kind = type(value)
    if issubclass(kind, types.ModuleType):
        return str(vars(value).get("__name__"))
    source = value if issubclass(kind, type) else kind
    owner = vars(source).get("__module__")
    if kind is types.MethodType:
        value = value.__func__  # type: ignore[attr-defined]
        kind = type(value)
    if kind in (types.FunctionType, types.BuiltinFunctionType):
        owner = getattr(value, "__module__", None)
    return owner if isinstance(owner, str) else None


@dataclass(frozen=True)
class _Rules:
    imported: Callable[[str], bool]  # a library first imported since the fingerprint
    gone: Callable[[str], bool]  # a module of the session's own, removed at its end
    own_back: bool  # the fingerprint was taken while the session's plugins patched


def _rebound(old: object, new: object, rules: _Rules, holder: str | None) -> bool:
    """Whether a name's value changing from `old` to `new` is a difference (see the module);
    `holder`: the module the name belongs to."""
    if old is new or old is None or (isinstance(old, SCALARS) and isinstance(new, SCALARS)):
        return False
    if type(old) in CONTAINERS and not old and type(new) is type(old):
        return False  # an empty one filled in
    if rules.own_back and (rules.gone(_owner(old) or "") or _owner(new) == holder):
        return False  # a patch of the session's plugins undone
    owner = _owner(new)
    return not (owner and (rules.imported(owner) or _unwatched(owner)))


def _namespace_changes(label: str, before: dict[str, Any], now: Mapping[str, Any],
                       rules: _Rules, bases: tuple[type, ...] | None, holder: str | None
                       ) -> Iterable[str]:
    """`bases`: a class's bases (its names added are read too); None for a module's."""
    if before.keys() == now.keys() and all(map(operator.is_, before.values(),
                                               map(now.__getitem__, before))):
        return  # every name holds what it held: the common case, decided without a call
    missing = object()
    for name, old in before.items():
        new = now.get(name, missing)
        if new is missing:
            if old is not None and not (rules.own_back and rules.gone(_owner(old) or "")):
                yield f"{label}.{name} (deleted)"
        elif _rebound(old, new, rules, holder):
            yield f"{label}.{name}"
    if bases is not None:
        for name in now.keys() - before.keys() - UNWATCHED_CLASS_NAMES:
            if _rebound(object(), now[name], rules, holder) \
                    and not _memo(name, now[name], holder, bases):
                yield f"{label}.{name} (added)"


def _generated(value: object) -> bool:
    """A function made at run time from generated source: it has no module of its own."""
    return type(value) is types.FunctionType and getattr(value, "__module__", None) is None


def _memo(name: str, value: object, holder: str | None, bases: tuple[type, ...]) -> bool:
    """Whether a name a class gained is its library's memo: a private name (one leading
    underscore, not a dunder), shadowing no base class's callable but a memo of the same kind,
    holding a value of the class's own top-level package or a function generated at run
    time. A dunder (an operator) or a method shadowed is a patch, whoever's value it holds."""
    if not name.startswith("_") or name.startswith("__"):
        return False
    missing = object()
    for base in bases:
        inherited = vars(base).get(name, missing)
        if inherited is not missing:
            if callable(inherited) and not _generated(inherited):
                return False
            break
    owner = _owner(value)
    if owner is None:
        return _generated(value)
    return holder is not None and owner.split(".", 1)[0] == holder.split(".", 1)[0]


def _loaded_again(before: dict[str, Any], module: types.ModuleType) -> bool:
    """Whether a load gave `module` another spec since `before` (its namespace then)."""
    old, new = before.get("__spec__"), vars(module).get("__spec__")
    return old is not None and new is not None and old is not new


def _unreachable(name: str) -> bool:
    """Whether no import of `name` finds a module: none of sys.meta_path's finders (built-in,
    frozen, sys.path, an editable install's) has a spec for it, so only a load by path made
    it. Asked of the finders, not importlib.util.find_spec, which answers from sys.modules."""
    if "." in name:
        return False  # a submodule is found through its package's path; not asked here
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        try:
            if find is None or find(name, None) is not None:
                return False
        except Exception:  # noqa: BLE001 - a finder that fails may still find it: keep it
            return False
    return True


def differences(before: Fingerprint, now: dict[str, object], imported: Callable[[str], bool],
                gone: Callable[[str], bool], own_back: bool = False) -> list[str]:
    """What changed since `before`, by name, with `now` the switches read now.

    `imported` names a library module first imported since `before` (its import may set what
    it owns); `gone` a module the session's end removed on purpose (the tests' own, imported
    again by the next session). `own_back`: a module's or class's own value set back is no
    difference (`before` was taken while the session's plugins had patched them: a patch
    undone at the session's end).
    """
    found: list[str] = []
    rules = _Rules(imported, gone, own_back)
    for name, (module, kind, namespace) in before.modules.items():
        if gone(name):
            continue
        current = sys.modules.get(name)
        if current is not module and current is not None and _unreachable(name):
            continue  # a module loaded by path under a name it shares (a Triton launcher)
        if current is not module:
            found.append(f"sys.modules[{name!r}] "
                         + ("removed" if current is None else "replaced"))
            continue
        if type(module) is not kind:
            found.append(f"{name}.__class__")
        changes = list(_namespace_changes(name, namespace, vars(module), rules, None, name))
        if changes and _loaded_again(namespace, module) and _unreachable(name):
            # Loaded by path again under a shared name, as its replacement above: loading
            # another launcher by path updated the one module that holds that name (seen on
            # an H100: its launch, __spec__ and __loader__), and no import reaches it.
            continue
        found += changes
    for cls, label, own in before.classes.values():
        holder = vars(cls).get("__module__")
        found += _namespace_changes(label, own, vars(cls), rules, cls.__mro__[1:],
                                    holder if isinstance(holder, str) else None)
    found += [label for fn, label, code in before.codes.values() if fn.__code__ is not code]
    defined = _added(before.switches.get(LIBRARY_DEFS), now.get(LIBRARY_DEFS))
    for name, value in before.switches.items():
        new = now.get(name)
        if name in (LIBRARY_DEFS, LIBRARY_IMPLS) and isinstance(value, frozenset) \
                and isinstance(new, frozenset) and value <= new:
            new = value | {m for m in new - value if name == LIBRARY_IMPLS
                           and _impl_op(m) not in defined}
        if new != value:
            found.append(_switched(name, value, new))
    return sorted(set(found))


def _added(old: object, new: object) -> frozenset[str]:
    both = isinstance(old, frozenset) and isinstance(new, frozenset)
    return frozenset(new - old) if both else frozenset()  # type: ignore[operator]


def _impl_op(key: str) -> str:
    """The operator of a torch.library._impls key, `ns/name/DispatchKey`, as _defs spells it."""
    namespace, _, rest = key.partition("/")
    return f"{namespace}::{rest.rpartition('/')[0]}"


def _switched(name: str, old: object, new: object) -> str:
    """A switch's change: its two values, or a set's members added (+) and removed (-)."""
    if isinstance(old, frozenset) and isinstance(new, frozenset):
        members = [f"+{m}" for m in sorted(new - old)] + [f"-{m}" for m in sorted(old - new)]
        shown = " ".join(members[:3]) + (f" ({len(members)} in all)" if len(members) > 3 else "")
        return f"{name}: {shown}"
    return f"{name}: {old!r} -> {new!r}"
