"""The agents a trial's latest run was placed on (chief first, comma-separated), kept after it
ends: `describe` says where a trial ran, and which Slurm job when a pilot agent ran it.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("trials", sa.Column("agents", sa.Text, nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("agents")
