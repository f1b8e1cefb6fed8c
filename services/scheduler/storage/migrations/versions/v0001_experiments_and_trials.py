"""Experiments, trials and their results (schema version 1 of the hand-kept list before Alembic).

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def auto_id() -> sa.Column:
    """SQLite's AUTOINCREMENT rowid; a BIGINT identity (BY DEFAULT) on PostgreSQL."""
    return sa.Column(
        "id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), sa.Identity(always=False), primary_key=True
    )


def upgrade() -> None:
    op.create_table(
        "experiments",
        auto_id(),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("config_yaml", sa.Text, nullable=False),
        sa.Column("config_json", sa.Text, nullable=False),
        sa.Column("model_definition", sa.LargeBinary, nullable=False),
        sa.Column("model_definition_name", sa.Text, nullable=False),
        sa.Column("seed", sa.BigInteger, nullable=False),
        sa.Column("searcher_snapshot", sa.Text),
        sa.Column("error", sa.Text, nullable=False, server_default=""),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.Column("ended_at", sa.Text, nullable=False, server_default=""),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "trials",
        auto_id(),
        sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id"), nullable=False),
        sa.Column("request_id", sa.Text, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("hparams_json", sa.Text, nullable=False),
        sa.Column("seed", sa.BigInteger, nullable=False),
        sa.Column("run_id", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("restarts", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("total_batches", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.Column("latest_checkpoint_uuid", sa.Text, nullable=False, server_default=""),
        sa.Column("latest_checkpoint_batches", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.Column("latest_checkpoint_step", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("sequencer_json", sa.Text, nullable=False),
        sa.Column("best_validation", sa.Float(precision=53)),
        sa.Column("error", sa.Text, nullable=False, server_default=""),
        sa.Column("start_time", sa.Text, nullable=False, server_default=""),
        sa.Column("end_time", sa.Text, nullable=False, server_default=""),
        sa.UniqueConstraint("experiment_id", "request_id"),
        sqlite_autoincrement=True,
    )
    op.create_index("trials_experiment", "trials", ["experiment_id"])
    op.create_table(
        "steps",
        sa.Column("trial_id", sa.Integer, sa.ForeignKey("trials.id"), nullable=False),
        sa.Column("step_id", sa.Integer, nullable=False),
        sa.Column("total_batches", sa.BigInteger, nullable=False),
        sa.Column("num_batches", sa.BigInteger, nullable=False),
        sa.Column("metrics_json", sa.Text, nullable=False),
        sa.Column("end_time", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("trial_id", "total_batches"),
    )
    op.create_table(
        "validations",
        sa.Column("trial_id", sa.Integer, sa.ForeignKey("trials.id"), nullable=False),
        sa.Column("step_id", sa.Integer, nullable=False),
        sa.Column("total_batches", sa.BigInteger, nullable=False),
        sa.Column("metrics_json", sa.Text, nullable=False),
        sa.Column("end_time", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("trial_id", "total_batches"),
    )
    op.create_table(
        "checkpoints",
        sa.Column("uuid", sa.Text, primary_key=True),
        sa.Column("trial_id", sa.Integer, sa.ForeignKey("trials.id"), nullable=False),
        sa.Column("step_id", sa.Integer, nullable=False),
        sa.Column("total_batches", sa.BigInteger, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("checkpoint_json", sa.Text, nullable=False),
        sa.Column("created_at", sa.Text, nullable=False),
    )
    op.create_index("checkpoints_trial", "checkpoints", ["trial_id"])
    op.create_table(
        "trial_logs",
        auto_id(),
        sa.Column("trial_id", sa.Integer, sa.ForeignKey("trials.id"), nullable=False),
        sa.Column("run_id", sa.Integer, nullable=False),
        sa.Column("timestamp", sa.Text, nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("trial_logs_trial", "trial_logs", ["trial_id", "id"])


def downgrade() -> None:
    for table in ("trial_logs", "checkpoints", "validations", "steps", "trials", "experiments"):
        op.drop_table(table)
