"""The seccomp filter every sandboxed command runs under: an allowlist of system calls.

One pure function, :func:`seccomp_program`, returns the classic-BPF program (an array
of ``struct sock_filter``) for a profile. The same bytes serve bubblewrap
(``--seccomp FD``) and an in-process ``seccomp(SECCOMP_SET_MODE_FILTER)`` (the
Landlock sandbox, where no namespace exists).

On x86-64 the filter is default deny, in the spirit of the container runtimes'
default profiles: the calls shells, coreutils, Python, git and compilers use are
allowed; any other call the table knows fails with ``EPERM``, and a call newer than
the table with ``ENOSYS`` (so libc falls back to an older call instead of failing).
What that leaves out on purpose is :data:`REFUSED`: io_uring (it opens and connects
sockets without ``socket(2)``), keyrings, ptrace, bpf, userfaultfd, perf events,
mount and the new mount API, namespaces (``unshare``, ``setns``, ``clone`` with a
``CLONE_NEW*`` flag; ``clone3`` gets ``ENOSYS`` because its flags sit in memory the
filter cannot read, and glibc then uses ``clone``), modules, kexec, reboot, swap,
clock and host-name changes. ``socket`` is allowed for ``AF_INET``/``AF_INET6`` only:
a read-only bind does not stop ``connect()`` to a host's Unix socket file, and
netlink/packet sockets reach the kernel's network configuration. ``socketpair`` stays
allowed: it makes an already-connected, anonymous pair that reaches nothing outside,
and many programs use it for their own IPC (Python's ``asyncio``, ``ssh``, test
runners). Calls from another ABI -- i386 (``int 0x80``) and x32 -- are refused, so the
table cannot be sidestepped through their numbers.

Why a hand-assembled program and not libseccomp (``pyseccomp``): bubblewrap does not
depend on libseccomp, so a machine with bwrap may lack ``libseccomp.so.2`` (this one
has no ``pyseccomp``), and the Landlock sandbox must work after a bare ``pip
install``. The program is generated from a name table
(:mod:`plangate.sandbox.syscalls_x86_64`) and each rule is a pair of instructions, so
it is read like the table it comes from.

Other machines: on aarch64 the filter denies the calls of :data:`REFUSED` by number
(a denylist; the allowlist needs a second full table); elsewhere there is no filter
and ``plangate doctor`` says so.
"""

from __future__ import annotations

import errno
import platform
import struct
from collections.abc import Iterable, Mapping

from plangate.sandbox.policy import Profile
from plangate.sandbox.syscalls_x86_64 import X86_64_SYSCALLS

__all__ = [
    "ALLOWED",
    "REFUSED",
    "seccomp_program",
    "seccomp_summary",
]

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6].
# Arguments are read by their low 32 bits (little-endian): every argument checked here
# is an int or a flag word whose bits of interest are all below 2**32.
_NR, _ARCH, _ARG0 = 0, 4, 16
_LD_W_ABS = 0x20
_JEQ_K, _JGT_K, _JGE_K, _JSET_K = 0x15, 0x25, 0x35, 0x45
_RET_K = 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_EPERM = _ERRNO | errno.EPERM
_ENOSYS = _ERRNO | errno.ENOSYS
_X32_BIT = 0x40000000
_AUDIT_ARCH_X86_64 = 0xC000003E
_AUDIT_ARCH_AARCH64 = 0xC00000B7

_AF_INET, _AF_INET6 = 2, 10
_CLONE_NAMESPACES = (
    0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
)
# personality(2) values programs use (Docker's list): the default, UNAME26's
# companion, ADDR_NO_RANDOMIZE for debuggers, and the query.
_PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)

REFUSED: dict[str, tuple[str, ...]] = {
    "io_uring": ("io_uring_setup", "io_uring_enter", "io_uring_register"),
    "keyrings": ("keyctl", "add_key", "request_key"),
    "tracing and kernel programs": (
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "kcmp",
        "pidfd_getfd",
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "fanotify_init",
    ),
    "mounts": (
        "mount",
        "umount2",
        "pivot_root",
        "chroot",
        "move_mount",
        "open_tree",
        "fsopen",
        "fsconfig",
        "fsmount",
        "fspick",
        "mount_setattr",
        "open_tree_attr",
        "open_by_handle_at",
        "name_to_handle_at",
    ),
    "namespaces": ("unshare", "setns"),
    "kernel and host": (
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "reboot",
        "swapon",
        "swapoff",
        "acct",
        "quotactl",
        "quotactl_fd",
        "syslog",
        "sethostname",
        "setdomainname",
        "settimeofday",
        "clock_settime",
        "clock_adjtime",
        "adjtimex",
        "iopl",
        "ioperm",
        "vhangup",
    ),
}
"""Calls refused on purpose, by group (what ``plangate doctor`` lists)."""

ALLOWED: frozenset[str] = frozenset(
    {
        # files and folders
        *("read", "write", "open", "openat", "openat2", "creat", "close", "close_range"),
        *("pread64", "pwrite64", "readv", "writev", "preadv", "pwritev", "preadv2"),
        *("pwritev2", "lseek", "dup", "dup2", "dup3", "fcntl", "flock", "pipe", "pipe2"),
        *("stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs"),
        *("access", "faccessat", "faccessat2", "readlink", "readlinkat", "getdents"),
        *("getdents64", "getcwd", "chdir", "fchdir", "mkdir", "mkdirat", "rmdir"),
        *("rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat"),
        *("unlink", "unlinkat", "truncate", "ftruncate", "fallocate", "fsync"),
        *("fdatasync", "sync", "syncfs", "sync_file_range", "chmod", "fchmod"),
        *("fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "umask"),
        *("utime", "utimes", "futimesat", "utimensat", "mknod", "mknodat"),
        *("getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr"),
        *("setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr"),
        *("fremovexattr", "setxattrat", "getxattrat", "listxattrat", "removexattrat"),
        *("file_getattr", "file_setattr", "sendfile", "splice", "tee", "vmsplice"),
        *("copy_file_range", "readahead", "fadvise64", "cachestat"),
        *("inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch"),
        # memory
        *("brk", "mmap", "munmap", "mprotect", "mremap", "madvise", "mincore", "msync"),
        *("mlock", "mlock2", "mlockall", "munlock", "munlockall", "remap_file_pages"),
        *("memfd_create", "memfd_secret", "membarrier", "mseal", "map_shadow_stack"),
        *("pkey_alloc", "pkey_free", "pkey_mprotect", "get_mempolicy"),
        # processes, threads, signals
        *("fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4", "waitid"),
        *("kill", "tkill", "tgkill", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn"),
        *("rt_sigpending", "rt_sigsuspend", "rt_sigtimedwait", "rt_sigqueueinfo"),
        *("rt_tgsigqueueinfo", "sigaltstack", "signalfd", "signalfd4", "pause"),
        *("restart_syscall", "pidfd_open", "pidfd_send_signal", "arch_prctl", "prctl"),
        *("set_tid_address", "set_robust_list", "get_robust_list", "rseq", "futex"),
        *("futex_waitv", "futex_wake", "futex_wait", "futex_requeue"),
        *("set_thread_area", "get_thread_area", "seccomp", "landlock_create_ruleset"),
        *("landlock_add_rule", "landlock_restrict_self", "capget", "capset"),
        # identity and limits (no capability survives, so these only lower)
        *("getpid", "getppid", "gettid", "getuid", "geteuid", "getgid", "getegid"),
        *("getresuid", "getresgid", "getgroups", "setuid", "setgid", "setreuid"),
        *("setregid", "setresuid", "setresgid", "setgroups", "setfsuid", "setfsgid"),
        *("getpgid", "setpgid", "getpgrp", "getsid", "setsid", "getrlimit", "setrlimit"),
        *("prlimit64", "getrusage", "times", "getpriority", "setpriority", "ioprio_get"),
        *("ioprio_set", "sched_yield", "sched_getaffinity", "sched_setaffinity"),
        *("sched_getparam", "sched_setparam", "sched_getscheduler", "sched_setscheduler"),
        *("sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval"),
        *("sched_getattr", "sched_setattr", "getcpu", "uname", "sysinfo", "getrandom"),
        # time
        *("time", "gettimeofday", "clock_gettime", "clock_getres", "clock_nanosleep"),
        *("nanosleep", "alarm", "getitimer", "setitimer", "timer_create", "timer_delete"),
        *("timer_settime", "timer_gettime", "timer_getoverrun", "timerfd_create"),
        *("timerfd_settime", "timerfd_gettime"),
        # waiting on descriptors, asynchronous I/O (not io_uring)
        *("select", "pselect6", "poll", "ppoll", "epoll_create", "epoll_create1"),
        *("epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2"),
        *("io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents"),
        *("io_pgetevents", "ioctl"),
        # System V and POSIX IPC (the IPC namespace is the sandbox's own)
        *("shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop"),
        *("semctl", "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink"),
        *("mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr"),
        # sockets: socket() itself is checked by domain below
        *("socketpair", "bind", "listen", "accept", "accept4", "connect", "shutdown"),
        *("getsockname", "getpeername", "getsockopt", "setsockopt", "sendto"),
        *("recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg"),
    }
)
"""Calls allowed whatever their arguments (x86-64)."""

# aarch64 numbers of the refused calls (asm-generic), for the denylist filter there.
_AARCH64_REFUSED: dict[str, int] = {
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "keyctl": 219,
    "add_key": 217,
    "request_key": 218,
    "ptrace": 117,
    "process_vm_readv": 270,
    "process_vm_writev": 271,
    "kcmp": 272,
    "pidfd_getfd": 438,
    "bpf": 280,
    "perf_event_open": 241,
    "userfaultfd": 282,
    "fanotify_init": 262,
    "mount": 40,
    "umount2": 39,
    "pivot_root": 41,
    "chroot": 51,
    "move_mount": 429,
    "open_tree": 428,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
    "open_by_handle_at": 265,
    "name_to_handle_at": 264,
    "unshare": 97,
    "setns": 268,
    "kexec_load": 104,
    "kexec_file_load": 294,
    "init_module": 105,
    "finit_module": 273,
    "delete_module": 106,
    "reboot": 142,
    "swapon": 224,
    "swapoff": 225,
    "acct": 89,
    "quotactl": 60,
    "syslog": 116,
    "sethostname": 161,
    "setdomainname": 162,
    "settimeofday": 170,
    "clock_settime": 112,
    "clock_adjtime": 266,
    "adjtimex": 171,
    "vhangup": 58,
}
_AARCH64_SOCKET = 198


def _op(code: int, k: int = 0, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _ret(action: int) -> bytes:
    return _op(_RET_K, action)


def _rule(nr: int, body: list[bytes]) -> list[bytes]:
    """``if nr == <nr>: <body>`` -- the body ends in a return, so no rule jumps further
    than its own body (classic BPF jumps are 8-bit)."""
    return [_op(_JEQ_K, nr, jf=len(body)), *body]


def _arg0_in(values: Iterable[int]) -> list[bytes]:
    """Allow when the first argument's low 32 bits are one of ``values``, else EPERM."""
    values = list(values)
    body = [_op(_LD_W_ABS, _ARG0)]
    body += [_op(_JEQ_K, v, jt=len(values) - i) for i, v in enumerate(values)]
    return [*body, _ret(_EPERM), _ret(_ALLOW)]


def _socket_body(inet: bool) -> list[bytes]:
    return _arg0_in((_AF_INET, _AF_INET6)) if inet else [_ret(_EPERM)]


def _clone_body() -> list[bytes]:
    return [
        _op(_LD_W_ABS, _ARG0),
        _op(_JSET_K, _CLONE_NAMESPACES, jf=1),
        _ret(_EPERM),
        _ret(_ALLOW),
    ]


def _x86_64(inet: bool, table: Mapping[str, int]) -> list[bytes]:
    program = [
        _op(_LD_W_ABS, _ARCH),
        _op(_JEQ_K, _AUDIT_ARCH_X86_64, jt=1),
        _ret(_EPERM),  # i386 (int 0x80) and any other ABI
        _op(_LD_W_ABS, _NR),
        _op(_JGE_K, _X32_BIT, jf=1),
        _ret(_EPERM),  # x32
        _op(_JGT_K, max(table.values()), jf=1),
        _ret(_ENOSYS),  # newer than the table: let libc fall back
    ]
    program += _rule(table["socket"], _socket_body(inet))
    program += _rule(table["clone"], _clone_body())
    program += _rule(table["clone3"], [_ret(_ENOSYS)])
    program += _rule(table["personality"], _arg0_in(_PERSONALITIES))
    for name in sorted(ALLOWED, key=lambda n: table[n]):
        program += _rule(table[name], [_ret(_ALLOW)])
    program.append(_ret(_EPERM))
    return program


def _aarch64(inet: bool) -> list[bytes]:
    program = [
        _op(_LD_W_ABS, _ARCH),
        _op(_JEQ_K, _AUDIT_ARCH_AARCH64, jt=1),
        _ret(_EPERM),  # 32-bit ARM
        _op(_LD_W_ABS, _NR),
    ]
    program += _rule(_AARCH64_SOCKET, _socket_body(inet))
    for nr in sorted(_AARCH64_REFUSED.values()):
        program += _rule(nr, [_ret(_EPERM)])
    program.append(_ret(_ALLOW))
    return program


def seccomp_program(
    profile: Profile, *, inet: bool = True, machine: str | None = None
) -> bytes | None:
    """The filter for ``profile`` on ``machine`` (this one by default), or None where
    plangate has no filter for the architecture.

    ``inet`` allows ``AF_INET``/``AF_INET6`` sockets. Under bubblewrap pass True: the
    network namespace decides what they reach (loopback only without the network).
    Without a network namespace (Landlock), pass whether the command has network.

    Both profiles get the same call list today: what a command may change is decided
    by the filesystem binds (or Landlock rules); the profile is an argument so that a
    stricter planning list stays one change here, with every caller already passing it.
    """
    del profile  # the same list for both profiles, see above
    arch = machine or platform.machine()
    if arch == "x86_64":
        return b"".join(_x86_64(inet, X86_64_SYSCALLS))
    if arch == "aarch64":
        return b"".join(_aarch64(inet))
    return None


def seccomp_summary(machine: str | None = None) -> list[str]:
    """What the filter does on ``machine`` (this one by default), in lines for
    ``plangate doctor``."""
    machine = machine or platform.machine()
    program = seccomp_program(Profile.PLANNING, machine=machine)
    if program is None:
        return [f"seccomp: no filter for {machine}"]
    kind = (
        f"allowlist of {len(ALLOWED) + 4} calls, every other call refused (EPERM; ENOSYS "
        "for clone3 and calls newer than plangate's table)"
        if machine == "x86_64"
        else "the calls below refused"
    )
    lines = [
        f"seccomp: {kind}; {len(program) // 8} BPF instructions; other ABIs refused",
        "  sockets: AF_INET/AF_INET6 only (Unix, netlink, packet refused; socketpair allowed)",
        "  clone: no new namespaces",
    ]
    lines += [f"  refused {group}: {', '.join(names)}" for group, names in REFUSED.items()]
    return lines
