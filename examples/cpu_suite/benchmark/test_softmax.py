"""softmax: torch's softmax against max-shifted exp over sum, computed in float32."""

import pytest
import torch

from . import base, consts, cpu_ops


@pytest.mark.softmax
def test_softmax():
    bench = base.UnaryReductionBenchmark(
        op_name="softmax",
        torch_op=torch.nn.functional.softmax,
        gems_op=cpu_ops.softmax_via_exp,
        dtypes=consts.CPU_FLOAT_DTYPES,
    )
    bench.run()
