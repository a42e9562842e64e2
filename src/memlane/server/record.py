"""The record a running ``memlane serve`` keeps in its home (``<home>/run/server.json``), kept
true while it serves.

:class:`RecordKeeper` writes the record (and the home's proof key, ``run/secret``: see
:mod:`memlane.hooks.daemon`) when the server starts serving, and then looks every
:data:`LOOK_S` seconds:

- at the record: deleted, corrupted or overwritten, it is written again (a hook finding no
  usable record goes in-process and cannot start a daemon while this server holds the lock:
  before, a corrupt record sent every hook in-process until the daemon's idle shutdown);
- at ``memlane.toml``: when its ``[server] token`` changes the record's token changes with
  it, by the rule the server's reload follows (:func:`memlane.server.state.token_after_reload`:
  a file without any token keeps the one in use). Before, a token added while serving left
  the record with the old one and every hook got HTTP 401.

It stops (and removes the record) in the process that wrote it: the one-process server, or the
parent of ``--workers N``.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memlane.errors import ConfigError
from memlane.hooks.daemon import ensure_secret, record_file, remove_record, write_record

log = logging.getLogger("memlane.server")

#: Seconds between two looks at the record and at ``memlane.toml``.
LOOK_S = 0.25


class RecordKeeper:
    """Keeps ``record`` in ``home`` (:func:`memlane.hooks.daemon.write_record`) from
    :meth:`start` to :meth:`stop`; ``overrides`` are the settings the server keeps across
    reloads (a daemon's token), as :class:`~memlane.server.state.ServerState` takes them."""

    def __init__(
        self, home: Path, record: dict[str, Any], overrides: Mapping[str, Any] | None = None
    ) -> None:
        self.home = home
        self.record = dict(record)
        self.overrides = dict(overrides or {})
        self._config = home / "memlane.toml"
        self._seen = self._stamp()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Write the proof key (when missing) and the record, then keep them."""
        ensure_secret(self.home)
        write_record(self.home, self.record)
        self._thread = threading.Thread(target=self._watch, name="memlane-record", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop looking and remove the record (if it is still this process's)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        remove_record(self.home, int(self.record["pid"]))

    def _watch(self) -> None:
        while not self._stop.wait(LOOK_S):
            try:
                self.look()
            except Exception:  # keep looking whatever one look did
                log.exception("keeping %s", record_file(self.home))

    def look(self) -> None:
        """One look: the token of a changed ``memlane.toml``, then the record on disk."""
        stamp = self._stamp()
        if stamp != self._seen:
            self._seen = stamp
            self._reload_token()
        if self._on_disk() != self.record:
            ensure_secret(self.home)
            write_record(self.home, self.record)
            log.info("%s was missing or changed: written again", record_file(self.home))

    def _reload_token(self) -> None:
        from memlane.config import Settings
        from memlane.server.state import token_after_reload

        try:
            settings = Settings.load(self.home, **self.overrides)
        except ConfigError:
            return  # the server keeps its settings too (it logs why)
        token = token_after_reload(str(self.record.get("token") or ""), settings.server)
        if token != self.record.get("token"):
            self.record["token"] = token
            write_record(self.home, self.record)
            log.info("the server's token changed: %s rewritten", record_file(self.home))

    def _on_disk(self) -> Any:
        try:
            with open(record_file(self.home), encoding="utf-8") as fh:
                return json.load(fh)
        except (OSError, ValueError):
            return None

    def _stamp(self) -> tuple[int, int] | None:
        try:
            info = os.stat(self._config)
        except OSError:
            return None
        return info.st_mtime_ns, info.st_size
