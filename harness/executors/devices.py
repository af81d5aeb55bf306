"""Which devices a run uses: DEVICES, else the caller's visibility variable, else all found."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from harness.backends import Backend, Device
from harness.settings import variables
from harness.settings.spec import Settings


def select_devices(settings: Settings, environ: Mapping[str, str] | None = None,
                   enumerate_devices: Callable[[], list[Device]] | None = None
                   ) -> list[str] | None:
    """The caller's selection of device ids (indices or UUIDs), in order, each once.

    DEVICES if given, else the ids in the backend's visibility variable (of `environ`,
    default: this process's), else every device the backend enumerates; the backend's tool is
    asked only in that last case. None where the backend has no accelerator: its children
    run unpinned. [] where the tool finds no device.
    """
    return select_ids(settings.backend, settings.devices, environ, enumerate_devices)


def select_ids(backend: Backend, chosen: Sequence[str], environ: Mapping[str, str] | None = None,
               enumerate_devices: Callable[[], list[Device]] | None = None) -> list[str] | None:
    """select_devices for a backend and a DEVICES value (`chosen`, empty: not given)."""
    if not backend.is_accelerator:
        return None
    if chosen:
        return list(dict.fromkeys(chosen))
    environ = variables.environ() if environ is None else environ
    visible = environ.get(backend.visibility_vars[0], "") if backend.visibility_vars else ""
    visible_ids = [item.strip() for item in visible.split(",") if item.strip()]
    if visible_ids:
        return list(dict.fromkeys(visible_ids))
    return [str(d.index) for d in (enumerate_devices or backend.enumerate_devices)()]


def visible_devices(found: list[Device], settings: Settings,
                    environ: Mapping[str, str] | None = None) -> list[Device]:
    """The devices of `found` that select_devices names, by index or UUID, in found's order
    (all of them where the backend has no accelerator)."""
    ids = select_devices(settings, environ, lambda: found)
    if ids is None:
        return found
    wanted = set(ids)
    return [d for d in found if str(d.index) in wanted or (d.uuid or "") in wanted]
