"""Determined's custom metric groups: a trial's reports in groups other than training and validation
(`core.train.report_metrics(group="abc", ...)`), one row per trial, group and batch count.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "metric_groups",
        sa.Column("trial_id", sa.Integer, sa.ForeignKey("trials.id"), nullable=False),
        sa.Column("group_name", sa.Text, nullable=False),
        sa.Column("total_batches", sa.BigInteger, nullable=False),
        sa.Column("run_id", sa.Integer, nullable=False, server_default=sa.text("1")),
        sa.Column("metrics_json", sa.Text, nullable=False),
        sa.Column("end_time", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("trial_id", "group_name", "total_batches"),
    )


def downgrade() -> None:
    op.drop_table("metric_groups")
