"""Each trial's learning curve as the web UI's bounded GetMetrics last cut it, kept across scheduler
starts (`curve_cache`): one row per trial and kind, with the mark of the rows it was cut from.

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cut_curves",
        sa.Column("trial_id", sa.Integer, sa.ForeignKey("trials.id"), nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("max_points", sa.Integer, nullable=False),
        sa.Column("row_count", sa.BigInteger, nullable=False),
        sa.Column("last_batches", sa.BigInteger, nullable=False),
        sa.Column("rows_json", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("trial_id", "kind"),
    )


def downgrade() -> None:
    op.drop_table("cut_curves")
