from google.protobuf import struct_pb2 as _struct_pb2
from pedl.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ConnectRequest(_message.Message):
    __slots__ = ("register", "heartbeat", "workload_completed", "trial_logs", "trial_exited", "batch", "epoch_length")
    REGISTER_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    TRIAL_LOGS_FIELD_NUMBER: _ClassVar[int]
    TRIAL_EXITED_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    EPOCH_LENGTH_FIELD_NUMBER: _ClassVar[int]
    register: RegisterAgent
    heartbeat: Heartbeat
    workload_completed: WorkloadCompleted
    trial_logs: TrialLogs
    trial_exited: TrialExited
    batch: ConnectRequestBatch
    epoch_length: EpochLength
    def __init__(self, register: _Optional[_Union[RegisterAgent, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., workload_completed: _Optional[_Union[WorkloadCompleted, _Mapping]] = ..., trial_logs: _Optional[_Union[TrialLogs, _Mapping]] = ..., trial_exited: _Optional[_Union[TrialExited, _Mapping]] = ..., batch: _Optional[_Union[ConnectRequestBatch, _Mapping]] = ..., epoch_length: _Optional[_Union[EpochLength, _Mapping]] = ...) -> None: ...

class ConnectRequestBatch(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[ConnectRequest]
    def __init__(self, messages: _Optional[_Iterable[_Union[ConnectRequest, _Mapping]]] = ...) -> None: ...

class ConnectResponse(_message.Message):
    __slots__ = ("registered", "start_trial", "run_workload", "kill_trial", "batch")
    REGISTERED_FIELD_NUMBER: _ClassVar[int]
    START_TRIAL_FIELD_NUMBER: _ClassVar[int]
    RUN_WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    KILL_TRIAL_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    registered: AgentRegistered
    start_trial: StartTrial
    run_workload: RunWorkload
    kill_trial: KillTrial
    batch: ConnectResponseBatch
    def __init__(self, registered: _Optional[_Union[AgentRegistered, _Mapping]] = ..., start_trial: _Optional[_Union[StartTrial, _Mapping]] = ..., run_workload: _Optional[_Union[RunWorkload, _Mapping]] = ..., kill_trial: _Optional[_Union[KillTrial, _Mapping]] = ..., batch: _Optional[_Union[ConnectResponseBatch, _Mapping]] = ...) -> None: ...

class ConnectResponseBatch(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[ConnectResponse]
    def __init__(self, messages: _Optional[_Iterable[_Union[ConnectResponse, _Mapping]]] = ...) -> None: ...

class RunningTrial(_message.Message):
    __slots__ = ("trial_id", "run_id", "slot_ids", "busy", "waiting")
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SLOT_IDS_FIELD_NUMBER: _ClassVar[int]
    BUSY_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    trial_id: int
    run_id: int
    slot_ids: _containers.RepeatedScalarFieldContainer[str]
    busy: bool
    waiting: bool
    def __init__(self, trial_id: _Optional[int] = ..., run_id: _Optional[int] = ..., slot_ids: _Optional[_Iterable[str]] = ..., busy: bool = ..., waiting: bool = ...) -> None: ...

class RunRef(_message.Message):
    __slots__ = ("trial_id", "run_id")
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    trial_id: int
    run_id: int
    def __init__(self, trial_id: _Optional[int] = ..., run_id: _Optional[int] = ...) -> None: ...

class RegisterAgent(_message.Message):
    __slots__ = ("agent_id", "slots", "hostname", "address", "environments", "resource_pool", "running_trials", "version", "accepts_batches", "accepts_handoffs", "isolation", "label", "protocol")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENTS_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_POOL_FIELD_NUMBER: _ClassVar[int]
    RUNNING_TRIALS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ACCEPTS_BATCHES_FIELD_NUMBER: _ClassVar[int]
    ACCEPTS_HANDOFFS_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    slots: _containers.RepeatedCompositeFieldContainer[_common_pb2.Slot]
    hostname: str
    address: str
    environments: _containers.RepeatedScalarFieldContainer[str]
    resource_pool: str
    running_trials: _containers.RepeatedCompositeFieldContainer[RunningTrial]
    version: str
    accepts_batches: bool
    accepts_handoffs: bool
    isolation: str
    label: str
    protocol: int
    def __init__(self, agent_id: _Optional[str] = ..., slots: _Optional[_Iterable[_Union[_common_pb2.Slot, _Mapping]]] = ..., hostname: _Optional[str] = ..., address: _Optional[str] = ..., environments: _Optional[_Iterable[str]] = ..., resource_pool: _Optional[str] = ..., running_trials: _Optional[_Iterable[_Union[RunningTrial, _Mapping]]] = ..., version: _Optional[str] = ..., accepts_batches: bool = ..., accepts_handoffs: bool = ..., isolation: _Optional[str] = ..., label: _Optional[str] = ..., protocol: _Optional[int] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EpochLength(_message.Message):
    __slots__ = ("trial_id", "run_id", "batches")
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    trial_id: int
    run_id: int
    batches: int
    def __init__(self, trial_id: _Optional[int] = ..., run_id: _Optional[int] = ..., batches: _Optional[int] = ...) -> None: ...

class WorkloadCompleted(_message.Message):
    __slots__ = ("result",)
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: _common_pb2.WorkloadResult
    def __init__(self, result: _Optional[_Union[_common_pb2.WorkloadResult, _Mapping]] = ...) -> None: ...

class TrialLogs(_message.Message):
    __slots__ = ("trial_id", "run_id", "lines")
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    trial_id: int
    run_id: int
    lines: _containers.RepeatedCompositeFieldContainer[_common_pb2.LogLine]
    def __init__(self, trial_id: _Optional[int] = ..., run_id: _Optional[int] = ..., lines: _Optional[_Iterable[_Union[_common_pb2.LogLine, _Mapping]]] = ...) -> None: ...

class TrialExited(_message.Message):
    __slots__ = ("trial_id", "run_id", "exit_code", "error", "killed", "failure", "timeline")
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    KILLED_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    TIMELINE_FIELD_NUMBER: _ClassVar[int]
    trial_id: int
    run_id: int
    exit_code: int
    error: str
    killed: bool
    failure: FailureSignature
    timeline: _containers.RepeatedCompositeFieldContainer[_common_pb2.TimelinePhase]
    def __init__(self, trial_id: _Optional[int] = ..., run_id: _Optional[int] = ..., exit_code: _Optional[int] = ..., error: _Optional[str] = ..., killed: bool = ..., failure: _Optional[_Union[FailureSignature, _Mapping]] = ..., timeline: _Optional[_Iterable[_Union[_common_pb2.TimelinePhase, _Mapping]]] = ...) -> None: ...

class FailureSignature(_message.Message):
    __slots__ = ("exception_type", "location", "trained", "permanent")
    EXCEPTION_TYPE_FIELD_NUMBER: _ClassVar[int]
    LOCATION_FIELD_NUMBER: _ClassVar[int]
    TRAINED_FIELD_NUMBER: _ClassVar[int]
    PERMANENT_FIELD_NUMBER: _ClassVar[int]
    exception_type: str
    location: str
    trained: bool
    permanent: bool
    def __init__(self, exception_type: _Optional[str] = ..., location: _Optional[str] = ..., trained: bool = ..., permanent: bool = ...) -> None: ...

class AgentRegistered(_message.Message):
    __slots__ = ("cluster_id", "heartbeat_interval_seconds", "accepts_batches", "protocol")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ACCEPTS_BATCHES_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    heartbeat_interval_seconds: float
    accepts_batches: bool
    protocol: int
    def __init__(self, cluster_id: _Optional[str] = ..., heartbeat_interval_seconds: _Optional[float] = ..., accepts_batches: bool = ..., protocol: _Optional[int] = ...) -> None: ...

class StartTrial(_message.Message):
    __slots__ = ("trial_id", "run_id", "experiment_id", "config_json", "hparams", "latest_checkpoint_uuid", "latest_checkpoint_batches", "slot_ids", "trial_seed", "checkpoint_store_address", "model_definition_name", "rank", "world_size", "rendezvous_address", "environment", "checkpoint_token", "after", "warm_start_checkpoint_uuid")
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    EXPERIMENT_ID_FIELD_NUMBER: _ClassVar[int]
    CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    HPARAMS_FIELD_NUMBER: _ClassVar[int]
    LATEST_CHECKPOINT_UUID_FIELD_NUMBER: _ClassVar[int]
    LATEST_CHECKPOINT_BATCHES_FIELD_NUMBER: _ClassVar[int]
    SLOT_IDS_FIELD_NUMBER: _ClassVar[int]
    TRIAL_SEED_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_STORE_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    MODEL_DEFINITION_NAME_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    WORLD_SIZE_FIELD_NUMBER: _ClassVar[int]
    RENDEZVOUS_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    WARM_START_CHECKPOINT_UUID_FIELD_NUMBER: _ClassVar[int]
    trial_id: int
    run_id: int
    experiment_id: int
    config_json: str
    hparams: _struct_pb2.Struct
    latest_checkpoint_uuid: str
    latest_checkpoint_batches: int
    slot_ids: _containers.RepeatedScalarFieldContainer[str]
    trial_seed: int
    checkpoint_store_address: str
    model_definition_name: str
    rank: int
    world_size: int
    rendezvous_address: str
    environment: str
    checkpoint_token: str
    after: _containers.RepeatedCompositeFieldContainer[RunRef]
    warm_start_checkpoint_uuid: str
    def __init__(self, trial_id: _Optional[int] = ..., run_id: _Optional[int] = ..., experiment_id: _Optional[int] = ..., config_json: _Optional[str] = ..., hparams: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., latest_checkpoint_uuid: _Optional[str] = ..., latest_checkpoint_batches: _Optional[int] = ..., slot_ids: _Optional[_Iterable[str]] = ..., trial_seed: _Optional[int] = ..., checkpoint_store_address: _Optional[str] = ..., model_definition_name: _Optional[str] = ..., rank: _Optional[int] = ..., world_size: _Optional[int] = ..., rendezvous_address: _Optional[str] = ..., environment: _Optional[str] = ..., checkpoint_token: _Optional[str] = ..., after: _Optional[_Iterable[_Union[RunRef, _Mapping]]] = ..., warm_start_checkpoint_uuid: _Optional[str] = ...) -> None: ...

class RunWorkload(_message.Message):
    __slots__ = ("workload",)
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    workload: _common_pb2.Workload
    def __init__(self, workload: _Optional[_Union[_common_pb2.Workload, _Mapping]] = ...) -> None: ...

class KillTrial(_message.Message):
    __slots__ = ("trial_id", "run_id")
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    trial_id: int
    run_id: int
    def __init__(self, trial_id: _Optional[int] = ..., run_id: _Optional[int] = ...) -> None: ...
