"""The ``memlane`` script and ``python -m memlane``: ``memlane hook ...`` goes straight to the
hook (:mod:`memlane.hooks.run`, standard library only, ~50 ms) without loading the Typer
application and every command module (~0.5 s); everything else goes to :mod:`memlane.cli`."""

from __future__ import annotations

import sys

#: Options of the ``memlane`` application that may come before ``hook`` (``memlane -v hook``).
GLOBAL_FLAGS = frozenset({"-v", "-vv", "-vvv", "--verbose", "-q", "--quiet"})


def main() -> None:
    """Entry point of the ``memlane`` script."""
    args = sys.argv[1:]
    lead = 0
    while lead < len(args) and args[lead] in GLOBAL_FLAGS:
        lead += 1
    if args[lead : lead + 1] == ["hook"] and not {"-h", "--help"} & set(args):
        try:
            from memlane.hooks.run import main as hook

            code = hook(args[lead + 1 :])
        except Exception:  # never in the user's way: not even a broken install (exit 0)
            code = 0
        sys.exit(code)
    from memlane.cli import main as cli

    cli()
