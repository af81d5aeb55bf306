"""Fingerprints of the device code in a Triton cache: what a switch did to the compiled code.

Two runs that compile the same code must get the same fingerprints, or a dead switch reads as
live. What varies between such runs is debug information: kernels FlagGems generates live
under each run's private FLAGGEMS_CACHE_DIR, so their line info names that directory (as text
in the IRs, as `.b8` bytes in PTX debug sections), and a cubin's line table records the
generated file's modification time. A fingerprint therefore covers the code and leaves the
debug information out:

- ELF binaries (cubin, hsaco, ...): every section but the debug ones, by name and content;
- text artifacts (TTIR, TTGIR, LLVM IR, PTX, ...): everything before the first debug section,
  without `.file`/`.loc` directives, with each private root (the run's cache; a side's own
  FlagGems tree, whose kernels' locations name it) replaced by one token;
- left out: JSON metadata (paths, cache keys) and shared objects (the host-side launcher
  helpers Triton builds with the host compiler, not device code).
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from pathlib import Path

PRIVATE_ROOT_TOKEN = b"<private-cache>"
SKIPPED_SUFFIXES = (".json", ".so")
ELF_MAGIC = b"\x7fELF"
_DEBUG_SECTION = re.compile(rb"^\s*\.section\s+\.debug", re.MULTILINE)
_LINE_DIRECTIVE = re.compile(rb"^\s*\.(?:file|loc)\b.*$\n?", re.MULTILINE)


def artifact_hashes(triton_cache: Path, *private_roots: Path) -> tuple[str, ...]:
    """sha256 fingerprint of every compiled artifact in a Triton cache, sorted and unique."""
    return tuple(sorted(artifact_files(triton_cache, *private_roots)))


def artifact_files(triton_cache: Path, *private_roots: Path) -> dict[str, Path]:
    """Every compiled artifact in a Triton cache by its fingerprint: the first file (by path)
    that has it."""
    roots = roots_of(*private_roots)
    found: dict[str, Path] = {}
    for path in sorted(triton_cache.glob("*/*")):
        if path.is_file() and path.suffix not in SKIPPED_SUFFIXES:
            found.setdefault(fingerprint(path.read_bytes(), roots), path)
    return found


# What a kernel's metadata (its cache entry's <name>.json) says of how it is launched: two
# kernels of equal code launched otherwise (more stages' shared memory, other warps) differ.
LAUNCH_FIELDS = ("name", "num_warps", "num_ctas", "num_stages", "maxnreg", "cluster_dims",
                 "shared", "tmem_size", "global_scratch_size", "global_scratch_align",
                 "launch_cooperative_grid", "launch_pdl", "waves_per_eu", "kpack",
                 "matrix_instr_nonkdim")
GROUP_PREFIX = "__grp__"  # a cache entry's index of its files, not the kernel's metadata


def kernel_fingerprints(triton_cache: Path, *private_roots: Path) -> set[str]:
    """One fingerprint per kernel in a Triton cache (an entry: a directory of one compile):
    its artifacts' fingerprints together, with the launch settings its metadata records
    (LAUNCH_FIELDS). Where a side's artifacts are all among the other's one by one, a kernel
    of its may still be none of the other's: its code equal to one tuning candidate's and its
    launch settings another's. OSError where a file cannot be read."""
    roots = roots_of(*private_roots)
    found = set()
    for entry in sorted(p for p in triton_cache.glob("*") if p.is_dir()):
        digest = hashlib.sha256()
        for path in sorted(p for p in entry.iterdir() if p.is_file()):
            if path.suffix not in SKIPPED_SUFFIXES:
                digest.update(fingerprint(path.read_bytes(), roots).encode())
            elif path.suffix == ".json" and not path.name.startswith(GROUP_PREFIX):
                digest.update(_launch(path.read_bytes()))
        found.add(digest.hexdigest())
    return found


def _launch(data: bytes) -> bytes:
    """The launch settings of a kernel's metadata, as canonical JSON; its whole text where it
    is not a JSON object."""
    try:
        meta = json.loads(data)
    except (ValueError, RecursionError):  # nested past the parser's depth: not metadata
        return data
    if not isinstance(meta, dict):
        return data
    return json.dumps({k: meta.get(k) for k in LAUNCH_FIELDS}, sort_keys=True,
                      default=str).encode()


def roots_of(*paths: Path | None) -> tuple[bytes, ...]:
    """Private roots as `fingerprint` takes them: resolved, longest first (a root inside
    another is replaced before the one that holds it)."""
    found = {str(p.resolve()).encode() for p in paths if p is not None}
    return tuple(sorted(found, key=len, reverse=True))


def fingerprint(data: bytes, private_roots: tuple[bytes, ...] = ()) -> str:
    """sha256 of one artifact's code, its debug information left out (see the module)."""
    if data.startswith(ELF_MAGIC):
        parts = _elf_code_sections(data)
        if parts is not None:
            return hashlib.sha256(b"".join(parts)).hexdigest()
    match = _DEBUG_SECTION.search(data)
    code = _LINE_DIRECTIVE.sub(b"", data[:match.start()] if match else data)
    for root in private_roots:
        code = code.replace(root, PRIVATE_ROOT_TOKEN)
    return hashlib.sha256(code).hexdigest()


def _elf_code_sections(data: bytes) -> list[bytes] | None:
    """Name and content of each section whose name does not mention debug; None when the
    section headers cannot be read (the whole file is then hashed as text)."""
    try:
        wide = data[4] == 2
        order = "<" if data[5] == 1 else ">"
        if wide:
            shoff, = struct.unpack_from(order + "Q", data, 0x28)
            entsize, count, names_index = struct.unpack_from(order + "HHH", data, 0x3A)
            layout, fields = order + "IIQQQQ", (0, 1, 4, 5)  # name, type, offset, size
        else:
            shoff, = struct.unpack_from(order + "I", data, 0x20)
            entsize, count, names_index = struct.unpack_from(order + "HHH", data, 0x2E)
            layout, fields = order + "IIIIII", (0, 1, 4, 5)
        headers = []
        for i in range(count):
            row = struct.unpack_from(layout, data, shoff + i * entsize)
            headers.append(tuple(row[f] for f in fields))
        _, _, names_at, _ = headers[names_index]
        parts = []
        for name_at, kind, offset, size in headers:
            name = data[names_at + name_at:data.index(b"\0", names_at + name_at)]
            if b"debug" in name:
                continue
            body = b"" if kind == 8 else data[offset:offset + size]  # 8: SHT_NOBITS
            parts += [name, b"\0", struct.pack("<Q", len(body)), body]
        return parts
    except (IndexError, ValueError, struct.error):
        return None


def count_compiled_kernels(triton_cache: Path) -> int:
    """Kernels Triton compiled into `triton_cache`: one `__grp__*.json` group per binary."""
    return sum(1 for _ in triton_cache.glob("*/__grp__*.json"))
