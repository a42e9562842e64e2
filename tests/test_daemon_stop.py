"""Stopping a home's server while it is still starting: it holds the home's lock for the seconds
its model takes to load before it writes its record, and a stop in that window (a test's
teardown, a user's `memlane hooks stop` right after a hook started the daemon) used to find no
record and leave it running for its whole idle time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from memlane.hooks.daemon import lock_holder, pid_alive, read_record, stop, take_lock

HOLD = (
    "import sys, time\n"
    "from memlane.hooks.daemon import take_lock\n"
    "assert take_lock(sys.argv[1]) is not None\n"
    "print('locked', flush=True)\n"
    "time.sleep(600)\n"
)


def test_a_server_still_starting_is_stopped(tmp_path: Path) -> None:
    home = tmp_path / "home"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(home)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        assert read_record(home)[0] is None  # no record yet: it is "loading"
        assert lock_holder(home) == holder.pid
        pid, why = stop(home, timeout_s=30)
        assert (pid, why) == (holder.pid, "")
        assert holder.wait(timeout=30) != 0 and not pid_alive(holder.pid)
        assert lock_holder(home) is None
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


def test_no_server_no_lock_holder(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert lock_holder(home) is None
    pid, why = stop(home)
    assert pid is None and why  # says why nothing was stopped
    fd = take_lock(home)  # this process holds it: stop() never signals its caller
    assert fd is not None
    try:
        assert stop(home)[0] is None
    finally:
        os.close(fd)
