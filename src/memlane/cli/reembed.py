"""``memlane reembed --model NAME``: re-embed a store with another model (docs/embeddings.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from memlane.cli.app import HomeOption, JsonOption, app, print_json, progress_bar
from memlane.cli.render import command


@command(app, "reembed")
def reembed_command(
    model: Annotated[
        str,
        typer.Option(
            "--model",
            help="The model to switch to: a local model (all-MiniLM-L6-v2, "
            "multilingual-e5-small, ...) or, with --provider openai, the server's model name.",
            show_default=False,
        ),
    ],
    provider: Annotated[
        str | None,
        typer.Option(
            "--provider",
            help="local, openai or hash. Default: [embedding] provider of the settings (the "
            "openai provider's base_url, key and dimensions come from there too).",
        ),
    ] = None,
    batch_size: Annotated[
        int, typer.Option("--batch-size", min=1, max=4096, help="Memories per batch.")
    ] = 256,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Re-embed every memory of the store with another model, then switch the store to it.

    Batches are staged in the store (SQLite file or PostgreSQL database; an interrupted run
    resumes where it stopped); the switch of all vectors and of the recorded model is one
    transaction, and the search indexes are rebuilt (SQLite: at the next open; PostgreSQL: the
    HNSW index, inside the switch). Stop other processes that write to the store first. Afterwards
    set [embedding] model (and provider) in memlane.toml to the new model.

    Example:  memlane reembed --model multilingual-e5-small
    """
    from pydantic import ValidationError

    from memlane.cli.app import handle_errors
    from memlane.config import EmbeddingSettings, Settings
    from memlane.embeddings import embedder_from_settings
    from memlane.errors import ConfigError
    from memlane.store import reembed_store

    with handle_errors():
        settings = Settings.load(home)
        emb = settings.embedding.model_dump()
        emb.update(model=model, provider=provider or emb["provider"])
        try:
            target = EmbeddingSettings.model_validate(emb)
        except ValidationError as exc:
            message = exc.errors()[0]["msg"].removeprefix("Value error, ")
            raise ConfigError("--model", model, message) from None
        embedder = embedder_from_settings(target)
        with progress_bar(remaining=True) as bar:
            task = bar.add_task(f"re-embedding with {embedder.name}", total=None)

            def advance(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            result = reembed_store(settings, embedder, batch_size=batch_size, progress=advance)
    if as_json:
        print_json(
            {
                "memories": result.memories,
                "embedded": result.embedded,
                "resumed": result.resumed,
                "old_model": result.old_model,
                "model": result.new_model,
                "dimension": result.dimension,
            }
        )
        return
    typer.echo(
        f"{result.memories} memories now embedded with {result.new_model} "
        f"({result.dimension} dims; was {result.old_model}; {result.embedded} embedded now, "
        f"{result.resumed} staged by an earlier run)."
    )
    setting = f'provider = "{target.provider}"\nmodel = "{target.model}"'
    typer.echo(f"Set in memlane.toml (or MEMLANE_EMBEDDING__MODEL):\n[embedding]\n{setting}")
