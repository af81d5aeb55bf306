"""Compiled-code fingerprints: equal code, equal fingerprints, whatever the debug info says."""

from __future__ import annotations

import struct
from pathlib import Path

from harness.run import artifacts

# PTX as Triton 3.6 wrote it on an H200, cut down: the generated kernel's path is in a .file
# directive and, as bytes ("/r/A" here), in the DWARF of its debug sections.
PTX = """.version 8.7
.target sm_90a
.visible .entry k(
{{
\t.loc\t1 61 0  // k.py:61:0
\t{op}.f32 \t%r1, %r2, %r3;
\tret;
}}
\t.file\t1 "{root}/flaggems/code_cache/k.py"
\t.section\t.debug_info
\t{{
.b8 47
.b8 114
.b8 47
.b8 {side}
\t}}
"""


def ptx(root: str, side: str, op: str = "mul") -> bytes:
    return PTX.format(root=root, side=ord(side), op=op).encode()


def elf(sections: dict[str, bytes]) -> bytes:
    """A little-endian ELF64 holding `sections` (plus the null and name-table sections)."""
    names = b"\0" + b"".join(n.encode() + b"\0" for n in [*sections, ".shstrtab"])
    bodies = [*sections.values(), names]
    data, offsets = bytearray(64), []
    for body in bodies:
        offsets.append(len(data))
        data += body
    shoff, headers = len(data), [bytes(64)]
    for i, (name, body) in enumerate(zip([*sections, ".shstrtab"], bodies, strict=True)):
        headers.append(struct.pack("<IIQQQQIIQQ", names.index(name.encode() + b"\0"), 1, 0, 0,
                                   offsets[i], len(body), 0, 0, 1, 0))
    data += b"".join(headers)
    data[:4], data[4], data[5] = b"\x7fELF", 2, 1
    struct.pack_into("<Q", data, 0x28, shoff)
    struct.pack_into("<HHH", data, 0x3A, 64, len(headers), len(headers) - 1)
    return bytes(data)


def cache(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        (root / "triton" / "H1").mkdir(parents=True, exist_ok=True)
        (root / "triton" / "H1" / name).write_bytes(data)
    return root / "triton"


def test_two_runs_of_the_same_code_fingerprint_alike(tmp_path):
    """The H200 case: each run's private cache path in the IR and the PTX debug bytes, a line
    table with the generated file's mtime in the cubin, a host launcher built per run."""
    runs = {}
    for side, mtime in (("A", b"\x94\xbe"), ("B", b"\x93\xbe")):
        root = tmp_path / "ab" / side / "r0" / "tuner_cache"
        runs[side] = artifacts.artifact_hashes(cache(root, {
            "k.ptx": ptx(str(root), side),
            "k.llir": f'!1 = !DIFile(filename: "k.py", directory: "{root}/code")'.encode(),
            "k.cubin": elf({".text.k": b"\x01\x02code", ".debug_line": b"k.py\0" + mtime}),
            "cuda_utils.so": f"built in /tmp/{side}".encode(),
            "k.json": f'{{"cache": "{root}"}}'.encode(),
        }), root)
    assert runs["A"] == runs["B"] and len(runs["A"]) == 3


def test_a_change_to_the_code_changes_the_fingerprint(tmp_path):
    base = artifacts.fingerprint(ptx("/r", "A"))
    assert artifacts.fingerprint(ptx("/r", "A", op="fma.rn")) != base
    text = elf({".text.k": b"mul", ".debug_line": b"x"})
    assert artifacts.fingerprint(elf({".text.k": b"fma", ".debug_line": b"x"})) != \
        artifacts.fingerprint(text)
    assert artifacts.fingerprint(elf({".text.k": b"mul", ".debug_line": b"y"})) == \
        artifacts.fingerprint(text)


def test_an_unreadable_elf_is_hashed_whole_rather_than_dropped():
    broken = b"\x7fELF\x02\x01" + b"\xff" * 10
    assert artifacts.fingerprint(broken) != artifacts.fingerprint(broken + b"x")


def test_compiled_kernels_are_counted_by_triton_group_files(tmp_path):
    for name in ("aa", "bb"):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"__grp__k_{name}.json").write_text("{}")
        (tmp_path / name / f"k_{name}.bin").write_text("")
    (tmp_path / "cc").mkdir()
    assert artifacts.count_compiled_kernels(tmp_path) == 2


def test_kernels_of_two_flaggems_trees_fingerprint_alike_where_their_code_does(tmp_path):
    """AXIS=flaggems: each side imports flag_gems from its own tree (stacks/A, stacks/B), whose
    path the IRs' locations name; on an H200 every unchanged operator read changed."""
    def ttir(tree: Path, op: str = "math.exp") -> bytes:
        return (f'#loc = loc("{tree}/src/flag_gems/ops/exp.py":21:0)\n'
                f'module {{ tt.func @k() {{ %0 = {op} %x : f32 loc(#loc) }} }}\n').encode()
    found = {}
    for side in "AB":
        root, tree = tmp_path / "cache" / side, tmp_path / "stacks" / side
        found[side] = artifacts.artifact_hashes(cache(root, {"k.ttir": ttir(tree)}), root,
                                                tree)
    assert found["A"] == found["B"]
    assert artifacts.artifact_hashes(cache(tmp_path / "cache" / "A", {"k.ttir": ttir(
        tmp_path / "stacks" / "A")}), tmp_path / "cache" / "A") != found["A"]  # tree kept
    changed = artifacts.fingerprint(ttir(tmp_path / "stacks" / "B", op="math.exp2"),
                                    artifacts.roots_of(tmp_path / "stacks" / "B"))
    assert changed not in found["B"]
    # a root inside another is replaced first: the outer one would leave its tail behind
    assert artifacts.roots_of(tmp_path, tmp_path / "stacks") == (
        str((tmp_path / "stacks").resolve()).encode(), str(tmp_path.resolve()).encode())


def test_a_kernel_is_its_code_and_its_launch_settings_whatever_its_metadata_holds(tmp_path):
    from harness.run.artifacts import kernel_fingerprints

    def kernel(cache, meta: bytes) -> set[str]:
        entry = tmp_path / cache / "KEY"
        entry.mkdir(parents=True)
        (entry / "k.ptx").write_text("// code\n")
        (entry / "__grp__k.json").write_text('{"child_paths": {}}')  # an index: not counted
        (entry / "k.json").write_bytes(meta)
        return kernel_fingerprints(tmp_path / cache)

    plain = kernel("a", b'{"name": "k", "num_stages": 3, "hash": "one"}')
    assert kernel("b", b'{"name": "k", "num_stages": 3, "hash": "two"}') == plain  # its key
    assert kernel("c", b'{"name": "k", "num_stages": 1, "hash": "one"}') != plain
    # metadata that is no JSON object, binary, or nested past the parser's depth is taken
    # whole rather than failing
    for cache, meta in (("d", b"[1, 2]"), ("e", b"\x00\xff"), ("f", b"[" * 100000)):
        assert len(kernel(cache, meta)) == 1
