"""Which run of its trial reported each step and validation: Determined's metric reports carry
it (`trialRunId`), counting a trial's runs from 1. Rows written before this revision read as run 1.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

_TABLES = ("steps", "validations")


def upgrade() -> None:
    for table in _TABLES:
        op.add_column(table, sa.Column("run_id", sa.Integer, nullable=False, server_default=sa.text("1")))


def downgrade() -> None:
    for table in _TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("run_id")
