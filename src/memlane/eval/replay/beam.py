"""Reading BEAM-format chats (Tavakoli et al., "Beyond a Million Tokens", ICLR 2026;
github.com/mohammadtavakoli78/BEAM) for ``memlane replay`` (docs/replay.md, "BEAM").

A chat is a folder holding ``chat.json`` (a list of batches: ``{"batch_number": N, "turns":
[[message, ...], ...]}``, each message ``{"role": "user"|"assistant", "id": int, "content":
str, ...}``) and ``probing_questions/probing_questions.json`` (category -> list of questions,
each with ``question`` and, except abstention, ``source_chat_ids``: a list of message ids or a
dict of such lists). :func:`load_beam` takes one chat folder, or a folder of chat folders (the
dataset's ``chats/100K``), and :func:`is_beam` tells such a path from a LoCoMo file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlane.errors import InvalidArgument

__all__ = ["BeamChat", "BeamQuestion", "Message", "chat_folders", "is_beam", "load_beam"]

CHAT_FILE = "chat.json"
QUESTIONS_FILE = Path("probing_questions") / "probing_questions.json"

#: The position marker BEAM's generator appends to user messages (``"... ->-> 1,1"``): not part
#: of what a user writes, so it is cut off.
_MARKER = re.compile(r"\s*->->\s*\d+\s*,\s*\d+\s*$")


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a chat: ``id`` (BEAM's, unique in the chat), ``role`` and ``text``."""

    id: int
    role: str
    text: str

    def memory_text(self) -> str:
        """What is stored: ``"<role>: <text>"`` with whitespace runs folded."""
        return f"{self.role}: {' '.join(self.text.split())}"

    def memory_texts(self, max_chars: int) -> list[str]:
        """:meth:`memory_text`, or, when longer than ``max_chars`` (the write path's limit),
        consecutive parts of at most that many characters, cut at paragraph breaks where
        possible (else at spaces), each ``"<role>: <part>"``."""
        whole = self.memory_text()
        if len(whole) <= max_chars:
            return [whole]
        room = max_chars - len(self.role) - 2
        parts: list[str] = []
        current = ""
        for para in (" ".join(p.split()) for p in self.text.split("\n\n")):
            while len(para) > room:  # a paragraph longer than a part: cut at a space
                cut = para.rfind(" ", 0, room)
                cut = cut if cut > 0 else room
                parts.extend([current] if current else [])
                current = ""
                parts.append(para[:cut])
                para = para[cut:].strip()
            if current and len(current) + 1 + len(para) > room:
                parts.append(current)
                current = para
            else:
                current = f"{current} {para}".strip()
        parts.extend([current] if current else [])
        return [f"{self.role}: {p}" for p in parts if p]


@dataclass(frozen=True, slots=True)
class BeamQuestion:
    """A probing question with evidence: ``category`` is BEAM's (``knowledge_update``...),
    ``evidence`` the cited message ids (as strings) that exist in the chat."""

    text: str
    category: str
    evidence: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class BeamChat:
    """One chat: ``sample_id`` is its folder's name; ``batches`` ``(batch_number, messages)``
    in order; ``questions`` those with evidence; ``unresolved_questions`` the others that are
    not abstention questions (none of their cited ids is a message of the chat)."""

    sample_id: str
    batches: tuple[tuple[int, tuple[Message, ...]], ...]
    questions: tuple[BeamQuestion, ...]
    unresolved_questions: int = 0
    #: Abstention questions (no evidence by design): not scored.
    abstention: int = 0

    @property
    def turns(self) -> int:
        """User messages (each one is an injection turn)."""
        return sum(m.role == "user" for _, msgs in self.batches for m in msgs)


def _is_chat(folder: Path) -> bool:
    return (folder / CHAT_FILE).is_file() and (folder / QUESTIONS_FILE).is_file()


def chat_folders(path: str | Path) -> list[Path]:
    """The chat folders of ``path``: itself when it is one, else its sub-folders that are (in
    the order of their names, numbers by value: ``1, 2, ..., 10``). Empty when none."""
    p = Path(path)
    if not p.is_dir():
        return []
    if _is_chat(p):
        return [p]
    subs = [d for d in p.iterdir() if d.is_dir() and _is_chat(d)]
    return sorted(subs, key=lambda d: (0, int(d.name), "") if d.name.isdigit() else (1, 0, d.name))


def is_beam(path: str | Path) -> bool:
    """True when ``path`` is a BEAM chat folder or a folder of them."""
    return bool(chat_folders(path))


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidArgument(f"cannot read {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise InvalidArgument(f"{path} is not valid JSON ({exc.msg}, line {exc.lineno})") from None


def _messages(turns: Any, where: Path) -> list[Message]:
    out: list[Message] = []
    stack = list(turns) if isinstance(turns, list) else []
    while stack:
        item = stack.pop(0)
        if isinstance(item, list):
            stack[0:0] = item
            continue
        if not isinstance(item, Mapping) or not isinstance(item.get("id"), int):
            raise InvalidArgument(
                f"{where}: a message must be an object with an integer 'id', 'role' and "
                f"'content' (BEAM format), got {str(item)[:80]!r}"
            )
        role, content = item.get("role"), item.get("content")
        if role not in ("user", "assistant") or not isinstance(content, str):
            raise InvalidArgument(
                f"{where}: message {item['id']} needs role 'user' or 'assistant' and a string "
                "content"
            )
        text = _MARKER.sub("", content) if role == "user" else content
        out.append(Message(item["id"], role, text))
    return out


def _ids(value: Any) -> list[str]:
    """Message ids cited by ``source_chat_ids`` (a list, a dict of lists, nested), as strings."""
    out: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop(0)
        if isinstance(item, Mapping):
            stack[0:0] = list(item.values())
        elif isinstance(item, list | tuple):
            stack[0:0] = list(item)
        elif isinstance(item, int) and not isinstance(item, bool) and str(item) not in out:
            out.append(str(item))
    return out


def load_chat(folder: Path) -> BeamChat:
    """One chat folder (see the module doc). Raises :class:`InvalidArgument` naming the file."""
    chat_path, q_path = folder / CHAT_FILE, folder / QUESTIONS_FILE
    data = _read(chat_path)
    if not isinstance(data, list) or not all(isinstance(b, Mapping) and "turns" in b for b in data):
        raise InvalidArgument(
            f"{chat_path} is not a BEAM chat: expected a list of batches with 'turns'"
        )
    batches = []
    for n, batch in enumerate(data, 1):
        number = batch.get("batch_number", n)
        batches.append((int(number), tuple(_messages(batch["turns"], chat_path))))
    known = {str(m.id) for _, msgs in batches for m in msgs}
    probing = _read(q_path)
    if not isinstance(probing, Mapping):
        raise InvalidArgument(f"{q_path} is not BEAM probing questions: expected an object")
    questions: list[BeamQuestion] = []
    unresolved = abstention = 0
    for category, items in probing.items():
        for q in items if isinstance(items, list) else []:
            if not isinstance(q, Mapping) or not isinstance(q.get("question"), str):
                continue
            evidence = tuple(i for i in _ids(q.get("source_chat_ids")) if i in known)
            if evidence:
                questions.append(BeamQuestion(q["question"], str(category), evidence))
            elif category == "abstention":
                abstention += 1
            else:
                unresolved += 1
    return BeamChat(folder.name, tuple(batches), tuple(questions), unresolved, abstention)


def load_beam(path: str | Path) -> list[BeamChat]:
    """The chats of ``path`` (a chat folder, or a folder of chat folders).

    Raises:
        InvalidArgument: no chat folder there, or a file not in BEAM format.
    """
    folders = chat_folders(path)
    if not folders:
        raise InvalidArgument(
            f"{path} holds no BEAM chat: a chat folder has {CHAT_FILE} and {QUESTIONS_FILE} "
            "(give it, or the folder of such folders, e.g. BEAM's chats/100K)"
        )
    return [load_chat(f) for f in folders]
