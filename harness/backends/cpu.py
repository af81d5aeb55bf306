"""Host CPU: no accelerator, no device tool, no graph capture; the laptop and CI backend."""

from __future__ import annotations

from harness.backends import Backend

BACKEND = Backend(
    name="cpu",
    aliases=(),
    vendor=None,  # FlagGems does not run here; the embedded torch suite does
    torch_device="cpu",
    visibility_vars=(),
    graph_class=None,
    python_modules=("torch",),
    is_accelerator=False,
    # One unit a task, as on GPUs; with no accelerator the task asks for no GRES.
    slurm_unit="gpu",
)
