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

    def sync(self, session: str, text: str, *, owner: str, agent: str | None = None) -> SyncResult:
        """Align the tracking with what the model really receives: ``text`` holds the memlane
        blocks of one request of the client to its model (Gemini CLI's ``BeforeModel`` hook
        sends them). A client that compresses or clears its history on its own, without an
        event that says so, is followed this way (Gemini CLI 0.61: docs/integrations.md).

        - A tracked memory whose line is in ``text`` is still in the model's context: at the
          last turn of its window (``context_window_depth`` of ``agent``'s settings) it is
          recorded as shown at the current turn, so it is not injected again while the history
          holds it, however long that is.
        - A memory shown within the window whose line is not in ``text`` was compressed away
          or cleared: the session is reset (reason ``compact``; the present memories recorded
          again at the current turn), so it may be injected again.

        Nothing tracked, or nothing to change: nothing is written (the usual case: one read).

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
        present = [mid for mid, m in rows.items() if _line_text(m.content) in flat]
        gone = tuple(sorted(set(window) - set(present)))
        # at the window's last turn: recorded again, or the next turn would inject it twice
        ending = [mid for mid in present if state.turn - window[mid] >= depth - 1]
        if not gone and not ending:
            return SyncResult(state, (), ())
        kept = present if gone else ending
        with store.transaction():
            if gone:
                store.reset_session(owner, session, ResetReason.COMPACT)
                log.info("session %s: %d memories left the model's context", session, len(gone))
            event = {"skipped": {"in_context": len(kept)}, "elapsed_ms": 0.0}
            store.finish_turn(owner, session, state.turn, kept, event)
        return SyncResult(store.session(owner, session), gone, tuple(kept))


def _line_text(content: str) -> str:
    """What of a memory's ``content`` its block line always holds: the whitespace folded and a
    final full stop left out (a line with an update note puts the note before it:
    :func:`memlane.injection.pipeline.format_block`)."""
    return " ".join(content.split()).rstrip(".")


@dataclasses.dataclass(frozen=True, slots=True)
class SyncResult:
    """What :meth:`Sessions.sync` did: the session's ``state`` after it, the memory ids that
    were ``gone`` from the request (forgotten: injectable again) and those ``kept`` (recorded
    as shown at the current turn)."""

    state: SessionState
    gone: tuple[str, ...]
    kept: tuple[str, ...]
