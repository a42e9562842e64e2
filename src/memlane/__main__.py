"""``python -m memlane``: the same CLI as the ``memlane`` script."""

from memlane._entry import main

main()
