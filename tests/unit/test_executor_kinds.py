"""The executor kinds' registry, that no module outside harness/executors/ tells one kind from
another by its name, and that a campaign.json written before executor documents still loads
and resumes on the kind that ran it."""

from __future__ import annotations

import ast
import dataclasses
import json

import pytest

from harness import cli, executors
from harness.campaign import where
from harness.campaign.document import Campaign, load
from harness.contract.ops_status import OpStatus, render_csv
from harness.errors import UsageError
from harness.executors import ExecutorDoc, ExecutorKind, local
from harness.executors.slurm import SlurmConfig
from harness.settings import spec, variables
from harness.settings.spec import PACKAGE_DIR

KIND_NAMES = set(executors.registry().names())
KIND_WORDS = ("executor", "kind")
# Where a kind's own fields may be named: the kinds themselves, and the backends, whose records
# say what each kind needs of a vendor's stack (a Slurm task's unit).
OWNERS = ("executors", "backends", "cpu_suite")
# The one table of variables lists EXECUTOR's choices, below the layer the kinds live in; a test
# here holds them to the registry's names.
TABLE = "settings/variables.py"


def _strings(node: ast.AST) -> list[str]:
    """The string constants `node` is or holds (a tuple, list or set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for e in node.elts for s in _strings(e)]
    return []


def _field_of_a_kind(name: str) -> bool:
    return any(name == kind or name.startswith(f"{kind}_") for kind in KIND_NAMES
               if kind != executors.DEFAULT)


def _a_kinds_module(module: str, names: list[str]) -> bool:
    """An import of a kind's own module (harness.executors.slurm); the default kind's
    executor serves the harness's own shards too."""
    return any(module == f"harness.executors.{kind}"
               or module.startswith(f"harness.executors.{kind}.")
               or module == "harness.executors" and kind in names
               for kind in KIND_NAMES if kind != executors.DEFAULT)


def kind_tests(tree: ast.Module) -> list[tuple[int, str]]:
    """Where a module tells an executor kind by its name: a comparison of something named
    executor or kind with a kind's name, a choice between two kinds' names, a table keyed by
    two kinds' names or listing them, a field named after a kind (campaign.slurm,
    entry.slurm_task), or an import of a kind's own module instead of its record."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and _a_kinds_module(
                node.module or "", [a.name for a in node.names]):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.keyword) and node.arg and _field_of_a_kind(node.arg):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                and _field_of_a_kind(node.target.id):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            named = [s for o in operands for s in _strings(o) if s in KIND_NAMES]
            about = any(w in ast.unparse(o).lower() for o in operands for w in KIND_WORDS
                        if not _strings(o))
            if named and about:
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.IfExp):
            if {*_strings(node.body), *_strings(node.orelse)} & KIND_NAMES:
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, (ast.Dict, ast.Tuple, ast.List, ast.Set)):
            keys = node.keys if isinstance(node, ast.Dict) else node.elts
            named = {s for k in keys if k is not None for s in _strings(k) if s in KIND_NAMES}
            if len(named) >= 2:
                found.append((node.lineno, ast.unparse(node)[:80]))
        elif isinstance(node, ast.Attribute) and _field_of_a_kind(node.attr):
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_no_module_outside_the_executor_kinds_tells_a_kind_by_its_name():
    found = [f"{path.relative_to(PACKAGE_DIR)}:{line} {text}"
             for path in sorted(PACKAGE_DIR.rglob("*.py"))
             if path.relative_to(PACKAGE_DIR).parts[0] not in OWNERS
             and path.relative_to(PACKAGE_DIR).as_posix() != TABLE
             for line, text in kind_tests(ast.parse(path.read_text(encoding="utf-8")))]
    assert found == []


@pytest.mark.parametrize("source", [
    'if slurm.executor(flags, env) == "slurm": pass',  # how the CLI and resume chose
    'remote = executor.name != "local"',
    'name = "slurm" if campaign.executor else "local"',
    'entry.slurm_task = end.facts.get("slurm_task") or entry.slurm_task',
    'if campaign.slurm is None: pass',
    'KINDS = ("local", "slurm")',
    'if chosen.kind.name == "slurm": pass',
    'from harness.executors import device_lock, slurm',
    'from harness.executors.slurm import task',
    'row = OpStatus(op, slurm_state=facts["slurm_state"])',
    'class Campaign:\n    slurm: ExecutorRecord | None = None',
])
def test_the_check_finds_each_way_a_kind_was_told_by_its_name(source):
    assert kind_tests(ast.parse(source)) != []


@pytest.mark.parametrize("source", [
    'if source == "local": pass',  # a tuner's source, not an executor
    'if chosen.kind.remote: pass',
    'unit = settings.backend.name',
    'x = "host" if runner is None else runner',
    'from harness.executors.local import LocalExecutor',
    'from harness.executors import Chosen, ExecutorDoc',
])
def test_the_check_leaves_what_is_no_kind_alone(source):
    assert kind_tests(ast.parse(source)) == []


def test_the_registry_knows_exactly_the_executor_choices_and_lists_them_for_another():
    assert executors.registry().names() == list(variables.EXECUTORS)
    assert executors.get("slurm").remote and not executors.get("local").remote
    with pytest.raises(UsageError) as err:
        executors.get("k8s")
    assert str(err.value) == ("EXECUTOR='k8s' is not accepted; expected one of: local, "
                              "slurm")


def test_a_kind_registered_twice_is_refused():
    reg = executors.Registry()
    reg.register(executors.get("local"))
    with pytest.raises(ValueError, match="'local' is registered twice"):
        reg.register(executors.get("local"))


def _k8s() -> ExecutorKind:
    """A kind as a Kubernetes executor would add it: here, the local kind's executor under
    another name, with a runner, a fact, a receipt field and a task command of its own."""
    return dataclasses.replace(
        executors.get("local"), name="k8s", own_runners=("kubectl",), runs="runs Kubernetes Jobs",
        facts=("k8s_pod",), receipt=lambda state: {"k8s": state}, task_command="k8s-task",
        run_task=lambda plan, env, out: 0, variables=("SLURM_TIME",), keeps=True)


@pytest.fixture
def with_k8s(monkeypatch):
    reg = executors.Registry()
    for kind in [*executors.registry().all(), _k8s()]:
        reg.register(kind)
    monkeypatch.setattr(executors, "_REGISTRY", reg)
    return reg.get("k8s")


def test_a_new_kind_needs_only_its_record_and_its_line(with_k8s, tmp_path):
    """Registered beside the others, a kind is chosen, built, refused a runner that is not its
    own, given its columns, receipt field and task command, and kept by a campaign, through
    the registry alone."""
    settings = spec.resolve({"backend": "cpu", "runner": "host"}, env={})
    chosen = where.config(settings, {"executor": "k8s", "slurm_time": "10"}, {})
    assert chosen.kind is with_k8s and chosen.given == {"slurm_time": "10"}
    assert isinstance(where.executor(settings, chosen, tmp_path), local.LocalExecutor)
    with pytest.raises(UsageError, match="RUNNER='kubectl' runs Kubernetes Jobs; it needs "
                                         "EXECUTOR=k8s"):
        executors.task_flags({"runner": "kubectl"}, {})
    assert executors.fact_names() == ("slurm_task", "slurm_state", "k8s_pod")
    text = render_csv([OpStatus("tanh", facts={"k8s_pod": "p-1"})], executors.fact_names())
    assert text.splitlines()[1].endswith(",,,p-1,")
    doc = ExecutorDoc("k8s", chosen.given, {"pods": ["p-1"]})
    assert executors.receipt_fields(doc) == {"slurm": None, "k8s": {"pods": ["p-1"]}}
    assert "k8s-task" in cli.internal()
    assert executors.doc_from_json(json.loads(json.dumps(doc.to_json()))) == doc
    assert executors.resumed(doc, settings, {}, {}).kind is with_k8s


# --------------------------------------------------------------------------- older campaigns

# A campaign.json as the harness wrote it before campaigns kept an executor document (a Slurm
# campaign with SLURM_PARALLEL=1, two rounds of one operator; the paths shortened).
BEFORE = {
    "schema": "harness-campaign/1", "dir": "/shared/runs/ab/none-tanh/20261203-133556",
    "created_utc": "2026-12-03T13:35:56+00:00",
    "axis": {"name": "none", "variable": None, "a": "0", "b": "1"},
    "caliber": {"backend": "cpu"}, "argv": ["--backend", "cpu"], "rounds": 2, "walls": {},
    "walls_from": None,
    "ops": {"tanh": {"node": "benchmark/test_tanh.py::test_tanh", "reason": None,
                     "rounds": 2}},
    "units": [
        {"id": "tanh/r0", "op": "tanh", "round": 0, "status": "ok", "reason": None, "rc": 0,
         "wall_s": 14.27, "device": "vm:-", "attempts": 1, "slurm_task": "100_0",
         "slurm_state": "COMPLETED", "started_utc": "2026-12-03T13:35:56+00:00"},
        {"id": "tanh/r1", "op": "tanh", "round": 1, "status": "submitted", "reason": None,
         "rc": None, "wall_s": None, "device": "slurm:103_0", "attempts": 1}],
    "state": "interrupted", "noise_floor_pct": 1.0, "python": "python3", "noise_from": None,
    "slurm": {"flags": {"slurm_parallel": "1"}, "submissions": [
        {"job": "100", "key": "s1-r0", "tasks": [["tanh/r0"]], "script_sha256": "5001"},
        {"job": "103", "key": "s1-later", "tasks": [["tanh/r1"]], "script_sha256": "ad31"}]},
    "side_artifacts": {},
}


def test_a_campaign_written_before_executor_documents_loads_as_the_slurm_kinds(tmp_path):
    (tmp_path / "campaign.json").write_text(json.dumps(BEFORE))
    campaign = load(tmp_path)
    assert campaign.executor == ExecutorDoc("slurm", {"slurm_parallel": "1"},
                                            {"submissions": BEFORE["slurm"]["submissions"]})
    assert campaign.unit("tanh/r0").facts == {"slurm_task": "100_0",
                                              "slurm_state": "COMPLETED"}
    written = campaign.to_json()
    assert written["schema"] == "harness-campaign/2" and "slurm" not in written
    assert written["units"][0] == BEFORE["units"][0]  # the unit's keys as they were
    assert Campaign.from_json(json.loads(json.dumps(written))) == campaign
    assert executors.receipt_fields(campaign.executor) == {
        "slurm": BEFORE["slurm"]["submissions"]}


def test_a_resume_of_such_a_campaign_runs_on_slurm_with_the_settings_it_kept(tmp_path):
    (tmp_path / "campaign.json").write_text(json.dumps(BEFORE))
    campaign = load(tmp_path)
    settings = spec.resolve({"backend": "cpu", "runner": "host"}, env={})
    chosen = executors.resumed(campaign.executor, settings, {}, {})
    assert chosen.kind.name == "slurm" and chosen.config == SlurmConfig(parallel=1)
    again = executors.resumed(campaign.executor, settings, {"slurm_time": "5"}, {})
    assert again.given == {"slurm_parallel": "1", "slurm_time": "5"}
    here = executors.resumed(campaign.executor, settings, {"executor": "local"}, {})
    assert here.kind.name == "local" and here.given == {}


def test_an_executor_document_of_a_kind_this_harness_lacks_names_the_field(tmp_path):
    doc = {**BEFORE, "schema": "harness-campaign/2", "executor": {"name": "k8s"}}
    (tmp_path / "campaign.json").write_text(json.dumps(doc))
    with pytest.raises(UsageError, match="campaign.json: executor.name is 'k8s'; expected one "
                                         "of: local, slurm"):
        load(tmp_path)
