"""What still holds device memory after a pytest session, in words a user can look up.

A worker that finds memory allocated after a session retires (harness.plugins.worker); its
reason names the largest tensors Python still reaches and, link by link, what holds each, up
to a name: a module, a class, a function, or a generator or call still running. Memory that no
object of Python holds is a library's own (a BLAS workspace, an allocator's arena).
"""

from __future__ import annotations

import contextlib
import gc
import types
import warnings
from typing import Any

# Device memory still allocated after a session that retires the worker: the larger of these.
# A library's cache of its last call's tensors (128-224 MiB after FlagGems' outer and addmm_out
# on an H200) costs a later session that much of the device and no timing; kept sessions add up.
LEAK_BYTES, LEAK_SHARE = 64 << 20, 0.01


def every_object() -> list[Any]:
    """`gc.get_objects()` with the objects `gc.freeze` moved out of the collector's sight: a
    worker freezes what outlives its session (harness.plugins.worker), and `get_objects` lists
    no frozen object. Frozen again before it returns, the session's objects with them (the
    worker collects everything now and then: worker.COLLECT_ALL_EVERY)."""
    if not gc.get_freeze_count():
        return gc.get_objects()
    gc.unfreeze()
    try:
        return gc.get_objects()
    finally:
        gc.freeze()


def allocated(torch: Any, device: str | None) -> int | None:
    """The bytes torch's module of `device` has allocated (the allocator's own count, no
    synchronize); None where torch has not used the device."""
    module = getattr(torch, device, None) if torch is not None and device else None
    initialized = getattr(module, "is_initialized", None)
    count = getattr(module, "memory_allocated", None)
    try:
        if initialized is None or count is None or not initialized():
            return None
        return int(count())
    except Exception:  # noqa: BLE001 - the device check after the session says why
        return None


def retire_reason(torch: Any, module: Any, device_type: str, allocated: int) -> str | None:
    """Why `allocated` bytes still held on the device after a session retire its worker, or
    None within the allowance (`module`: torch's module of the device, as the backend names it)."""
    if allocated <= max(LEAK_BYTES, int(LEAK_SHARE * total_memory(module))):
        return None
    said = f"{allocated >> 20} MiB of device memory still allocated after the session"
    try:
        return f"{said} ({held_by(torch, device_type)})"
    except Exception:  # noqa: BLE001 - naming what holds it must never cost the reply
        return said


def total_memory(module: Any) -> int:
    """The device's memory in bytes (torch's mem_get_info), 0 where it cannot be read."""
    try:
        return int(module.mem_get_info()[1])
    except Exception:  # noqa: BLE001 - a device module without it: the fixed limit alone
        return 0


def held_by(torch: Any, device_type: str, shown: int = 3) -> str:
    """The largest tensors on `device_type` that Python still reaches, each with the chain of
    what holds it (up to a module's, class's or function's name), for a retirement's reason;
    what no object of Python holds is a library's own allocation (a BLAS workspace)."""
    found = []
    with warnings.catch_warnings():  # an isinstance can touch a deprecated lazy attribute
        warnings.simplefilter("ignore")
        for obj in every_object():
            with contextlib.suppress(Exception):
                if isinstance(obj, torch.Tensor) and obj.device.type == device_type:
                    found.append(obj)
    if not found:
        return "no tensor that Python holds: a library's own allocation"
    found.sort(key=_nbytes, reverse=True)
    top = found[:shown]
    parts = []
    for tensor in top:
        parts.append(f"{_shape(tensor)} {tensor.dtype} {_nbytes(tensor) >> 20} MiB held by "
                     f"{holders(tensor, ignored=(found, top))}")
    del tensor
    more = f"; {len(found) - shown} more" if len(found) > shown else ""
    return "; ".join(parts) + more


def _nbytes(tensor: Any) -> int:
    """The bytes of a tensor's storage; 0 for a layout without one (sparse, nested)."""
    try:
        return int(tensor.untyped_storage().nbytes())
    except Exception:  # noqa: BLE001 - e.g. "Cannot access storage of SparseTensorImpl"
        return 0


def _shape(tensor: Any) -> str:
    try:
        return str(tuple(tensor.shape))
    except Exception:  # noqa: BLE001 - a nested tensor has no single shape
        return f"({tensor.layout})"


def holders(obj: object, ignored: tuple[object, ...] = (), depth: int = 8) -> str:
    """What holds `obj`, link by link (`list < tuple < module m`): the first referrer at each
    step, up to `depth` steps or the first that has a name (a module, class, function, or
    the frame of a call or generator still running). `ignored`: the caller's own holders."""
    own = {held_by.__code__, holders.__code__}
    chain, seen = [], {id(x) for x in ignored}
    looked: list[list[object]] = []  # kept to the end, so that no id in `seen` is reused
    for _ in range(depth):
        seen.add(id(obj))
        refs = [r for r in gc.get_referrers(obj) if id(r) not in seen
                and not (isinstance(r, types.FrameType) and r.f_code in own)]
        if not refs:
            break
        obj = refs[0]
        looked.append(refs)
        seen.add(id(refs))  # this list holds `obj` too: never a link of its chain
        name = _name_of(obj)
        chain.append(name or type(obj).__name__)
        if name:
            break
    del refs, looked
    return " < ".join(chain) or "nothing found"


def _name_of(obj: object) -> str | None:
    if isinstance(obj, (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)):
        frame = getattr(obj, "gi_frame", None) or getattr(obj, "cr_frame", None) \
            or getattr(obj, "ag_frame", None)
        where = f" ({frame.f_code.co_filename}:{frame.f_lineno})" if frame is not None else ""
        return f"{type(obj).__name__} {obj.__qualname__}{where}"
    if isinstance(obj, types.FrameType):
        code = obj.f_code
        return (f"the frame of {getattr(code, 'co_qualname', code.co_name)} "
                f"({obj.f_code.co_filename}:{obj.f_lineno})")
    if isinstance(obj, dict) and isinstance(obj.get("__name__"), str):
        return f"module {obj['__name__']}"
    if isinstance(obj, (types.FunctionType, type, types.ModuleType)):
        return f"{type(obj).__name__} {getattr(obj, '__qualname__', obj.__name__)}"
    return None
