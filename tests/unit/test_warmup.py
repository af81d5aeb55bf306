"""Parallel warmup: the shard plan, its refusals, the sweep with fake children, and Ctrl-C."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest

from harness.backends import Device
from harness.contract.records import read_records
from harness.providers.flaggems import Node
from harness.run import warmup
from harness.run.preflight import Plan
from harness.settings import spec
from harness.settings.spec import EMBEDDED_SUITE
from tests.procs import alive, interrupt_driver, wait_for

TANH = Node("benchmark/test_tanh.py", "test_tanh", ("tanh",))
SUITE_TANH_SHAPES = ([1048576], [64, 64], [1024, 1024], [32, 256, 256])


def settings(tmp_path: Path, **flags) -> spec.Settings:
    base = {"backend": "cpu", "out": str(tmp_path / "runs"), "parallel_warmup_gpus": "2"}
    return spec.resolve({**base, **flags}, {}, which=lambda _: None)


def cuda(tmp_path: Path, **flags) -> spec.Settings:
    return settings(tmp_path, backend="cuda", runner="host",
                    flaggems_dir=str(EMBEDDED_SUITE), **flags)


def no_enumeration() -> list[Device]:
    raise AssertionError("the caller's selection was given: nothing needs enumerating")


# --------------------------------------------------------------------------- the plan


def test_deal_gives_every_shard_one_nth_of_the_dtype_config_work():
    # gcd(2, 3) = 1: one group of three dtypes, its configs split in two
    assert warmup.deal(["f16", "f32", "bf16"], 2) == [
        (("f16", "f32", "bf16"), (0, 2)), (("f16", "f32", "bf16"), (1, 2))]
    # gcd(3, 3) = 3: a dtype per shard, each tuned whole as a serial sweep would
    assert warmup.deal(["f16", "f32", "bf16"], 3) == [
        (("f16",), (0, 1)), (("f32",), (0, 1)), (("bf16",), (0, 1))]
    # gcd(4, 2) = 2: each dtype on two shards, splitting its configs
    assert warmup.deal(["f32", "bf16"], 4) == [
        (("f32",), (0, 2)), (("f32",), (1, 2)), (("bf16",), (0, 2)), (("bf16",), (1, 2))]
    assert warmup.deal(["f16", "f32", "bf16", "f64"], 2) == [
        (("f16", "bf16"), (0, 1)), (("f32", "f64"), (0, 1))]
    assert warmup.deal([], 3) == [((), (0, 3)), ((), (1, 3)), ((), (2, 3))]  # dtypes unknown


def test_cpu_shards_run_unpinned_one_dtype_each_with_every_config(tmp_path):
    plan = warmup.plan_warmup(settings(tmp_path), TANH)
    assert plan.refused is None and plan.resolution.key == "UnaryPointwiseBenchmark"
    assert plan.resolution.dtypes == ("float32", "bfloat16")  # the suite's test_tanh.py
    assert plan.resolution.shapes == SUITE_TANH_SHAPES
    assert [(s.index, s.device, s.dtypes, s.share) for s in plan.shards] == [
        (0, None, ("float32",), (0, 1)), (1, None, ("bfloat16",), (0, 1))]
    assert plan.measure_device is None


def test_dtypes_flaggems_cannot_select_are_not_dealt(tmp_path):
    s = settings(tmp_path, dtypes="float64,float32")
    plan = warmup.plan_warmup(s, TANH)
    assert [(sh.dtypes, sh.share) for sh in plan.shards] == [((), (0, 2)), ((), (1, 2))]
    argv = warmup.shard_argv(s, TANH, plan.shards[1], tmp_path)
    assert argv[argv.index("--dtypes") + 1] == "float64,float32"  # the caller's own choice
    assert argv[argv.index("--warmup-share") + 1] == "1/2"


def test_one_dtype_given_by_the_caller_splits_its_configs(tmp_path):
    plan = warmup.plan_warmup(settings(tmp_path, dtypes="bfloat16"), TANH)
    assert [(s.dtypes, s.share) for s in plan.shards] == [
        (("bfloat16",), (0, 2)), (("bfloat16",), (1, 2))]
    argv = warmup.shard_argv(settings(tmp_path, dtypes="bfloat16"), TANH, plan.shards[0],
                             tmp_path)
    assert argv[argv.index("--dtypes") + 1] == "bfloat16"


def test_devices_given_pin_shard_i_to_the_ith_device(tmp_path):
    plan = warmup.plan_warmup(cuda(tmp_path, devices="6,7"), TANH,
                              environ={"CUDA_VISIBLE_DEVICES": "0,1"},
                              enumerate_devices=no_enumeration)
    assert [s.device for s in plan.shards] == ["6", "7"] and plan.measure_device == "6"


def test_a_visibility_selection_of_6_7_gets_shards_on_6_and_7_never_0_and_1(tmp_path):
    s = cuda(tmp_path)
    env = {"CUDA_VISIBLE_DEVICES": "6,7"}
    plan = warmup.plan_warmup(s, TANH, environ=env, enumerate_devices=no_enumeration)
    assert [sh.device for sh in plan.shards] == ["6", "7"]
    for shard in plan.shards:
        argv = warmup.shard_argv(s, TANH, shard, tmp_path)
        assert argv[argv.index("--devices") + 1] == shard.device
        assert argv[argv.index("--dtypes") + 1] == ",".join(shard.dtypes)
        assert warmup.shard_env(s, shard.device, env)["CUDA_VISIBLE_DEVICES"] == shard.device


def test_without_a_selection_the_enumerated_devices_are_used_in_order(tmp_path):
    found = [Device(3, "H200"), Device(5, "H200"), Device(6, "H200")]
    plan = warmup.plan_warmup(cuda(tmp_path), TANH, environ={},
                              enumerate_devices=lambda: found)
    assert [s.device for s in plan.shards] == ["3", "5"]


def test_shard_child_is_a_tune_only_recording_run_of_the_same_node_and_shapes(tmp_path):
    shapes = tmp_path / "s.yaml"
    shapes.write_text("tanh:\n  shapes: [[8, 8], [16, 16]]\n")
    s = settings(tmp_path, level="core", mode="direct", repeat="3", shape_mode="file",
                 shape_file=str(shapes))
    shard = warmup.Shard(0, None, ("float32",), (1, 2))
    argv = warmup.shard_argv(s, TANH, shard, tmp_path / "w")
    flags = dict(zip(argv[4::2], argv[5::2], strict=False))
    assert argv[1:4] == ["-m", "harness.cli", "run"]
    assert flags["--node"] == TANH.nodeid and flags["--shape-mode"] == "file"
    assert flags["--shape-file"] == str(shapes.resolve())
    assert flags["--isolate-tuner-cache"] == "1" and flags["--out"] == str(tmp_path / "w")
    assert (flags["--mode"], flags["--repeat"], flags["--level"]) == ("direct", "3", "core")
    assert flags["--warmup-share"] == "1/2"
    assert "--devices" not in flags and flags["--dtypes"] == "float32"  # cpu: unpinned
    upstream = warmup.shard_argv(settings(tmp_path), TANH, shard, tmp_path / "w")
    assert "--shape-file" not in upstream
    assert upstream[upstream.index("--shape-mode") + 1] == "upstream"


def test_shard_environment_cannot_make_a_shard_shard_again():
    env = warmup.shard_env(spec.resolve({"backend": "cpu"}, {}),
                           None, {"PARALLEL_WARMUP_GPUS": "2", "REPLAY_FROM": "x", "OP": "mm",
                                  "KEEP": "1"})
    assert env["KEEP"] == "1" and not {"PARALLEL_WARMUP_GPUS", "REPLAY_FROM", "OP"} & set(env)


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(("flags", "reason", "needle"), [
    ({"level": "comprehensive"}, "comprehensive", "set_more_shapes()"),
    ({"parallel_warmup_gpus": "1"}, "one_shard", "PARALLEL_WARMUP_GPUS=1"),
    ({"replay_from": "somewhere"}, "replay_from", "REPLAY_FROM pins the winners"),
])
def test_refusals_name_their_reason(tmp_path, flags, reason, needle):
    plan = warmup.plan_warmup(settings(tmp_path, **flags), TANH)
    assert plan.refused[0] == reason and needle in plan.refused[1] and not plan.shards
    assert plan.serial_line().startswith(f"PARALLEL_WARMUP_SERIAL reason={reason} detail=")


def test_unresolved_shapes_refuse_and_list_the_candidates(tmp_path):
    shapes = tmp_path / "s.yaml"
    shapes.write_text("BlasBenchmark:\n  shapes: [[1, 2, 3, 4]]\n")
    plan = warmup.plan_warmup(settings(tmp_path, shape_mode="file", shape_file=str(shapes)), TANH)
    assert plan.refused[0] == "unresolved_shapes"
    assert "tried=tanh,UnaryPointwiseBenchmark,Benchmark" in plan.refused[1]


def test_too_few_devices_in_the_selection_refuse(tmp_path):
    plan = warmup.plan_warmup(cuda(tmp_path, devices="6,7", parallel_warmup_gpus="3"), TANH)
    assert plan.refused == ("too_few_devices", "PARALLEL_WARMUP_GPUS=3 needs 3 devices; the "
                            "selection holds 2 (6,7)")


def test_a_single_shape_and_dtype_still_shares_the_configs(tmp_path):
    shapes = tmp_path / "s.yaml"
    shapes.write_text("tanh:\n  shapes: [[8, 8]]\n")
    plan = warmup.plan_warmup(settings(tmp_path, shape_mode="file", shape_file=str(shapes),
                                       dtypes="float32"), TANH)
    assert plan.refused is None and [s.share for s in plan.shards] == [(0, 2), (1, 2)]


# --------------------------------------------------------------------------- the sweep

# A fake `harness run`: claims a run directory under --out, prints its header line, records
# the winners given as JSON (with their times, when given), exits with the given code.
FAKE_SHARD = r"""
import json, os, sys
out, rc, winners = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
records = os.path.join(out, "tanh", "20261129-120000", "autotune_records")
os.makedirs(records)
print("# run_dir: " + os.path.dirname(records), flush=True)
with open(os.path.join(records, "winners.jsonl"), "w") as fh:
    for kernel, key, config, *_ in winners:
        fh.write(json.dumps({"kind": "winner", "source": "triton", "kernel": kernel,
                             "key": key, "config": config}) + "\n")
with open(os.path.join(records, "winner_times.jsonl"), "w") as fh:
    for kernel, key, _, *ms in winners:
        if ms:
            fh.write(json.dumps({"source": "triton", "kernel": kernel, "key": key,
                                 "ms": ms[0]}) + "\n")
print("claims=" + os.environ.get("ZL_PLUGIN_WARMUP_CLAIMS", "-"))
print("shard says goodbye")
sys.exit(rc)
"""


def fake_shards(rcs: dict[int, int], winners: dict[int, list]):
    def command(shard, shard_out):
        return [sys.executable, "-c", FAKE_SHARD, str(shard_out), str(rcs.get(shard.index, 0)),
                json.dumps(winners.get(shard.index, []))]
    return command


def prepared(tmp_path, command, **flags):
    s = settings(tmp_path, **flags)
    lines: list[str] = []
    result = warmup.prepare(s, Plan(node=TANH, op="tanh"), out=lines.append, command=command,
                            poll_s=0.01)
    return s, result, lines


def test_sweep_merges_the_shards_winners_keeping_the_fastest_and_counts_differing_keys(
        tmp_path):
    winners = {0: [["k", [1], {"BLOCK": 64}, 0.5], ["k", [2], {"BLOCK": 32}, 0.1],
                   ["k", [4], {"BLOCK": 8}]],
               1: [["k", [1], {"BLOCK": 128}, 0.25], ["k", [3], {"BLOCK": 16}, 0.2],
                   ["k", [4], {"BLOCK": 4}]]}
    s, (measured, run_dir), lines = prepared(tmp_path, fake_shards({}, winners))
    warm = run_dir / "warmup"
    assert run_dir.parent == s.out / "tanh"
    assert "PARALLEL_WARMUP_WINNERS_DIFFER count=2" in lines
    merged = read_records(warm)
    # key 1: shard 1's winner was faster, and shard 0's is its run-off candidate; key 4 has
    # no times, so shard 0's is kept, with no run-off
    assert sorted((w.key, w.config["BLOCK"]) for w in merged.winners) == [
        ((1,), 128), ((2,), 32), ((3,), 16), ((4,), 8)]
    assert merged.times[("triton", "k", "[1]")] == 0.25
    assert [(c.key, c.config["BLOCK"]) for c in merged.candidates] == [((1,), 64)]
    assert (measured.replay_from, measured.replay_strict, measured.isolate_tuner_cache,
            measured.record) == (warm, False, True, True)
    assert measured.shape_mode == s.shape_mode and measured.devices == s.devices
    log = (run_dir / "run.log").read_text()
    for needle in ("shape key: UnaryPointwiseBenchmark",
                   "shard-0: device=- dtypes=float32 configs=all",
                   "PARALLEL_WARMUP_WINNERS_DIFFER count=2",
                   "PARALLEL_WARMUP_DONE shards=2 winners=4 run_off_keys=1"):
        assert needle in log
    assert "shard says goodbye" in (warm / "shard-1.log").read_text()


def test_shards_that_split_configs_claim_them_in_one_directory_per_dtype_group(tmp_path):
    _, (_, run_dir), lines = prepared(tmp_path, fake_shards({}, {}), dtypes="bfloat16")
    claims = (run_dir / "warmup" / "claims" / "bfloat16").resolve()
    assert claims.is_dir()
    for i in (0, 1):
        assert f"claims={claims}" in (run_dir / "warmup" / f"shard-{i}.log").read_text()
    assert any(line.startswith("shard-1: device=- dtypes=bfloat16 configs=1/2 (claimed first "
                               "come, first served in ") for line in lines)
    whole, (_, run_dir), _ = prepared(tmp_path / "w", fake_shards({}, {}))
    assert "claims=-" in (run_dir / "warmup" / "shard-0.log").read_text()  # a dtype each
    assert not (run_dir / "warmup" / "claims").exists()


def test_equal_winners_print_no_differ_marker(tmp_path):
    same = [["k", [1], {"BLOCK": 64}]]
    _, (measured, _), lines = prepared(tmp_path, fake_shards({}, {0: same, 1: same}))
    assert not any(line.startswith("PARALLEL_WARMUP_WINNERS_DIFFER") for line in lines)
    assert measured.replay_from is not None


def test_one_failing_shard_discards_the_sweep_and_keeps_the_logs(tmp_path):
    s, (measured, run_dir), lines = prepared(
        tmp_path, fake_shards({1: 3}, {0: [["k", [1], {"B": 1}]]}))
    assert measured == s  # the serial sweep: nothing replayed
    assert any(line.startswith("PARALLEL_WARMUP_SERIAL reason=shard_failed detail=shard-1 "
                               "rc=3") for line in lines)
    warm = run_dir / "warmup"
    assert not (warm / "autotune_records").exists()
    assert "shard says goodbye" in (warm / "shard-0.log").read_text()
    assert "PARALLEL_WARMUP_SERIAL reason=shard_failed" in (run_dir / "run.log").read_text()


def test_a_shard_that_recorded_nothing_discards_the_sweep(tmp_path):
    def command(shard, shard_out):
        return [sys.executable, "-c", "print('no run directory')"]
    s, (measured, _), lines = prepared(tmp_path, command)
    assert measured == s and "claimed no run directory" in lines[-1]


def test_refusal_claims_the_run_directory_and_logs_why(tmp_path):
    def command(*_):
        raise AssertionError("a refused sweep starts no shard")
    s, (measured, run_dir), lines = prepared(tmp_path, command, level="comprehensive")
    assert measured == s and lines[-1].startswith("PARALLEL_WARMUP_SERIAL reason=comprehensive")
    assert lines[-1] in (run_dir / "run.log").read_text()
    assert not (run_dir / "warmup").exists()


def test_unset_parallel_warmup_does_nothing(tmp_path):
    s = spec.resolve({"backend": "cpu", "out": str(tmp_path / "runs")}, {})
    assert warmup.prepare(s, Plan(node=TANH, op="tanh"), out=print) == (s, None)
    assert warmup.describe_dry_run(s, Plan(node=TANH, op="tanh")) == []
    assert not (tmp_path / "runs").exists()


def test_dry_run_shows_the_keys_and_the_plan_and_creates_nothing(tmp_path):
    s = cuda(tmp_path, devices="6,7")
    lines = warmup.describe_dry_run(s, Plan(node=TANH, op="tanh"))
    text = "\n".join(lines)
    assert "shape key: UnaryPointwiseBenchmark" in text
    assert "shapes=4: every shard runs each: [1048576] [64, 64] [1024, 1024] [32, 256, 256]" \
        in text
    assert "shard-0: device=6 dtypes=float32 configs=all" in text
    assert "shard-1: device=7 dtypes=bfloat16 configs=all" in text
    assert "--warmup-share 0/1" in text and "--dtypes bfloat16 --devices 7" in text
    assert "measured run: serial on device 6" in text
    assert not (tmp_path / "runs").exists()


# --------------------------------------------------------------------------- Ctrl-C

_DRIVER = """
import sys
from harness.settings import spec
from harness.run import warmup
from harness.run.preflight import Plan
from harness.providers.flaggems import Node

out, pids = sys.argv[1], sys.argv[2]
settings = spec.resolve({"backend": "cpu", "out": out, "parallel_warmup_gpus": "2"}, {})
# each shard starts a grandchild in its group, then ignores SIGTERM: only SIGKILL ends it
child = ("import os, signal, subprocess, sys, time; "
         "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); "
         "signal.signal(signal.SIGTERM, signal.SIG_IGN); "
         "open(sys.argv[1], 'a').write('%d %d\\\\n' % (os.getpid(), g.pid)); "
         "time.sleep(300)")
try:
    warmup.prepare(settings, Plan(node=Node("benchmark/test_tanh.py", "test_tanh"), op="tanh"),
                   grace_s=1.0, poll_s=0.02,
                   command=lambda shard, o: [sys.executable, "-c", child, pids])
except KeyboardInterrupt:
    print("interrupt propagated", flush=True)
    sys.exit(130)
print("not interrupted", flush=True)
"""






@pytest.mark.slow  # a driver, two shards and their grandchildren
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process states from /proc")
def test_ctrl_c_stops_and_reaps_every_shard_and_grandchild_before_it_propagates(tmp_path):
    rc, output, started = interrupt_driver(_DRIVER, tmp_path, signal.SIGINT,
                                           "two shards, each with a grandchild")
    assert rc == 130, output
    assert "PARALLEL_WARMUP_INTERRUPTED signal=SIGINT" in output
    assert "interrupt propagated" in output and "not interrupted" not in output
    shards, grandchildren = started[0::2], started[1::2]
    assert not [p for p in shards if alive(p)]  # reaped before the interrupt propagated
    # SIGKILLed with their group; reparented, they may take a moment to be collected
    wait_for(lambda: not any(alive(p) for p in grandchildren), 5, "grandchildren gone")
    assert output.count("interrupted wall=") == 2  # each shard reported as stopped
