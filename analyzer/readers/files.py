"""Opening a file FuseLens reads without hanging on it: one rule for traces, side files and cache entries.

Light on purpose (os, stat): the cache's header-only path and the side-file reader use it without numpy.
"""

from __future__ import annotations

import errno
import os
import stat

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
)


def open_regular(path: str | os.PathLike, limit: int | None = None, what: str = "trace file", *, follow: bool = True):
    """`path` opened for binary reading, once it is known to be a regular file: a FIFO given as a path (or planted
    where a cache entry or side file should be) would block `open()` forever, a device would stream without end.

    Opened with O_NONBLOCK (a FIFO's open returns at once) and checked with fstat on the open descriptor (no race
    with a swap after a stat); the flag is then cleared so reads of a regular file behave as usual. Raises OSError
    whose strerror is the one-line reason: "is a FIFO, not a trace file", "symbolic link loop", …;
    FileNotFoundError, IsADirectoryError and PermissionError as open() does. `limit`: refuse a bigger file.
    follow=False: a symbolic link itself is refused (O_NOFOLLOW: the cache never reads through one)."""
    try:
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        if not follow:
            flags |= getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags)
    except OSError as err:
        if err.errno == errno.ELOOP and not follow:
            raise OSError(errno.ELOOP, "is a symbolic link (not followed here)") from None
        if err.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "symbolic link loop (too many levels of symbolic links)") from None
        if err.errno == errno.ENXIO:  # open() of a Unix socket
            raise OSError(errno.ENXIO, f"is a socket, not a {what}") from None
        if err.errno == errno.ENAMETOOLONG:
            raise OSError(err.errno, "path name too long") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((k for test, k in _KINDS if test(st.st_mode)), "not a regular file")
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, f"is a directory, not a {what}")
            raise OSError(errno.EINVAL, f"is {kind}, not a {what}")
        if limit is not None and st.st_size > limit:
            raise OSError(errno.EFBIG, f"{st.st_size:,} bytes is too big for a {what} (limit {limit:,})")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
