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
    # requirements/cpu.txt's pin (a test keeps them equal)
    install_hint="pip install torch==2.13.0 (the pin of requirements/cpu.txt), or `make venv` "
                 "in a checkout",
    is_accelerator=False,
    # torch's CPU kernels size their thread pool from it when they start (the demo's axis);
    # it reaches torch's reference as well, so it is no compiler switch.
    axis_variables=("OMP_NUM_THREADS",),
    # One unit a task, as on GPUs; with no accelerator the task asks for no GRES.
    slurm_unit="gpu",
)
