from google.protobuf import struct_pb2 as _struct_pb2
from pedl.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class UploadHeader(_message.Message):
    __slots__ = ("experiment_id", "trial_id", "total_batches", "metadata", "storage", "uuid")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    EXPERIMENT_ID_FIELD_NUMBER: _ClassVar[int]
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BATCHES_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    STORAGE_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    experiment_id: int
    trial_id: int
    total_batches: int
    metadata: _containers.ScalarMap[str, str]
    storage: _struct_pb2.Struct
    uuid: str
    def __init__(self, experiment_id: _Optional[int] = ..., trial_id: _Optional[int] = ..., total_batches: _Optional[int] = ..., metadata: _Optional[_Mapping[str, str]] = ..., storage: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., uuid: _Optional[str] = ...) -> None: ...

class FileChunk(_message.Message):
    __slots__ = ("path", "offset", "data", "last", "sha256")
    PATH_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    path: str
    offset: int
    data: bytes
    last: bool
    sha256: str
    def __init__(self, path: _Optional[str] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ..., last: bool = ..., sha256: _Optional[str] = ...) -> None: ...

class UploadCheckpointRequest(_message.Message):
    __slots__ = ("header", "chunk")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    header: UploadHeader
    chunk: FileChunk
    def __init__(self, header: _Optional[_Union[UploadHeader, _Mapping]] = ..., chunk: _Optional[_Union[FileChunk, _Mapping]] = ...) -> None: ...

class UploadCheckpointResponse(_message.Message):
    __slots__ = ("checkpoint",)
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    checkpoint: _common_pb2.Checkpoint
    def __init__(self, checkpoint: _Optional[_Union[_common_pb2.Checkpoint, _Mapping]] = ...) -> None: ...

class PlannedFile(_message.Message):
    __slots__ = ("path", "size")
    PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    path: str
    size: int
    def __init__(self, path: _Optional[str] = ..., size: _Optional[int] = ...) -> None: ...

class BeginUploadRequest(_message.Message):
    __slots__ = ("header", "files")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    header: UploadHeader
    files: _containers.RepeatedCompositeFieldContainer[PlannedFile]
    def __init__(self, header: _Optional[_Union[UploadHeader, _Mapping]] = ..., files: _Optional[_Iterable[_Union[PlannedFile, _Mapping]]] = ...) -> None: ...

class FileUploadPlan(_message.Message):
    __slots__ = ("path", "part_size", "part_urls")
    PATH_FIELD_NUMBER: _ClassVar[int]
    PART_SIZE_FIELD_NUMBER: _ClassVar[int]
    PART_URLS_FIELD_NUMBER: _ClassVar[int]
    path: str
    part_size: int
    part_urls: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, path: _Optional[str] = ..., part_size: _Optional[int] = ..., part_urls: _Optional[_Iterable[str]] = ...) -> None: ...

class BeginUploadResponse(_message.Message):
    __slots__ = ("uuid", "files", "expires_in_seconds")
    UUID_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_IN_SECONDS_FIELD_NUMBER: _ClassVar[int]
    uuid: str
    files: _containers.RepeatedCompositeFieldContainer[FileUploadPlan]
    expires_in_seconds: int
    def __init__(self, uuid: _Optional[str] = ..., files: _Optional[_Iterable[_Union[FileUploadPlan, _Mapping]]] = ..., expires_in_seconds: _Optional[int] = ...) -> None: ...

class UploadedFile(_message.Message):
    __slots__ = ("path", "sha256", "etags")
    PATH_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    ETAGS_FIELD_NUMBER: _ClassVar[int]
    path: str
    sha256: str
    etags: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, path: _Optional[str] = ..., sha256: _Optional[str] = ..., etags: _Optional[_Iterable[str]] = ...) -> None: ...

class FinishUploadRequest(_message.Message):
    __slots__ = ("uuid", "files")
    UUID_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    uuid: str
    files: _containers.RepeatedCompositeFieldContainer[UploadedFile]
    def __init__(self, uuid: _Optional[str] = ..., files: _Optional[_Iterable[_Union[UploadedFile, _Mapping]]] = ...) -> None: ...

class FinishUploadResponse(_message.Message):
    __slots__ = ("checkpoint",)
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    checkpoint: _common_pb2.Checkpoint
    def __init__(self, checkpoint: _Optional[_Union[_common_pb2.Checkpoint, _Mapping]] = ...) -> None: ...

class AbortUploadRequest(_message.Message):
    __slots__ = ("uuid",)
    UUID_FIELD_NUMBER: _ClassVar[int]
    uuid: str
    def __init__(self, uuid: _Optional[str] = ...) -> None: ...

class AbortUploadResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DownloadCheckpointRequest(_message.Message):
    __slots__ = ("uuid", "accept_urls")
    UUID_FIELD_NUMBER: _ClassVar[int]
    ACCEPT_URLS_FIELD_NUMBER: _ClassVar[int]
    uuid: str
    accept_urls: bool
    def __init__(self, uuid: _Optional[str] = ..., accept_urls: bool = ...) -> None: ...

class FileUrl(_message.Message):
    __slots__ = ("path", "url", "expires_in_seconds")
    PATH_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_IN_SECONDS_FIELD_NUMBER: _ClassVar[int]
    path: str
    url: str
    expires_in_seconds: int
    def __init__(self, path: _Optional[str] = ..., url: _Optional[str] = ..., expires_in_seconds: _Optional[int] = ...) -> None: ...

class DownloadCheckpointResponse(_message.Message):
    __slots__ = ("checkpoint", "chunk", "url")
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    checkpoint: _common_pb2.Checkpoint
    chunk: FileChunk
    url: FileUrl
    def __init__(self, checkpoint: _Optional[_Union[_common_pb2.Checkpoint, _Mapping]] = ..., chunk: _Optional[_Union[FileChunk, _Mapping]] = ..., url: _Optional[_Union[FileUrl, _Mapping]] = ...) -> None: ...

class GetCheckpointRequest(_message.Message):
    __slots__ = ("uuid",)
    UUID_FIELD_NUMBER: _ClassVar[int]
    uuid: str
    def __init__(self, uuid: _Optional[str] = ...) -> None: ...

class GetCheckpointResponse(_message.Message):
    __slots__ = ("checkpoint",)
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    checkpoint: _common_pb2.Checkpoint
    def __init__(self, checkpoint: _Optional[_Union[_common_pb2.Checkpoint, _Mapping]] = ...) -> None: ...

class ListCheckpointsRequest(_message.Message):
    __slots__ = ("experiment_id", "trial_id")
    EXPERIMENT_ID_FIELD_NUMBER: _ClassVar[int]
    TRIAL_ID_FIELD_NUMBER: _ClassVar[int]
    experiment_id: int
    trial_id: int
    def __init__(self, experiment_id: _Optional[int] = ..., trial_id: _Optional[int] = ...) -> None: ...

class ListCheckpointsResponse(_message.Message):
    __slots__ = ("checkpoints",)
    CHECKPOINTS_FIELD_NUMBER: _ClassVar[int]
    checkpoints: _containers.RepeatedCompositeFieldContainer[_common_pb2.Checkpoint]
    def __init__(self, checkpoints: _Optional[_Iterable[_Union[_common_pb2.Checkpoint, _Mapping]]] = ...) -> None: ...

class DeleteCheckpointRequest(_message.Message):
    __slots__ = ("uuid",)
    UUID_FIELD_NUMBER: _ClassVar[int]
    uuid: str
    def __init__(self, uuid: _Optional[str] = ...) -> None: ...

class DeleteCheckpointResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
