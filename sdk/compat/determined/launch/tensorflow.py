"""`python3 -m determined.launch.tensorflow [--] COMMAND`: runs COMMAND on each slot's process. On
several slots each gets TF_CONFIG naming every rank's worker address and its own index, which
`det.core.DistributedContext.from_tf_config()` (tf.distribute's MultiWorkerMirroredStrategy)
reads; on one slot there is none (the default strategy)."""

from __future__ import annotations

import json
import os
import sys

from determined.launch._exec import exec_command
from pedl.config.launchers import tensorflow_command
from pedl.harness.distributed import launch_from_env, multi_worker_tf_config

LAUNCHER = "determined.launch.tensorflow"


def main(argv: list[str]) -> None:
    try:
        command = tensorflow_command(argv, LAUNCHER)
        launch = launch_from_env()
    except ValueError as e:
        raise SystemExit(str(e)) from None
    if launch is not None:
        try:
            os.environ["TF_CONFIG"] = json.dumps(multi_worker_tf_config(launch))
        except RuntimeError as e:  # torch missing: the ranks have no rendezvous
            raise SystemExit(f"{LAUNCHER}: {e}") from None
    exec_command(command)


if __name__ == "__main__":
    main(sys.argv[1:])
