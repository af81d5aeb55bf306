"""What the harness's session plugins keep from one session of a worker to the next.

A worker forgets its sessions' plugin modules after each one (harness.plugins.owned), so what a
plugin keeps for the next session lives here, in a module the worker keeps: each entry a pure
function of its key (and of what the entry holds beside it), so that a session given one
reads what a fresh process would have made.
Outside a worker it lives as long as its process, as any module does.
"""

from __future__ import annotations

import threading
from typing import Any

# Entries at most, each store: the least recently used goes first. A campaign's sessions read
# one shapes file or a few; a run over many files keeps the last ones.
LIMIT = 16


class Store:
    """Values by key, the least recently used dropped past LIMIT; safe to use from threads."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self.values: dict[Any, Any] = {}
        self._lock = threading.Lock()

    def get(self, key: Any, default: Any = None) -> Any:
        with self._lock:
            value = self.values.pop(key, default)
            if value is not default:
                self.values[key] = value  # the newest again
            return value

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self.values.pop(key, None)
            self.values[key] = value
            while len(self.values) > self.limit:
                del self.values[next(iter(self.values))]


# YAML documents parsed by yaml.safe_load, by their text and the loader's state
# (harness.plugins.yaml_cache).
PARSED = Store()
