"""The process that runs one trial: `python -m pedl.harness`.

`pedl.harness.controller` is the framework-neutral interface every Trial API implements;
`pedl.harness.workloads` runs workloads against it from any `WorkloadSource` (the agent over
gRPC here, local/test mode in-process).
"""
