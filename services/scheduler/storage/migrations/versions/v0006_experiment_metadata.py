"""What users change on an experiment after creating it: a description replacing the config's,
labels, and whether it is archived (hidden from `det e list`); and whether a user account is active.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("experiments", sa.Column("description", sa.Text))
    op.add_column("experiments", sa.Column("labels_json", sa.Text, nullable=False, server_default="[]"))
    op.add_column(
        "experiments", sa.Column("archived", sa.Integer, nullable=False, server_default=sa.text("0"))
    )
    op.add_column("users", sa.Column("active", sa.Integer, nullable=False, server_default=sa.text("1")))


def downgrade() -> None:
    op.drop_column("users", "active")
    op.drop_column("experiments", "archived")
    op.drop_column("experiments", "labels_json")
    op.drop_column("experiments", "description")
