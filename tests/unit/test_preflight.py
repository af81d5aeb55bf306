"""Each preflight check, in order, with the check named on failure and nothing created."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.errors import PreflightError, UsageError
from harness.run.checks import CHECKS, Environment
from harness.run.preflight import (
    collect_preflight,
    iter_checks,
    run_preflight,
)
from harness.run.probe import probe_python
from harness.settings import spec

NVIDIA_SMI_LINE = "0, NVIDIA H200, GPU-1111, 580.159.04, 143771, 1980\n"


def make_tree(root, layout="new"):
    bench = root / "benchmark"
    bench.mkdir(parents=True)
    (bench / ("base.py" if layout == "new" else "performance_utils.py")).write_text("")
    (bench / "test_tanh.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.mark.tanh
        def test_tanh():
            pass
    """))
    return root


def fake_run(stdout=NVIDIA_SMI_LINE, rc=0):
    real = subprocess.run

    def run(cmd, **kwargs):
        if cmd[0] == sys.executable:  # the python probe runs for real
            return real(cmd, **kwargs)
        return subprocess.CompletedProcess(cmd, rc, stdout=stdout, stderr="")

    return run


def env(which=lambda name: f"/usr/bin/{name}", run=None, python=sys.executable):
    return Environment(python=python, which=which, run=run or fake_run())


def settings(tmp_path, **flags):
    base = {"backend": "cpu", "op": "tanh", "flaggems_dir": str(tmp_path / "fg")}
    return spec.resolve({**base, **flags}, {}, which=lambda _: None)


def failing_check(s, environment=None, with_accelerator=True):
    with pytest.raises(PreflightError) as info:
        run_preflight(s, environment or env(), with_accelerator=with_accelerator)
    assert str(info.value).startswith(f"PREFLIGHT_FAILED check={info.value.check} detail=")
    return info.value.check, info.value.detail


def test_all_checks_pass_in_order_on_cpu(tmp_path):
    make_tree(tmp_path / "fg")
    seen = [step.name for step in iter_checks(settings(tmp_path), env())]
    assert seen == list(CHECKS)
    plan = run_preflight(settings(tmp_path), env())
    assert plan.node.nodeid == "benchmark/test_tanh.py::test_tanh" and plan.op == "tanh"
    assert "shape_file" in plan.skipped and "python_modules" in plan.passed
    assert plan.versions.get("torch")


def test_missing_flaggems_dir(tmp_path):
    assert failing_check(settings(tmp_path, flaggems_dir="/nope"))[0] == "flaggems_dir"


def test_older_layout_is_named(tmp_path):
    make_tree(tmp_path / "fg", layout="old")
    check, detail = failing_check(settings(tmp_path))
    assert check == "benchmark_file" and "performance_utils.py" in detail


def test_unknown_op_lists_close_matches(tmp_path):
    make_tree(tmp_path / "fg")
    check, detail = failing_check(settings(tmp_path, op="tanhh"))
    assert check == "test_node" and "benchmark/test_tanh.py::test_tanh" in detail


def test_a_named_node_is_resolved_from_its_file_alone_and_a_bad_one_worded_from_the_tree(
        tmp_path, monkeypatch):
    from harness.providers import flaggems

    make_tree(tmp_path / "fg")
    (tmp_path / "fg" / "benchmark" / "test_other.py").write_text("def test_tanh2():\n    pass\n")
    scans = []
    real = flaggems.scan_tree
    real_file = flaggems.scan_benchmark
    monkeypatch.setattr(flaggems, "scan_tree",
                        lambda root: scans.append(None) or real(root))
    monkeypatch.setattr(flaggems, "scan_benchmark",
                        lambda root, only=None: scans.append(only) or real_file(root, only))
    node = "benchmark/test_tanh.py::test_tanh"
    plan = run_preflight(settings(tmp_path, op=None, node=node), env())
    assert plan.node.nodeid == node and plan.node.marks == ("tanh",) and plan.op == "tanh"
    assert scans == ["benchmark/test_tanh.py"]  # the other file was never parsed
    scans.clear()
    check, detail = failing_check(settings(tmp_path, op=None,
                                           node="benchmark/test_tanh.py::test_tanh2"))
    # the closest nodes come from the whole tree, as before
    assert check == "test_node" and "benchmark/test_other.py::test_tanh2" in detail
    assert scans == ["benchmark/test_tanh.py", None, None]  # the whole tree's scan, logged


def test_shape_file_checked_only_in_file_mode(tmp_path):
    make_tree(tmp_path / "fg")
    missing = settings(tmp_path, shape_mode="file", shape_file=str(tmp_path / "no.yaml"))
    assert failing_check(missing)[0] == "shape_file"
    bad = tmp_path / "bad.yaml"
    bad.write_text("tanh: [unclosed\n")
    assert failing_check(settings(tmp_path, shape_mode="file", shape_file=str(bad)))[0] == \
        "shape_file"
    good = tmp_path / "good.yaml"
    good.write_text("tanh:\n  shapes: [[64, 64]]\n")
    plan = run_preflight(settings(tmp_path, shape_mode="file", shape_file=str(good)), env())
    assert "shape_file" in plan.passed


def test_replay_from_must_exist(tmp_path):
    make_tree(tmp_path / "fg")
    assert failing_check(settings(tmp_path, replay_from=str(tmp_path / "gone")))[0] == \
        "replay_from"


def cuda_settings(tmp_path, **flags):
    return settings(tmp_path, backend="cuda", runner="host", **flags)


def test_backend_tool_missing(tmp_path):
    make_tree(tmp_path / "fg")
    check, detail = failing_check(cuda_settings(tmp_path), env(which=lambda _: None))
    assert check == "backend" and "nvidia-smi" in detail


def test_no_visible_device(tmp_path):
    make_tree(tmp_path / "fg")
    assert failing_check(cuda_settings(tmp_path), env(run=fake_run(stdout="")))[0] == "device"
    assert failing_check(cuda_settings(tmp_path, devices="3"))[0] == "device"


def test_python_modules_missing_on_an_accelerator_backend(tmp_path):
    make_tree(tmp_path / "fg")
    check, detail = failing_check(cuda_settings(tmp_path, devices="0"))
    assert check == "python_modules" and "flag_gems" in detail  # not installed here


def test_dry_run_skips_only_the_accelerator_checks(tmp_path):
    make_tree(tmp_path / "fg")
    def run(cmd, **kwargs):  # a probe that finds every module
        return subprocess.CompletedProcess(cmd, 0, '{"python": "3.12.3", "missing": [], '
                                           '"versions": {}}', "")

    steps = {step.name: step.reason for step in
             iter_checks(cuda_settings(tmp_path), env(which=lambda _: None, run=run),
                         with_accelerator=False)}
    assert steps["backend"].startswith("dry run") and steps["device"].startswith("dry run")
    assert steps["flaggems_dir"] is None and steps["python_modules"] is None


def test_probe_reports_missing_modules_without_importing_them():
    facts = probe_python(sys.executable, ("json", "surely_not_a_module_xyz"))
    assert facts["missing"] == ["surely_not_a_module_xyz"]
    assert facts["python"].count(".") == 2


def test_probe_of_a_broken_interpreter_is_a_python_modules_failure(tmp_path):
    with pytest.raises(PreflightError) as info:
        probe_python(str(tmp_path / "no-python"), ("torch",))
    assert info.value.check == "python_modules"


def test_failure_leaves_nothing_on_disk(tmp_path):
    out = tmp_path / "runs"
    failing_check(settings(tmp_path, flaggems_dir="/nope", out=str(out)))
    assert not out.exists()


def test_probe_sees_the_pythonpath_pytest_will_add(tmp_path):
    (tmp_path / "src" / "fakegems").mkdir(parents=True)
    (tmp_path / "src" / "fakegems" / "__init__.py").write_text("")
    assert probe_python(sys.executable, ("fakegems",))["missing"] == ["fakegems"]
    facts = probe_python(sys.executable, ("fakegems",), extra_paths=(tmp_path / "src",))
    assert facts["missing"] == []


def test_caller_visibility_variable_narrows_devices_when_devices_unset(tmp_path, monkeypatch):
    from harness.backends import Device
    from harness.executors.devices import visible_devices

    found = [Device(0, "a"), Device(1, "b"), Device(2, "c")]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,2")
    assert [d.index for d in visible_devices(found, cuda_settings(tmp_path))] == [1, 2]
    assert [d.index for d in visible_devices(found, cuda_settings(tmp_path, devices="2"))] == [2]


def test_unparseable_tool_output_is_a_device_failure(tmp_path):
    make_tree(tmp_path / "fg")
    check, detail = failing_check(cuda_settings(tmp_path), env(run=fake_run(stdout="garbage\n")))
    assert check == "device" and "nvidia-smi" in detail


# --------------------------------------------------------------------------- bad inputs


def test_out_unwritable_fails_check_out_before_anything_is_created(tmp_path, monkeypatch):
    make_tree(tmp_path / "fg")
    monkeypatch.setattr("harness.run.checks.os.access", lambda path, mode: False)
    check, detail = failing_check(settings(tmp_path, out=str(tmp_path / "runs" / "x")))
    assert check == "out" and f"OUT='{tmp_path}/runs/x'" in detail
    assert f"its nearest directory '{tmp_path}'" in detail and "not writable" in detail
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fg"]


def test_out_where_no_directory_can_be_made_fails_check_out_even_for_root(tmp_path):
    make_tree(tmp_path / "fg")
    check, detail = failing_check(settings(tmp_path, out="/proc/harness-runs"))
    assert check == "out" and "no directory can be created there" in detail


def test_out_probe_leaves_nothing_behind(tmp_path):
    make_tree(tmp_path / "fg")
    run_preflight(settings(tmp_path, out=str(tmp_path)), env())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fg"]


def test_dtypes_the_benchmark_does_not_declare_fail_before_pytest(tmp_path):
    s = spec.resolve({"backend": "cpu", "op": "tanh", "dtypes": "float16"}, {},
                     which=lambda _: None)  # the embedded suite's tanh: float32, bfloat16
    with pytest.raises(UsageError) as info:
        run_preflight(s, env())
    assert "DTYPES (--dtypes)='float16' is not accepted" in str(info.value)
    assert "benchmark/test_tanh.py::test_tanh declares" in str(info.value)
    assert "float32, bfloat16" in str(info.value)
    ok = spec.resolve({"backend": "cpu", "op": "tanh", "dtypes": "bfloat16"}, {},
                      which=lambda _: None)
    assert "dtypes" in run_preflight(ok, env()).passed


def test_dtypes_not_known_statically_must_be_ones_flaggems_accepts(tmp_path):
    make_tree(tmp_path / "fg")  # test_tanh constructs no benchmark: its dtypes are not known
    with pytest.raises(UsageError, match="float64 is not measured; FlagGems' --dtypes accepts: "
                                         "bfloat16, bool, complex64, float16"):
        run_preflight(settings(tmp_path, dtypes="float64"), env())
    assert "dtypes" in run_preflight(settings(tmp_path, dtypes="int32"), env()).passed


def shape_settings(tmp_path, path):
    make_tree(tmp_path / "fg")
    return settings(tmp_path, shape_mode="file", shape_file=str(path))


def test_shape_file_that_is_a_directory_is_not_reported_missing(tmp_path):
    (tmp_path / "shapes").mkdir()
    check, detail = failing_check(shape_settings(tmp_path, tmp_path / "shapes"))
    assert check == "shape_file" and "is not a file; expected a shape YAML file" in detail


def test_binary_shape_file_fails_its_check_without_a_traceback(tmp_path):
    binary = tmp_path / "shapes.yaml"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00")
    check, detail = failing_check(shape_settings(tmp_path, binary))
    assert check == "shape_file" and "cannot be read as UTF-8 text" in detail


@pytest.mark.parametrize(("text", "needle"), [
    ("tanh:\n  shapes: [64, 64]\n", "entry 'tanh': shape 64 is not accepted; expected a "
                                     "non-empty list of integers"),
    ("tanh:\n  shapes: [[a, 4]]\n", "shape ['a', 4] is not accepted"),
    ("tanh:\n  shapes: [[1.5]]\n", "shape [1.5] is not accepted"),
    ("tanh:\n  shapes: []\n", "shapes=[]; expected a non-empty list of shapes"),
    ("tanh:\n  shape: [[64]]\n", "entry 'tanh' has 'shape'; expected only shapes, shape_desc"),
    ("tanh: [[64, 64]]\n", "entry 'tanh' is list; expected a mapping with 'shapes'"),
    ("tanh:\n  shapes: [[64]]\n  shape_desc: 3\n", "shape_desc=3; expected a string"),
    ("- [64, 64]\n", "expected a mapping of op or class names"),
    ("", "expected a mapping of op or class names"),
])
def test_shape_file_with_malformed_entries_fails_preflight_not_pytest(tmp_path, text, needle):
    path = tmp_path / "shapes.yaml"
    path.write_text(text)
    check, detail = failing_check(shape_settings(tmp_path, path))
    assert check == "shape_file" and detail.startswith(f"SHAPE_FILE='{path}': ")
    assert needle in detail


@pytest.mark.parametrize("source", [
    spec.EMBEDDED_SUITE / "benchmark" / "core_shapes.yaml",
    Path(__file__).resolve().parents[2] / "runs" / "shape",
])
def test_real_shape_files_pass_the_structure_check(tmp_path, source):
    files = sorted(source.glob("*.yaml")) if source.is_dir() else [source]
    for path in files:
        assert "shape_file" in run_preflight(shape_settings(tmp_path / path.stem, path),
                                             env()).passed, path


def test_replay_from_with_corrupt_records_fails_before_a_run_dir_exists(tmp_path):
    make_tree(tmp_path / "fg")
    records = tmp_path / "old" / "autotune_records"
    records.mkdir(parents=True)
    (records / "winners.jsonl").write_text('{"kind": "winner", "source": "triton"}\nnot json\n')
    check, detail = failing_check(settings(tmp_path, replay_from=str(tmp_path / "old")))
    assert check == "replay_from" and "winners.jsonl:1: not an autotune record" in detail
    (records / "winners.jsonl").write_bytes(b"\xff\xfe\x00garbage")
    check, detail = failing_check(settings(tmp_path, replay_from=str(tmp_path / "old")))
    assert check == "replay_from" and "cannot be read as UTF-8 text" in detail
    (records / "winners.jsonl").unlink()
    check, detail = failing_check(settings(tmp_path, replay_from=str(tmp_path / "old")))
    assert check == "replay_from" and "holds no autotune_records/winners.jsonl" in detail


def test_devices_the_backend_does_not_have_fail_naming_them_and_the_ones_it_has(tmp_path):
    make_tree(tmp_path / "fg")
    two = NVIDIA_SMI_LINE + "1, NVIDIA H200, GPU-2222, 580.159.04, 143771, 1980\n"
    check, detail = failing_check(cuda_settings(tmp_path, devices="1,7,GPU-99999999"),
                                  env(run=fake_run(stdout=two)))
    assert check == "device"
    assert "names 7, GPU-99999999, which cuda does not have" in detail
    assert "its devices: 0 (GPU-1111), 1 (GPU-2222)" in detail


# --------------------------------------------------------------------------- collected


def test_collect_reports_every_failure_and_skips_what_depends_on_one(tmp_path):
    lines = []
    s = settings(tmp_path, backend="cuda", runner="host", flaggems_dir=str(tmp_path / "nope"),
                 replay_from=str(tmp_path / "gone"))
    result = collect_preflight(s, env(which=lambda _: None), with_accelerator=False,
                               report=lines.append)
    assert [f.check for f in result.failures] == ["flaggems_dir", "replay_from",
                                                  "python_modules"]
    assert "preflight benchmark_file: skipped (needs flaggems_dir, which failed)" in lines
    assert "preflight test_node: skipped (needs benchmark_file, which failed)" in lines
    assert "preflight flaggems_dir: FAILED" in lines
    assert result.plan.node is None and result.exit_code == 3
    marked, errors = [], []
    assert result.write_failures(marked.append, errors.append) == 3
    assert [m.split()[1] for m in marked] == ["check=flaggems_dir", "check=replay_from",
                                             "check=python_modules"] and not errors


def test_collect_of_a_bad_value_alone_exits_2_and_writes_an_error_line(tmp_path):
    make_tree(tmp_path / "fg")
    result = collect_preflight(settings(tmp_path, dtypes="float64"), env())
    assert [f.check for f in result.failures] == ["dtypes"] and result.exit_code == 2
    errors = []
    result.write_failures(lambda _: None, errors.append)
    assert errors[0].startswith("error: DTYPES (--dtypes)='float64' is not accepted")


def test_collect_with_every_check_passing_is_the_plan_of_run_preflight(tmp_path):
    make_tree(tmp_path / "fg")
    result = collect_preflight(settings(tmp_path), env())
    assert result.failures == () and result.exit_code == 0
    assert result.plan.node.nodeid == "benchmark/test_tanh.py::test_tanh"
    assert result.plan.passed == run_preflight(settings(tmp_path), env()).passed


def test_devices_on_cpu_are_said_to_be_ignored_not_silently_dropped(tmp_path):
    make_tree(tmp_path / "fg")
    steps = {step.name: step.reason for step in iter_checks(settings(tmp_path, devices="5"),
                                                              env())}
    assert steps["device"] == "no accelerator on this backend; DEVICES=5 is ignored"


@pytest.mark.parametrize("mode", ["upstream", "smoke"])
def test_the_shape_file_check_names_the_shape_mode_it_skips_for(tmp_path, mode):
    # Regression: SHAPE_MODE=smoke printed "preflight shape_file: skipped (SHAPE_MODE=upstream)".
    make_tree(tmp_path / "fg")
    steps = {s.name: s for s in iter_checks(settings(tmp_path, shape_mode=mode), env())}
    assert steps["shape_file"].status == f"skipped (SHAPE_MODE={mode})"


@pytest.mark.parametrize(("script", "said"), [
    ("#!/bin/sh\nexit 0\n", "did not answer as a Python interpreter: no output"),
    ("#!/bin/sh\necho not json\n", "did not answer as a Python interpreter: not json"),
    ("#!/bin/sh\nexit 3\n", "failed (exit 3): no output"),
])
def test_an_interpreter_that_is_no_python_fails_preflight_in_one_line(tmp_path, script, said):
    # Regression: /bin/true named as a side's interpreter ended in a JSONDecodeError traceback
    fake = tmp_path / "python"
    fake.write_text(script)
    fake.chmod(0o755)
    with pytest.raises(PreflightError) as caught:
        probe_python(str(fake), ("torch",))
    assert caught.value.detail == f"{fake} {said}"


def test_a_wrapper_that_prints_before_it_runs_python_is_still_understood(tmp_path):
    import sys

    fake = tmp_path / "python"
    fake.write_text(f'#!/bin/sh\necho "setting up the environment"\nexec {sys.executable} "$@"\n')
    fake.chmod(0o755)
    assert probe_python(str(fake), ("json",))["missing"] == []


def test_a_failure_whose_detail_spans_lines_is_one_marker_line():
    from harness.errors import PreflightError

    exc = PreflightError("sbatch", "sbatch exited 1:\nerror: cannot reach\n\n  the controller\n")
    assert str(exc) == ("PREFLIGHT_FAILED check=sbatch detail=sbatch exited 1: | error: cannot "
                        "reach | the controller")
    assert "\n" not in str(exc)


def test_a_missing_module_says_which_interpreter_and_how_to_choose_or_install_one(tmp_path):
    # Regression: a pip-installed harness failed the cpu demo with "cannot import torch" and no
    # hint; after `make demo`, GPU targets used the demo's cpu .venv and said only "cannot
    # import triton, flag_gems".
    import dataclasses

    from harness.backends import get

    cpu = get("cpu")
    lacking = dataclasses.replace(cpu, python_modules=("torch", "no_such_module_zl"))
    settings = spec.resolve({"backend": "cpu", "op": "tanh"}, {}, which=lambda _: None)
    with pytest.raises(PreflightError) as info:
        run_preflight(dataclasses.replace(settings, backend=lacking), with_accelerator=False)
    detail = info.value.detail
    assert detail.startswith(f"{sys.executable} cannot import no_such_module_zl (the "
                             "interpreter that runs the harness)")
    assert "make PYTHON=/path/to/python" in detail and ".venv/bin/python" in detail
    pin = next(line.strip() for line in
               (Path(spec.REPO_ROOT) / "requirements" / "cpu.txt").read_text().splitlines()
               if line.startswith("torch=="))
    assert f"install them: pip install {pin} (the pin of requirements/cpu.txt)" in detail
    assert "make venv" in detail and "\n" not in detail
    gpu = dataclasses.replace(get("cuda"), python_modules=("no_such_module_zl",))
    with pytest.raises(PreflightError) as info:
        run_preflight(dataclasses.replace(settings, backend=gpu), with_accelerator=False)
    assert "pip install" not in info.value.detail
    assert "RUNNER=docker to run in the backend's image" in info.value.detail
