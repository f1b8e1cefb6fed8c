"""The checkpoint an experiment's trials warm-start from (resolved at create).

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "experiments", sa.Column("warm_start_checkpoint_uuid", sa.Text, nullable=False, server_default="")
    )


def downgrade() -> None:
    op.drop_column("experiments", "warm_start_checkpoint_uuid")
