"""One worker of a 2-process KerasTrialController run, as the harness would start it (no agent).

    python keras_worker_main.py RANK MASTER_PORT KIND OUT_DIR [RESTORE_DIR]

Trains ToyKerasTrial on `KIND` data to 10 batches (checkpointing there into OUT_DIR/ckpt<RANK>)
and on to 20, validating at both; with RESTORE_DIR it restores that checkpoint first instead.
Writes what it saw to OUT_DIR/rank<RANK>.json.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from pedl.harness.build import seed_all  # noqa: E402
from pedl.harness.distributed import Launch, ProcessGroup, start_framework  # noqa: E402


def main() -> None:
    rank, port, kind, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
    restore = Path(sys.argv[5]) if len(sys.argv) > 5 else None
    group = ProcessGroup(Launch(rank, rank, 2, 2, "127.0.0.1", port))
    group.start()
    from keras_toy_trials import ToyKerasTrial, toy_data

    start_framework(ToyKerasTrial, group)
    seed_all(11)  # as start_trial: seeded after the strategy started, before data and model
    from pedl.keras import KerasTrialController

    controller = KerasTrialController.from_trial_class(ToyKerasTrial, {"lr": 0.05}, toy_data(kind))
    seen: dict[str, object] = {"tf_config": json.loads(os.environ["TF_CONFIG"])}
    if restore is None:
        step = controller.train_until(10)
        seen.update(step10=step.metrics, inputs10=step.num_inputs, validation10=controller.validate())
        own = out / f"ckpt{rank}"  # each rank's own directory, as the harness gives it
        own.mkdir()
        controller.save(own)
        seen["wrote"] = sorted(p.name for p in own.iterdir())
    else:
        controller.load(restore)
    step = controller.train_until(20)
    seen.update(step20=step.metrics, validation20=controller.validate())
    (out / f"rank{rank}.json").write_text(json.dumps(seen))
    group.finish()
    sys.stdout.flush()
    os._exit(0)  # as the harness: no interpreter teardown after a distributed run


if __name__ == "__main__":
    main()
