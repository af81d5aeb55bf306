"""scripts/compile_scaling.py: its sweep, its verdict and its refusals (the timing itself needs
Triton and a device)."""

from __future__ import annotations

import sys

import pytest

from tests import scripts


@pytest.fixture(scope="module")
def cs():
    return scripts.load("compile_scaling")


def test_the_sweep_is_48_distinct_configs_whose_tiles_divide_the_shape(cs):
    configs = cs.sweep()
    assert len(configs) == 48
    assert len({tuple(sorted(c.items())) for c in configs}) == 48
    m, n, k = cs.SHAPE
    assert all(m % c["BM"] == 0 and n % c["BN"] == 0 and k % c["BK"] == 0 for c in configs)


def test_threads_far_slower_than_processes_read_gil_bound(cs):
    line = cs.verdict({"serial": 21.4, "threads": 4.4, "processes": 2.2})
    assert line.startswith("GIL-bound: processes compile 2.00x faster than threads")
    assert "threads 4.9x" in line and "processes 9.7x" in line


def test_threads_close_to_processes_suffice(cs):
    line = cs.verdict({"serial": 21.4, "threads": 4.4, "processes": 4.0})
    assert line.startswith("threads suffice: processes are 1.10x as fast")


def test_without_both_pools_only_speedups_are_given(cs):
    assert cs.verdict({"serial": 20.0, "threads": 5.0}) == "speedup over serial: threads 4.0x"
    assert cs.verdict({"threads": 5.0}) == "speedup over serial: -"


@pytest.mark.parametrize("argv, message", [
    (["--workers", "0"], "--workers 0: give 1 or more"),
    (["--modes", "serial,gpu"], "--modes 'serial,gpu': choose from serial, threads, processes"),
])
def test_bad_arguments_name_the_value_and_exit_2(cs, capsys, argv, message):
    with pytest.raises(SystemExit) as info:
        cs.main(argv)
    assert info.value.code == 2 and message in capsys.readouterr().err


def test_without_triton_it_says_so_instead_of_failing_per_mode(cs, capsys, monkeypatch):
    monkeypatch.setattr(cs, "triton", None)
    with pytest.raises(SystemExit) as info:
        cs.main(["--modes", "serial"])
    assert info.value.code == 2 and "Triton cannot be imported" in capsys.readouterr().err


def test_a_target_is_backend_colon_arch(cs, monkeypatch):
    import collections
    import types

    target = collections.namedtuple("GPUTarget", "backend arch warp_size")
    for name in ("triton", "triton.backends"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    compiler = types.ModuleType("triton.backends.compiler")
    compiler.GPUTarget = target
    monkeypatch.setitem(sys.modules, "triton.backends.compiler", compiler)
    assert cs.parse_target("cuda:90") == target("cuda", 90, 32)
    assert cs.parse_target("hip:gfx942") == target("hip", "gfx942", 64)
    with pytest.raises(ValueError, match="--target 'cuda': expected backend:arch"):
        cs.parse_target("cuda")


def test_kendall_tau_reads_alike_reversed_and_mixed_rankings(cs):
    assert cs.kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert cs.kendall_tau([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0
    assert cs.kendall_tau([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)
    assert cs.kendall_tau([5], [1]) == 0.0


def test_cost_order_starts_the_biggest_tiles_on_fewest_warps_first(cs):
    configs = cs.ordered(cs.sweep(), "cost")
    assert sorted(map(str, configs)) == sorted(map(str, cs.sweep()))  # same configs
    first, last = configs[0], configs[-1]
    assert first["BM"] * first["BN"] == 256 * 128 and first["num_warps"] == 4
    assert (last["BM"], last["BN"], last["BK"], last["num_warps"]) == (64, 64, 32, 8)
    assert cs.ordered(cs.sweep(), "given") == cs.sweep()


def test_ranking_reports_tau_and_the_spread_of_serial_compiles(cs):
    configs = cs.sweep()
    seconds = [cs.cost(c) / 1e5 for c in configs]  # times that rank exactly as the cost does
    line = cs.ranking(configs, seconds)
    assert line.startswith("compile_cost ranks the 48 serial compiles with Kendall tau ")
    assert f"slowest {max(seconds):.2f} s, fastest {min(seconds):.2f} s" in line
    tau = float(line.split("tau ")[1].split()[0])
    assert tau > 0.9  # ties in cost count as neither concordant nor discordant
    reversed_line = cs.ranking(configs, [-s for s in seconds])
    assert float(reversed_line.split("tau ")[1].split()[0]) < -0.9


def test_ctrl_c_ends_with_one_line_and_exit_130(cs, capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cs, "triton", object())
    monkeypatch.setattr(cs, "measure", interrupted)
    assert cs.main(["--modes", "serial"]) == 130
    assert capsys.readouterr().err == "interrupted: nothing measured past the last line\n"
