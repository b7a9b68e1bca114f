"""Reading files a benchmark wrote: check what they are before reading them.

A harness is untrusted: its results file may be a FIFO (``open`` would block forever), a device
file (``/dev/zero`` never ends), a symlink out of its artifact folder (``/etc/shadow``), or many
gigabytes. :func:`read_untrusted` refuses all of these with an error that says what the file is
and what was expected, and reads at most ``max_bytes``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from zlops.errors import ZlopsError

#: default size limit of a results file (config ``results_max_mib``)
DEFAULT_MAX_BYTES = 256 * 1024 * 1024

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


class UnsafeFile(ZlopsError):
    """A file a benchmark left is not something zlops will read (not regular, outside, too big)."""


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def read_untrusted(path: Path, *, root: Path | None, max_bytes: int = DEFAULT_MAX_BYTES,
                   what: str = "results file") -> bytes:
    """The bytes of ``path``, a regular file inside ``root`` (when given) of at most ``max_bytes``.

    Symlinks are followed only where they stay inside ``root``. Never blocks on a FIFO: the file is
    opened non-blocking and checked with ``fstat`` on the opened descriptor (what is read is what
    was checked). Raises FileNotFoundError when it does not exist, :class:`UnsafeFile` otherwise.
    """
    real = Path(os.path.realpath(path))
    if root is not None and not _inside(real, Path(os.path.realpath(root))):
        raise UnsafeFile(f"{path}: the {what} is a symlink leading out of the shard folder {root} (to {real}); "
                         "the benchmark must write a regular file there")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(real, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UnsafeFile(f"{path}: cannot open the {what}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(f"{path}: the {what} is {_kind(st.st_mode)}, not a regular file; "
                             "the benchmark must write a regular file")
        if st.st_size > max_bytes:
            raise UnsafeFile(f"{path}: the {what} is {st.st_size} bytes, over the limit of {max_bytes} bytes "
                             "(results_max_mib in the config raises it)")
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        total = 0
        while total <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:  # it grew after the check
            raise UnsafeFile(f"{path}: the {what} grew past the limit of {max_bytes} bytes while being read")
        return b"".join(chunks)
    finally:
        os.close(fd)
