"""Generated gRPC/protobuf stubs of the pedl.v1 API (scripts/gen_protos.py)."""
