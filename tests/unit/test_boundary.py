"""The host/plugin boundary: one spelling of each name, written from Settings, read back loudly."""

from __future__ import annotations

import ast
import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.contract import boundary
from harness.contract.boundary import BoundaryError, read
from harness.run import plugin_plan
from harness.settings import spec, variables

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE = REPO_ROOT / "harness"
KERNEL_LOG = REPO_ROOT / "tests" / "data" / "results" / "h200" / "tanh_core_kernel.log"
# Makes pytest unimportable, as in an environment without it, then runs the harness command.
NO_PYTEST = """
import sys

class NoPytest:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pytest", "_pytest"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoPytest())
"""


def boundary_strings() -> dict[str, str]:
    """Every name the boundary module spells: its upper-case string constants."""
    return {k: v for k, v in vars(boundary).items() if k.isupper() and isinstance(v, str)}


def string_literals(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module (f-string pieces included), less docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)):
            docstrings.add(id(body[0].value))
    return [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and id(n) not in docstrings]


def spells(literal: str, name: str) -> bool:
    # A name with a separator in it is spelled wherever it occurs; a plain word ("claims")
    # only as the whole literal.
    if any(c in name for c in "_.#*"):
        return name in literal
    return literal == name


def test_every_boundary_name_is_spelled_only_in_the_boundary_module():
    names = boundary_strings()
    found = [f"{path.relative_to(REPO_ROOT)}:{line}: {literal!r} spells {key}"
             for path in sorted(PACKAGE.rglob("*.py")) if path.name != "boundary.py"
             for line, literal in string_literals(path)
             for key, name in names.items() if spells(literal, name)]
    assert found == []


def test_the_literal_check_sees_a_second_spelling(tmp_path):
    # The check above must be able to fail: an f-string piece and a plain literal both count.
    module = tmp_path / "m.py"
    module.write_text('"""Docs may say ZL_PLUGIN_RUN_DIR."""\n'
                      'X = "ZL_PLUGIN_RUN_DIR"\nY = f"{X} AUTOTUNE_REPLAY_FALLBACK reason=x"\n')
    literals = [lit for _, lit in string_literals(module)]
    assert [lit for lit in literals if spells(lit, boundary.RUN_DIR_VAR)] == ["ZL_PLUGIN_RUN_DIR"]
    assert any(spells(lit, boundary.REPLAY_FALLBACK_MARKER) for lit in literals)
    assert not spells("each claims dir", boundary.CLAIMS_DIR)


def test_every_child_variable_is_named_in_its_own_constant():
    variables = [v for v in vars(boundary).values() if isinstance(v, boundary.ChildVar)]
    env_names = {v for k, v in boundary_strings().items() if k.endswith("_VAR")}
    assert {v.name for v in variables} == env_names


def test_no_user_setting_shares_a_name_with_what_the_host_sets_for_its_plugins():
    # Regression: ZL_TIMER was both the user's MODE (auto accepted) and the timer the host
    # decided for the timing plugin (auto refused), one name with two meanings.
    host = {v for k, v in boundary_strings().items() if k.endswith("_VAR")}
    assert all(name.startswith(boundary.PREFIX) for name in host)
    assert not host & {var.env for var in variables.TABLE if var.env}


def harness_imports(module: str) -> set[str]:
    """The harness modules that `module` imports, by their short names."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("harness"):
            found |= {alias.name for alias in node.names}
            found.add(node.module.rpartition(".")[2])
    return found


def test_the_boundary_and_the_settings_import_neither_each_other():
    # Regression: spec imported boundary for its names, boundary imported spec for Settings.
    assert not {"spec", "variables", "precompile"} & harness_imports("contract/boundary")
    for module in ("settings/spec", "settings/variables"):
        assert not {"boundary", "precompile"} & harness_imports(module)


def _settings(tmp_path: Path, **flags: object) -> spec.Settings:
    base = {"backend": "cpu", "flaggems_dir": str(tmp_path / "fg"), "out": str(tmp_path / "runs")}
    return spec.resolve({**base, **flags}, {}, which=lambda _: None)


def test_what_the_host_writes_the_plugins_read_back_as_the_settings_say(tmp_path):
    replay = tmp_path / "old"
    settings = dataclasses.replace(_settings(tmp_path, repeat="3", compile_workers="5"),
                                   warmup_share=(1, 4), replay_from=replay, replay_strict=True)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / boundary.REPLAYED_FILE).write_text("")  # prepare_replay writes it before pytest
    env = plugin_plan.boundary_env(settings, run_dir, precompile=True)
    assert read(boundary.BACKEND, "t", environ=env) is settings.backend
    assert read(boundary.RUN_DIR, "t", environ=env) == run_dir.resolve()
    assert read(boundary.TIMER, "t", environ=env) == settings.timer == "direct"
    assert read(boundary.REPEAT, "t", environ=env) == 3
    assert read(boundary.COMPILE_WORKERS, "t", environ=env) == 5
    assert read(boundary.WARMUP_SHARE, "t", environ=env) == (1, 4)
    assert read(boundary.REPLAY, "t", environ=env) == (run_dir / boundary.REPLAYED_FILE).resolve()
    assert read(boundary.REPLAY_STRICT, "t", environ=env) is True
    assert read(boundary.WARMUP_CLAIMS, "t", environ=env) is None  # a warmup sets it per shard


def test_features_that_are_off_leave_their_variables_unset(tmp_path):
    settings = _settings(tmp_path)
    env = plugin_plan.boundary_env(settings, tmp_path, precompile=False)
    assert sorted(env) == sorted([boundary.BACKEND_VAR, boundary.RUN_DIR_VAR,
                                  boundary.TIMER_VAR, boundary.REPEAT_VAR])


def test_the_steady_graph_timer_reaches_the_capture_plugin_only_where_graphs_time(tmp_path):
    steady = _settings(tmp_path, graph_timer="steady")
    graph = dataclasses.replace(steady, timer="graph")
    env = plugin_plan.boundary_env(graph, tmp_path, precompile=False)
    assert read(boundary.GRAPH_TIMER, "t", environ=env) == "steady"
    assert boundary.GRAPH_TIMER_VAR not in plugin_plan.boundary_env(steady, tmp_path, False)
    upstream = dataclasses.replace(graph, graph_timer="upstream")
    assert boundary.GRAPH_TIMER_VAR not in plugin_plan.boundary_env(upstream, tmp_path, False)
    with pytest.raises(BoundaryError, match="ZL_PLUGIN_GRAPH_TIMER='fast'.*adaptive, upstream, "
                       "steady"):
        read(boundary.GRAPH_TIMER, "t", environ={boundary.GRAPH_TIMER_VAR: "fast"})
    adaptive = dataclasses.replace(graph, graph_timer="adaptive")
    assert read(boundary.GRAPH_TIMER, "t", environ=plugin_plan.boundary_env(
        adaptive, tmp_path, False)) == "adaptive"


def test_the_settings_offer_the_graph_timers_the_capture_plugin_reads():
    assert variables.GRAPH_TIMERS == boundary.GRAPH_TIMERS
    assert variables.BY_MAKE["GRAPH_TIMER"].default == "adaptive"


def test_a_missing_required_variable_names_itself_and_who_needs_it():
    with pytest.raises(BoundaryError) as exc:
        read(boundary.BACKEND, "the timing plugin", environ={})
    message = str(exc.value)
    assert message.startswith("ZL_PLUGIN_BACKEND is not set: the timing plugin needs one of: ")
    assert "cpu" in message and "cuda" in message and "\n" not in message


@pytest.mark.parametrize(("var", "value"), [
    (boundary.BACKEND, ""), (boundary.BACKEND, "nvidiaa"), (boundary.TIMER, "auto"),
    (boundary.TIMER, ""), (boundary.REPEAT, "0"), (boundary.REPEAT, "2.5"),
    (boundary.REPEAT, "²"), (boundary.RUN_DIR, ""), (boundary.WARMUP_SHARE, "2/2"),
    (boundary.WARMUP_SHARE, "1/2; rm -rf /"), (boundary.REPLAY_STRICT, "yes"),
    (boundary.COMPILE_WORKERS, "-1"),
])
def test_a_malformed_value_is_an_error_with_the_value_and_what_is_accepted(var, value):
    with pytest.raises(BoundaryError) as exc:
        read(var, "the x plugin", environ={var.name: value})
    assert str(exc.value) == f"{var.name}={value!r}: the x plugin needs {var.accepted_text()}"


def test_a_run_dir_or_replay_file_of_the_wrong_kind_is_refused(tmp_path):
    a_file = tmp_path / "f"
    a_file.write_text("x")
    with pytest.raises(BoundaryError, match="ZL_PLUGIN_RUN_DIR="):
        read(boundary.RUN_DIR, "p", environ={boundary.RUN_DIR_VAR: str(a_file)})
    with pytest.raises(BoundaryError, match="ZL_PLUGIN_AUTOTUNE_REPLAY="):
        read(boundary.REPLAY, "p", environ={boundary.REPLAY_VAR: str(tmp_path)})
    spaced = tmp_path / "a dir; with spaces"
    spaced.mkdir()
    assert read(boundary.RUN_DIR, "p", environ={boundary.RUN_DIR_VAR: str(spaced)}) == spaced


def test_an_optional_variable_unset_or_empty_reads_as_off():
    for environ in ({}, {boundary.WARMUP_SHARE_VAR: ""}):
        assert read(boundary.WARMUP_SHARE, "p", environ=environ) is None


def test_the_caller_chooses_the_error_class():
    with pytest.raises(pytest.UsageError, match="^ZL_PLUGIN_TIMER is not set"):
        read(boundary.TIMER, "p", pytest.UsageError, environ={})


def test_read_defaults_to_the_process_environment(monkeypatch):
    monkeypatch.setenv(boundary.REPEAT_VAR, "7")
    assert read(boundary.REPEAT, "p") == 7


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})


@pytest.mark.slow  # a fresh interpreter
def test_host_modules_that_name_the_boundary_import_no_pytest():
    code = ("import sys, harness.cli, harness.contract.boundary, harness.run.runner, "
            "harness.report.summary, harness.report.write; "
            "print(sorted(m for m in sys.modules if 'pytest' in m))")
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_the_pytest_blocker_really_blocks():
    proc = _python(NO_PYTEST + "import pytest\n")
    assert proc.returncode != 0 and "No module named 'pytest'" in proc.stderr


@pytest.mark.slow  # a fresh interpreter
def test_summary_of_a_flaggems_log_works_without_pytest():
    code = NO_PYTEST + "from harness.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    proc = _python(code, "summary", str(KERNEL_LOG))
    assert proc.returncode == 0, proc.stderr
    assert "tanh" in proc.stdout and "torch.float16" in proc.stdout


def test_regression_a_stale_replay_in_the_callers_environment_never_reaches_pytest(
        tmp_path, monkeypatch):
    # Before: the child got os.environ whole, so an exported ZL_AUTOTUNE_REPLAY (now
    # ZL_PLUGIN_AUTOTUNE_REPLAY) pinned another run's winners in a run that replays nothing.
    from harness.executors import procs as supervise
    from harness.run import runner

    monkeypatch.setenv(boundary.REPLAY_VAR, str(tmp_path / "stale.jsonl"))
    monkeypatch.setenv(boundary.REPLAY_STRICT_VAR, "1")
    monkeypatch.setenv(boundary.WARMUP_CLAIMS_VAR, str(tmp_path / "claims"))
    # an outer pytest's options: every benchmark session rewrote this file, and timed less
    monkeypatch.setenv("PYTEST_ADDOPTS", f"--junitxml={tmp_path / 'outer.xml'} -x")
    code = ("import os; print([os.environ.get(n) for n in "
            f"({boundary.REPLAY_VAR!r}, {boundary.REPLAY_STRICT_VAR!r}, "
            f"{boundary.TIMER_VAR!r}, {boundary.WARMUP_CLAIMS_VAR!r}, 'PYTEST_ADDOPTS')])")
    inv = runner.Invocation(argv=[sys.executable, "-c", code], cwd=tmp_path,
                            env={boundary.TIMER_VAR: "direct"}, plugins=())
    echoed: list[bytes] = []
    with open(tmp_path / "log", "wb") as log:
        rc = runner._stream(inv, log, echoed.append, supervise.GroupStopper(), [])
    assert rc == 0
    assert b"".join(echoed).decode().strip() == str(
        [None, None, "direct", str(tmp_path / "claims"), None])


def test_inherited_passes_of_the_boundary_only_what_it_allows():
    environ = {boundary.BACKEND_VAR: "cuda", boundary.WARMUP_CLAIMS_VAR: "/c", "PATH": "/bin",
               boundary.PREFIX + "NOT_YET_READ": "stale", "PYTEST_ADDOPTS": "-x",
               "ZL_ELSE": "kept"}
    assert boundary.inherited(environ) == {boundary.WARMUP_CLAIMS_VAR: "/c", "PATH": "/bin",
                                           "ZL_ELSE": "kept"}
