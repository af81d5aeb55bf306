"""A tuner's key as it looks the key up, and its JSON spelling, for the tuner plugins."""

from __future__ import annotations

from typing import Any


def tuner_key(tuner: Any, kwargs: dict[str, Any]) -> tuple[str, tuple[Any, ...]]:
    """(kernel, key) as the tuner looks it up: libtuner's table and strategy-normalised key,
    or a Triton autotuner's function name and key with the tensor dtypes appended."""
    nargs = dict(tuner.nargs or {})
    args = {k: v for k, v in {**nargs, **kwargs}.items() if k in tuner.arg_names}
    if hasattr(tuner, "config_table_name") and hasattr(tuner, "get_key"):
        return tuner.config_table_name, tuple(tuner.get_key(args))
    key = [args[k] for k in tuner.keys if k in args]
    key += [str(v.dtype) for v in args.values() if hasattr(v, "dtype")]
    fn = tuner.base_fn
    return f"{fn.__module__}:{fn.__qualname__}", tuple(key)


def tuner_source(tuner: Any) -> str:
    """Whose tuner it is: "flaggems" (libtuner, with its database) or "triton"."""
    return "flaggems" if hasattr(tuner, "config_table_name") else "triton"


def json_key(key: tuple[Any, ...]) -> list[Any]:
    """A key as the records spell it: JSON scalars kept, anything else (a dtype) as str."""
    return [k if isinstance(k, (int, float, str, bool)) or k is None else str(k) for k in key]
