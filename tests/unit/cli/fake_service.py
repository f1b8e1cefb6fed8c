"""Stand-in for pedl-checkpoint-store / pedl-scheduler / pedl-agent in `cluster up` tests.

`python fake_service.py KIND ARGS...`: KIND containing "agent" marks its --work-dir warm (at once; a
second later for "late-agent"; never for "cold-agent") and sleeps; "fail" exits 3 after printing;
"hang" never serves; anything else serves gRPC health (and, for the scheduler, a ListAgents that names
agent-1..agent-8, and a Login) on --port and writes the bound port to --port-file.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent import futures
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from pedl.cluster.paths import harness_warm_file
from pedl.v1 import auth_pb2, auth_pb2_grpc, scheduler_pb2, scheduler_pb2_grpc


class _Scheduler(scheduler_pb2_grpc.SchedulerServiceServicer):
    def ListAgents(self, request, context):  # type: ignore[no-untyped-def]  # noqa: N802
        agents = [scheduler_pb2.Agent(id=f"agent-{i}") for i in range(1, 9)]
        return scheduler_pb2.ListAgentsResponse(agents=agents)

    def GetClusterInfo(self, request, context):  # type: ignore[no-untyped-def]  # noqa: N802
        return scheduler_pb2.GetClusterInfoResponse(checkpoint_store_address="127.0.0.1:1")


class _Auth(auth_pb2_grpc.AuthServiceServicer):
    def Login(self, request, context):  # type: ignore[no-untyped-def]  # noqa: N802
        return auth_pb2.LoginResponse(token="fake-token", user=auth_pb2.User(username=request.username))


def main() -> None:
    kind = sys.argv[1]
    if "fail" in kind:
        print("fake service: configuration is broken", flush=True)
        sys.exit(3)
    if "agent" in kind or "hang" in kind:
        if "agent" in kind and "cold" not in kind:  # warm at once, or "late" (a real one: fork server ready)
            agent = argparse.ArgumentParser()
            agent.add_argument("--work-dir", required=True)
            time.sleep(1.0 if "late" in kind else 0.0)
            harness_warm_file(Path(agent.parse_known_args(sys.argv[2:])[0].work_dir)).write_text("")
        while True:
            time.sleep(1)
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--port-file", required=True)
    args, _ = parser.parse_known_args(sys.argv[2:])
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    if "scheduler" in kind:
        scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(_Scheduler(), server)
        auth_pb2_grpc.add_AuthServiceServicer_to_server(_Auth(), server)
    port = server.add_insecure_port(f"127.0.0.1:{args.port}")
    server.start()
    Path(args.port_file).write_text(f"{port}\n")
    server.wait_for_termination()


if __name__ == "__main__":
    main()
