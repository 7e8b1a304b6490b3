"""Let shared libraries built against glibc ≥ 2.38 load on glibc 2.34–2.37 (x86-64 ELF).

``llama-cpp-py-sync``'s wheels are tagged ``manylinux2014`` but their
libraries were linked against glibc 2.38: compiled with C23 headers, calls to
``strtol``/``strtoul``/``strtoull``/``sscanf`` became ``__isoc23_*`` symbols
(version ``GLIBC_2.38``), the only 2.38 requirement they carry. On Debian 12
(glibc 2.36) ``dlopen`` then fails with "version `GLIBC_2.38' not found".

:func:`relink_c23` rewrites a copy of such a library so that those four
symbols bind to their classic glibc 2.2.5 versions: each symbol's name is
pointed at its own tail in the string table (``__isoc23_strtol`` → ``strtol``),
its version index at the library's ``GLIBC_2.2.5`` requirement, and the
``GLIBC_2.38`` requirement itself is renamed to ``GLIBC_2.2.5``. No code is
changed. The C23 variants differ from the classic ones only in accepting
binary literals (``0b101`` with base 0 or 2, ``%b``), which llama.cpp does not
parse. Any other ``GLIBC_2.38`` symbol makes the rewrite refuse
(:class:`ElfCompatError`), so an unknown dependency is never papered over.
"""

from __future__ import annotations

import struct

from deltamem.errors import ElfCompatError

__all__ = ["C23_SYMBOLS", "ElfCompatError", "glibc_2_38_symbols", "relink_c23"]

C23_SYMBOLS = frozenset({"__isoc23_strtol", "__isoc23_strtoul", "__isoc23_strtoull",
                         "__isoc23_sscanf"})
"""The glibc 2.38 symbols :func:`relink_c23` knows a classic equivalent for."""

_PREFIX = len("__isoc23_")
_SHT_DYNSYM, _SHT_VERNEED, _SHT_VERSYM = 11, 0x6FFFFFFE, 0x6FFFFFFF
_NEW, _OLD, _LIBC = "GLIBC_2.38", "GLIBC_2.2.5", "libc.so.6"


def _elf_hash(name: bytes) -> int:
    """The SysV ELF hash (``vna_hash`` of a version requirement)."""
    h = 0
    for c in name:
        h = ((h << 4) + c) & 0xFFFFFFFF
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
        h &= ~g & 0xFFFFFFFF
    return h


def _cstr(data: bytes | bytearray, off: int) -> str:
    return bytes(data[off:data.index(0, off)]).decode("ascii", "replace")


class _Elf:
    def __init__(self, data: bytearray) -> None:
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise ElfCompatError("not a little-endian ELF64 file")
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
        secs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
                for i in range(shnum)]
        by_type = {s[1]: s for s in secs}
        if not {_SHT_DYNSYM, _SHT_VERNEED, _SHT_VERSYM} <= by_type.keys():
            raise ElfCompatError("no dynamic symbol versions")
        self.data = data
        dynsym = by_type[_SHT_DYNSYM]
        self.sym_off, self.n_syms = dynsym[4], dynsym[5] // 24
        self.str_off = secs[dynsym[6]][4]
        self.versym_off = by_type[_SHT_VERSYM][4]
        verneed = by_type[_SHT_VERNEED]
        # (offset of the Vernaux entry, version name, version index) for libc's requirements
        self.libc_aux: list[tuple[int, str, int]] = []
        off, count = verneed[4], verneed[7]
        for _ in range(count):
            _, cnt, file_, aux, nxt = struct.unpack_from("<HHIII", data, off)
            a = off + aux
            for _ in range(cnt):
                _, _, other, name, anext = struct.unpack_from("<IHHII", data, a)
                if _cstr(data, self.str_off + file_) == _LIBC:
                    self.libc_aux.append((a, _cstr(data, self.str_off + name), other))
                a += anext
            if not nxt:
                break
            off += nxt

    def symbols_with_version(self, index: int) -> list[tuple[int, str]]:
        out = []
        for i in range(self.n_syms):
            ver, = struct.unpack_from("<H", self.data, self.versym_off + 2 * i)
            if ver & 0x7FFF == index:
                name, = struct.unpack_from("<I", self.data, self.sym_off + 24 * i)
                out.append((i, _cstr(self.data, self.str_off + name)))
        return out


def glibc_2_38_symbols(data: bytes) -> list[str]:
    """Names of the dynamic symbols ``data`` (an ELF64 library) needs at ``GLIBC_2.38``."""
    elf = _Elf(bytearray(data))
    return [name for _, new, idx in elf.libc_aux if new == _NEW
            for _, name in elf.symbols_with_version(idx)]


def relink_c23(data: bytes) -> bytes:
    """``data`` with its ``__isoc23_*`` imports bound to glibc 2.2.5 (see the module doc).

    A library without a ``GLIBC_2.38`` requirement is returned unchanged.

    Raises:
        ElfCompatError: not a little-endian ELF64 library, no ``GLIBC_2.2.5``
            requirement to re-use, or a ``GLIBC_2.38`` symbol outside :data:`C23_SYMBOLS`.
    """
    buf = bytearray(data)
    elf = _Elf(buf)
    new = [(a, idx) for a, name, idx in elf.libc_aux if name == _NEW]
    if not new:
        return bytes(data)
    old = [(a, idx) for a, name, idx in elf.libc_aux if name == _OLD]
    if not old:
        raise ElfCompatError(f"no {_OLD} requirement to bind the C23 symbols to")
    old_aux, old_idx = old[0]
    old_hash, _, _, old_name, _ = struct.unpack_from("<IHHII", buf, old_aux)
    for aux, idx in new:
        for i, name in elf.symbols_with_version(idx):
            if name not in C23_SYMBOLS:
                raise ElfCompatError(f"{name} needs glibc 2.38 and has no older equivalent")
            st_name, = struct.unpack_from("<I", buf, elf.sym_off + 24 * i)
            struct.pack_into("<I", buf, elf.sym_off + 24 * i, st_name + _PREFIX)
            struct.pack_into("<H", buf, elf.versym_off + 2 * i, old_idx)
        # the requirement stays (its index is in use) but now asks for GLIBC_2.2.5
        struct.pack_into("<IH", buf, aux, old_hash, 0)
        struct.pack_into("<I", buf, aux + 8, old_name)
    if _elf_hash(_OLD.encode()) != old_hash:
        raise ElfCompatError("unexpected version hash in the library")
    return bytes(buf)
