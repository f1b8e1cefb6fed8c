from pedl.v1 import agent_pb2 as _agent_pb2
from pedl.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetTrialInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetTrialInfoResponse(_message.Message):
    __slots__ = ("trial", "model_definition_dir")
    TRIAL_FIELD_NUMBER: _ClassVar[int]
    MODEL_DEFINITION_DIR_FIELD_NUMBER: _ClassVar[int]
    trial: _agent_pb2.StartTrial
    model_definition_dir: str
    def __init__(self, trial: _Optional[_Union[_agent_pb2.StartTrial, _Mapping]] = ..., model_definition_dir: _Optional[str] = ...) -> None: ...

class NextWorkloadRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class NextWorkloadResponse(_message.Message):
    __slots__ = ("workload",)
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    workload: _common_pb2.Workload
    def __init__(self, workload: _Optional[_Union[_common_pb2.Workload, _Mapping]] = ...) -> None: ...

class CompleteWorkloadRequest(_message.Message):
    __slots__ = ("result", "timeline")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    TIMELINE_FIELD_NUMBER: _ClassVar[int]
    result: _common_pb2.WorkloadResult
    timeline: _containers.RepeatedCompositeFieldContainer[_common_pb2.TimelinePhase]
    def __init__(self, result: _Optional[_Union[_common_pb2.WorkloadResult, _Mapping]] = ..., timeline: _Optional[_Iterable[_Union[_common_pb2.TimelinePhase, _Mapping]]] = ...) -> None: ...

class CompleteWorkloadResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReportFailureRequest(_message.Message):
    __slots__ = ("failure",)
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    failure: _agent_pb2.FailureSignature
    def __init__(self, failure: _Optional[_Union[_agent_pb2.FailureSignature, _Mapping]] = ...) -> None: ...

class ReportFailureResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReportEpochLengthRequest(_message.Message):
    __slots__ = ("batches",)
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    batches: int
    def __init__(self, batches: _Optional[int] = ...) -> None: ...

class ReportEpochLengthResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
