#!/usr/bin/env python3
"""`pedl-healthcheck HOST:PORT`: exit 0 when the gRPC server there reports SERVING (for container health).

With PEDL_TLS_CA set it speaks TLS, verifying the server against that CA (the health service needs no
login).
"""

import os
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: pedl-healthcheck HOST:PORT", file=sys.stderr)
        return 2
    ca = os.environ.get("PEDL_TLS_CA")
    if ca:
        with open(ca, "rb") as f:
            channel = grpc.secure_channel(sys.argv[1], grpc.ssl_channel_credentials(f.read()))
    else:
        channel = grpc.insecure_channel(sys.argv[1])
    with channel:
        try:
            response = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        except grpc.RpcError as e:
            print(f"{sys.argv[1]}: {e.code().name}", file=sys.stderr)
            return 1
    return 0 if response.status == health_pb2.HealthCheckResponse.SERVING else 1


if __name__ == "__main__":
    sys.exit(main())
