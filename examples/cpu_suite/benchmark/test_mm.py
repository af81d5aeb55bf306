"""mm: torch.Tensor.mm against matmul with B copied to column-major first."""

import pytest
import torch

from . import base, cpu_ops


def mm_input_fn(b, m, n, k, cur_dtype, device, b_column_major):
    inp1 = torch.randn([m, k], dtype=cur_dtype, device=device)
    if b_column_major:
        yield inp1, torch.randn([n, k], dtype=cur_dtype, device=device).t()
    else:
        yield inp1, torch.randn([k, n], dtype=cur_dtype, device=device)


@pytest.mark.mm
def test_mm():
    # float32 only: bfloat16 matmul on a CPU without AMX/AVX512-BF16 runs ~100x slower.
    bench = base.BlasBenchmark(
        op_name="mm",
        input_fn=mm_input_fn,
        torch_op=torch.Tensor.mm,
        gems_op=cpu_ops.mm_column_major,
        dtypes=[torch.float32],
    )
    bench.run()
