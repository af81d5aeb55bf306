"""Plugin tests run pytest in this process (pytester.runpytest) where no crash is involved."""

from __future__ import annotations

# Imported before any run: an in-process run drops the modules it imported first, and torch,
# which the suites under test import, cannot be imported a second time into one process.
import torch  # noqa: F401
