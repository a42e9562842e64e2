"""Per-session injection tracking: what a session has been shown, and its resets.

The state (turn counter, injected memory ids with their turn, the last reset) lives in the store,
so a hook process, a CLI call and a server see the same session.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from memlane.config import InjectionSettings
from memlane.errors import InvalidArgument
from memlane.store.base import MemoryStore
from memlane.types import Memory, ResetReason, SessionState

log = logging.getLogger("memlane.injection")


def check_session(session: object) -> None:
    """Raise :class:`InvalidArgument` unless ``session`` is a non-empty string."""
    if not isinstance(session, str) or not session.strip():
        raise InvalidArgument(f"session must be a non-empty string, got {session!r}")


def injected_within(state: SessionState, turn: int, depth: int) -> dict[str, int]:
    """The memories of ``state.injected`` shown within the ``depth`` turns up to ``turn`` (the
    window of step 5), with the turn each was injected."""
    return {mid: t for mid, t in state.injected.items() if turn - t < depth}


class Sessions:
    """Read and reset sessions; takes the store and the per-agent ``[injection]`` settings."""

    def __init__(
        self, store: MemoryStore, settings_for: Callable[[str | None], InjectionSettings]
    ) -> None:
        self.store = store
        self.settings_for = settings_for

    def reset(self, session: str, reason: ResetReason | str, *, owner: str) -> SessionState:
        """Forget what ``session`` was shown (after compaction, /clear or a resume); memories
        the session learned before now may be injected again.

        Raises:
            InvalidArgument: empty session, or ``reason`` not ``compact``, ``clear`` or
                ``resume``.
        """
        try:
            why = ResetReason(reason)
        except ValueError:
            names = ", ".join(r.value for r in ResetReason)
            raise InvalidArgument(f"unknown reset reason {reason!r}; valid: {names}") from None
        check_session(session)
        state = self.store.reset_session(owner, session, why)
        log.info("session %s reset (%s)", session, why.value)
        return state

    def state(self, session: str, *, owner: str, agent: str | None = None) -> SessionState:
        """The persisted tracking of ``session``; ``injected`` holds the memories within the
        window (``context_window_depth`` of ``agent``'s settings) of its current turn.
        Raises :class:`InvalidArgument` for an empty session id."""
        check_session(session)
        state = self.store.session(owner, session)
        depth = self.settings_for(agent).context_window_depth
        return dataclasses.replace(state, injected=injected_within(state, state.turn, depth))

    def sync(self, session: str, text: str, *, owner: str, agent: str | None = None) -> SyncResult:
        """Compare the tracking with what the model really receives: ``text`` holds the
        memlane blocks of one request of the client to its model (Gemini CLI's
        ``BeforeModel`` hook sends them). A client that compresses its history on its own,
        after the hook that injects has run (Gemini CLI 0.61 compresses inside the turn, after
        ``BeforeAgent``: docs/integrations.md), is followed this way.

        - A memory shown within the window whose line is not in ``text`` was compressed away:
          it is returned in ``missing`` (the caller adds it to this request, which the client
          does not keep in its history, so every later request of the window lacks it and
          gets it again; the hooks' turns are ``kept=True``, whose window does not end before
          a reset: :func:`memlane.injection.turn.held_over`).
          Nothing is written for it: the window still says the model has it.
        - A tracked memory whose line is in ``text`` is still in the model's context: at the
          last turn of its window (``context_window_depth`` of ``agent``'s settings) it is
          recorded as shown at the current turn, so it is not injected again while the history
          holds it, however long that is.

        Nothing tracked, or nothing to record: nothing is written (the usual case: one read).

        Raises:
            InvalidArgument: empty session, or ``text`` not a string.
        """
        check_session(session)
        if not isinstance(text, str):
            raise InvalidArgument(f"text must be a string, got {type(text).__name__}")
        store = self.store
        state = store.session(owner, session)
        depth = self.settings_for(agent).context_window_depth
        window = injected_within(state, state.turn, depth)
        if not window:
            return SyncResult(state, (), ())
        flat = " ".join(text.split())
        rows = store.get_many(owner, list(window))
        present = {mid for mid, m in rows.items() if _line_text(m.content) in flat}
        # in the order they were shown (the block reads as it did), ids breaking ties
        order = sorted(window, key=lambda mid: (window[mid], mid))
        missing = tuple(rows[mid] for mid in order if mid in rows and mid not in present)
        # at the window's last turn: recorded again, or the next turn would inject it twice
        ending = [mid for mid in order if mid in present and state.turn - window[mid] >= depth - 1]
        if ending:
            with store.transaction():
                event = {"skipped": {"in_context": len(ending)}, "elapsed_ms": 0.0}
                store.finish_turn(owner, session, state.turn, ending, event)
            state = store.session(owner, session)
        if missing:
            log.info("session %s: %d memories left the model's context", session, len(missing))
        return SyncResult(state, missing, tuple(ending))


def _line_text(content: str) -> str:
    """What of a memory's ``content`` its block line always holds: the whitespace folded and a
    final full stop left out (a line with an update note puts the note before it:
    :func:`memlane.injection.pipeline.format_block`)."""
    return " ".join(content.split()).rstrip(".")


@dataclasses.dataclass(frozen=True, slots=True)
class SyncResult:
    """What :meth:`Sessions.sync` found: the session's ``state`` after it, the memories
    shown within the window that the request lacks (``missing``, in the order they were
    shown: compressed away) and the ids ``kept`` (held by the request at the last turn of
    their window: recorded as shown at the current turn). ``block``: the ``missing``
    memories as an injection block (:meth:`memlane.MemoryEngine.sync_session` fills it)."""

    state: SessionState
    missing: tuple[Memory, ...]
    kept: tuple[str, ...]
    block: str | None = None

    @property
    def gone(self) -> tuple[str, ...]:
        """The ids of ``missing``."""
        return tuple(m.id for m in self.missing)
