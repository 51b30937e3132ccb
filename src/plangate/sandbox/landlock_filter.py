"""The seccomp program that closes what Landlock leaves open (the Landlock sandbox only).

bubblewrap's namespaces isolate the network, and its read-only mounts refuse every
change to a file; Landlock does neither completely. Landlock restricts TCP only, and it
does not cover a file's metadata: a command could still send UDP, open netlink or
packet sockets, and ``chmod``, ``chown``, ``touch`` or set extended attributes on any
file it can name (root owns the system's files). This program, stacked on the common
one (:mod:`plangate.sandbox.seccomp`), refuses with ``EPERM``:

* ``socket()`` of any family but ``AF_UNIX`` (left to the common program) and, when the
  command has the network, ``AF_INET``/``AF_INET6``;
* ``io_uring`` (it opens sockets and files without the calls above);
* the calls that change a file's mode, owner or extended attributes. Under Landlock
  ``chmod +x`` in the workspace fails too: the price of not letting a command change
  the mode of ``/usr/bin/sudo``;
* while planning, the calls that set a file's times as well (``touch``). After approval
  they stay allowed: ``touch new-file`` sets the times of the file it made, and the
  worst they do elsewhere is misdate a file.

Calls from another ABI (32-bit or x32 on x86-64) are refused outright. Classic BPF,
built here as bytes (``struct sock_filter``).
"""

from __future__ import annotations

import platform
import struct

__all__ = ["landlock_gaps_filter"]

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6];
_NR, _ARCH, _ARG0 = 0, 4, 16
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_ALLOW = 0x7FFF0000
_EPERM = 0x00050000 | 1
_AF_UNIX, _AF_INET, _AF_INET6 = 1, 2, 10
_X32_BIT = 0x40000000

_IO_URING = (425, 426, 427)  # setup, enter, register: the same on every architecture
_FCHMODAT2, _SETXATTRAT, _REMOVEXATTRAT = 452, 463, 466

# machine: (AUDIT_ARCH_*, __NR_socket, mode/owner/xattr calls, time calls)
_ARCHES: dict[str, tuple[int, int, tuple[int, ...], tuple[int, ...]]] = {
    "x86_64": (
        0xC000003E,
        41,
        # chmod fchmod chown fchown lchown, setxattr..fremovexattr (not the getters),
        # fchownat fchmodat
        (90, 91, 92, 93, 94, 188, 189, 190, 197, 198, 199, 260, 268),
        (132, 235, 261, 280),  # utime utimes futimesat utimensat
    ),
    "aarch64": (
        0xC00000B7,
        198,
        # setxattr lsetxattr fsetxattr removexattr lremovexattr fremovexattr
        # fchmod fchmodat fchownat fchown
        (5, 6, 7, 14, 15, 16, 52, 53, 54, 55),
        (88,),  # utimensat
    ),
}


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def landlock_gaps_filter(
    *, network: bool, planning: bool, machine: str | None = None
) -> bytes | None:
    """The program for this machine's architecture, or None where it is not known."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit_arch, nr_socket, metadata, times = arch
    refused = (*metadata, _FCHMODAT2, _SETXATTRAT, _REMOVEXATTRAT, *_IO_URING)
    if planning:
        refused += times
    program = [
        _op(_LD_W_ABS, _ARCH),
        _op(_JEQ_K, audit_arch, jt=1),  # native ABI: go on
        _op(_RET_K, _EPERM),  # any other ABI: refused
        _op(_LD_W_ABS, _NR),
        _op(_JGE_K, _X32_BIT, jt=0, jf=1),
        _op(_RET_K, _EPERM),  # x32 calls: refused
    ]
    for nr in refused:
        program += [_op(_JEQ_K, nr, jt=0, jf=1), _op(_RET_K, _EPERM)]
    families = (_AF_UNIX, _AF_INET, _AF_INET6) if network else (_AF_UNIX,)
    program += [
        _op(_JEQ_K, nr_socket, jt=1),
        _op(_RET_K, _ALLOW),  # not socket(): allowed (the common program decides the rest)
        _op(_LD_W_ABS, _ARG0),  # the family (low 32 bits, little-endian)
    ]
    for family in families:
        program += [_op(_JEQ_K, family, jt=0, jf=1), _op(_RET_K, _ALLOW)]
    program.append(_op(_RET_K, _EPERM))
    return b"".join(program)
