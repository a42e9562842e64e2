"""Helpers for OpenAI-style message lists: injected blocks, transcripts and compaction.

A *message* is a mapping with ``role`` (``"system"``, ``"user"``, ``"assistant"``, ``"tool"``
...) and ``content``. ``content`` is normally a ``str``; it may also be a list of parts such as
``{"type": "text", "text": "..."}`` (non-text parts, e.g. images, carry no text here) or ``None``
(an assistant message that only calls tools). Anything that is not a mapping is treated as a
message without text and is passed through untouched.

From the design (ARCHITECTURE.md, "Injection", History paragraph):

- injected blocks persist in the conversation, bounded by ``max_injected_blocks_in_history``
  (default 3; 0 = ephemeral): :func:`prune_injection_blocks`, :func:`with_injection`;
- prune and insert on the history that will be kept, not on a copy that a cancelled turn
  throws away: every function here returns a *new* list, which the caller must assign to the
  history it keeps;
- the compaction transcript skips injected blocks: :func:`render_transcript`;
- compaction thresholds 0.80 (summarise the oldest 30%), 0.85 (50%), 0.95 (emergency
  truncation, no LLM), and compaction resets the session's tracking: :class:`Compactor`.

Nothing here calls a model by itself; the only LLM call is the ``summarise`` callable a caller
gives to :class:`Compactor`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from memlane.errors import InvalidArgument
from memlane.types import Injection

__all__ = [
    "INJECTION_BLOCK_PREFIX",
    "SUMMARY_PREFIX",
    "CompactionAction",
    "CompactionResult",
    "Compactor",
    "estimate_tokens",
    "is_injection_block",
    "is_injection_text",
    "message_text",
    "prune_injection_blocks",
    "render_transcript",
    "with_injection",
]

#: First line of every injected block (the single source of this constant; import it from here).
INJECTION_BLOCK_PREFIX = "[Context from memory]"

#: First line of the system message that replaces summarised history (see :class:`Compactor`).
SUMMARY_PREFIX = "[Summary of earlier conversation]"

#: What :meth:`Compactor.compact` did (or :meth:`Compactor.needed_action` would do).
CompactionAction = Literal["none", "summarise_30", "summarise_50", "truncate"]


# --------------------------------------------------------------------------- reading messages


def message_text(message: object) -> str:
    """The text of one message: its ``content`` when a ``str``, else its text parts joined.

    List content: parts that are ``{"type": "text", "text": str}`` (or bare strings) are joined
    with ``"\\n"``; other parts (images, audio ...) are ignored. A non-mapping, a missing or
    ``None`` content, or content of any other type gives ``""``. Never raises.
    """
    if not isinstance(message, Mapping):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list | tuple):
        texts: list[str] = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping) and part.get("type", "text") == "text":
                text = part.get("text")
                if isinstance(text, str):
                    texts.append(text)
        return "\n".join(texts)
    return ""


def _role(message: object) -> str | None:
    if isinstance(message, Mapping):
        role = message.get("role")
        if isinstance(role, str):
            return role
    return None


def is_injection_text(text: str) -> bool:
    """True when ``text`` is an injected block: it starts with :data:`INJECTION_BLOCK_PREFIX`
    after leading whitespace."""
    return text.lstrip().startswith(INJECTION_BLOCK_PREFIX)


def is_injection_block(message: object) -> bool:
    """True when the message's text is an injected block (:func:`is_injection_text`).

    The role is not looked at (a block may be inserted with any role). A non-mapping or a
    message without text gives ``False``.
    """
    return is_injection_text(message_text(message))


def _is_summary(message: object) -> bool:
    return _role(message) == "system" and message_text(message).lstrip().startswith(SUMMARY_PREFIX)


# --------------------------------------------------------------------------- injected blocks


def _check_max_keep(max_keep: object) -> int:
    if isinstance(max_keep, bool) or not isinstance(max_keep, int):
        raise InvalidArgument(
            f"max_keep must be an int >= 0 (max_injected_blocks_in_history), got {max_keep!r}"
        )
    if max_keep < 0:
        raise InvalidArgument(
            f"max_keep must be >= 0 (0 = ephemeral: no block kept from earlier turns), "
            f"got {max_keep}"
        )
    return max_keep


def _keep_newest_blocks(messages: Sequence[Any], keep: int) -> list[Any]:
    """New list with only the ``keep`` newest injection blocks; other messages untouched."""
    block_positions = [i for i, m in enumerate(messages) if is_injection_block(m)]
    drop = set(block_positions[: max(len(block_positions) - keep, 0)])
    return [m for i, m in enumerate(messages) if i not in drop]


def prune_injection_blocks(messages: Sequence[Any], max_keep: int) -> list[Any]:
    """Drop old injection blocks, leaving room for the next one.

    Returns a new list (``messages`` is not mutated) that keeps at most ``max_keep - 1`` of the
    newest injection blocks (see :func:`is_injection_block`), so that inserting this turn's
    block keeps the history at ``max_keep`` blocks. ``max_keep`` is
    ``max_injected_blocks_in_history`` (design default 3); ``0`` (ephemeral) and ``1`` both keep
    no earlier block. Every other message is kept, in order, as the same object.

    Raises :class:`~memlane.errors.InvalidArgument` when ``max_keep`` is negative or not an int.
    """
    keep = _check_max_keep(max_keep)
    return _keep_newest_blocks(messages, max(keep - 1, 0))


def with_injection(
    messages: Sequence[Any],
    injection: Injection | str | None,
    max_keep: int,
    *,
    role: str = "system",
) -> list[Any]:
    """This turn's history: old blocks pruned, the new block placed before the last user message.

    ``injection`` is an :class:`~memlane.types.Injection` (its ``.block`` is used), a plain block
    string, or ``None``. The block is inserted as ``{"role": role, "content": block}`` just before
    the last message whose role is ``"user"`` (appended at the end when there is none). Use
    ``role="user"`` for models that reject system messages mid-conversation.

    Bound (``max_keep`` = ``max_injected_blocks_in_history``, design default 3):

    - with a block: earlier blocks are pruned to the newest ``max_keep - 1``
      (:func:`prune_injection_blocks`), then the block is inserted, so the result holds at most
      ``max(max_keep, 1)`` blocks. With ``max_keep = 0`` (ephemeral) the block is still
      inserted for this call -- the caller sends it -- and the next call prunes it away;
    - without a block (``None``, or an ``Injection`` whose ``.block`` is ``None``): nothing is
      inserted and earlier blocks are pruned to the newest ``max_keep`` (no room needs to be
      made), so the result holds at most ``max_keep`` blocks -- in particular none when
      ``max_keep = 0``.

    Returns a new list; ``messages`` is not mutated. **Assign the result to the history you
    keep** (``history = with_injection(history, inj, 3)``) and send that: pruning and inserting
    on a throw-away copy (one a cancelled turn discards) lets blocks pile up or vanish.

    Raises :class:`~memlane.errors.InvalidArgument` when ``max_keep`` is negative, ``role`` is
    empty, or the block does not start with :data:`INJECTION_BLOCK_PREFIX` (after leading
    whitespace) -- such a block could never be recognised, hence never pruned.
    """
    keep = _check_max_keep(max_keep)
    block = injection.block if isinstance(injection, Injection) else injection
    if block is None:
        return _keep_newest_blocks(messages, keep)
    if not isinstance(block, str) or not is_injection_text(block):
        raise InvalidArgument(
            f"an injection block must be a str starting with {INJECTION_BLOCK_PREFIX!r} "
            f"(as MemoryEngine.inject formats it), got {block!r:.80}"
        )
    if not isinstance(role, str) or not role:
        raise InvalidArgument(f"role must be a non-empty str, got {role!r}")
    out = prune_injection_blocks(messages, keep)
    at = len(out)
    for i in range(len(out) - 1, -1, -1):
        if _role(out[i]) == "user":
            at = i
            break
    out.insert(at, {"role": role, "content": block})
    return out


def render_transcript(messages: Sequence[Any]) -> str:
    """Plain-text transcript for compaction / summarisation: one ``"role: text"`` entry a message.

    Injection blocks are skipped (a summary must never carry injected memories back into the
    conversation), as are messages whose text is empty or whitespace (e.g. tool-call-only
    assistant messages) and non-mappings. Entries are joined with ``"\\n"``; a multi-line text
    stays multi-line. A missing role is written ``unknown``.
    """
    lines: list[str] = []
    for message in messages:
        if is_injection_block(message):
            continue
        text = message_text(message).strip()
        if not text:
            continue
        lines.append(f"{_role(message) or 'unknown'}: {text}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- compaction


def estimate_tokens(text: str) -> int:
    """Rough token count: ``ceil(len(text) / 4)`` (about 4 characters a token for English).

    The default ``count_tokens`` of :class:`Compactor`; give a real tokenizer for precision.
    """
    return math.ceil(len(text) / 4)


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """Outcome of :meth:`Compactor.compact`.

    ``messages`` is the new history (a new list; assign it to the history you keep);
    ``action`` what was done; ``tokens_before`` / ``tokens_after`` the token counts of the whole
    history before and after (units of the compactor's ``count_tokens``).
    """

    messages: list[Any]
    action: CompactionAction
    tokens_before: int
    tokens_after: int


def _check_fraction(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"{name} must be a number in (0, 1], got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class Compactor:
    """Keeps a message history under a model's context size, at the design's thresholds.

    Usage = tokens of all messages (sum of ``count_tokens(text)`` over the messages, text as
    :func:`message_text` reads it) / ``context_tokens``. The thresholds come from the design
    (ARCHITECTURE.md, "Injection", History paragraph); at usage >= ...:

    - ``summarise_at`` (0.80): ``"summarise_30"`` -- the oldest 30% of the compactable messages
      are replaced by one summary message;
    - ``deep_summarise_at`` (0.85): ``"summarise_50"`` -- the oldest 50%;
    - ``emergency_at`` (0.95): ``"truncate"`` -- emergency truncation, no LLM: the oldest
      messages are dropped until usage is below ``summarise_at``.

    Without a ``summarise`` callable every crossing falls back to ``"truncate"``.

    Fields:

    - ``context_tokens``: the model's context size in tokens (int > 0);
    - ``count_tokens``: ``str -> int``; default :func:`estimate_tokens` (~4 characters a token);
    - ``summarise``: ``transcript str -> summary str`` (an LLM call), given the
      :func:`render_transcript` of the messages being summarised; errors it raises propagate
      (nothing changed, ``on_reset`` not called); at ``emergency_at`` it is not called;
    - ``summarise_at`` < ``deep_summarise_at`` < ``emergency_at``: fractions of
      ``context_tokens``, ``0 < a < b < c <= 1``.

    Raises :class:`~memlane.errors.InvalidArgument` on a bad field.
    """

    context_tokens: int
    count_tokens: Callable[[str], int] | None = None
    summarise: Callable[[str], str] | None = None
    summarise_at: float = 0.80
    deep_summarise_at: float = 0.85
    emergency_at: float = 0.95

    def __post_init__(self) -> None:
        ctx: object = self.context_tokens
        if isinstance(ctx, bool) or not isinstance(ctx, int) or ctx <= 0:
            raise InvalidArgument(
                f"context_tokens must be an int > 0 (the model's context size in tokens), "
                f"got {ctx!r}"
            )
        a = _check_fraction("summarise_at", self.summarise_at)
        b = _check_fraction("deep_summarise_at", self.deep_summarise_at)
        c = _check_fraction("emergency_at", self.emergency_at)
        if not (0.0 < a < b < c <= 1.0):
            raise InvalidArgument(
                "thresholds must satisfy 0 < summarise_at < deep_summarise_at < emergency_at "
                f"<= 1 (design: 0.80, 0.85, 0.95), got {a}, {b}, {c}"
            )

    # -- measuring

    def _count(self, text: str) -> int:
        counter = self.count_tokens or estimate_tokens
        return counter(text)

    def tokens(self, messages: Sequence[Any]) -> int:
        """Token count of the whole history (sum over messages of ``count_tokens(text)``)."""
        return sum(self._count(message_text(m)) for m in messages)

    def usage(self, messages: Sequence[Any]) -> float:
        """Fraction of the context the history fills: ``tokens(messages) / context_tokens``."""
        return self.tokens(messages) / self.context_tokens

    def needed_action(self, messages: Sequence[Any]) -> CompactionAction:
        """The action :meth:`compact` would take now, without doing it.

        ``"truncate"`` at usage >= ``emergency_at``, or at any crossing when there is no
        ``summarise``; ``"summarise_50"`` at >= ``deep_summarise_at``; ``"summarise_30"`` at
        >= ``summarise_at``; else ``"none"``.
        """
        return self._action_for(self.usage(messages))

    def _action_for(self, usage: float) -> CompactionAction:
        if usage < self.summarise_at:
            return "none"
        if usage >= self.emergency_at or self.summarise is None:
            return "truncate"
        if usage >= self.deep_summarise_at:
            return "summarise_50"
        return "summarise_30"

    # -- compacting

    @staticmethod
    def _split_head(messages: Sequence[Any]) -> int:
        """Length of the leading run of system messages that are kept always.

        Injection blocks and earlier summaries end the run (a summary is folded into the next
        one instead of piling up at the top).
        """
        n = 0
        for message in messages:
            if _role(message) != "system" or is_injection_block(message) or _is_summary(message):
                break
            n += 1
        return n

    @staticmethod
    def _clean_cut(body: Sequence[Any], cut: int) -> int:
        """Move a cut forward past ``tool`` results so none is separated from its call.

        The newest message always stays (the cut never reaches ``len(body)``).
        """
        while 0 < cut < len(body) - 1 and _role(body[cut]) == "tool":
            cut += 1
        return cut

    def compact(
        self,
        messages: Sequence[Any],
        *,
        on_reset: Callable[[], object] | None = None,
    ) -> CompactionResult:
        """Compact the history when its usage crosses a threshold (see :meth:`needed_action`).

        Always kept: the leading run of system messages that are not injection blocks or earlier
        summaries (instructions), and the newest message. The rest (the *body*) is compacted:

        - ``"summarise_30"`` / ``"summarise_50"``: the oldest 30% / 50% of the body (rounded
          down, at least one message, never the newest) is rendered with
          :func:`render_transcript` -- injection blocks dropped, never summarised -- and
          replaced by one message ``{"role": "system", "content": SUMMARY_PREFIX + "\\n" +
          summary}`` placed right after the kept system messages (an earlier summary is part
          of the body, so it is folded into the new one);
        - ``"truncate"``: the oldest body messages are dropped (no LLM) until usage is below
          ``summarise_at``, or only the newest message is left.

        A cut never leaves a ``tool`` message first unless it is the newest (the cut moves
        forward past tool results). One call takes one step; if the history is still above a
        threshold afterwards (e.g. a long summary), call again. When there is nothing to compact
        (only the kept messages), nothing changes and the action is ``"none"``.

        When the action is not ``"none"``, ``on_reset()`` is called once, after compacting --
        this is how the engine resets the session's injection tracking:
        ``on_reset=lambda: engine.reset_session(session, "compact")``. Returns a
        :class:`CompactionResult`; ``messages`` is never mutated.
        """
        # Each message is counted once (``count_tokens`` may be a real tokenizer).
        sizes = [self._count(message_text(m)) for m in messages]
        tokens_before = sum(sizes)
        action = self._action_for(tokens_before / self.context_tokens)
        if action == "none":
            return CompactionResult(list(messages), "none", tokens_before, tokens_before)

        head_len = self._split_head(messages)
        body = list(messages[head_len:])
        body_sizes = sizes[head_len:]
        summary_messages: list[Any] = []

        if action == "truncate":
            limit = self.summarise_at * self.context_tokens
            total = tokens_before
            cut = 0
            while cut < len(body) - 1 and total >= limit:
                total -= body_sizes[cut]
                cut += 1
            cut = self._clean_cut(body, cut)
        else:
            share = 0.3 if action == "summarise_30" else 0.5
            cut = min(max(int(len(body) * share), 1), max(len(body) - 1, 0))
            cut = self._clean_cut(body, cut)
            transcript = render_transcript(body[:cut])
            if transcript:
                assert self.summarise is not None  # _action_for returns truncate without it
                summary = self.summarise(transcript).strip()
                if summary:
                    summary_messages.append(
                        {"role": "system", "content": f"{SUMMARY_PREFIX}\n{summary}"}
                    )

        if cut == 0:  # only kept messages: nothing to compact, tracking stays as it is
            return CompactionResult(list(messages), "none", tokens_before, tokens_before)
        out = list(messages[:head_len]) + summary_messages + body[cut:]
        tokens_after = tokens_before - sum(body_sizes[:cut]) + self.tokens(summary_messages)
        result = CompactionResult(out, action, tokens_before, tokens_after)
        if on_reset is not None:
            on_reset()
        return result
