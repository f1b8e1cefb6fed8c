from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WorkloadKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WORKLOAD_KIND_UNSPECIFIED: _ClassVar[WorkloadKind]
    WORKLOAD_KIND_RUN_STEP: _ClassVar[WorkloadKind]
    WORKLOAD_KIND_COMPUTE_VALIDATION_METRICS: _ClassVar[WorkloadKind]
    WORKLOAD_KIND_CHECKPOINT_MODEL: _ClassVar[WorkloadKind]
    WORKLOAD_KIND_TERMINATE: _ClassVar[WorkloadKind]

class CheckpointState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CHECKPOINT_STATE_UNSPECIFIED: _ClassVar[CheckpointState]
    CHECKPOINT_STATE_COMPLETED: _ClassVar[CheckpointState]
    CHECKPOINT_STATE_DELETED: _ClassVar[CheckpointState]
    CHECKPOINT_STATE_DELETING: _ClassVar[CheckpointState]
    CHECKPOINT_STATE_MISSING: _ClassVar[CheckpointState]

class ScriptReportKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCRIPT_REPORT_KIND_UNSPECIFIED: _ClassVar[ScriptReportKind]
    SCRIPT_REPORT_KIND_TRAINING: _ClassVar[ScriptReportKind]
    SCRIPT_REPORT_KIND_VALIDATION: _ClassVar[ScriptReportKind]
    SCRIPT_REPORT_KIND_CHECKPOINT: _ClassVar[ScriptReportKind]

class ExperimentState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EXPERIMENT_STATE_UNSPECIFIED: _ClassVar[ExperimentState]
    EXPERIMENT_STATE_ACTIVE: _ClassVar[ExperimentState]
    EXPERIMENT_STATE_PAUSED: _ClassVar[ExperimentState]
    EXPERIMENT_STATE_COMPLETED: _ClassVar[ExperimentState]
    EXPERIMENT_STATE_ERROR: _ClassVar[ExperimentState]
    EXPERIMENT_STATE_CANCELED: _ClassVar[ExperimentState]

class TrialState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRIAL_STATE_UNSPECIFIED: _ClassVar[TrialState]
    TRIAL_STATE_ACTIVE: _ClassVar[TrialState]
    TRIAL_STATE_PAUSED: _ClassVar[TrialState]
    TRIAL_STATE_COMPLETED: _ClassVar[TrialState]
    TRIAL_STATE_ERROR: _ClassVar[TrialState]
    TRIAL_STATE_CANCELED: _ClassVar[TrialState]
WORKLOAD_KIND_UNSPECIFIED: WorkloadKind
WORKLOAD_KIND_RUN_STEP: WorkloadKind
WORKLOAD_KIND_COMPUTE_VALIDATION_METRICS: WorkloadKind
WORKLOAD_KIND_CHECKPOINT_MODEL: WorkloadKind
WORKLOAD_KIND_TERMINATE: WorkloadKind
CHECKPOINT_STATE_UNSPECIFIED: CheckpointState
CHECKPOINT_STATE_COMPLETED: CheckpointState
CHECKPOINT_STATE_DELETED: CheckpointState
CHECKPOINT_STATE_DELETING: CheckpointState
CHECKPOINT_STATE_MISSING: CheckpointState
SCRIPT_REPORT_KIND_UNSPECIFIED: ScriptReportKind
SCRIPT_REPORT_KIND_TRAINING: ScriptReportKind
SCRIPT_REPORT_KIND_VALIDATION: ScriptReportKind
SCRIPT_REPORT_KIND_CHECKPOINT: ScriptReportKind
EXPERIMENT_STATE_UNSPECIFIED: ExperimentState
EXPERIMENT_STATE_ACTIVE: ExperimentState
EXPERIMENT_STATE_PAUSED: ExperimentState
EXPERIMENT_STATE_COMPLETED: ExperimentState
EXPERIMENT_STATE_ERROR: ExperimentState
EXPERIMENT_STATE_CANCELED: ExperimentState
TRIAL_STATE_UNSPECIFIED: TrialState
TRIAL_STATE_ACTIVE: TrialState
TRIAL_STATE_PAUSED: TrialState
TRIAL_STATE_COMPLETED: TrialState
TRIAL_STATE_ERROR: TrialState
TRIAL_STATE_CANCELED: TrialState

class Workload(_message.Message):
    __slots__ = ("kind", "trial_id", "run_id", "step_id", "total_batches")
    KIND_FIELD_NUMBER: _ClassVar[int]
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BATCHES_FIELD_NUMBER: _ClassVar[int]
    kind: WorkloadKind
    trial_id: int
    run_id: int
    step_id: int
    total_batches: int
    def __init__(self, kind: _Optional[_Union[WorkloadKind, str]] = ..., trial_id: _Optional[int] = ..., run_id: _Optional[int] = ..., step_id: _Optional[int] = ..., total_batches: _Optional[int] = ...) -> None: ...

class FileInfo(_message.Message):
    __slots__ = ("path", "size", "sha256")
    PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    path: str
    size: int
    sha256: str
    def __init__(self, path: _Optional[str] = ..., size: _Optional[int] = ..., sha256: _Optional[str] = ...) -> None: ...

class Checkpoint(_message.Message):
    __slots__ = ("uuid", "experiment_id", "trial_id", "total_batches", "files", "state", "created_at", "metadata", "total_size")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    UUID_FIELD_NUMBER: _ClassVar[int]
    EXPERIMENT_ID_FIELD_NUMBER: _ClassVar[int]
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BATCHES_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    uuid: str
    experiment_id: int
    trial_id: int
    total_batches: int
    files: _containers.RepeatedCompositeFieldContainer[FileInfo]
    state: CheckpointState
    created_at: str
    metadata: _containers.ScalarMap[str, str]
    total_size: int
    def __init__(self, uuid: _Optional[str] = ..., experiment_id: _Optional[int] = ..., trial_id: _Optional[int] = ..., total_batches: _Optional[int] = ..., files: _Optional[_Iterable[_Union[FileInfo, _Mapping]]] = ..., state: _Optional[_Union[CheckpointState, str]] = ..., created_at: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., total_size: _Optional[int] = ...) -> None: ...

class WorkloadResult(_message.Message):
    __slots__ = ("workload", "metrics", "checkpoint", "num_batches", "num_inputs", "duration_seconds", "script_reports", "script_progress", "script_finished")
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    NUM_BATCHES_FIELD_NUMBER: _ClassVar[int]
    NUM_INPUTS_FIELD_NUMBER: _ClassVar[int]
    DURATION_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SCRIPT_REPORTS_FIELD_NUMBER: _ClassVar[int]
    SCRIPT_PROGRESS_FIELD_NUMBER: _ClassVar[int]
    SCRIPT_FINISHED_FIELD_NUMBER: _ClassVar[int]
    workload: Workload
    metrics: _struct_pb2.Struct
    checkpoint: Checkpoint
    num_batches: int
    num_inputs: int
    duration_seconds: float
    script_reports: _containers.RepeatedCompositeFieldContainer[ScriptReport]
    script_progress: int
    script_finished: bool
    def __init__(self, workload: _Optional[_Union[Workload, _Mapping]] = ..., metrics: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., checkpoint: _Optional[_Union[Checkpoint, _Mapping]] = ..., num_batches: _Optional[int] = ..., num_inputs: _Optional[int] = ..., duration_seconds: _Optional[float] = ..., script_reports: _Optional[_Iterable[_Union[ScriptReport, _Mapping]]] = ..., script_progress: _Optional[int] = ..., script_finished: bool = ...) -> None: ...

class ScriptReport(_message.Message):
    __slots__ = ("kind", "steps_completed", "metrics", "checkpoint")
    KIND_FIELD_NUMBER: _ClassVar[int]
    STEPS_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    kind: ScriptReportKind
    steps_completed: int
    metrics: _struct_pb2.Struct
    checkpoint: Checkpoint
    def __init__(self, kind: _Optional[_Union[ScriptReportKind, str]] = ..., steps_completed: _Optional[int] = ..., metrics: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., checkpoint: _Optional[_Union[Checkpoint, _Mapping]] = ...) -> None: ...

class LogLine(_message.Message):
    __slots__ = ("id", "trial_id", "run_id", "timestamp", "source", "message")
    ID_FIELD_NUMBER: _ClassVar[int]
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    id: int
    trial_id: int
    run_id: int
    timestamp: str
    source: str
    message: str
    def __init__(self, id: _Optional[int] = ..., trial_id: _Optional[int] = ..., run_id: _Optional[int] = ..., timestamp: _Optional[str] = ..., source: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class TimelinePhase(_message.Message):
    __slots__ = ("name", "start", "end", "source", "run_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    start: float
    end: float
    source: str
    run_id: int
    def __init__(self, name: _Optional[str] = ..., start: _Optional[float] = ..., end: _Optional[float] = ..., source: _Optional[str] = ..., run_id: _Optional[int] = ...) -> None: ...

class Slot(_message.Message):
    __slots__ = ("id", "type", "device", "trial_id", "disabled")
    ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    DISABLED_FIELD_NUMBER: _ClassVar[int]
    id: str
    type: str
    device: str
    trial_id: int
    disabled: bool
    def __init__(self, id: _Optional[str] = ..., type: _Optional[str] = ..., device: _Optional[str] = ..., trial_id: _Optional[int] = ..., disabled: bool = ...) -> None: ...
