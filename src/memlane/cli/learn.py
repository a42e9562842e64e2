"""``memlane learn TRANSCRIPT``: the configured LLM extracts memories from a conversation."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memlane.cli.app import (
    AgentOption,
    HomeOption,
    JsonOption,
    OwnerOption,
    ProjectOption,
    app,
    out,
    print_json,
)
from memlane.cli.render import (
    command,
    decision_text,
    engine_for,
    memory_cell,
    project_for,
    table,
    write_result_dict,
)


@command(app, "learn")
def learn(
    transcript: Annotated[
        Path,
        typer.Argument(
            help="OpenAI-style JSON/JSONL messages or a Claude Code transcript (JSONL).",
            show_default=False,
        ),
    ],
    owner: OwnerOption = None,
    agent: AgentOption = None,
    session: Annotated[
        str | None, typer.Option("--session", help="Session the memories were learned in.")
    ] = None,
    project: ProjectOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Learn memories from a conversation with the configured LLM ([llm] in memlane.toml).

    Injected [Context from memory] blocks are removed before the model sees the conversation;
    the extracted memories go through the write path (no duplicates) as one batch. Without an
    LLM configured this is an error naming the setting (exit code 5); a transcript that cannot
    be read (exit code 3).

    Example:  memlane learn chat.jsonl --owner alice
    """
    from memlane.learn import read_transcript

    with engine_for(home, create=True) as engine:
        messages = read_transcript(transcript)
        results = engine.learn(
            messages, owner=owner, agent=agent, session=session, project=project_for(project)
        )
        stats = engine.llm_stats()
    if as_json:
        print_json({"results": [write_result_dict(r) for r in results], "llm": stats})
        return
    t = table(f"{len(results)} memories learned from {len(messages)} messages")
    t.add_column("decision", no_wrap=True)
    t.add_column("memory (id below)", min_width=36)  # the id whole at 80 columns
    for r in results:
        t.add_row(decision_text(r.decision), memory_cell(r.memory, with_type=True))
    out.print(t)
