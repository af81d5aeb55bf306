"""sum: torch.sum against a blocked reduction through BLAS (gemv with ones), in float32."""

import pytest
import torch

from . import base, consts, cpu_ops


@pytest.mark.sum
def test_sum():
    bench = base.UnaryReductionBenchmark(
        op_name="sum",
        torch_op=torch.sum,
        gems_op=cpu_ops.sum_via_gemv,
        dtypes=consts.CPU_FLOAT_DTYPES,
    )
    bench.run()
