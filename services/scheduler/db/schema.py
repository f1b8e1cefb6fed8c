"""Versioned schema migrations, applied in order; a database records the last one it ran.

Written in the SQL that SQLite and PostgreSQL share, so one schema serves both; the few types
they spell differently are written as the tokens {AUTO_ID} and {BLOB} and rendered per backend.
Never edit a released migration: append a new one.
"""

from __future__ import annotations

from pedl_scheduler.db.dialect import Dialect

MIGRATIONS: list[list[str]] = [
    # 1: experiments, trials and their results.
    [
        """CREATE TABLE experiments (
            id {AUTO_ID},
            state TEXT NOT NULL,
            config_yaml TEXT NOT NULL,
            config_json TEXT NOT NULL,
            model_definition {BLOB} NOT NULL,
            model_definition_name TEXT NOT NULL,
            seed BIGINT NOT NULL,
            searcher_snapshot TEXT,
            error TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL,
            ended_at TEXT NOT NULL DEFAULT ''
        )""",
        """CREATE TABLE trials (
            id {AUTO_ID},
            experiment_id INTEGER NOT NULL REFERENCES experiments(id),
            request_id TEXT NOT NULL,
            state TEXT NOT NULL,
            hparams_json TEXT NOT NULL,
            seed BIGINT NOT NULL,
            run_id INTEGER NOT NULL DEFAULT 0,
            restarts INTEGER NOT NULL DEFAULT 0,
            total_batches BIGINT NOT NULL DEFAULT 0,
            latest_checkpoint_uuid TEXT NOT NULL DEFAULT '',
            latest_checkpoint_batches BIGINT NOT NULL DEFAULT 0,
            latest_checkpoint_step INTEGER NOT NULL DEFAULT 0,
            sequencer_json TEXT NOT NULL,
            best_validation DOUBLE PRECISION,
            error TEXT NOT NULL DEFAULT '',
            start_time TEXT NOT NULL DEFAULT '',
            end_time TEXT NOT NULL DEFAULT '',
            UNIQUE (experiment_id, request_id)
        )""",
        "CREATE INDEX trials_experiment ON trials (experiment_id)",
        """CREATE TABLE steps (
            trial_id INTEGER NOT NULL REFERENCES trials(id),
            step_id INTEGER NOT NULL,
            total_batches BIGINT NOT NULL,
            num_batches BIGINT NOT NULL,
            metrics_json TEXT NOT NULL,
            end_time TEXT NOT NULL,
            PRIMARY KEY (trial_id, total_batches)
        )""",
        """CREATE TABLE validations (
            trial_id INTEGER NOT NULL REFERENCES trials(id),
            step_id INTEGER NOT NULL,
            total_batches BIGINT NOT NULL,
            metrics_json TEXT NOT NULL,
            end_time TEXT NOT NULL,
            PRIMARY KEY (trial_id, total_batches)
        )""",
        """CREATE TABLE checkpoints (
            uuid TEXT PRIMARY KEY,
            trial_id INTEGER NOT NULL REFERENCES trials(id),
            step_id INTEGER NOT NULL,
            total_batches BIGINT NOT NULL,
            state TEXT NOT NULL,
            checkpoint_json TEXT NOT NULL,
            created_at TEXT NOT NULL
        )""",
        "CREATE INDEX checkpoints_trial ON checkpoints (trial_id)",
        """CREATE TABLE trial_logs (
            id {AUTO_ID},
            trial_id INTEGER NOT NULL REFERENCES trials(id),
            run_id INTEGER NOT NULL,
            timestamp TEXT NOT NULL,
            source TEXT NOT NULL,
            message TEXT NOT NULL
        )""",
        "CREATE INDEX trial_logs_trial ON trial_logs (trial_id, id)",
    ],
    # 2: a trial that continues another's checkpoint (PBT exploit, ASHA resume) remembers which.
    [
        "ALTER TABLE trials ADD COLUMN parent_trial_id INTEGER",
    ],
    # 3: users, their sessions (only a hash of each token is kept), and who owns an experiment.
    [
        """CREATE TABLE users (
            id {AUTO_ID},
            username TEXT NOT NULL UNIQUE,
            password_hash TEXT NOT NULL,
            admin INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL
        )""",
        """CREATE TABLE sessions (
            token_hash TEXT PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id),
            created_at TEXT NOT NULL,
            expires_at DOUBLE PRECISION NOT NULL
        )""",
        "CREATE INDEX sessions_user ON sessions (user_id)",
        "ALTER TABLE experiments ADD COLUMN owner TEXT NOT NULL DEFAULT ''",
    ],
    # 4: a child trial waiting for its parent to save the state it copies survives a restart.
    [
        "ALTER TABLE trials ADD COLUMN waiting_on_trial_id INTEGER",
    ],
    # 5: the searcher's events since its last snapshot (a large search snapshots now and then).
    [
        "ALTER TABLE experiments ADD COLUMN searcher_seq BIGINT NOT NULL DEFAULT 0",
        """CREATE TABLE searcher_events (
            experiment_id INTEGER NOT NULL REFERENCES experiments(id),
            seq BIGINT NOT NULL,
            event_json TEXT NOT NULL,
            PRIMARY KEY (experiment_id, seq)
        )""",
    ],
]


def render(version: int, dialect: Dialect) -> list[str]:
    """Migration `version` (1-based) as statements for `dialect`."""
    return [dialect.render(statement) for statement in MIGRATIONS[version - 1]]
