from google.protobuf import struct_pb2 as _struct_pb2
from pedl.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MetricKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    METRIC_KIND_UNSPECIFIED: _ClassVar[MetricKind]
    METRIC_KIND_TRAINING: _ClassVar[MetricKind]
    METRIC_KIND_VALIDATION: _ClassVar[MetricKind]
METRIC_KIND_UNSPECIFIED: MetricKind
METRIC_KIND_TRAINING: MetricKind
METRIC_KIND_VALIDATION: MetricKind

class Experiment(_message.Message):
    __slots__ = ("id", "state", "config_yaml", "config", "description", "created_at", "ended_at", "num_trials", "model_definition_name", "error", "searcher_metric", "smaller_is_better", "owner", "labels", "archived")
    ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CONFIG_YAML_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_FIELD_NUMBER: _ClassVar[int]
    NUM_TRIALS_FIELD_NUMBER: _ClassVar[int]
    MODEL_DEFINITION_NAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SEARCHER_METRIC_FIELD_NUMBER: _ClassVar[int]
    SMALLER_IS_BETTER_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ARCHIVED_FIELD_NUMBER: _ClassVar[int]
    id: int
    state: _common_pb2.ExperimentState
    config_yaml: str
    config: _struct_pb2.Struct
    description: str
    created_at: str
    ended_at: str
    num_trials: int
    model_definition_name: str
    error: str
    searcher_metric: str
    smaller_is_better: bool
    owner: str
    labels: _containers.RepeatedScalarFieldContainer[str]
    archived: bool
    def __init__(self, id: _Optional[int] = ..., state: _Optional[_Union[_common_pb2.ExperimentState, str]] = ..., config_yaml: _Optional[str] = ..., config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., description: _Optional[str] = ..., created_at: _Optional[str] = ..., ended_at: _Optional[str] = ..., num_trials: _Optional[int] = ..., model_definition_name: _Optional[str] = ..., error: _Optional[str] = ..., searcher_metric: _Optional[str] = ..., smaller_is_better: bool = ..., owner: _Optional[str] = ..., labels: _Optional[_Iterable[str]] = ..., archived: bool = ...) -> None: ...

class Trial(_message.Message):
    __slots__ = ("id", "experiment_id", "state", "hparams", "total_batches", "run_id", "restarts", "agent_id", "latest_checkpoint_uuid", "start_time", "end_time", "best_validation_metric", "num_steps", "error", "seed", "waiting_reason", "epoch_batches", "parent_trial_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    EXPERIMENT_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    HPARAMS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BATCHES_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    LATEST_CHECKPOINT_UUID_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    BEST_VALIDATION_METRIC_FIELD_NUMBER: _ClassVar[int]
    NUM_STEPS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    WAITING_REASON_FIELD_NUMBER: _ClassVar[int]
    EPOCH_BATCHES_FIELD_NUMBER: _ClassVar[int]
    PARENT_TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    experiment_id: int
    state: _common_pb2.TrialState
    hparams: _struct_pb2.Struct
    total_batches: int
    run_id: int
    restarts: int
    agent_id: str
    latest_checkpoint_uuid: str
    start_time: str
    end_time: str
    best_validation_metric: float
    num_steps: int
    error: str
    seed: int
    waiting_reason: str
    epoch_batches: int
    parent_trial_id: int
    def __init__(self, id: _Optional[int] = ..., experiment_id: _Optional[int] = ..., state: _Optional[_Union[_common_pb2.TrialState, str]] = ..., hparams: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., total_batches: _Optional[int] = ..., run_id: _Optional[int] = ..., restarts: _Optional[int] = ..., agent_id: _Optional[str] = ..., latest_checkpoint_uuid: _Optional[str] = ..., start_time: _Optional[str] = ..., end_time: _Optional[str] = ..., best_validation_metric: _Optional[float] = ..., num_steps: _Optional[int] = ..., error: _Optional[str] = ..., seed: _Optional[int] = ..., waiting_reason: _Optional[str] = ..., epoch_batches: _Optional[int] = ..., parent_trial_id: _Optional[int] = ...) -> None: ...

class Step(_message.Message):
    __slots__ = ("step_id", "total_batches", "num_batches", "metrics", "end_time")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BATCHES_FIELD_NUMBER: _ClassVar[int]
    NUM_BATCHES_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    total_batches: int
    num_batches: int
    metrics: _struct_pb2.Struct
    end_time: str
    def __init__(self, step_id: _Optional[int] = ..., total_batches: _Optional[int] = ..., num_batches: _Optional[int] = ..., metrics: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., end_time: _Optional[str] = ...) -> None: ...

class Validation(_message.Message):
    __slots__ = ("step_id", "total_batches", "metrics", "end_time")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BATCHES_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    total_batches: int
    metrics: _struct_pb2.Struct
    end_time: str
    def __init__(self, step_id: _Optional[int] = ..., total_batches: _Optional[int] = ..., metrics: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., end_time: _Optional[str] = ...) -> None: ...

class Agent(_message.Message):
    __slots__ = ("id", "slots", "connected_at", "last_heartbeat", "hostname", "environments", "resource_pool", "isolation", "disabled", "label", "address")
    ID_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENTS_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_POOL_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_FIELD_NUMBER: _ClassVar[int]
    DISABLED_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    id: str
    slots: _containers.RepeatedCompositeFieldContainer[_common_pb2.Slot]
    connected_at: str
    last_heartbeat: str
    hostname: str
    environments: _containers.RepeatedScalarFieldContainer[str]
    resource_pool: str
    isolation: str
    disabled: bool
    label: str
    address: str
    def __init__(self, id: _Optional[str] = ..., slots: _Optional[_Iterable[_Union[_common_pb2.Slot, _Mapping]]] = ..., connected_at: _Optional[str] = ..., last_heartbeat: _Optional[str] = ..., hostname: _Optional[str] = ..., environments: _Optional[_Iterable[str]] = ..., resource_pool: _Optional[str] = ..., isolation: _Optional[str] = ..., disabled: bool = ..., label: _Optional[str] = ..., address: _Optional[str] = ...) -> None: ...

class CreateExperimentRequest(_message.Message):
    __slots__ = ("config_yaml", "model_definition", "model_definition_name")
    CONFIG_YAML_FIELD_NUMBER: _ClassVar[int]
    MODEL_DEFINITION_FIELD_NUMBER: _ClassVar[int]
    MODEL_DEFINITION_NAME_FIELD_NUMBER: _ClassVar[int]
    config_yaml: str
    model_definition: bytes
    model_definition_name: str
    def __init__(self, config_yaml: _Optional[str] = ..., model_definition: _Optional[bytes] = ..., model_definition_name: _Optional[str] = ...) -> None: ...

class CreateExperimentResponse(_message.Message):
    __slots__ = ("experiment",)
    EXPERIMENT_FIELD_NUMBER: _ClassVar[int]
    experiment: Experiment
    def __init__(self, experiment: _Optional[_Union[Experiment, _Mapping]] = ...) -> None: ...

class ListExperimentsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "newest_first", "states", "owner", "exclude_archived", "text")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    NEWEST_FIRST_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_ARCHIVED_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    newest_first: bool
    states: _containers.RepeatedScalarFieldContainer[_common_pb2.ExperimentState]
    owner: str
    exclude_archived: bool
    text: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., newest_first: bool = ..., states: _Optional[_Iterable[_Union[_common_pb2.ExperimentState, str]]] = ..., owner: _Optional[str] = ..., exclude_archived: bool = ..., text: _Optional[str] = ...) -> None: ...

class ListExperimentsResponse(_message.Message):
    __slots__ = ("experiments", "next_page_token")
    EXPERIMENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    experiments: _containers.RepeatedCompositeFieldContainer[Experiment]
    next_page_token: str
    def __init__(self, experiments: _Optional[_Iterable[_Union[Experiment, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetExperimentRequest(_message.Message):
    __slots__ = ("experiment_id",)
    EXPERIMENT_ID_FIELD_NUMBER: _ClassVar[int]
    experiment_id: int
    def __init__(self, experiment_id: _Optional[int] = ...) -> None: ...

class GetExperimentResponse(_message.Message):
    __slots__ = ("experiment", "trials")
    EXPERIMENT_FIELD_NUMBER: _ClassVar[int]
    TRIALS_FIELD_NUMBER: _ClassVar[int]
    experiment: Experiment
    trials: _containers.RepeatedCompositeFieldContainer[Trial]
    def __init__(self, experiment: _Optional[_Union[Experiment, _Mapping]] = ..., trials: _Optional[_Iterable[_Union[Trial, _Mapping]]] = ...) -> None: ...

class KillExperimentRequest(_message.Message):
    __slots__ = ("experiment_id",)
    EXPERIMENT_ID_FIELD_NUMBER: _ClassVar[int]
    experiment_id: int
    def __init__(self, experiment_id: _Optional[int] = ...) -> None: ...

class KillExperimentResponse(_message.Message):
    __slots__ = ("experiment",)
    EXPERIMENT_FIELD_NUMBER: _ClassVar[int]
    experiment: Experiment
    def __init__(self, experiment: _Optional[_Union[Experiment, _Mapping]] = ...) -> None: ...

class PauseExperimentRequest(_message.Message):
    __slots__ = ("experiment_id",)
    EXPERIMENT_ID_FIELD_NUMBER: _ClassVar[int]
    experiment_id: int
    def __init__(self, experiment_id: _Optional[int] = ...) -> None: ...

class PauseExperimentResponse(_message.Message):
    __slots__ = ("experiment",)
    EXPERIMENT_FIELD_NUMBER: _ClassVar[int]
    experiment: Experiment
    def __init__(self, experiment: _Optional[_Union[Experiment, _Mapping]] = ...) -> None: ...

class ActivateExperimentRequest(_message.Message):
    __slots__ = ("experiment_id",)
    EXPERIMENT_ID_FIELD_NUMBER: _ClassVar[int]
    experiment_id: int
    def __init__(self, experiment_id: _Optional[int] = ...) -> None: ...

class ActivateExperimentResponse(_message.Message):
    __slots__ = ("experiment",)
    EXPERIMENT_FIELD_NUMBER: _ClassVar[int]
    experiment: Experiment
    def __init__(self, experiment: _Optional[_Union[Experiment, _Mapping]] = ...) -> None: ...

class GetModelDefinitionRequest(_message.Message):
    __slots__ = ("experiment_id",)
    EXPERIMENT_ID_FIELD_NUMBER: _ClassVar[int]
    experiment_id: int
    def __init__(self, experiment_id: _Optional[int] = ...) -> None: ...

class GetModelDefinitionResponse(_message.Message):
    __slots__ = ("model_definition", "model_definition_name")
    MODEL_DEFINITION_FIELD_NUMBER: _ClassVar[int]
    MODEL_DEFINITION_NAME_FIELD_NUMBER: _ClassVar[int]
    model_definition: bytes
    model_definition_name: str
    def __init__(self, model_definition: _Optional[bytes] = ..., model_definition_name: _Optional[str] = ...) -> None: ...

class GetTrialRequest(_message.Message):
    __slots__ = ("trial_id", "page_size", "page_token")
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    trial_id: int
    page_size: int
    page_token: str
    def __init__(self, trial_id: _Optional[int] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class GetTrialResponse(_message.Message):
    __slots__ = ("trial", "steps", "validations", "checkpoints", "timeline", "next_page_token")
    TRIAL_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    VALIDATIONS_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINTS_FIELD_NUMBER: _ClassVar[int]
    TIMELINE_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    trial: Trial
    steps: _containers.RepeatedCompositeFieldContainer[Step]
    validations: _containers.RepeatedCompositeFieldContainer[Validation]
    checkpoints: _containers.RepeatedCompositeFieldContainer[_common_pb2.Checkpoint]
    timeline: _containers.RepeatedCompositeFieldContainer[_common_pb2.TimelinePhase]
    next_page_token: str
    def __init__(self, trial: _Optional[_Union[Trial, _Mapping]] = ..., steps: _Optional[_Iterable[_Union[Step, _Mapping]]] = ..., validations: _Optional[_Iterable[_Union[Validation, _Mapping]]] = ..., checkpoints: _Optional[_Iterable[_Union[_common_pb2.Checkpoint, _Mapping]]] = ..., timeline: _Optional[_Iterable[_Union[_common_pb2.TimelinePhase, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetTrialLogsRequest(_message.Message):
    __slots__ = ("trial_id", "follow", "after_id", "tail")
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    AFTER_ID_FIELD_NUMBER: _ClassVar[int]
    TAIL_FIELD_NUMBER: _ClassVar[int]
    trial_id: int
    follow: bool
    after_id: int
    tail: int
    def __init__(self, trial_id: _Optional[int] = ..., follow: bool = ..., after_id: _Optional[int] = ..., tail: _Optional[int] = ...) -> None: ...

class GetTrialLogsResponse(_message.Message):
    __slots__ = ("lines",)
    LINES_FIELD_NUMBER: _ClassVar[int]
    lines: _containers.RepeatedCompositeFieldContainer[_common_pb2.LogLine]
    def __init__(self, lines: _Optional[_Iterable[_Union[_common_pb2.LogLine, _Mapping]]] = ...) -> None: ...

class ListAgentsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListAgentsResponse(_message.Message):
    __slots__ = ("agents",)
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    agents: _containers.RepeatedCompositeFieldContainer[Agent]
    def __init__(self, agents: _Optional[_Iterable[_Union[Agent, _Mapping]]] = ...) -> None: ...

class GetClusterInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetClusterInfoResponse(_message.Message):
    __slots__ = ("version", "checkpoint_store_address", "cluster_id")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_STORE_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    version: str
    checkpoint_store_address: str
    cluster_id: str
    def __init__(self, version: _Optional[str] = ..., checkpoint_store_address: _Optional[str] = ..., cluster_id: _Optional[str] = ...) -> None: ...

class ListTrialDetailsRequest(_message.Message):
    __slots__ = ("experiment_id", "after_trial_id", "limit", "include_steps")
    EXPERIMENT_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_STEPS_FIELD_NUMBER: _ClassVar[int]
    experiment_id: int
    after_trial_id: int
    limit: int
    include_steps: bool
    def __init__(self, experiment_id: _Optional[int] = ..., after_trial_id: _Optional[int] = ..., limit: _Optional[int] = ..., include_steps: bool = ...) -> None: ...

class ListTrialDetailsResponse(_message.Message):
    __slots__ = ("trials", "next_after_trial_id")
    TRIALS_FIELD_NUMBER: _ClassVar[int]
    NEXT_AFTER_TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    trials: _containers.RepeatedCompositeFieldContainer[GetTrialResponse]
    next_after_trial_id: int
    def __init__(self, trials: _Optional[_Iterable[_Union[GetTrialResponse, _Mapping]]] = ..., next_after_trial_id: _Optional[int] = ...) -> None: ...

class PatchExperimentRequest(_message.Message):
    __slots__ = ("experiment_id", "description", "add_labels", "remove_labels", "archived", "max_slots", "weight", "priority", "gc_policy", "dry_run")
    EXPERIMENT_ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ADD_LABELS_FIELD_NUMBER: _ClassVar[int]
    REMOVE_LABELS_FIELD_NUMBER: _ClassVar[int]
    ARCHIVED_FIELD_NUMBER: _ClassVar[int]
    MAX_SLOTS_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    GC_POLICY_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    experiment_id: int
    description: str
    add_labels: _containers.RepeatedScalarFieldContainer[str]
    remove_labels: _containers.RepeatedScalarFieldContainer[str]
    archived: bool
    max_slots: int
    weight: float
    priority: int
    gc_policy: CheckpointGcPolicy
    dry_run: bool
    def __init__(self, experiment_id: _Optional[int] = ..., description: _Optional[str] = ..., add_labels: _Optional[_Iterable[str]] = ..., remove_labels: _Optional[_Iterable[str]] = ..., archived: bool = ..., max_slots: _Optional[int] = ..., weight: _Optional[float] = ..., priority: _Optional[int] = ..., gc_policy: _Optional[_Union[CheckpointGcPolicy, _Mapping]] = ..., dry_run: bool = ...) -> None: ...

class CheckpointGcPolicy(_message.Message):
    __slots__ = ("save_experiment_best", "save_trial_best", "save_trial_latest")
    SAVE_EXPERIMENT_BEST_FIELD_NUMBER: _ClassVar[int]
    SAVE_TRIAL_BEST_FIELD_NUMBER: _ClassVar[int]
    SAVE_TRIAL_LATEST_FIELD_NUMBER: _ClassVar[int]
    save_experiment_best: int
    save_trial_best: int
    save_trial_latest: int
    def __init__(self, save_experiment_best: _Optional[int] = ..., save_trial_best: _Optional[int] = ..., save_trial_latest: _Optional[int] = ...) -> None: ...

class PatchExperimentResponse(_message.Message):
    __slots__ = ("experiment", "deleted_checkpoints")
    EXPERIMENT_FIELD_NUMBER: _ClassVar[int]
    DELETED_CHECKPOINTS_FIELD_NUMBER: _ClassVar[int]
    experiment: Experiment
    deleted_checkpoints: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, experiment: _Optional[_Union[Experiment, _Mapping]] = ..., deleted_checkpoints: _Optional[_Iterable[str]] = ...) -> None: ...

class UploadExperimentRequest(_message.Message):
    __slots__ = ("config_yaml", "model_definition_name", "model_definition")
    CONFIG_YAML_FIELD_NUMBER: _ClassVar[int]
    MODEL_DEFINITION_NAME_FIELD_NUMBER: _ClassVar[int]
    MODEL_DEFINITION_FIELD_NUMBER: _ClassVar[int]
    config_yaml: str
    model_definition_name: str
    model_definition: bytes
    def __init__(self, config_yaml: _Optional[str] = ..., model_definition_name: _Optional[str] = ..., model_definition: _Optional[bytes] = ...) -> None: ...

class UploadExperimentResponse(_message.Message):
    __slots__ = ("experiment",)
    EXPERIMENT_FIELD_NUMBER: _ClassVar[int]
    experiment: Experiment
    def __init__(self, experiment: _Optional[_Union[Experiment, _Mapping]] = ...) -> None: ...

class KillTrialRequest(_message.Message):
    __slots__ = ("trial_id",)
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    trial_id: int
    def __init__(self, trial_id: _Optional[int] = ...) -> None: ...

class KillTrialResponse(_message.Message):
    __slots__ = ("trial",)
    TRIAL_FIELD_NUMBER: _ClassVar[int]
    trial: Trial
    def __init__(self, trial: _Optional[_Union[Trial, _Mapping]] = ...) -> None: ...

class SetAgentEnabledRequest(_message.Message):
    __slots__ = ("agent_id", "slot_id", "enabled")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    SLOT_ID_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    slot_id: str
    enabled: bool
    def __init__(self, agent_id: _Optional[str] = ..., slot_id: _Optional[str] = ..., enabled: bool = ...) -> None: ...

class SetAgentEnabledResponse(_message.Message):
    __slots__ = ("agent",)
    AGENT_FIELD_NUMBER: _ClassVar[int]
    agent: Agent
    def __init__(self, agent: _Optional[_Union[Agent, _Mapping]] = ...) -> None: ...

class DeleteExperimentRequest(_message.Message):
    __slots__ = ("experiment_id",)
    EXPERIMENT_ID_FIELD_NUMBER: _ClassVar[int]
    experiment_id: int
    def __init__(self, experiment_id: _Optional[int] = ...) -> None: ...

class DeleteExperimentResponse(_message.Message):
    __slots__ = ("deleted_checkpoints",)
    DELETED_CHECKPOINTS_FIELD_NUMBER: _ClassVar[int]
    deleted_checkpoints: int
    def __init__(self, deleted_checkpoints: _Optional[int] = ...) -> None: ...

class DeleteCheckpointsRequest(_message.Message):
    __slots__ = ("checkpoint_uuids",)
    CHECKPOINT_UUIDS_FIELD_NUMBER: _ClassVar[int]
    checkpoint_uuids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, checkpoint_uuids: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteCheckpointsResponse(_message.Message):
    __slots__ = ("checkpoints",)
    CHECKPOINTS_FIELD_NUMBER: _ClassVar[int]
    checkpoints: _containers.RepeatedCompositeFieldContainer[_common_pb2.Checkpoint]
    def __init__(self, checkpoints: _Optional[_Iterable[_Union[_common_pb2.Checkpoint, _Mapping]]] = ...) -> None: ...

class GetMetricsRequest(_message.Message):
    __slots__ = ("trial_id", "experiment_id", "from_batches", "follow", "page_size", "kind")
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    EXPERIMENT_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_BATCHES_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    trial_id: int
    experiment_id: int
    from_batches: int
    follow: bool
    page_size: int
    kind: MetricKind
    def __init__(self, trial_id: _Optional[int] = ..., experiment_id: _Optional[int] = ..., from_batches: _Optional[int] = ..., follow: bool = ..., page_size: _Optional[int] = ..., kind: _Optional[_Union[MetricKind, str]] = ...) -> None: ...

class MetricSeries(_message.Message):
    __slots__ = ("trial_id", "kind", "total_batches", "metrics_json", "end_time")
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BATCHES_FIELD_NUMBER: _ClassVar[int]
    METRICS_JSON_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    trial_id: int
    kind: MetricKind
    total_batches: _containers.RepeatedScalarFieldContainer[int]
    metrics_json: _containers.RepeatedScalarFieldContainer[str]
    end_time: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, trial_id: _Optional[int] = ..., kind: _Optional[_Union[MetricKind, str]] = ..., total_batches: _Optional[_Iterable[int]] = ..., metrics_json: _Optional[_Iterable[str]] = ..., end_time: _Optional[_Iterable[str]] = ...) -> None: ...

class GetMetricsResponse(_message.Message):
    __slots__ = ("series", "caught_up")
    SERIES_FIELD_NUMBER: _ClassVar[int]
    CAUGHT_UP_FIELD_NUMBER: _ClassVar[int]
    series: _containers.RepeatedCompositeFieldContainer[MetricSeries]
    caught_up: bool
    def __init__(self, series: _Optional[_Iterable[_Union[MetricSeries, _Mapping]]] = ..., caught_up: bool = ...) -> None: ...
