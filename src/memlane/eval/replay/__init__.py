"""The replay: ``memlane replay FILE|FOLDER`` (docs/replay.md), LoCoMo files or BEAM chats.

- :mod:`~memlane.eval.replay.beam`: reading BEAM chats (messages, probing questions);
- :mod:`~memlane.eval.replay.locomo`: reading the file (conversations, observations, questions);
- :mod:`~memlane.eval.replay.run`: the replay itself, on a fresh store;
- :mod:`~memlane.eval.replay.report`: the tallies and the report.
"""

from memlane.eval.replay.beam import BeamChat, BeamQuestion, is_beam, load_beam
from memlane.eval.replay.locomo import (
    CATEGORIES,
    Conversation,
    Question,
    Turn,
    load_locomo,
    normalise_evidence,
    select_conversations,
)
from memlane.eval.replay.report import MODES
from memlane.eval.replay.run import (
    load_conversations,
    open_replay_engine,
    replay,
    replay_file,
    token_counter,
)

__all__ = [
    "CATEGORIES",
    "MODES",
    "BeamChat",
    "BeamQuestion",
    "Conversation",
    "Question",
    "Turn",
    "is_beam",
    "load_beam",
    "load_conversations",
    "load_locomo",
    "normalise_evidence",
    "open_replay_engine",
    "replay",
    "replay_file",
    "select_conversations",
    "token_counter",
]
