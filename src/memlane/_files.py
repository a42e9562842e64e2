"""Owner-only files (issue #33, docs/security.md "Owner-only files"): the home folder and the
folders memlane makes in it are ``0700``, the store (``memlane.db`` and SQLite's ``-wal`` and
``-shm``, which SQLite creates with the database file's mode) and the search index files
``0600``, whatever the process's umask, so another local account reads no memory.

Modes are set where each file or folder is created (never by changing the process's umask,
which a server shares with its threads and the user's own files); files that exist with wider
modes are reported by :func:`loose_modes` (``memlane serve`` warns at start) with the ``chmod``
that fixes them, never changed behind the user's back.

Only the standard library: the hooks import this on their way to the server.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (hooks: every prompt)
if TYPE_CHECKING:
    from collections.abc import Iterable

#: A folder of memlane's: its owner only.
DIR_MODE = 0o700
#: A file holding memories (the store, its WAL and SHM, the search indexes): its owner only.
FILE_MODE = 0o600


def private_dir(path: str | os.PathLike[str]) -> None:
    """``mkdir -p path``, each folder it creates ``0700`` (an existing folder is left as it is:
    :func:`loose_modes` reports it). Raises ``OSError`` as :func:`os.makedirs`."""
    path = os.path.abspath(os.fspath(path))
    missing: list[str] = []
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, DIR_MODE)
        except FileExistsError:
            if not os.path.isdir(folder):
                raise
            continue  # another process made it meanwhile
        os.chmod(folder, DIR_MODE)  # the umask may have taken bits: set exactly 0700


def private_file(path: str | os.PathLike[str]) -> bool:
    """Create ``path`` empty with mode ``0600`` unless it exists; ``True`` when it was created
    now. Its folder must exist. Raises ``OSError``."""
    try:
        fd = os.open(os.fspath(path), os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
    return True


def loose_modes(home: str | os.PathLike[str], files: Iterable[str | os.PathLike[str]]) -> list[str]:
    """One line per path that other accounts can read or write: ``home`` (wanted ``0700``) and
    each of ``files`` that exists (wanted ``0600``; a folder among them ``0700``), each naming
    the path, its mode and the ``chmod`` that fixes it. ``[]`` when all are owner-only."""
    out: list[str] = []
    for path, wanted_file in ((os.fspath(home), False), *((os.fspath(f), True) for f in files)):
        try:
            st = os.stat(path)
        except OSError:
            continue
        is_dir = stat.S_ISDIR(st.st_mode)
        mode = stat.S_IMODE(st.st_mode)
        wanted = FILE_MODE if wanted_file and not is_dir else DIR_MODE
        if mode & 0o077:
            out.append(
                f"{path} is {mode:04o}: other local accounts can read it; "
                f"run `chmod {wanted:o} {path}`"
            )
    return out


def store_files(db_path: str | os.PathLike[str]) -> list[str]:
    """The SQLite store's files and its index folder with the files in it (those that exist)."""
    db = os.fspath(db_path)
    paths = [db, db + "-wal", db + "-shm", db + ".vec"]
    vec = db + ".vec"
    if os.path.isdir(vec):
        paths += [os.path.join(vec, name) for name in sorted(os.listdir(vec))]
    return [p for p in paths if os.path.exists(p)]
