"""Files that survive a crash and a second process: one atomic write, one exclusive lock.

Everything the library keeps on disk for a run — a site's privacy ledger and the replies it
released, a secure-sum site's shares, checkpoints — is written with :func:`write_atomic`
(temporary file in the same folder, flushed and fsynced, then :func:`os.replace`, then the
folder fsynced where the file system allows), so a reader sees the old bytes or the new ones,
never a torn file; and a read-check-write step that two processes may run at once (Flower
starts a process per message) holds :func:`exclusive_lock`.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["exclusive_lock", "fsync_dir", "fsync_file", "write_atomic"]


def write_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a crash leaves the old file or the new one whole.

    Parameters
    ----------
    path : str or Path
        The file; its folder must exist.
    data : bytes
        Its new content.

    Examples
    --------
    >>> folder = Path(tempfile.mkdtemp())
    >>> write_atomic(folder / "state.json", b"{}")
    >>> (folder / "state.json").read_bytes(), sorted(p.name for p in folder.iterdir())
    (b'{}', ['state.json'])
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def fsync_file(path: str | Path) -> None:
    """Flush a file another writer made (e.g. a model dump) to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str | Path) -> None:
    """Make a folder's entries (a rename into it) durable; a no-op where the file system
    cannot fsync a folder."""
    with contextlib.suppress(OSError):
        fsync_file(path)


@contextlib.contextmanager
def exclusive_lock(path: str | Path) -> Iterator[None]:
    """Hold an exclusive :func:`fcntl.flock` on the file ``path`` (created if missing) for
    the ``with`` block: one holder at a time across threads' handles and processes; the
    lock goes with the process if it dies.

    Examples
    --------
    >>> lock = Path(tempfile.mkdtemp()) / ".lock"
    >>> with exclusive_lock(lock):
    ...     lock.exists()
    True
    """
    import fcntl

    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
