"""Small durable-filesystem helpers shared by the file backends (run in worker threads)."""

from __future__ import annotations

import os

__all__ = ["ensure_private_dir", "fsync_dir"]


def fsync_dir(directory: str) -> None:
    """Make the entries of ``directory`` (a file created or renamed in it) durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_private_dir(directory: str) -> None:
    """Create ``directory`` (and its parents) if missing, mode 0700, durably: each directory
    made is synced into its parent."""
    if os.path.isdir(directory):
        return
    parent = os.path.dirname(directory)
    if parent and parent != directory:
        ensure_private_dir(parent)
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        return
    if parent:
        fsync_dir(parent)
