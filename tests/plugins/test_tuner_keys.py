"""tuner_keys: a tuner's key as the tuner looks it up, whose tuner it is, and its JSON spelling."""

from __future__ import annotations

import json
from types import SimpleNamespace

import torch

from harness.plugins.tuner_keys import json_key, tuner_key, tuner_source


def scale(x, y, n, BLOCK):  # a kernel's Python function, as Triton keeps it in base_fn
    pass


def triton_tuner(nargs=None, keys=("n",)):
    return SimpleNamespace(base_fn=scale, arg_names=["x", "y", "n", "BLOCK"], keys=list(keys),
                           nargs=nargs)


class LibTuner:
    """FlagGems' libtuner: a table name and a strategy that normalises the key."""

    config_table_name = "scale_table"
    arg_names = ["x", "n"]
    nargs = None

    def get_key(self, args):
        return [1 << (args["n"] - 1).bit_length(), str(args["x"].dtype)]  # n to a power of 2


def test_a_triton_key_is_its_key_arguments_then_its_tensors_dtypes_in_argument_order():
    x, y = torch.ones(2, dtype=torch.float16), torch.ones(2, dtype=torch.bfloat16)
    kernel, key = tuner_key(triton_tuner(), {"x": x, "y": y, "n": 100, "BLOCK": 64})
    assert kernel == f"{__name__}:scale"
    assert key == (100, "torch.float16", "torch.bfloat16")


def test_the_launchs_positional_arguments_count_and_keyword_ones_win_over_them():
    x = torch.ones(2)
    tuner = triton_tuner(nargs={"x": x, "n": 8}, keys=("n", "BLOCK"))
    assert tuner_key(tuner, {"n": 16, "BLOCK": 32, "other": 1})[1] == (16, 32, "torch.float32")
    assert tuner_key(triton_tuner(keys=("n",)), {"unknown": torch.ones(1)})[1] == ()


def test_a_libtuner_key_is_its_tables_name_and_its_own_normalised_key():
    x = torch.ones(2, dtype=torch.float16)
    assert tuner_key(LibTuner(), {"x": x, "n": 100, "ignored": 3}) == (
        "scale_table", (128, "torch.float16"))


def test_whose_tuner_it_is_follows_the_config_table():
    assert (tuner_source(LibTuner()), tuner_source(triton_tuner())) == ("flaggems", "triton")


def test_a_json_key_keeps_scalars_and_spells_anything_else_as_str():
    key = (128, 0.5, "fp16", True, None, torch.float16, (1, 2))
    spelled = json_key(key)
    assert spelled == [128, 0.5, "fp16", True, None, "torch.float16", "(1, 2)"]
    assert json.loads(json.dumps(spelled)) == spelled
