"""``python -m memlane``: the same CLI as the ``memlane`` script."""

from memlane.cli import main

main()
