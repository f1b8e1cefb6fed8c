"""Why a trial ended ERROR: its own code ("user") or the infrastructure ("infrastructure"); "" for
trials that did not end ERROR, or that an older pedl ended (their error text tells). `pedl experiment
activate` revives an ERROR experiment only through trials the infrastructure ended.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("trials", sa.Column("end_cause", sa.Text, nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("end_cause")
