"""The seccomp program: its table, and the real kernel enforcing it.

The enforcement tests install the program in a child Python with ``seccomp(2)`` (the
way the Landlock sandbox applies it, no bubblewrap involved) and issue the refused
calls through ``ctypes``; each has a canary that the same call works without the
filter, so a test cannot pass because the call was failing anyway.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from plangate.sandbox.policy import Profile
from plangate.sandbox.seccomp import ALLOWED, REFUSED, seccomp_program, seccomp_summary
from plangate.sandbox.syscalls_x86_64 import X86_64_SYSCALLS

x86_64_only = pytest.mark.skipif(platform.machine() != "x86_64", reason="x86-64 table")

# A child Python that optionally installs the program given on stdin, then runs the
# probes and prints their results as JSON: {name: [return value, errno name]}.
CHILD = textwrap.dedent(
    """
    import ctypes, errno, json, os, socket, sys
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    program = sys.stdin.buffer.read()
    if program:
        class Prog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
        assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
        prog = Prog(len(program) // 8, program)
        assert libc.syscall(317, 1, 0, ctypes.byref(prog)) == 0, ctypes.get_errno()
    def call(nr, *args):
        ctypes.set_errno(0)
        value = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
        return [value, errno.errorcode.get(ctypes.get_errno(), "0") if value < 0 else "0"]
    def sock(family, kind):
        try:
            socket.socket(family, kind).close()
            return [0, "0"]
        except OSError as exc:
            return [-1, errno.errorcode.get(exc.errno, "?")]
    params = ctypes.create_string_buffer(120)
    out = {
        "io_uring_setup": call(425, 4, ctypes.addressof(params)),
        "keyctl": call(250, 0, -1, 0),  # KEYCTL_GET_KEYRING_ID of the thread keyring
        "userfaultfd": call(323, 0),
        "unshare_user": call(272, 0x10000000),
        "clone3": call(435, 0, 0),
        "x32_getpid": call(0x40000000 + 39),
        "beyond_table": call(1000),
        "getpid": call(39),
        "unix": sock(socket.AF_UNIX, socket.SOCK_STREAM),
        "netlink": sock(socket.AF_NETLINK, socket.SOCK_RAW),
        "inet": sock(socket.AF_INET, socket.SOCK_STREAM),
        "inet6": sock(socket.AF_INET6, socket.SOCK_DGRAM),
    }
    a, b = socket.socketpair()
    a.send(b"x")
    out["socketpair"] = [len(b.recv(1)), "0"]
    print(json.dumps(out))
    """
)


def _probe(program: bytes | None) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        input=program or b"",
        capture_output=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout)


@x86_64_only
def test_the_table_names_every_call_the_filter_mentions() -> None:
    refused = {name for names in REFUSED.values() for name in names}
    assert X86_64_SYSCALLS.keys() >= ALLOWED
    assert refused <= X86_64_SYSCALLS.keys()
    assert not ALLOWED & refused
    # Calls checked by their arguments are not allowed wholesale.
    assert not ALLOWED & {"socket", "clone", "clone3", "personality"}
    assert len(set(X86_64_SYSCALLS.values())) == len(X86_64_SYSCALLS)


@x86_64_only
def test_the_program_is_well_formed_and_fits_the_kernel_limit() -> None:
    for profile in Profile:
        for inet in (True, False):
            program = seccomp_program(profile, inet=inet)
            assert program is not None
            assert len(program) % 8 == 0
            assert len(program) // 8 <= 4096  # BPF_MAXINSNS
    assert seccomp_program(Profile.PLANNING, machine="riscv64") is None
    assert seccomp_program(Profile.PLANNING, machine="aarch64") is not None


@pytest.mark.skipif(sys.platform != "linux", reason="seccomp is Linux")
@x86_64_only
def test_the_kernel_refuses_what_the_filter_refuses_and_nothing_ordinary() -> None:
    free = _probe(None)
    filtered = _probe(seccomp_program(Profile.PLANNING, inet=True))
    # Canaries: without the filter these calls get past seccomp (another errno or
    # success), so the EPERM below is the filter's.
    assert free["io_uring_setup"][1] != "EPERM", free
    assert free["unix"] == [0, "0"] and free["netlink"] == [0, "0"]
    assert free["x32_getpid"][1] != "EPERM" and free["beyond_table"][1] == "ENOSYS"

    for refused in ("io_uring_setup", "keyctl", "userfaultfd", "unshare_user"):
        assert filtered[refused] == [-1, "EPERM"], (refused, filtered)
    assert filtered["unix"] == [-1, "EPERM"] and filtered["netlink"] == [-1, "EPERM"]
    assert filtered["x32_getpid"] == [-1, "EPERM"]
    assert filtered["clone3"] == [-1, "ENOSYS"]  # glibc falls back to clone
    assert filtered["beyond_table"] == [-1, "ENOSYS"]
    assert filtered["getpid"][0] > 0
    assert filtered["inet"] == [0, "0"] and filtered["inet6"] == [0, "0"]
    assert filtered["socketpair"] == [1, "0"]


@pytest.mark.skipif(sys.platform != "linux", reason="seccomp is Linux")
@x86_64_only
def test_without_network_no_internet_socket_opens() -> None:
    """The Landlock sandbox has no network namespace: the filter is what keeps a
    command without network off the internet."""
    filtered = _probe(seccomp_program(Profile.ACTING, inet=False))
    assert filtered["inet"] == [-1, "EPERM"] and filtered["inet6"] == [-1, "EPERM"]
    assert filtered["socketpair"] == [1, "0"]


def test_the_summary_names_what_is_refused() -> None:
    text = "\n".join(seccomp_summary("x86_64"))
    assert "allowlist" in text and "io_uring_setup" in text and "AF_INET" in text
    assert "no filter" in seccomp_summary("riscv64")[0]
