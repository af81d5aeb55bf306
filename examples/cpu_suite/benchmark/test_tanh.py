"""tanh: torch.tanh against 1 - 2 / (exp(2x) + 1), computed in float32 and in place."""

import pytest
import torch

from . import base, consts, cpu_ops


@pytest.mark.tanh
def test_tanh():
    bench = base.UnaryPointwiseBenchmark(
        op_name="tanh",
        torch_op=torch.tanh,
        gems_op=cpu_ops.tanh_via_exp,
        dtypes=consts.CPU_FLOAT_DTYPES,
    )
    bench.run()
