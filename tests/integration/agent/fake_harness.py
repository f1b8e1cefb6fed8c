"""A stand-in for `python -m pedl.harness` that speaks HarnessService, for the agent's tests.

What it does comes from `behavior.txt` in its cwd (the unpacked model definition):
  ok     run workloads until TERMINATE (hparam `step_sleep` delays each result), exit 0
  raise  raise from "user code" after GetTrialInfo (traceback on stderr, exit 1)
  child  start a child that ignores SIGTERM, write both pids to pids.txt, then serve workloads
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from google.protobuf import json_format, struct_pb2

import pedl._grpc
from pedl.v1 import common_pb2, harness_pb2, harness_pb2_grpc


def user_code() -> None:
    raise ValueError("boom from user code")


def main() -> int:
    behavior = Path("behavior.txt").read_text().strip()
    channel = pedl._grpc.channel("unix:" + os.environ["PEDL_HARNESS_SOCKET"])
    stub = harness_pb2_grpc.HarnessServiceStub(channel)
    info = stub.GetTrialInfo(harness_pb2.GetTrialInfoRequest())
    hparams = json_format.MessageToDict(info.trial.hparams)
    print(
        f"info trial={info.trial.trial_id} run={info.trial.run_id} env_trial={os.environ['PEDL_TRIAL_ID']} "
        f"dir={info.model_definition_dir} cwd={os.getcwd()} hparams={sorted(hparams.items())}"
    )
    if behavior == "raise":
        print("about to fail", file=sys.stderr)
        user_code()
    if behavior == "child":
        code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
        child = subprocess.Popen([sys.executable, "-c", code])
        Path("pids.txt").write_text(f"{os.getpid()} {child.pid}\n")
    while True:
        w = stub.NextWorkload(harness_pb2.NextWorkloadRequest()).workload
        print(f"workload {common_pb2.WorkloadKind.Name(w.kind)} step={w.step_id} total={w.total_batches}")
        time.sleep(float(hparams.get("step_sleep", 0)))
        metrics = struct_pb2.Struct()
        metrics.update({"loss": 1.0 / max(1, w.step_id)})
        result = common_pb2.WorkloadResult(workload=w, metrics=metrics, num_batches=w.total_batches)
        stub.CompleteWorkload(harness_pb2.CompleteWorkloadRequest(result=result))
        if w.kind == common_pb2.WORKLOAD_KIND_TERMINATE:
            return 0


if __name__ == "__main__":
    sys.exit(main())
