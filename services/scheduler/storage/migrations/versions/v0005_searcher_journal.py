"""The searcher's events since its last snapshot (a large search snapshots now and then).

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "experiments", sa.Column("searcher_seq", sa.BigInteger, nullable=False, server_default=sa.text("0"))
    )
    op.create_table(
        "searcher_events",
        sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id"), nullable=False),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("event_json", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", "seq"),
    )


def downgrade() -> None:
    op.drop_table("searcher_events")
    op.drop_column("experiments", "searcher_seq")
