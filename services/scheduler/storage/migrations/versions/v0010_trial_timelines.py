"""Trial timelines: when each phase of a run started and ended (slot assigned .. slot free).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "trial_timelines",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer, "sqlite"),
            sa.Identity(always=False),
            primary_key=True,
        ),
        sa.Column("trial_id", sa.Integer, sa.ForeignKey("trials.id"), nullable=False),
        sa.Column("run_id", sa.Integer, nullable=False),
        sa.Column("phases_json", sa.Text, nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("trial_timelines_trial", "trial_timelines", ["trial_id", "run_id"])


def downgrade() -> None:
    op.drop_index("trial_timelines_trial", "trial_timelines")
    op.drop_table("trial_timelines")
