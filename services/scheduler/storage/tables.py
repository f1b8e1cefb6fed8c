"""The scheduler's tables, declared once: SQLAlchemy renders them for SQLite and PostgreSQL alike.

This is the schema at the newest migration (`migrations/versions`); a change here comes with a
new migration that makes it, and `tests/unit/scheduler/test_migrations.py` checks the two agree.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    text,
)

metadata = MetaData()


def auto_id() -> Column:
    """An id the database assigns: SQLite's AUTOINCREMENT rowid, a BIGINT identity on PostgreSQL
    (BY DEFAULT, so restores and tests may still insert explicit ids)."""
    return Column(
        "id",
        BigInteger().with_variant(Integer, "sqlite"),
        Identity(always=False),
        primary_key=True,
    )


experiments = Table(
    "experiments",
    metadata,
    auto_id(),
    Column("state", Text, nullable=False),
    Column("config_yaml", Text, nullable=False),
    Column("config_json", Text, nullable=False),
    Column("model_definition", LargeBinary, nullable=False),
    Column("model_definition_name", Text, nullable=False),
    Column("seed", BigInteger, nullable=False),
    Column("searcher_snapshot", Text),
    Column("error", Text, nullable=False, server_default=""),
    Column("created_at", Text, nullable=False),
    Column("ended_at", Text, nullable=False, server_default=""),
    Column("owner", Text, nullable=False, server_default=""),
    Column("searcher_seq", BigInteger, nullable=False, server_default=text("0")),
    # Set by PatchExperiment: NULL description means the config's.
    Column("description", Text),
    Column("labels_json", Text, nullable=False, server_default="[]"),
    Column("archived", Integer, nullable=False, server_default=text("0")),
    # The checkpoint every trial starts from (searcher.source_checkpoint_uuid / source_trial_id,
    # resolved at create); "" for none.
    Column("warm_start_checkpoint_uuid", Text, nullable=False, server_default=""),
    # Free text its owner or an admin keeps on the experiment (PatchExperiment notes).
    Column("notes", Text, nullable=False, server_default=""),
    sqlite_autoincrement=True,
)

trials = Table(
    "trials",
    metadata,
    auto_id(),
    Column("experiment_id", Integer, ForeignKey("experiments.id"), nullable=False),
    Column("request_id", Text, nullable=False),
    Column("state", Text, nullable=False),
    Column("hparams_json", Text, nullable=False),
    Column("seed", BigInteger, nullable=False),
    Column("run_id", Integer, nullable=False, server_default=text("0")),
    Column("restarts", Integer, nullable=False, server_default=text("0")),
    Column("total_batches", BigInteger, nullable=False, server_default=text("0")),
    Column("latest_checkpoint_uuid", Text, nullable=False, server_default=""),
    Column("latest_checkpoint_batches", BigInteger, nullable=False, server_default=text("0")),
    Column("latest_checkpoint_step", Integer, nullable=False, server_default=text("0")),
    Column("sequencer_json", Text, nullable=False),
    Column("best_validation", Float(precision=53)),
    Column("error", Text, nullable=False, server_default=""),
    Column("start_time", Text, nullable=False, server_default=""),
    Column("end_time", Text, nullable=False, server_default=""),
    Column("parent_trial_id", Integer),  # the trial whose checkpoint this one continues (PBT, ASHA)
    Column("waiting_on_trial_id", Integer),  # the parent this trial waits on to save its state
    # Why it ended ERROR: "user" (its code) or "infrastructure"; "" otherwise or when an older pedl ended it.
    Column("end_cause", Text, nullable=False, server_default=""),
    # The agents of its latest run, chief first, comma-separated; kept after the run ends.
    Column("agents", Text, nullable=False, server_default=""),
    UniqueConstraint("experiment_id", "request_id"),
    Index("trials_experiment", "experiment_id"),
    sqlite_autoincrement=True,
)

steps = Table(
    "steps",
    metadata,
    Column("trial_id", Integer, ForeignKey("trials.id"), nullable=False),
    Column("step_id", Integer, nullable=False),
    Column("total_batches", BigInteger, nullable=False),
    # The run of the trial that reported it (a trial's runs count from 1; rows older than the column: 1).
    Column("run_id", Integer, nullable=False, server_default=text("1")),
    Column("num_batches", BigInteger, nullable=False),
    Column("metrics_json", Text, nullable=False),
    Column("end_time", Text, nullable=False),
    PrimaryKeyConstraint("trial_id", "total_batches"),
)

validations = Table(
    "validations",
    metadata,
    Column("trial_id", Integer, ForeignKey("trials.id"), nullable=False),
    Column("step_id", Integer, nullable=False),
    Column("total_batches", BigInteger, nullable=False),
    # The run of the trial that reported it (a trial's runs count from 1; rows older than the column: 1).
    Column("run_id", Integer, nullable=False, server_default=text("1")),
    Column("metrics_json", Text, nullable=False),
    Column("end_time", Text, nullable=False),
    PrimaryKeyConstraint("trial_id", "total_batches"),
)

# Reports of Determined's other metric groups (Core API `report_metrics(group=...)`,
# ReportTrialMetrics with a group other than training/validation): charted and streamed, never ranked.
metric_groups = Table(
    "metric_groups",
    metadata,
    Column("trial_id", Integer, ForeignKey("trials.id"), nullable=False),
    Column("group_name", Text, nullable=False),
    Column("total_batches", BigInteger, nullable=False),
    Column("run_id", Integer, nullable=False, server_default=text("1")),
    Column("metrics_json", Text, nullable=False),
    Column("end_time", Text, nullable=False),
    PrimaryKeyConstraint("trial_id", "group_name", "total_batches"),
)

# Each trial's learning curve as the web UI's bounded GetMetrics last cut it (`curve_cache`), kept
# across scheduler starts: the bound, the mark (row count, last batch count) of the rows it was cut
# from, and the kept rows as JSON; one per trial and kind.
cut_curves = Table(
    "cut_curves",
    metadata,
    Column("trial_id", Integer, ForeignKey("trials.id"), nullable=False),
    Column("kind", Text, nullable=False),
    Column("max_points", Integer, nullable=False),
    Column("row_count", BigInteger, nullable=False),
    Column("last_batches", BigInteger, nullable=False),
    Column("rows_json", Text, nullable=False),
    PrimaryKeyConstraint("trial_id", "kind"),
)

checkpoints = Table(
    "checkpoints",
    metadata,
    Column("uuid", Text, primary_key=True),
    Column("trial_id", Integer, ForeignKey("trials.id"), nullable=False),
    Column("step_id", Integer, nullable=False),
    Column("total_batches", BigInteger, nullable=False),
    Column("state", Text, nullable=False),
    Column("checkpoint_json", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    # When `state` last changed (RFC 3339; "" for never): how long a DELETING one has waited.
    Column("state_changed_at", Text, nullable=False, server_default=""),
    Index("checkpoints_trial", "trial_id"),
    Index("checkpoints_state", "state"),
)

trial_logs = Table(
    "trial_logs",
    metadata,
    auto_id(),
    Column("trial_id", Integer, ForeignKey("trials.id"), nullable=False),
    Column("run_id", Integer, nullable=False),
    Column("timestamp", Text, nullable=False),
    Column("source", Text, nullable=False),
    Column("message", Text, nullable=False),
    Index("trial_logs_trial", "trial_id", "id"),
    sqlite_autoincrement=True,
)

# One row per run of a trial: its phases (TimelinePhase fields) as a JSON list, written when it exits.
trial_timelines = Table(
    "trial_timelines",
    metadata,
    auto_id(),
    Column("trial_id", Integer, ForeignKey("trials.id"), nullable=False),
    Column("run_id", Integer, nullable=False),
    Column("phases_json", Text, nullable=False),
    Index("trial_timelines_trial", "trial_id", "run_id"),
    sqlite_autoincrement=True,
)

users = Table(
    "users",
    metadata,
    auto_id(),
    Column("username", Text, nullable=False, unique=True),
    Column("password_hash", Text, nullable=False),
    Column("admin", Integer, nullable=False, server_default=text("0")),
    Column("created_at", Text, nullable=False),
    # A deactivated user cannot log in; their sessions end.
    Column("active", Integer, nullable=False, server_default=text("1")),
    # Shown in place of the username when set (Determined's displayName).
    Column("display_name", Text, nullable=False, server_default=""),
    sqlite_autoincrement=True,
)

# The Unix user and group a pedl user's trials run as on root agents (`pedl user
# link-with-agent-user`, Determined's agent_user_group); a user without a row runs as --trial-user.
agent_user_links = Table(
    "agent_user_links",
    metadata,
    Column("user_id", Integer, ForeignKey("users.id"), primary_key=True),
    Column("uid", Integer, nullable=False),
    Column("gid", Integer, nullable=False),
    Column("agent_user", Text, nullable=False, server_default=""),
    Column("agent_group", Text, nullable=False, server_default=""),
)

# Only a hash of each session token is kept.
sessions = Table(
    "sessions",
    metadata,
    Column("token_hash", Text, primary_key=True),
    Column("user_id", Integer, ForeignKey("users.id"), nullable=False),
    Column("created_at", Text, nullable=False),
    Column("expires_at", Float(precision=53), nullable=False),
    Index("sessions_user", "user_id"),
)

# A searcher's events since its last snapshot (`searcher_journal.py`).
searcher_events = Table(
    "searcher_events",
    metadata,
    Column("experiment_id", Integer, ForeignKey("experiments.id"), nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("event_json", Text, nullable=False),
    PrimaryKeyConstraint("experiment_id", "seq"),
)

# `det agent|slot disable`, kept across scheduler restarts; slot_id "" stands for the whole agent.
disabled_slots = Table(
    "disabled_slots",
    metadata,
    Column("agent_id", Text, nullable=False),
    Column("slot_id", Text, nullable=False),
    PrimaryKeyConstraint("agent_id", "slot_id"),
)
