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
from memlane.types import ResetReason, SessionState

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
