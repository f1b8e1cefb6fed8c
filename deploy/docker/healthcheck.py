#!/usr/bin/env python3
"""`pedl-healthcheck HOST:PORT`: exit 0 when the gRPC server there reports SERVING (for container health)."""

import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: pedl-healthcheck HOST:PORT", file=sys.stderr)
        return 2
    with grpc.insecure_channel(sys.argv[1]) as channel:
        try:
            response = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        except grpc.RpcError as e:
            print(f"{sys.argv[1]}: {e.code().name}", file=sys.stderr)
            return 1
    return 0 if response.status == health_pb2.HealthCheckResponse.SERVING else 1


if __name__ == "__main__":
    sys.exit(main())
