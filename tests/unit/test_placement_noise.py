"""scripts/placement_noise.py: inputs moved elsewhere keep their layout; the spreads it prints."""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import placement_noise  # noqa: E402


def test_moved_inputs_keep_values_sizes_and_strides_at_other_addresses():
    torch = pytest.importorskip("torch")
    wide = torch.arange(48.0).reshape(6, 8)
    args = (wide.t(), wide[:, ::2])  # a transposed view and a strided one
    copies, spacer = placement_noise.moved(args, random.Random(1))
    for a, c in zip(args, copies, strict=True):
        assert torch.equal(a, c) and c.stride() == a.stride() and c.size() == a.size()
        assert c.data_ptr() != a.data_ptr()
    large, *small = spacer
    assert large.dtype == torch.uint8 and large.numel() % 4096 == 0
    # small requests get a spacer of their own pool: 1 MiB each, at most 63 of them
    assert len(small) < 64 and all(t.numel() == placement_noise.SMALL_REQUEST for t in small)
    sizes = {len(placement_noise.moved(args, random.Random(seed))[1]) for seed in range(20)}
    assert len(sizes) > 1  # the count of small spacers varies from one placement to the next


def _runs(between: float, within: float, drift: float = 0.0
          ) -> list[dict[str, dict[str, list[float]]]]:
    """Four processes whose rows sit `between` apart in log time (0, +-between, +2 between)
    and whose timings in a process alternate by +-`within`; `later` lies `drift` above or below
    `same` (in turn by process)."""
    out = []
    for index, offset in enumerate((0.0, between, -between, 2 * between)):
        times = [math.exp(offset + (within if i % 2 else -within)) * 1e-3 for i in range(5)]
        step = drift if index % 2 else -drift
        out.append({row: {"same": times, "moved": [math.exp(offset) * 1e-3] * 5,
                          "apart": times[1:3], "reloaded": times[:1],
                          "later": [t * math.exp(step) for t in times]}
                    for row in placement_noise.ROWS})
    return out


def test_the_report_tells_a_process_offset_from_a_spread_within_a_process():
    lines = placement_noise.report(_runs(between=0.02, within=0.005))
    assert lines[0].split()[:3] == ["row", "median", "us"]
    cells = lines[1].split()
    assert cells[0:2] == ["rot90", "64x64"]
    (within_same, within_moved, within_apart, within_reloaded, within_later, between_same,
     between_moved, between_apart, _, between_later, drift) = (
        float(c.rstrip("%")) for c in cells[3:14])
    # alternating +-0.5%: sd 0.548%; processes at 0, +2, -2, +4%: sd 2.58% (each median of `same`
    # lies 0.5% below its process's offset, so the medians spread as the offsets do)
    assert within_same == pytest.approx(0.55, abs=0.01) == within_later and within_moved == 0.0
    assert between_same == pytest.approx(2.58, abs=0.01) == between_moved == between_later
    assert math.isnan(within_reloaded)  # one timing a process: no spread to tell
    # two timings a process, 1% apart: sd 0.707%; their medians sit on the offsets
    assert within_apart == pytest.approx(0.71, abs=0.01)
    assert between_apart == pytest.approx(2.58, abs=0.01)
    assert drift == 0.0  # the offset stayed with each process
    assert len(lines) == 1 + len(placement_noise.ROWS)


def test_the_drift_to_later_reads_an_offset_that_comes_with_time():
    cells = placement_noise.report(_runs(between=0.02, within=0.0, drift=0.03))[1].split()
    assert cells[-1] == "3.00%"  # +-3% in turn: the root mean square is 3%, whatever the sign
    assert float(cells[8].rstrip("%")) == pytest.approx(2.58, abs=0.01)  # `same` between


def test_a_run_made_before_reloads_and_kept_graphs_existed_still_reports():
    runs = [{row: {k: v for k, v in kinds.items() if k in ("same", "moved")}
             for row, kinds in run.items()} for run in _runs(between=0.01, within=0.0)]
    cells = placement_noise.report(runs)[1].split()
    assert cells[5:8] == ["nan%"] * 3 and cells[10:14] == ["nan%"] * 4
    assert float(cells[8].rstrip("%")) > 1.0


class _Kernel:
    """Stands for Triton's JITFunction: compiled kernels held per device."""

    def __init__(self, held: dict) -> None:
        self.device_caches = held


def test_reloading_drops_every_held_kernel_and_counts_the_functions_that_held_any():
    held, empty = _Kernel({0: "compiled"}), _Kernel({})
    held.cache = {"key": "older Triton"}  # both names held: one function all the same
    other = type("Other", (), {"device_caches": {0: "kept"}})()
    assert placement_noise.reload_kernels(_Kernel) == 1
    assert held.device_caches == {} == held.cache and other.device_caches == {0: "kept"}
    assert placement_noise.reload_kernels(_Kernel) == 0
    del empty


def test_a_kept_graph_class_keeps_every_instance_and_stays_that_class():
    class Graph:  # built in __new__, as torch.cuda.CUDAGraph is
        def __new__(cls, keep_graph: bool = False):
            graph = super().__new__(cls)
            graph.keep_graph = keep_graph
            return graph

    kept: list = []
    cls = placement_noise.keeping(Graph, kept)
    first, second = cls(), cls(keep_graph=True)
    assert kept == [first, second] and isinstance(first, Graph) and second.keep_graph


class _Tuner:
    def __init__(self, configs: list) -> None:
        self.configs = configs


def test_pinning_leaves_each_tuner_its_first_config_and_counts_those_that_had_more():
    many, one, none = _Tuner(["BLOCK 256", "BLOCK 512"]), _Tuner(["BLOCK 64"]), _Tuner([])
    assert placement_noise.pin_configs(_Tuner) == 1
    assert many.configs == ["BLOCK 256"] and one.configs == ["BLOCK 64"] and none.configs == []
    assert placement_noise.pin_configs(_Tuner) == 0


class _Launcher:
    """Stands for a launcher in front of Triton (FlagGems' LibEntry): a dict per device of
    the kernels it launches without asking Triton again."""

    def __init__(self) -> None:
        self.kernel_cache = ({"key": "compiled"}, {}, {"other": "compiled"})


def test_reloading_also_drops_a_launchers_own_kernels_per_device():
    # Regression: only Triton's JITFunction caches were dropped, and FlagGems' LibEntry went
    # on launching the kernels it held, so "reloaded" timed the same loaded code again.
    launcher, kernel = _Launcher(), _Kernel({0: "compiled"})
    assert placement_noise.reload_kernels(_Kernel, _Launcher) == 2
    assert launcher.kernel_cache == ({}, {}, {}) and kernel.device_caches == {}


@pytest.mark.parametrize("flag,value", [("--processes", "0"), ("--repeats", "1"),
                                        ("--placements", "x; rm")])
def test_too_few_timings_to_spread_are_refused_in_one_line_naming_the_value(flag, value, capsys):
    with pytest.raises(SystemExit) as ended:
        placement_noise.main([flag, value])
    assert ended.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"argument {flag}: {value!r}: expected a whole number of at least 2" in err


@pytest.mark.parametrize("where", ["folder", "missing/out.json"])
def test_an_out_that_cannot_be_written_is_refused_before_any_process_runs(where, tmp_path,
                                                                            capsys):
    (tmp_path / "folder").mkdir()
    with pytest.raises(SystemExit) as ended:
        placement_noise.main(["--out", str(tmp_path / where), "--processes", "2"])
    assert ended.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith(f"--out {str(tmp_path / where)!r}: expected a file in an existing folder")
