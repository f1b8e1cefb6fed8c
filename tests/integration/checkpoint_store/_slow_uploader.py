"""Run as a script: starts an upload, sends part of a file, then hangs until killed."""

import sys
import threading

import grpc

from pedl import _grpc
from pedl.v1 import checkpoint_store_pb2 as pb
from pedl.v1 import checkpoint_store_pb2_grpc


def requests():
    yield pb.UploadCheckpointRequest(header=pb.UploadHeader(experiment_id=7, trial_id=7, total_batches=1))
    yield pb.UploadCheckpointRequest(chunk=pb.FileChunk(path="dir/part", offset=0, data=b"x" * 1_000_000))
    print("sent", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    stub = checkpoint_store_pb2_grpc.CheckpointStoreServiceStub(_grpc.channel(sys.argv[1]))
    try:
        stub.UploadCheckpoint(requests())
    except grpc.RpcError as e:
        print(e, file=sys.stderr)
        sys.exit(1)
