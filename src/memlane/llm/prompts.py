"""Every prompt memlane sends to a model, versioned, and the schemas of the answers.

Change a prompt's text -> bump its version: ``dedup_log`` rows record the version that produced
each decision (``[verify-v1] <reasoning>``), so a review can tell old decisions from new ones.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from memlane.types import TYPE_NAMES

VERIFY_VERSION = "verify-v3"
LEARN_VERSION = "learn-v1"
JANITOR_VERSION = "janitor-v2"
VERIFY_MANY_VERSION = "verify-many-v2"

VERIFY_SYSTEM = """\
You deduplicate the long-term memory of an AI assistant. You get an EXISTING memory and a NEW \
candidate memory. Decide:
- "reject": NEW says nothing that EXISTING does not already say (same facts, maybe other words).
- "merge": both are about the same thing and NEW adds a detail; write "merged_text", one \
memory that keeps every fact of both, no longer than both together.
- "contradict": NEW replaces EXISTING: the same thing changed, so EXISTING is no longer true \
("lives in Paris" then "moved to Berlin"; "likes tea" then "no longer drinks tea").
- "keep": they state different facts that can both be true (other people, other things, other \
times): store both.
When unsure, answer "keep". Answer with one JSON object only: \
{"action": "merge" | "reject" | "contradict" | "keep", "merged_text": the merged memory for \
"merge", else "", \
"reasoning": one short sentence}."""

VERIFY_USER = "EXISTING: {existing}\nNEW: {new}"

#: Several pairs of one write batch in one call: the same decision per numbered pair.
VERIFY_MANY_SYSTEM = (
    VERIFY_SYSTEM.split("Answer with one JSON object only")[0]
    + """You get several numbered PAIRS, each an EXISTING memory and a NEW one; decide each pair on \
its own. Answer with one JSON object only: {"answers": [{"pair": number, "action": "merge" | \
"reject" | "contradict" | "keep", "merged_text": the merged memory for "merge", else "", \
"reasoning": one short \
sentence}]}, one answer for every pair."""
)

VERIFY_MANY_USER = "PAIR {n}\nEXISTING: {existing}\nNEW: {new}"

LEARN_SYSTEM = f"""\
You extract long-term memories from a conversation between a user and an AI assistant. Keep \
only what will be useful in later conversations: facts about the user, preferences, decisions, \
goals, to-dos, events. Each memory is one to three sentences that stand on their own (name who \
and what; include the context that makes it useful later). Skip small talk and anything the \
assistant only guessed. Types: {TYPE_NAMES}. Importance: 0 (trivial) to 1 (essential). Answer \
with one JSON object only: {{"memories": [{{"content": string, "type": string, "importance": \
number}}]}} (an empty list when nothing is worth keeping)."""

LEARN_USER = "Conversation:\n{transcript}"

#: Added to the learn prompt once when the first answer held nothing usable (``problem``: why).
LEARN_RETRY = """\
Your previous answer could not be used: {problem}. Answer again with one JSON object only: \
{{"memories": [{{"content": string, "type": string, "importance": number from 0 to 1}}]}}."""

JANITOR_SYSTEM = """\
You clean up the long-term memory of an AI assistant. You get a numbered list of stored \
memories that look alike. Decide which of them say the same thing (the same facts, maybe in \
other words, one maybe with more detail) and write ONE memory that keeps every fact of those: \
"merged_text", no longer than those memories together. Memories about other people, things or \
times, or that contradict each other, are NOT the same: leave them out. Answer with one JSON \
object only: {"action": "merge" | "keep", "members": [numbers of the memories merged, at least \
two], "merged_text": the merged memory for "merge", else "", "reasoning": one short \
sentence}. "keep": none of them \
say the same thing."""

JANITOR_USER = "Memories:\n{numbered}"


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")


#: ``merged_text`` as the schema sent to the model says it: a string, always written (``""``
#: unless merging). A grammar-constrained small model offered ``string or null`` answered
#: ``merge`` with ``null`` every time (SmolLM2-135M under llama.cpp: docs/dedup.md), which the
#: write path must refuse; pydantic still accepts ``null`` from a model that sends it.
MergedText = Annotated[str | None, WithJsonSchema({"type": "string"})]
#: The answer's fields a model must write (the schema's ``required``; pydantic keeps defaults).
_WRITE_ALL = ConfigDict(
    extra="ignore", json_schema_extra={"required": ["action", "merged_text", "reasoning"]}
)


class VerifyAnswer(_Answer):
    """The model's answer to :data:`VERIFY_SYSTEM`."""

    model_config = _WRITE_ALL

    action: Literal["merge", "reject", "keep", "contradict"]
    merged_text: MergedText = None
    reasoning: str = Field(default="", max_length=2000)


class JanitorAnswer(_Answer):
    """The model's answer to :data:`JANITOR_SYSTEM` (``members``: 1-based numbers)."""

    model_config = _WRITE_ALL

    action: Literal["merge", "keep"]
    members: list[int] = Field(default_factory=list, max_length=200)
    merged_text: MergedText = None
    reasoning: str = Field(default="", max_length=2000)


class PairAnswer(VerifyAnswer):
    """One pair's answer in :class:`VerifyManyAnswer` (``pair``: its 1-based number)."""

    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra={"required": ["pair", "action", "merged_text", "reasoning"]},
    )

    pair: int


class VerifyManyAnswer(_Answer):
    """The model's answer to :data:`VERIFY_MANY_SYSTEM`."""

    answers: list[PairAnswer] = Field(default_factory=list, max_length=200)


class LearnedMemory(_Answer):
    content: str = Field(min_length=1)
    type: str = "fact"
    importance: float = Field(default=0.5, ge=0, le=1)


class LearnAnswer(_Answer):
    """The model's answer to :data:`LEARN_SYSTEM`."""

    #: Required: an answer without it is malformed, not "nothing to learn" (a small model that
    #: answers some other JSON must not look like a conversation with nothing worth keeping).
    memories: list[LearnedMemory] = Field(max_length=200)


def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema sent to the model: its fields, types and required fields, without titles
    and descriptions (docstrings written for developers, which a small model copies into its
    answer when the schema is in its prompt)."""
    bare: dict[str, Any] = _bare(model.model_json_schema())
    return bare


def _bare(schema: Any) -> Any:
    """``schema`` without its ``title`` / ``description`` annotations (strings; a property of that
    name is a dict and stays)."""
    if isinstance(schema, dict):
        return {
            k: _bare(v)
            for k, v in schema.items()
            if not (k in ("title", "description") and isinstance(v, str))
        }
    if isinstance(schema, list):
        return [_bare(v) for v in schema]
    return schema
