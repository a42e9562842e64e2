"""The one turn model shared by every door that injects before a model call (coding-assistant
hooks, framework adapters, the proxy; ARCHITECTURE.md "One turn, many doors").

A turn is (session, the user message that started it). Its block is decided once, by
:meth:`~memlane.injection.pipeline.Injector.inject` (every step: window, dedup, budget); every
later call of the same turn (a tool loop's next model call, a continuation, a retry) gets the
same block back, records nothing and runs no search (``Turn.repeat``).

What the store keeps per turn (``session_turns``, :class:`~memlane.store.records.SessionTurn`):
the turn's key, a DIGEST (never the prompt's text: privacy issue #33), the position the door
gave, the session's injection turn number and the block's memory ids in block order. The block
is rendered again from those ids on every call (:func:`render`), so a purged or forgotten memory
leaves the block, and the same memories give the same bytes.

``kept``: does the door's text stay in what its client sends next turn?

- ``True`` (the coding-assistant hooks: Claude Code, Gemini CLI, Codex, Qwen Code, Copilot
  CLI, OpenCode; AutoGen, CrewAI's in-place edits): the client holds every block of the
  session until a compaction or a reset, so a memory shown earlier in the session is never
  shown again while it holds it, however many turns ago that was: at the end of its window
  (``context_window_depth`` turns) a memory is recorded as shown again (:func:`held_over`),
  as :meth:`~memlane.injection.Sessions.sync` does for a memory Gemini's request still holds.
  Only a reset (compaction, clear, a shrunk ``position``) lets it be injected again;
  ``earlier`` is empty. (Without this, Copilot CLI and OpenCode, which never drop a block,
  got a second copy of a memory at the 11th prompt after it was shown.)
- ``False`` (the proxy, most framework seams): the text is rebuilt per call and never kept, so
  the door re-supplies the memories still within the window: ``Turn.earlier`` holds the earlier
  turns' blocks whose turn is within ``context_window_depth`` turns of this one, oldest first,
  each rendered the same bytes every time (the proxy's byte-identical prefix), never a memory
  twice across them and ``block``.

``position``: the user turns the conversation holds, this one included. A new turn whose
position is not above every recorded one means the history shrank or was edited (client-side
compaction, a cleared or rewound conversation): the session is reset as
:meth:`~memlane.MemoryEngine.reset_session` does (reason ``compact``), its turn records dropped,
and ``Turn.reset`` says ``"compact"``.

Repeats: with ``position`` (or a door ``key``), any recorded turn of the same key is a repeat;
without either, only the session's latest turn is (the same message sent again later in the
conversation is a new turn).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence

from memlane.config import InjectionSettings
from memlane.errors import InvalidArgument
from memlane.injection.agree import update_note
from memlane.injection.pipeline import Injector, _line, format_block
from memlane.injection.sessions import Sessions, check_session
from memlane.store.base import MemoryStore, SessionTurn
from memlane.types import InjectedItem, Injection, Memory, ResetReason, Status, Turn, TurnBlock

log = logging.getLogger("memlane.injection")

#: Prefix of the digests: a new way of computing keys changes it (old records never match).
_KEY_VERSION = "memlane-turn-1"


def turn_key(
    owner: str, session: str, position: int | None, message: str, key: str | None = None
) -> str:
    """The turn's digest: 32 hex characters of SHA-256 over (owner, session, position,
    message), or over (owner, session, ``key``) when the door has its own turn id. Only this
    digest is stored, never the message."""
    parts: list[object] = (
        [_KEY_VERSION, owner, session, position, message]
        if key is None
        else [_KEY_VERSION + "/key", owner, session, key]
    )
    raw = json.dumps(parts, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:32]


def check_turn_args(message: object, kept: object, position: object, key: object) -> None:
    """Raise :class:`InvalidArgument` naming the field for a bad :meth:`TurnModel.turn`
    argument (the session and the rest are checked by the injection)."""
    if not isinstance(message, str) or not message.strip():
        raise InvalidArgument(
            f"message must be the non-empty text of the user message that started the turn, "
            f"got {message!r:.40}"
        )
    if not isinstance(kept, bool):
        raise InvalidArgument(
            f"kept must be true or false (does the door's block stay in the history its "
            f"client sends next turn?), got {kept!r}"
        )
    if position is not None and (
        isinstance(position, bool) or not isinstance(position, int) or position < 1
    ):
        raise InvalidArgument(
            f"position must be a positive integer (the user turns the conversation holds, "
            f"this one included) or null, got {position!r}"
        )
    if key is not None and (not isinstance(key, str) or not key.strip()):
        raise InvalidArgument(f"key must be a non-empty string (the door's turn id), got {key!r}")


class TurnModel:
    """Decides turns (see the module docstring) over the store, the injector and the sessions;
    ``settings_for(agent)``: the per-agent ``[injection]`` settings."""

    def __init__(
        self,
        store: MemoryStore,
        injector: Injector,
        sessions: Sessions,
        settings_for: Callable[[str | None], InjectionSettings],
    ) -> None:
        self.store = store
        self.injector = injector
        self.sessions = sessions
        self.settings_for = settings_for

    def turn(
        self,
        session: str,
        message: str,
        *,
        kept: bool,
        owner: str,
        position: int | None = None,
        agent: str | None = None,
        project: str | None = None,
        recent: Sequence[str] | None = None,
        max_chars: int | None = None,
        known: Sequence[str] = (),
        key: str | None = None,
    ) -> Turn:
        """This call's :class:`~memlane.types.Turn` (see the module docstring); ``owner``
        already resolved by the engine.

        Raises:
            InvalidArgument: a bad argument (named); nothing is recorded.
            StoreError: the store failed; the turn may be decided again by the next call.
        """
        check_session(session)
        check_turn_args(message, kept, position, key)
        digest = turn_key(owner, session, position, message, key)
        depth = self.settings_for(agent).context_window_depth
        records = self.store.session_turns(owner, session)
        found = next((r for r in records if r.key == digest), None)
        if found is not None and position is None and key is None and found is not records[-1]:
            found = None  # the same words again later in the conversation: a new turn
        if found is not None:
            block, items, earlier = self._render(owner, found, records, depth, kept)
            log.info("turn session=%s key=%s repeat items=%d", session, digest, len(items))
            return Turn(digest, True, block, items, None, earlier)

        reset: str | None = None
        if position is not None and any(
            r.position is not None and r.position >= position for r in records
        ):
            self.sessions.reset(session, ResetReason.COMPACT, owner=owner)
            records, reset = [], ResetReason.COMPACT.value
            log.info("turn session=%s: the history is shorter than recorded: reset", session)
        if kept and reset is None:
            held_over(self.store, owner, session, depth)
        injection = self.injector.inject(
            session, message, owner=owner, agent=agent, recent=recent, max_chars=max_chars,
            known=known, project=project,
        )  # fmt: skip
        record = SessionTurn(digest, position, injection.turn, self._items(owner, injection))
        self.store.record_session_turn(owner, session, record, injection.turn - 2 * depth + 1)
        records = [r for r in records if r.key != digest] + [record]
        block, items, earlier = self._render(owner, record, records, depth, kept)
        return Turn(digest, False, block, items, injection, earlier, reset)

    def _items(
        self, owner: str, injection: Injection
    ) -> tuple[tuple[str, str, str | None, float], ...]:
        """The injection's items as a record holds them: ``(id, source, folded id, score)``.
        A line with an update note stands for an older memory too (folded into the note):
        it is found among the ids the turn recorded besides its items, by the note's text."""
        lines = set((injection.block or "").split("\n"))
        plain = {i.memory.id for i in injection.items if _line(i.memory) in lines}
        folded: dict[str, str] = {}
        if len(plain) < len(injection.items):
            state = self.store.session(owner, injection.session)
            shown = {i.memory.id for i in injection.items}
            others = [
                m for m, t in state.injected.items() if t == injection.turn and m not in shown
            ]
            olders = self.store.get_many(owner, others)
            for item in injection.items:
                if item.memory.id in plain:
                    continue
                for old in olders.values():
                    if _line(item.memory, update_note(item.memory, old)) in lines:
                        folded[item.memory.id] = old.id
                        break
        return tuple(
            (i.memory.id, i.source, folded.get(i.memory.id), float(i.score))
            for i in injection.items
        )

    def _render(
        self,
        owner: str,
        record: SessionTurn,
        records: Sequence[SessionTurn],
        depth: int,
        kept: bool,
    ) -> tuple[str | None, tuple[InjectedItem, ...], tuple[TurnBlock, ...]]:
        """``record``'s block and items, and (``kept=False``) the earlier records' blocks
        within ``depth`` injection turns of it, all from the memories as they are now (one
        read); no memory twice across the earlier blocks and this one."""
        earlier: list[SessionTurn] = []
        if not kept:
            earlier = sorted(
                (
                    r
                    for r in records
                    if r.key != record.key
                    and r.turn <= record.turn
                    and record.turn - r.turn < depth
                    and (
                        record.position is None
                        or r.position is None
                        or r.position < record.position
                    )
                ),
                key=lambda r: (r.turn, r.position or 0, r.key),
            )
        wanted = [
            i for r in (*earlier, record) for item in r.items for i in (item[0], item[2]) if i
        ]
        memories = {
            mid: m
            for mid, m in self.store.get_many(owner, wanted).items()
            if m.status is not Status.FORGOTTEN
        }
        block, items = render(record.items, memories, set())
        seen = {i for item in record.items for i in (item[0], item[2]) if i}
        blocks: list[TurnBlock] = []
        for r in earlier:
            text, _ = render(r.items, memories, seen)
            seen.update(i for item in r.items for i in (item[0], item[2]) if i)
            if text is not None:
                blocks.append(TurnBlock(r.key, r.position, text))
        return block, items, tuple(blocks)


def held_over(store: MemoryStore, owner: str, session: str, depth: int) -> tuple[str, ...]:
    """For a door whose client keeps its blocks (``kept=True``): record the session's
    memories that would leave the no-repeat window with the next turn (shown ``depth`` or more
    turns before it) as shown at the session's current turn, so the next turn's injection
    still counts them as held (the client's history has them until a reset). One read; a
    write only when some memory is at its window's end (an injection event with
    ``skipped["in_context"]``, as :meth:`~memlane.injection.Sessions.sync` writes).
    Returns the ids recorded again, in the order they were shown."""
    state = store.session(owner, session)
    upcoming = state.turn + 1
    ending = sorted(
        (mid for mid, t in state.injected.items() if upcoming - t >= depth),
        key=lambda mid: (state.injected[mid], mid),
    )
    if ending and state.turn > 0:
        with store.transaction():
            event = {"skipped": {"in_context": len(ending)}, "elapsed_ms": 0.0}
            store.finish_turn(owner, session, state.turn, ending, event)
        log.info("turn session=%s: %d memories still held, kept in the window", session,
                 len(ending))  # fmt: skip
    return tuple(ending)


def render(
    entries: Sequence[tuple[str, str, str | None, float]],
    memories: dict[str, Memory],
    leave_out: set[str],
) -> tuple[str | None, tuple[InjectedItem, ...]]:
    """A recorded block again: its entries ``(id, source, folded id, score)`` whose memory is
    in ``memories`` and not in ``leave_out``, in their order, through
    :func:`~memlane.injection.pipeline.format_block` (an update note again from the folded
    memory when it is still there). The same memories give the same bytes."""
    pinned: list[Memory] = []
    contextual: list[Memory] = []
    notes: dict[str, str] = {}
    items: list[InjectedItem] = []
    for mid, source, folded, score in entries:
        memory = memories.get(mid)
        if memory is None or mid in leave_out:
            continue
        older = memories.get(folded) if folded else None
        if older is not None and folded not in leave_out:
            notes[mid] = update_note(memory, older)
        (pinned if source == "pinned" else contextual).append(memory)
        items.append(InjectedItem(memory, source, score))
    return format_block(pinned, contextual, notes), tuple(items)
