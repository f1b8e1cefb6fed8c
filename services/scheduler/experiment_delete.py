"""Deleting an ended experiment: its checkpoints and its trials' own TensorBoard files leave the store
first, then its rows the database.

Its checkpoints are marked DELETING (committed) first, as every deletion is: if the store cannot delete
one, or the scheduler dies midway, the rows stay, so `det e delete` can be run again and the
reconciler finishes what was started; a checkpoint the store never had counts as deleted.
"""

from __future__ import annotations

import asyncio

import grpc

from pedl.checkpoints import CheckpointError, CheckpointNotFound, CheckpointStoreClient, tensorboard
from pedl_scheduler.checkpoint_deleter import DELETING
from pedl_scheduler.storage import Storage
from pedl_scheduler.storage.ops import experiments as experiment_ops
from pedl_scheduler.storage.ops import results as result_ops

ENDED = ("COMPLETED", "ERROR", "CANCELED")


class DeleteError(Exception):
    pass


async def delete_experiment(db: Storage, store_address: str, exp_id: int, live: bool) -> int:
    """Deletes the experiment; returns how many checkpoints left the store."""
    state = experiment_ops.experiment_state(db, exp_id)
    if state not in ENDED or live:
        raise DeleteError(
            f"experiment {exp_id} is {state}: only an ended experiment can be deleted (kill it first)"
        )
    uuids = experiment_ops.undeleted_checkpoints(db, exp_id)
    if uuids:
        result_ops.set_checkpoint_state(db, uuids, DELETING)
        db.flush()
        await asyncio.to_thread(_delete_checkpoints, store_address, uuids)
    if store_address:
        await asyncio.to_thread(_delete_tensorboard_files, store_address, exp_id)
    experiment_ops.delete_experiment(db, exp_id)
    return len(uuids)


def _delete_checkpoints(store_address: str, uuids: list[str]) -> None:
    with CheckpointStoreClient(store_address) as store:
        for uuid in uuids:
            try:
                store.delete(uuid)
            except CheckpointNotFound:
                pass
            except CheckpointError as e:
                raise DeleteError(
                    f"checkpoint {uuid} could not be deleted ({e}); nothing was removed"
                ) from None


def _delete_tensorboard_files(store_address: str, exp_id: int) -> None:
    with CheckpointStoreClient(store_address) as store:
        try:
            tensorboard.delete_experiment(store, exp_id)
        except CheckpointError as e:
            if e.code == grpc.StatusCode.UNIMPLEMENTED:  # a store older than them holds none
                return
            raise DeleteError(
                f"the TensorBoard files of experiment {exp_id} could not be deleted ({e}); "
                "its checkpoints are gone, its rows are kept: run the delete again"
            ) from None
