"""Named migrations of the SQLite store, applied in order on open by the backend-neutral runner
(:mod:`memlane.store.sql.migrate`: each in one transaction with its "applied" record, then a rehash
when the content hash changed)."""

from __future__ import annotations

MIGRATIONS: list[tuple[str, str]] = [
    (
        "0001_initial",
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

        CREATE TABLE memories (
            num INTEGER PRIMARY KEY,          -- row number: the vector-index key
            id TEXT NOT NULL UNIQUE,          -- UUIDv7
            owner TEXT NOT NULL,
            agent TEXT,
            session TEXT,
            source TEXT,
            type TEXT NOT NULL,
            content TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            importance REAL NOT NULL,
            status TEXT NOT NULL DEFAULT 'active',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            last_accessed_at TEXT,
            access_count INTEGER NOT NULL DEFAULT 0,
            confirmations INTEGER NOT NULL DEFAULT 0,
            metadata TEXT NOT NULL DEFAULT '{}',
            embedding BLOB NOT NULL,          -- float32, unit norm
            vec_seq INTEGER NOT NULL          -- bumped on every change the vector index must see
        );
        CREATE INDEX memories_scope_hash ON memories (owner, content_hash) WHERE status = 'active';
        CREATE INDEX memories_owner_vec_seq ON memories (owner, vec_seq);
        CREATE INDEX memories_owner_created ON memories (owner, status, created_at);
        CREATE INDEX memories_owner_session ON memories (owner, session, created_at);

        CREATE VIRTUAL TABLE memories_fts USING fts5 (
            content, content = 'memories', content_rowid = 'num',
            tokenize = 'porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER memories_fts_ai AFTER INSERT ON memories BEGIN
            INSERT INTO memories_fts (rowid, content) VALUES (new.num, new.content);
        END;
        CREATE TRIGGER memories_fts_ad AFTER DELETE ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, content)
                VALUES ('delete', old.num, old.content);
        END;
        CREATE TRIGGER memories_fts_au AFTER UPDATE OF content ON memories BEGIN
            INSERT INTO memories_fts (memories_fts, rowid, content)
                VALUES ('delete', old.num, old.content);
            INSERT INTO memories_fts (rowid, content) VALUES (new.num, new.content);
        END;

        CREATE TABLE memory_history (
            id INTEGER PRIMARY KEY,
            memory_id TEXT NOT NULL REFERENCES memories (id),
            version INTEGER NOT NULL,
            content TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            reason TEXT NOT NULL,
            replaced_at TEXT NOT NULL
        );
        CREATE INDEX memory_history_memory ON memory_history (memory_id, version);

        CREATE TABLE associations (
            source_id TEXT NOT NULL REFERENCES memories (id),
            target_id TEXT NOT NULL REFERENCES memories (id),
            relation TEXT NOT NULL,
            weight REAL NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (source_id, target_id, relation)
        );
        CREATE INDEX associations_target ON associations (target_id);

        CREATE TABLE dedup_log (
            id INTEGER PRIMARY KEY,
            owner TEXT NOT NULL,
            new_text TEXT NOT NULL,
            existing_id TEXT,
            existing_text TEXT,
            similarity REAL,
            decision TEXT NOT NULL,
            reasoning TEXT,
            review_status TEXT NOT NULL DEFAULT 'unreviewed',
            created_at TEXT NOT NULL
        );
        CREATE INDEX dedup_log_owner ON dedup_log (owner, id);

        CREATE TABLE sessions (
            owner TEXT NOT NULL,
            session TEXT NOT NULL,
            turn INTEGER NOT NULL DEFAULT 0,
            last_reset_at TEXT,
            last_reset_reason TEXT,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (owner, session)
        );
        CREATE TABLE session_injections (
            owner TEXT NOT NULL,
            session TEXT NOT NULL,
            memory_id TEXT NOT NULL,
            turn INTEGER NOT NULL,
            PRIMARY KEY (owner, session, memory_id)
        );
        CREATE TABLE injection_events (
            id INTEGER PRIMARY KEY,
            owner TEXT NOT NULL,
            session TEXT NOT NULL,
            turn INTEGER NOT NULL,
            memory_ids TEXT NOT NULL,
            skipped TEXT NOT NULL,
            elapsed_ms REAL NOT NULL,
            query TEXT,
            created_at TEXT NOT NULL
        );
        CREATE INDEX injection_events_session ON injection_events (owner, session, id);
        """,
    ),
    (
        "0002_lookup_indexes",
        """
        -- the transaction's base vec_seq (max over all owners)
        CREATE INDEX IF NOT EXISTS memories_vec_seq ON memories (vec_seq);
        -- "has this owner agent-scoped memories?": without it, a full scan of the owner's rows
        CREATE INDEX IF NOT EXISTS memories_owner_agent ON memories (owner)
            WHERE agent IS NOT NULL;
        """,
    ),
    (
        "0003_memories_valid_to",
        """
        -- when a memory stopped being true (set when a newer memory supersedes it)
        ALTER TABLE memories ADD COLUMN valid_to TEXT;
        """,
    ),
    (
        "0004_learn_cursors",
        """
        -- how many messages of a session MemoryEngine.learn has already read
        CREATE TABLE learn_cursors (
            owner TEXT NOT NULL,
            session TEXT NOT NULL,
            learned INTEGER NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (owner, session)
        );
        """,
    ),
    (
        "0005_memories_project",
        """
        -- the project a memory belongs to (memlane.scope: a repository's identity); NULL:
        -- global to its owner. Rows stored before this migration become global.
        ALTER TABLE memories ADD COLUMN project TEXT;
        CREATE INDEX memories_owner_project ON memories (owner, project)
            WHERE project IS NOT NULL;
        """,
    ),
    (
        "0006_agent_suffix_projects",
        """
        -- Hooks with per_project = true stored a project's memories, before the project
        -- column, under the agent "<agent>@<project identity>" (github.com/acme/app,
        -- commit:<root commit>, path:/folder): they move to that project under the plain
        -- agent, a new change number each (the search caches read them again). The oldest
        -- form, "<agent>@<folder>-<6 hex of its path>", names no identity: `memlane hooks
        -- migrate PATH` moves those, given the repository (memlane.hooks.legacy).
        UPDATE memories SET
            project = substr(agent, instr(agent, '@') + 1),
            agent = substr(agent, 1, instr(agent, '@') - 1),
            vec_seq = (SELECT coalesce(max(vec_seq), 0) FROM memories) + num
        WHERE project IS NULL AND instr(agent, '@') > 1
            AND (substr(agent, instr(agent, '@') + 1) LIKE '%/%'
                 OR substr(agent, instr(agent, '@') + 1) LIKE 'commit:%'
                 OR substr(agent, instr(agent, '@') + 1) LIKE 'path:%');
        """,
    ),
    (
        "0007_pinned_indexes",
        """
        -- an injection turn's pinned memories (Memories.pinned_sql): one walk per type of
        -- its newest or most important active memories, a few rows each, instead of a walk
        -- of every active memory of the owner (93,641 memories: 245 ms a turn sorted by
        -- importance, 278 ms newest first for a type with no memory)
        CREATE INDEX memories_pinned_recent ON memories (owner, type, created_at)
            WHERE status = 'active';
        CREATE INDEX memories_pinned_importance ON memories (owner, type, importance, created_at)
            WHERE status = 'active';
        """,
    ),
    (
        "0008_no_prompt_text",
        """
        -- Issue #33: every injection event kept the turn's query (the user's prompt with lines
        -- of the transcript: secrets and <private> spans included) and nothing read it back.
        -- The column goes; its text is overwritten first. SQLiteStore.open runs the migrations
        -- with secure_delete on (freed bytes zeroed) and empties the WAL after them, so no copy
        -- of the text is left in memlane.db or memlane.db-wal.
        UPDATE injection_events SET query = NULL WHERE query IS NOT NULL;
        ALTER TABLE injection_events DROP COLUMN query;
        """,
    ),
    (
        "0009_session_turns",
        """
        -- the one turn model (memlane.injection.turn): per turn of a session, its key (a
        -- DIGEST of owner, session, position and the user message, or of the door's own turn
        -- id: never the prompt's text, issue #33), the conversation position the door gave,
        -- the session's injection turn number, and the memories of its block in block order
        -- as JSON [[id, "pinned"|"contextual", folded id or null], ...] (ids only: the block
        -- is rendered again from the memories, so a purged or forgotten one is left out).
        CREATE TABLE session_turns (
            owner TEXT NOT NULL,
            session TEXT NOT NULL,
            key TEXT NOT NULL,
            position INTEGER,
            turn INTEGER NOT NULL,
            items TEXT NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (owner, session, key)
        );
        """,
    ),
    (
        "0010_purge_marks",
        """
        -- A purge deletes rows, and a deleted row never shows in the search caches' change
        -- feed (which reads memories): each purge leaves its owner's mark here, numbered like
        -- a change (vec_seq), so every process's caches see it at their next catch-up, rebuild
        -- from the rows left and never save the purged rows back (issue #33). One row per
        -- owner: the SHA-256 of its name (a purged owner's name is not kept), its last purge.
        CREATE TABLE purge_marks (owner_key TEXT PRIMARY KEY, seq INTEGER NOT NULL);
        """,
    ),
]
