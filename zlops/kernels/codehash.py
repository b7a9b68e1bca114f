"""The hash of a kernel's compiled code, without what only says where its source was.

Triton compiles with line info: the cubin's ``.debug_line`` / ``.nv_debug_*`` sections, the PTX's
``.file`` / ``.loc`` directives and ``.debug_*`` sections, and the LLVM IR's ``!dbg`` metadata hold the
source file's absolute path and line numbers. zlops builds every night in a worktree of its own
(``worktrees/<suite>/<sha>-<key>/``), so the raw files of an unchanged kernel differ between two nights
(seen on the H200: every cubin of the FlagGems capture embeds ``/tmp/zh/worktrees/flaggems/9d95...``), as
they do after an edit that only moves the kernel's lines. :func:`code_digest` hashes what runs instead:

- ELF (``.cubin``, ``.hsaco``): the sha256 over every section but the debug ones, the string and
  symbol tables and their relocations, by name, type, size and bytes (a NOBITS section by its size);
- PTX / AMDGCN text: the text before the first ``.section .debug_`` without ``.file`` / ``.loc`` lines
  and trailing ``//`` comments;
- LLVM IR: without ``!dbg`` attachments and metadata lines.

Pure: bytes in, a hex digest out.
"""

from __future__ import annotations

import hashlib
import re
import struct

#: sections that only describe the source (paths, lines) or name symbols
_SKIP = re.compile(r"^(\.rela?)?(\.debug|\.nv_debug)|^\.(shstrtab|strtab|symtab)$")
_SHT_NOBITS = 8
_PTX_DEBUG = re.compile(rb"^\s*\.section\s+\.debug_", re.M)
_PTX_DROP = re.compile(rb"^\s*\.(file|loc)\b.*$", re.M)
_COMMENT = re.compile(rb"[ \t]*//.*$", re.M)
_LL_DBG = re.compile(rb", !dbg ![0-9]+|!dbg ![0-9]+ ")
_LL_META = re.compile(rb"^!.*$", re.M)


def elf_digest(data: bytes) -> str | None:
    """The code sections' digest of a 64-bit little-endian ELF; None when it is not one (or is malformed)."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    try:
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        if shentsize < 64 or shoff + shnum * shentsize > len(data) or shstrndx >= shnum:
            return None
        headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
        _, _, _, _, str_off, str_size = headers[shstrndx]
        names = data[str_off:str_off + str_size]
        sections = []
        for name_off, sh_type, _, _, offset, size in headers:
            end = names.find(b"\0", name_off)
            name = names[name_off:end if end >= 0 else None].decode("latin-1")
            if not name or _SKIP.search(name):
                continue
            if sh_type != _SHT_NOBITS and offset + size > len(data):
                return None
            sections.append((name, sh_type, size, b"" if sh_type == _SHT_NOBITS else data[offset:offset + size]))
    except struct.error:
        return None
    h = hashlib.sha256(b"elf-code-v1")
    for name, sh_type, size, body in sorted(sections):
        h.update(f"{name}\0{sh_type}\0{size}\0".encode())
        h.update(body)
    return h.hexdigest()


def text_digest(data: bytes, kind: str) -> str:
    """The digest of a text stage (``ptx``, ``amdgcn``, ``llir``) without its source locations."""
    if kind in ("ptx", "amdgcn"):
        found = _PTX_DEBUG.search(data)
        data = _COMMENT.sub(b"", _PTX_DROP.sub(b"", data[:found.start()] if found else data))
    elif kind == "llir":
        data = _LL_META.sub(b"", _LL_DBG.sub(b"", data))
    lines = [line.rstrip() for line in data.splitlines() if line.strip()]
    return hashlib.sha256(f"{kind}-code-v1\0".encode() + b"\n".join(lines)).hexdigest()


def code_digest(data: bytes, kind: str) -> str:
    """The digest of a compiled kernel file of ``kind`` (its suffix without the dot): the ELF's code
    sections, a text stage without source locations, else the file's plain sha256."""
    if kind in ("cubin", "hsaco"):
        digest = elf_digest(data)
        if digest is not None:
            return digest
    if kind in ("ptx", "amdgcn", "llir"):
        return text_digest(data, kind)
    return hashlib.sha256(data).hexdigest()
