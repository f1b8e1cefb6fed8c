"""A user's display name (Determined's `displayName`), shown in place of the username when set.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("users", sa.Column("display_name", sa.Text, nullable=False, server_default=""))


def downgrade() -> None:
    op.drop_column("users", "display_name")
