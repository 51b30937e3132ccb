"""A seccomp filter that keeps sandboxed commands away from the host's Unix sockets.

``--unshare-net`` isolates IP and abstract sockets, but a read-only bind does not stop
``connect()`` to a socket file (a database, a container engine, an agent's key store).
The filter makes ``socket(AF_UNIX, …)`` fail with ``EPERM``; ``socketpair`` stays allowed
(it cannot reach anything outside, and runtimes use it for their own pipes). Calls from
another ABI (32-bit or x32 on x86-64) are refused outright, so the filter cannot be
sidestepped through them.

The program is classic BPF, built here as bytes (``struct sock_filter``) and handed to
bubblewrap through ``--seccomp FD``.
"""

from __future__ import annotations

import platform
import struct

__all__ = ["unix_socket_filter"]

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6];
_NR, _ARCH, _ARG0 = 0, 4, 16
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_ALLOW = 0x7FFF0000
_EPERM = 0x00050000 | 1
_AF_UNIX = 1
_X32_BIT = 0x40000000

# machine: (AUDIT_ARCH_*, __NR_socket)
_ARCHES = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def unix_socket_filter(machine: str | None = None) -> bytes | None:
    """The filter for this machine's architecture, or None where it is not known."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit_arch, nr_socket = arch
    program = [
        _op(_LD_W_ABS, _ARCH),
        _op(_JEQ_K, audit_arch, jt=1),  # native ABI: go on
        _op(_RET_K, _EPERM),  # any other ABI: refused
        _op(_LD_W_ABS, _NR),
        _op(_JGE_K, _X32_BIT, jt=4),  # x32 calls: refused
        _op(_JEQ_K, nr_socket, jf=2),  # not socket(): allowed
        _op(_LD_W_ABS, _ARG0),  # the domain (low 32 bits, little-endian)
        _op(_JEQ_K, _AF_UNIX, jt=1),
        _op(_RET_K, _ALLOW),
        _op(_RET_K, _EPERM),
    ]
    return b"".join(program)
