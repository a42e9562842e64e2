"""Reading LoCoMo-format files (Maharana et al., ACL 2024; the format is described in
``../shared/data/README.md`` and ``docs/replay.md``): conversations, their sessions of turns, the
observations of each session and the questions with their evidence (dialogue ids such as
``"D1:3"``, normalised here)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from memlane.errors import InvalidArgument

#: Question categories scored (5, adversarial, has no answer in the conversation).
CATEGORIES: Mapping[int, str] = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}

_DIA_ID = re.compile(r"^D(\d+):(\d+)$")
_EVIDENCE_SPLIT = re.compile(r"[,;\s]+")
_SESSION_KEY = re.compile(r"^session_(\d+)$")
_OBSERVATION_KEY = re.compile(r"^session_(\d+)_observation$")


def normalise_evidence(value: object) -> list[str]:
    """Dialogue ids cited by an evidence value, normalised, unique, in order.

    ``value`` is a dia id (``"D1:3"``), a string packing several (``"D8:6; D9:17"``,
    ``"D26:14, D26:34"``: split on ``[,; ]+``), or a list of those (nested lists allowed). Leading
    zeros are dropped (``"D30:05"`` -> ``"D30:5"``). Tokens that are not ``D<session>:<turn>``
    (``"D"``, ``"D:11:26"``) are skipped; whether an id resolves to a turn is the caller's check.
    """
    out: list[str] = []
    stack: list[object] = [value]
    while stack:
        item = stack.pop(0)
        if isinstance(item, list | tuple):
            stack[0:0] = list(item)
            continue
        if not isinstance(item, str):
            continue
        for token in _EVIDENCE_SPLIT.split(item.strip()):
            match = _DIA_ID.match(token)
            if match is None:
                continue
            dia_id = f"D{int(match[1])}:{int(match[2])}"
            if dia_id not in out:
                out.append(dia_id)
    return out


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of a session: ``dia_id`` normalised; ``caption`` the image caption, if any."""

    speaker: str
    dia_id: str
    text: str
    caption: str | None = None

    def message(self) -> str:
        """What the turn says, as the agent would read it: ``"<speaker>: <text>"``, plus the
        caption of a shared image in brackets."""
        text = " ".join(self.text.split())
        if self.caption:
            text = f"{text} [shares a photo: {' '.join(self.caption.split())}]".strip()
        return f"{self.speaker}: {text}"


@dataclass(frozen=True, slots=True)
class Question:
    """One question of categories 1-4 with its evidence (normalised and resolving to a turn)."""

    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Observation:
    speaker: str
    text: str
    evidence: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Conversation:
    """One LoCoMo conversation: sessions sorted by number, observations by session number."""

    sample_id: str
    sessions: tuple[tuple[int, tuple[Turn, ...]], ...]
    observations: Mapping[int, tuple[Observation, ...]]
    questions: tuple[Question, ...]
    #: Questions of categories 1-4 left out because none of their evidence resolves.
    unresolved_questions: int = 0

    @property
    def turns(self) -> int:
        return sum(len(turns) for _, turns in self.sessions)


def load_locomo(path: str | Path) -> list[Conversation]:
    """Read a LoCoMo-format JSON file (a list of conversations; see ``docs/replay.md``).

    Raises:
        InvalidArgument: the file is missing, not JSON, or not in LoCoMo format.
    """
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidArgument(f"no such file: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"cannot read {p}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise InvalidArgument(f"{p} is not valid JSON: {exc}") from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data:
        raise InvalidArgument(f"{p}: expected a JSON list of LoCoMo conversations")
    return [_parse_conversation(item, n, p) for n, item in enumerate(data)]


def _parse_conversation(item: object, n: int, path: Path) -> Conversation:
    where = f"{path}: conversation {n}"
    if not isinstance(item, Mapping):
        raise InvalidArgument(f"{where}: expected an object, got {type(item).__name__}")
    conv = item.get("conversation")
    if not isinstance(conv, Mapping):
        raise InvalidArgument(f"{where}: missing 'conversation' object")
    sample_id = str(item.get("sample_id") or f"conv-{n}")
    where = f"{path}: {sample_id}"

    sessions: list[tuple[int, tuple[Turn, ...]]] = []
    for key, value in conv.items():
        match = _SESSION_KEY.match(str(key))
        if match is None or not isinstance(value, list):
            continue
        turns: list[Turn] = []
        for t in value:
            if not isinstance(t, Mapping) or not isinstance(t.get("text"), str):
                raise InvalidArgument(f"{where}: {key} has a turn without 'text'")
            ids = normalise_evidence(t.get("dia_id"))
            caption = t.get("blip_caption")
            turns.append(
                Turn(
                    speaker=str(t.get("speaker") or "someone"),
                    dia_id=ids[0] if ids else "",
                    text=t["text"],
                    caption=caption if isinstance(caption, str) and caption.strip() else None,
                )
            )
        sessions.append((int(match[1]), tuple(turns)))
    if not sessions:
        raise InvalidArgument(f"{where}: no 'session_<N>' lists in 'conversation'")
    sessions.sort(key=lambda s: s[0])
    turn_ids = frozenset(t.dia_id for _, turns in sessions for t in turns if t.dia_id)

    observations: dict[int, tuple[Observation, ...]] = {}
    raw_obs = item.get("observation") or {}
    if not isinstance(raw_obs, Mapping):
        raise InvalidArgument(f"{where}: 'observation' must be an object")
    for key, value in raw_obs.items():
        match = _OBSERVATION_KEY.match(str(key))
        if match is None or not isinstance(value, Mapping):
            continue
        facts: list[Observation] = []
        for speaker, entries in value.items():
            for entry in entries if isinstance(entries, list) else []:
                if isinstance(entry, list | tuple) and entry and isinstance(entry[0], str):
                    evidence = normalise_evidence(list(entry[1:]))
                    if entry[0].strip():
                        facts.append(Observation(str(speaker), entry[0].strip(), tuple(evidence)))
        observations[int(match[1])] = tuple(facts)

    questions: list[Question] = []
    unresolved = 0
    for qa in item.get("qa") or []:
        if not isinstance(qa, Mapping) or not isinstance(qa.get("question"), str):
            continue
        category = qa.get("category")
        if not isinstance(category, int) or category not in CATEGORIES:
            continue
        resolved = tuple(e for e in normalise_evidence(qa.get("evidence")) if e in turn_ids)
        if not resolved:
            unresolved += 1
            continue
        questions.append(Question(qa["question"], category, resolved))
    return Conversation(
        sample_id=sample_id,
        sessions=tuple(sessions),
        observations=observations,
        questions=tuple(questions),
        unresolved_questions=unresolved,
    )


def select_conversations(
    conversations: Sequence[Conversation], selection: str | Sequence[int | str] | None
) -> list[Conversation]:
    """The conversations named by ``selection``: indexes (``"0,2"``) or sample ids
    (``"conv-26"``), comma-separated or a list; ``None`` or empty = all.

    Raises:
        InvalidArgument: an index out of range or an unknown sample id.
    """
    if selection is None:
        return list(conversations)
    parts = (
        [s.strip() for s in selection.split(",") if s.strip()]
        if isinstance(selection, str)
        else [str(s).strip() for s in selection]
    )
    if not parts:
        return list(conversations)
    by_id = {c.sample_id: c for c in conversations}
    out: list[Conversation] = []
    for part in parts:
        if part in by_id:
            chosen = by_id[part]
        elif part.lstrip("-").isdigit():
            index = int(part)
            if not 0 <= index < len(conversations):
                raise InvalidArgument(
                    f"conversation index {index} out of range: the file has "
                    f"{len(conversations)} (0..{len(conversations) - 1})"
                )
            chosen = conversations[index]
        else:
            names = ", ".join(by_id)
            raise InvalidArgument(f"unknown conversation {part!r}; indexes or one of: {names}")
        if chosen not in out:
            out.append(chosen)
    return out
