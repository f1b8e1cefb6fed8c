"""The Unix user and group each pedl user's trials run as on root agents (`pedl user
link-with-agent-user`); users without a link run as the agent's --trial-user.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agent_user_links",
        sa.Column("user_id", sa.Integer, sa.ForeignKey("users.id"), primary_key=True),
        sa.Column("uid", sa.Integer, nullable=False),
        sa.Column("gid", sa.Integer, nullable=False),
        sa.Column("agent_user", sa.Text, nullable=False, server_default=""),
        sa.Column("agent_group", sa.Text, nullable=False, server_default=""),
    )


def downgrade() -> None:
    op.drop_table("agent_user_links")
