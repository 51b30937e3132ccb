"""The Landlock launcher: restrict this process, then become the command.

    python -I -S landlock_exec.py [--network] [--seccomp-fd N] [--limit NAME=N]...
        [--rule KIND=PATH]... -- bash -c COMMAND

plangate starts this file (by path, with Python's isolated mode and without ``site``, so
it starts in milliseconds and imports nothing but the standard library) instead of the
command. It applies, in order: the resource limits, an empty capability bounding set
(root keeps no capability across ``execve``), ``PR_SET_NO_NEW_PRIVS``, a Landlock ruleset
built from the ``--rule`` arguments (:mod:`plangate.sandbox.landlock` writes them), the
seccomp programs read from inherited descriptors, and then ``execve``s the command.
The arguments are plain flags, not JSON: importing ``json`` (and ``re`` with it) would
double the launcher's start-up time.
A launcher process, not ``preexec_fn``: the parent runs threads, and code between
``fork`` and ``exec`` in a threaded Python process can deadlock.

It fails closed: if any step fails the command is never started (exit status 126 and
one line on stderr saying why).

The three Landlock system calls are called through ``ctypes`` rather than a PyPI
package: the one binding there (``landlock``) has only development releases, and the
ABI handling this needs (network rights from ABI 4, scoping from ABI 6) is a few lines.

Only the standard library may be imported here.
"""

from __future__ import annotations

import ctypes
import os
import resource
import struct
import sys

__all__ = [
    "ABI_NETWORK",
    "EXIT_REFUSED",
    "Spec",
    "abi_version",
    "fs_rights",
    "main",
    "parse",
]

EXIT_REFUSED = 126
"""Exit status when the sandbox could not be set up (the command did not start)."""

# Generic system call numbers (the same on x86-64 and arm64).
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4

# Filesystem rights, with the ABI that introduced them.
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_REMOVE_DIR, _REMOVE_FILE, _MAKE_CHAR, _MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
_MAKE_REG, _MAKE_SOCK, _MAKE_FIFO, _MAKE_BLOCK = 1 << 8, 1 << 9, 1 << 10, 1 << 11
_MAKE_SYM, _REFER, _TRUNCATE, _IOCTL_DEV = 1 << 12, 1 << 13, 1 << 14, 1 << 15
_ABI_FS = {1: (1 << 13) - 1, 2: _REFER, 3: _TRUNCATE, 5: _IOCTL_DEV}
_FILE_ONLY = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV
"""The rights a rule on a file (not a folder) may carry."""

ABI_NETWORK = 4
"""Landlock restricts TCP bind and connect from this ABI on (Linux 6.7)."""
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_ABI_SCOPE = 6
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1

_READ = _EXECUTE | _READ_FILE | _READ_DIR
_WRITE = (
    _WRITE_FILE
    | _REMOVE_DIR
    | _REMOVE_FILE
    | _MAKE_DIR
    | _MAKE_REG
    | _MAKE_SOCK
    | _MAKE_FIFO
    | _MAKE_SYM
    | _REFER
    | _TRUNCATE
)
_KINDS = {
    "read": _READ,
    "list": _READ_DIR,
    "write": _READ | _WRITE,
    # Devices such as /dev/null: read, write, and the terminal ioctls programs expect.
    "device": _READ_FILE | _WRITE_FILE | _IOCTL_DEV,
}
"""What each rule kind of the spec grants (``list``: the names in a folder, not the
files' contents: a folder holding something hidden)."""


class _Refused(Exception):
    """The sandbox could not be set up: the command must not start."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise _Refused(f"{what}: {os.strerror(errno)} (errno {errno})")
    return result


def abi_version() -> int:
    """The Landlock ABI this kernel offers; 0 when Landlock is missing or disabled."""
    libc = _libc()
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    version = syscall(
        ctypes.c_long(_SYS_CREATE_RULESET), None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION
    )
    return max(int(version), 0)


def fs_rights(abi: int) -> int:
    """Every filesystem right the kernel knows at ``abi`` (the kernel docs' best effort:
    a right an older kernel does not know is neither handled nor granted)."""
    rights = 0
    for introduced, bits in _ABI_FS.items():
        if abi >= introduced:
            rights |= bits
    return rights


def _restrict(spec: Spec, abi: int) -> None:
    libc = _libc()
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    handled_fs = fs_rights(abi)
    network = spec.network
    if not network and abi < ABI_NETWORK:
        raise _Refused(
            f"Landlock ABI {abi} cannot restrict the network (ABI {ABI_NETWORK}, Linux 6.7)"
        )
    handled_net = 0 if network else _NET_BIND_TCP | _NET_CONNECT_TCP
    scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= _ABI_SCOPE else 0
    # struct landlock_ruleset_attr: handled_access_fs, handled_access_net, scoped (u64 each);
    # an older kernel accepts the longer struct as long as the fields it lacks are zero.
    attr = ctypes.create_string_buffer(struct.pack("=QQQ", handled_fs, handled_net, scoped))
    ruleset = _check(
        syscall(ctypes.c_long(_SYS_CREATE_RULESET), attr, ctypes.c_size_t(len(attr.raw)), 0),
        "landlock_create_ruleset",
    )
    try:
        for path, kind in spec.rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue  # a system folder this machine does not have
            try:
                rights = _KINDS[kind] & handled_fs
                if os.fstat(fd).st_mode & 0o170000 != 0o040000:  # not a folder
                    rights &= _FILE_ONLY
                # struct landlock_path_beneath_attr (packed): allowed_access u64, parent_fd s32
                rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd))
                _check(
                    syscall(ctypes.c_long(_SYS_ADD_RULE), ruleset, _RULE_PATH_BENEATH, rule, 0),
                    f"landlock_add_rule {path}",
                )
            finally:
                os.close(fd)
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(syscall(ctypes.c_long(_SYS_RESTRICT_SELF), ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)


def _install_seccomp(fd: int) -> None:
    """Load the classic BPF program held by ``fd`` (struct sock_filter records)."""
    with os.fdopen(fd, "rb") as source:
        program = source.read()
    if not program or len(program) % 8:
        raise _Refused("the seccomp program is empty or malformed")

    class _Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    prog = _Prog(len(program) // 8, program)
    _check(
        _libc().prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0),
        "prctl(PR_SET_SECCOMP)",
    )


def _drop_capabilities() -> None:
    """Empty the bounding and ambient sets, so the command keeps no capability after
    ``execve`` even as root (hostname, clock, modules, raw sockets, DAC override)."""
    libc = _libc()
    try:
        with open("/proc/sys/kernel/cap_last_cap") as source:
            last = int(source.read())
    except (OSError, ValueError):
        last = 63
    if os.geteuid() == 0:
        for cap in range(last + 1):
            _check(libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap}")
    # Unprivileged: nothing in the bounding set survives execve for a non-root user
    # without file capabilities, and no_new_privs ignores those.
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)


def _limit(limits: dict[str, int]) -> None:
    names = {
        "cpu": resource.RLIMIT_CPU,
        "fsize": resource.RLIMIT_FSIZE,
        # Counted per real user; root is exempt from it (the timeout's group kill is
        # what ends a runaway tree there).
        "nproc": resource.RLIMIT_NPROC,
        "as": resource.RLIMIT_AS,
        "nofile": resource.RLIMIT_NOFILE,
        "core": resource.RLIMIT_CORE,
    }
    for name, value in limits.items():
        resource.setrlimit(names[name], (value, value))


class Spec:
    """The launcher's arguments, parsed (a plain class: ``dataclasses`` imports ``inspect``
    and ``re``, which cost more than the rest of the launcher)."""

    def __init__(self) -> None:
        self.rules: list[tuple[str, str]] = []
        self.network = False
        self.seccomp_fds: list[int] = []
        self.limits: dict[str, int] = {}
        self.command: list[str] = []


def parse(argv: list[str]) -> Spec:
    spec = Spec()
    args = iter(argv)
    for arg in args:
        if arg == "--":
            spec.command = list(args)
        elif arg == "--network":
            spec.network = True
        elif arg == "--seccomp-fd":
            spec.seccomp_fds.append(int(next(args)))
        elif arg == "--limit":
            name, _, value = next(args).partition("=")
            spec.limits[name] = int(value)
        elif arg == "--rule":
            kind, _, path = next(args).partition("=")
            if kind not in _KINDS or not path.startswith("/"):
                raise ValueError(f"bad rule {kind}={path}")
            spec.rules.append((path, kind))
        else:
            raise ValueError(f"unknown argument {arg!r}")
    if not spec.command:
        raise ValueError("no command after --")
    return spec


def _find(name: str) -> str:
    """The executable ``name`` names, searched on ``PATH`` like ``execvp``."""
    if "/" in name:
        return name
    for folder in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep):
        candidate = os.path.join(folder or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise _Refused(f"{name}: command not found")


def main(argv: list[str]) -> int:
    try:
        spec = parse(argv)
        abi = abi_version()
        if abi < 1:
            raise _Refused("Landlock is not available in this kernel")
        # Found before the restriction: execvp would import the warnings module, which
        # the ruleset may no longer let this interpreter read.
        program = _find(spec.command[0])
        _limit(spec.limits)
        _drop_capabilities()
        _restrict(spec, abi)
        for fd in spec.seccomp_fds:
            _install_seccomp(fd)
        os.execv(program, spec.command)
    except (_Refused, OSError, ValueError, KeyError, StopIteration) as exc:
        print(f"plangate sandbox (landlock): not started: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    return EXIT_REFUSED  # not reached: execvp does not return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
