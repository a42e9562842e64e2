"""The store's domain written once in SQL, over a small :class:`~memlane.store.sql.dialect.Dialect`
per backend.

What is here is the same for every backend: the ``memories`` rows and their writes
(:mod:`.memories`), sessions (:mod:`.sessions`), associations and the dedup log (:mod:`.links`),
janitor merges and review (:mod:`.maintenance`), the change feed of the search caches
(:mod:`.feed`), the migration runner (:mod:`.migrate`) and :class:`~memlane.store.sql.store.SQLStore`,
which composes them. What a backend supplies is in :mod:`.dialect` (the SQL differences: placeholders,
time / JSON / vector conversion, ``ANY`` against chunked ``IN``, the change number) and
:class:`~memlane.store.sql.database.Database` (connections, transactions, owner locks, access
counts, error translation), plus its vector leg (:class:`~memlane.store.sql.database.VectorLeg`).
"""
