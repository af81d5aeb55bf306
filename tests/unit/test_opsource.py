"""An operator's Python source in a flag_gems package: what two commits' trees are compared by."""

from __future__ import annotations

from pathlib import Path

from harness.providers.opsource import PackageSource, op_source_hash

PACKAGE = {  # a flag_gems laid out as FlagGems' is: ops, shared utilities, a vendor override
    "__init__.py": "from .ops import *  # noqa\nfrom . import runtime\n"
                   "_FULL = [('cos', cos), ('sin', sin), ('mm', mm)]\n",
    "runtime/__init__.py": "from .device import device\n",
    "runtime/device.py": "device = 'cuda'\n",
    "ops/__init__.py": "from .cos import cos\nfrom .sin import sin\nfrom .mm import mm\n",
    "ops/cos.py": "from ..utils import pointwise_dynamic\nfrom flag_gems import runtime\n\n\n"
                  "def cos(A):\n    return pointwise_dynamic(A)\n",
    "ops/sin.py": "from flag_gems.utils.pointwise_dynamic import pointwise_dynamic\n\n\n"
                  "def sin(A):\n    return pointwise_dynamic(A)\n",
    "ops/mm.py": "import flag_gems\nfrom flag_gems.utils.libentry import libentry\n\n\n"
                 "def mm(a, b):\n    return libentry(a, b)\n",
    "utils/__init__.py": "from .pointwise_dynamic import pointwise_dynamic\n"
                         "from .libentry import libentry\n",
    "utils/pointwise_dynamic.py": "def pointwise_dynamic(x):\n    return x\n",
    "utils/libentry.py": "def libentry(a, b):\n    return a\n",
    "runtime/backend/_vendor/ops/cos.py": "def cos(A):\n    return A\n",
    "docs.py": "# cos is documented here, never defined\n",
}


def tree(root: Path, changes: dict[str, str] | None = None) -> PackageSource:
    package = root / "src" / "flag_gems"
    for rel, text in {**PACKAGE, **(changes or {})}.items():
        (package / rel).parent.mkdir(parents=True, exist_ok=True)
        (package / rel).write_text(text)
    return PackageSource(package)


def hashes(source: PackageSource) -> dict[str, str | None]:
    return {op: op_source_hash(source, op) for op in ("cos", "sin", "mm", "tanh")}


def test_a_change_to_one_operator_leaves_the_others_source_unchanged(tmp_path: Path):
    a = hashes(tree(tmp_path / "A"))
    b = hashes(tree(tmp_path / "B", {"ops/sin.py": PACKAGE["ops/sin.py"] + "# faster\n"}))
    assert a["sin"] != b["sin"]
    assert (a["cos"], a["mm"]) == (b["cos"], b["mm"]) and a["cos"] is not None
    assert a["tanh"] is None and b["tanh"] is None  # defined nowhere: its source is not known


def test_what_an_operator_imports_and_its_overrides_are_its_source_too(tmp_path: Path):
    base = hashes(tree(tmp_path / "A"))
    shared = hashes(tree(tmp_path / "B", {"utils/pointwise_dynamic.py":
                                          "def pointwise_dynamic(x):\n    return -x\n"}))
    assert shared["cos"] != base["cos"] and shared["sin"] != base["sin"]
    assert shared["mm"] == base["mm"]  # it never imports pointwise_dynamic
    vendor = hashes(tree(tmp_path / "C", {"runtime/backend/_vendor/ops/cos.py":
                                          "def cos(A):\n    return A + 0\n"}))
    assert vendor["cos"] != base["cos"] and vendor["sin"] == base["sin"]
    runtime = hashes(tree(tmp_path / "D", {"runtime/device.py": "device = 'other'\n"}))
    assert runtime["cos"] != base["cos"] and runtime["sin"] == base["sin"]


def test_the_package_registration_counts_for_every_operator(tmp_path: Path):
    base = hashes(tree(tmp_path / "A"))
    registered = hashes(tree(tmp_path / "B", {"__init__.py": PACKAGE["__init__.py"]
                                              + "_FULL.append(('tanh', cos))\n"}))
    assert all(registered[op] != base[op] for op in ("cos", "sin", "mm"))


def test_a_package_import_takes_the_packages_text_not_every_operator(tmp_path: Path):
    source = tree(tmp_path / "A")
    files = {p.relative_to(source.package).as_posix()
             for p in source.closure(source.defining("mm"))}
    assert files == {"__init__.py", "ops/__init__.py", "ops/mm.py", "utils/__init__.py",
                     "utils/libentry.py"}
    assert [p.relative_to(source.package).as_posix() for p in source.defining("cos")] == [
        "ops/cos.py", "runtime/backend/_vendor/ops/cos.py"]
