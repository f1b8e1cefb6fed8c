"""Notes an experiment's owner (or an admin) keeps on it, edited in the web UI or over REST.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("experiments", sa.Column("notes", sa.Text, nullable=False, server_default=""))


def downgrade() -> None:
    op.drop_column("experiments", "notes")
