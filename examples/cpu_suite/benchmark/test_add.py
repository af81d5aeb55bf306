"""add: torch.add against an add into a freshly allocated output (out=)."""

import pytest
import torch

from . import base, consts, cpu_ops


@pytest.mark.add
def test_add():
    bench = base.BinaryPointwiseBenchmark(
        op_name="add",
        torch_op=torch.add,
        gems_op=cpu_ops.add_into_empty,
        dtypes=consts.CPU_FLOAT_DTYPES,
    )
    bench.run()
