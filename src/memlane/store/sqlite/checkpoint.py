"""Copying SQLite's write-ahead log back into the database on a thread of its own, off the
path of the write that fills it.

In WAL mode every commit appends the pages it changed to ``<db>-wal``; by default the commit
that takes the log past 1,000 pages then copies the whole log back into the database file
(SQLite's automatic checkpoint: two fsyncs and ~1,000 page writes) before it returns. An
injection turn writes ~29 pages (its access counts rewrite the wide ``memories`` rows: ~19 of
them), so one turn in ~33 paid 20-60 ms for that copy on a loaded machine: the turn's p95.

:class:`Checkpointer` asks for a passive checkpoint (``PRAGMA wal_checkpoint(PASSIVE)``: it
never waits for a reader or a writer, and none waits for it) on a connection of its own, from a
thread started on first use, every :data:`CHECKPOINT_EVERY` commits of this process. The log
then stays far below the automatic threshold, which is left as it is: if the thread falls
behind, or another checkpoint holds the lock, a commit checkpoints as it always did. SQLite's
connection releases the GIL while it works, so on a machine with a spare core the copy runs
beside the next turn instead of inside one.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

__all__ = ["CHECKPOINT_EVERY", "Checkpointer"]

#: Commits of this process between two checkpoints (~230 log pages at an injection turn's ~29:
#: a quarter of SQLite's automatic threshold of 1,000).
CHECKPOINT_EVERY = 8


class Checkpointer:
    """Passive checkpoints of one SQLite file on a thread of its own (see the module).

    Thread-safe. :meth:`committed` after each commit; :meth:`close` before the store's
    connection closes (the last connection to close checkpoints and removes the log, as
    before). A checkpoint that fails (busy: another process is checkpointing; a read-only
    file) is left to the next one or to the commits' own automatic checkpoint: it is never
    raised to a caller.
    """

    def __init__(self, path: Path, every: int | None = None) -> None:
        self.path = path
        #: Commits between two checkpoints.
        self.every = CHECKPOINT_EVERY if every is None else max(1, int(every))
        self._cond = threading.Condition()
        self._commits = 0
        self._asked = 0  # checkpoints asked for
        self._done = 0  # checkpoints that ran (or failed)
        self._thread: threading.Thread | None = None
        self._closed = False
        #: Checkpoints that completed without an error (for tests and benchmarks).
        self.checkpoints = 0

    @property
    def running(self) -> bool:
        """Whether the thread is alive (started by the :attr:`every`-th commit, stopped by
        :meth:`close`)."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def committed(self) -> None:
        """Count one commit; every :attr:`every` commits, wake the thread (started the first
        time). Never raises: it is called after the ``COMMIT``, and a write that landed must not
        be reported as failed. When no thread can be started (the process is out of threads)
        the checkpointer stops and SQLite's automatic checkpoint does the work, as before."""
        with self._cond:
            if self._closed:
                return
            self._commits += 1
            if self._commits < self.every:
                return
            self._commits = 0
            self._asked += 1
            if self._thread is None:
                thread = threading.Thread(
                    target=self._run, name=f"memlane-checkpoint {self.path.name}", daemon=True
                )
                try:
                    thread.start()
                except RuntimeError:  # no thread to be had: the commits checkpoint, as before
                    self._closed = True
                    return
                self._thread = thread
            self._cond.notify_all()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every checkpoint asked for so far has run; ``False`` at ``timeout``
        (seconds)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._closed or self._done >= self._asked, timeout)

    def close(self) -> None:
        """Stop the thread (after the checkpoint it is running, if any); idempotent."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(lambda: self._closed or self._done < self._asked)
                    if self._closed:
                        return
                    target = self._asked
                try:
                    if conn is None:  # busy: never wait (a passive checkpoint waits for none)
                        conn = sqlite3.connect(str(self.path), isolation_level=None, timeout=0.0)
                    busy = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    ok = busy is not None and not busy[0]
                except sqlite3.Error:
                    ok = False  # left to the next checkpoint (see the class docstring)
                with self._cond:
                    self._done = target
                    self.checkpoints += ok
                    self._cond.notify_all()
        finally:
            if conn is not None:
                conn.close()
            with self._cond:  # nobody waits for a thread that is gone
                self._done = self._asked
                self._cond.notify_all()
