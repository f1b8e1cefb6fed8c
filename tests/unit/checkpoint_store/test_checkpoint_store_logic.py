"""Upload assembly, visibility, recovery and deletes of CheckpointStore on a local directory."""

import hashlib
from pathlib import Path

import pytest

from pedl.v1 import checkpoint_store_pb2, common_pb2
from pedl_checkpoint_store import known_storages, layout
from pedl_checkpoint_store.backends import BackendResolver
from pedl_checkpoint_store.errors import DataLoss, InvalidArgument, NotFound
from pedl_checkpoint_store.local import LocalFilesystemBackend
from pedl_checkpoint_store.storage_roots import resolved_roots
from pedl_checkpoint_store.store import CheckpointStore
from pedl_checkpoint_store.upload import Upload


def chunks(path: str, data: bytes, size: int = 4) -> list[checkpoint_store_pb2.FileChunk]:
    pieces = [data[i : i + size] for i in range(0, len(data), size)] or [b""]
    out, offset = [], 0
    for i, piece in enumerate(pieces):
        last = i == len(pieces) - 1
        sha = hashlib.sha256(data).hexdigest() if last else ""
        out.append(
            checkpoint_store_pb2.FileChunk(path=path, offset=offset, data=piece, last=last, sha256=sha)
        )
        offset += len(piece)
    return out


def new_store(root: Path, *allowed: Path) -> CheckpointStore:
    """A store on `root`; `allowed` are further roots shared_fs storage may use."""
    backend = LocalFilesystemBackend(root)
    store = CheckpointStore(backend, BackendResolver(backend, resolved_roots([root, *allowed])))
    store.recover()
    return store


def begin(store: CheckpointStore, **kw: object) -> Upload:
    args: dict = {"experiment_id": 1, "trial_id": 2, "total_batches": 100} | kw
    return store.begin_upload(**args)


def upload(store: CheckpointStore, files: dict[str, bytes], **kw: object) -> common_pb2.Checkpoint:
    up = begin(store, **kw)
    for path, data in files.items():
        for c in chunks(path, data):
            up.add_chunk(c)
    return up.finish()


def chunk(item: checkpoint_store_pb2.DownloadCheckpointResponse | bytes) -> checkpoint_store_pb2.FileChunk:
    """The chunk a store's answer carries, parsed as any client's protobuf would (chunks go out
    already serialized)."""
    if isinstance(item, bytes):
        item = checkpoint_store_pb2.DownloadCheckpointResponse.FromString(item)
    assert item.WhichOneof("message") == "chunk"
    return item.chunk


def download(store: CheckpointStore, uuid: str) -> dict[str, bytes]:
    _, stream = store.open_download(uuid, chunk_size=3)
    files: dict[str, bytes] = {}
    for item in stream:
        c = chunk(item)
        assert c.offset == len(files.get(c.path, b""))
        files[c.path] = files.get(c.path, b"") + c.data
    return files


def uuid_dirs(root: Path) -> list[str]:
    """What the store keeps in `root`, but for its list of the storages it ever used."""
    return sorted(p.name for p in root.iterdir() if p.name != known_storages.KEY) if root.exists() else []


FILES = {"model/weights.pt": b"0123456789abcdef", "empty": b"", "opt/state": b"xyz"}


def test_uploaded_checkpoint_is_recorded_and_downloadable(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    cp = upload(store, FILES, metadata={"framework": "torch"})
    assert cp.state == common_pb2.CHECKPOINT_STATE_COMPLETED
    assert (cp.experiment_id, cp.trial_id, cp.total_batches) == (1, 2, 100)
    assert dict(cp.metadata) == {"framework": "torch"}
    assert cp.total_size == 19
    assert cp.created_at.endswith("Z")
    assert {f.path: (f.size, f.sha256) for f in cp.files} == {
        p: (len(d), hashlib.sha256(d).hexdigest()) for p, d in FILES.items()
    }
    assert store.get(cp.uuid) == cp
    assert download(store, cp.uuid) == FILES


def test_empty_file_downloads_as_one_last_chunk(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    cp = upload(store, {"empty": b""})
    _, stream = store.open_download(cp.uuid)
    assert [(c.path, c.data, c.last) for c in map(chunk, stream)] == [("empty", b"", True)]


def test_checkpoint_is_invisible_until_finished(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    up = begin(store)
    for c in chunks("a", b"hello"):
        up.add_chunk(c)
    assert store.list() == []
    with pytest.raises(NotFound, match=f"checkpoint {up.uuid} not found"):
        store.get(up.uuid)
    with pytest.raises(NotFound):
        store.open_download(up.uuid)
    up.finish()
    assert [c.uuid for c in store.list()] == [up.uuid]


def test_sha256_mismatch_names_the_file_and_leaves_nothing(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    up = begin(store)
    bad = checkpoint_store_pb2.FileChunk(path="w.pt", offset=0, data=b"abc", last=True, sha256="0" * 64)
    with pytest.raises(InvalidArgument, match="sha256 mismatch for file 'w.pt'"):
        up.add_chunk(bad)
    assert uuid_dirs(tmp_path) == []
    assert store.list() == []


@pytest.mark.parametrize("path", ["/abs/file", "../escape", "a/../../b"])
def test_unsafe_paths_are_rejected(tmp_path: Path, path: str) -> None:
    store = new_store(tmp_path)
    up = begin(store)
    with pytest.raises(InvalidArgument, match="absolute|'..'"):
        up.add_chunk(chunks(path, b"x")[0])
    assert uuid_dirs(tmp_path) == []
    assert not (tmp_path.parent / "escape").exists()


def test_stream_errors_are_named(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    cases = [
        ([chunks("a", b"12345678")[0], chunks("b", b"x")[0]], "arrived before the last chunk of file 'a'"),
        ([chunks("a", b"12345678")[1]], "offset 4, expected 0"),
        (chunks("a", b"1") + chunks("a", b"1"), "file 'a' was sent twice"),
        (chunks("a", b"1") + chunks("a/b", b"1"), "inside 'a', which is a file"),
        (chunks("a/b", b"1") + chunks("a", b"1"), "clashes with a directory"),
        ([checkpoint_store_pb2.FileChunk(path="a", data=b"1", last=True)], "carries no sha256"),
    ]
    for stream, message in cases:
        up = begin(store)
        with pytest.raises(InvalidArgument, match=message):
            for c in stream:
                up.add_chunk(c)
        assert up.state == "aborted"
    assert uuid_dirs(tmp_path) == []


def test_finish_before_last_chunk_is_rejected(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    up = begin(store)
    up.add_chunk(chunks("a", b"12345678")[0])
    with pytest.raises(InvalidArgument, match="before the last chunk of file 'a'"):
        up.finish()
    assert uuid_dirs(tmp_path) == [] and store.list() == []


def test_abort_removes_partial_data(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    up = begin(store)
    up.add_chunk(chunks("a", b"12345678")[0])
    assert uuid_dirs(tmp_path) == [up.uuid]
    up.abort()
    assert uuid_dirs(tmp_path) == []


def test_negative_ids_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="total_batches must not be negative"):
        begin(new_store(tmp_path), total_batches=-1)


def test_list_filters_and_orders_newest_first(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    a = upload(store, {"f": b"1"}, experiment_id=1, trial_id=1)
    b = upload(store, {"f": b"2"}, experiment_id=1, trial_id=2)
    c = upload(store, {"f": b"3"}, experiment_id=2, trial_id=3)
    assert [x.uuid for x in store.list()] == [c.uuid, b.uuid, a.uuid]
    assert [x.uuid for x in store.list(experiment_id=1)] == [b.uuid, a.uuid]
    assert [x.uuid for x in store.list(trial_id=1)] == [a.uuid]
    assert store.list(experiment_id=2, trial_id=1) == []


def test_delete_removes_record_and_bytes(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    cp = upload(store, FILES)
    store.delete(cp.uuid)
    assert uuid_dirs(tmp_path) == []
    with pytest.raises(NotFound, match=f"checkpoint {cp.uuid} not found"):
        store.get(cp.uuid)
    with pytest.raises(NotFound):
        store.delete(cp.uuid)


def test_missing_files_names_the_files_gone_from_a_visible_checkpoints_storage(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    cp = upload(store, {"a.bin": b"aaaa", "sub/b.bin": b"bb"})
    assert store.missing_files(cp.uuid) == []
    (tmp_path / layout.data_key(cp.uuid, "sub/b.bin")).unlink()
    assert store.missing_files(cp.uuid) == ["sub/b.bin"]
    assert [c.uuid for c in store.list()] == [cp.uuid]  # still listed: only a check of its files tells
    store.delete(cp.uuid)
    with pytest.raises(NotFound):
        store.missing_files(cp.uuid)


def test_recover_reloads_visible_and_removes_leftovers(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    kept = upload(store, FILES)
    partial = begin(store)
    partial.add_chunk(chunks("a", b"12345678")[0])  # the process "dies" here
    doomed = upload(store, {"f": b"x"})
    # A delete interrupted after its marker was written.
    store.catalog.put_bytes(layout.marker_key(doomed.uuid, layout.DELETING), layout.encode_marker({}))
    (tmp_path / "not-a-checkpoint").mkdir()

    fresh = CheckpointStore(LocalFilesystemBackend(tmp_path))
    report = fresh.recover()
    assert report.loaded == 1
    assert report.removed_partial == [partial.uuid]
    assert report.finished_deletes == [doomed.uuid]
    assert [c.uuid for c in fresh.list()] == [kept.uuid]
    assert fresh.get(kept.uuid) == kept
    assert download(fresh, kept.uuid) == FILES
    assert uuid_dirs(tmp_path) == sorted([kept.uuid, "not-a-checkpoint"])


def test_unreadable_record_is_skipped_not_deleted(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    cp = upload(store, FILES)
    (tmp_path / cp.uuid / layout.RECORD).write_text("{not json")
    fresh = CheckpointStore(LocalFilesystemBackend(tmp_path))
    assert fresh.recover().unreadable == [cp.uuid]
    assert fresh.list() == []
    assert (tmp_path / cp.uuid / "data" / "empty").exists()


def test_shared_fs_storage_puts_bytes_elsewhere(tmp_path: Path) -> None:
    store = new_store(tmp_path / "store", tmp_path / "shared")
    storage = {"type": "shared_fs", "host_path": str(tmp_path / "shared"), "storage_path": "ckpts"}
    cp = upload(store, FILES, storage=storage)
    assert (tmp_path / "shared" / "ckpts" / cp.uuid / "data" / "opt" / "state").read_bytes() == b"xyz"
    assert download(store, cp.uuid) == FILES
    fresh = new_store(tmp_path / "store", tmp_path / "shared")
    assert download(fresh, cp.uuid) == FILES
    fresh.delete(cp.uuid)
    assert uuid_dirs(tmp_path / "shared" / "ckpts") == []


def test_partial_upload_on_other_storage_is_removed_at_recovery(tmp_path: Path) -> None:
    store = new_store(tmp_path / "store", tmp_path / "shared")
    storage = {"type": "shared_fs", "host_path": str(tmp_path / "shared")}
    up = begin(store, storage=storage)
    up.add_chunk(chunks("a", b"12345678")[0])
    assert uuid_dirs(tmp_path / "shared") == [up.uuid]
    new_store(tmp_path / "store", tmp_path / "shared")
    assert uuid_dirs(tmp_path / "shared") == []
    assert uuid_dirs(tmp_path / "store") == []


@pytest.mark.parametrize(
    ("storage", "message"),
    [
        ({"type": "gcs", "bucket": "b"}, "type 'gcs' is not supported by this checkpoint store"),
        ({"type": "shared_fs"}, "host_path is required"),
        ({"type": "shared_fs", "host_path": "relative"}, "must be an absolute path"),
        ({"type": "shared_fs", "host_path": "/tmp", "storage_path": "../x"}, "must not contain '..'"),
        ({"type": "shared_fs", "host_path": "/any/path"}, "outside the storage roots this cluster allows"),
    ],
)
def test_bad_storage_configs_are_rejected(tmp_path: Path, storage: dict, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        begin(new_store(tmp_path), storage=storage)


def test_storage_config_without_type_means_default(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    cp = upload(store, {"f": b"1"}, storage={"save_trial_best": 1})
    assert (tmp_path / cp.uuid / "data" / "f").read_bytes() == b"1"


def test_download_checks_sizes_and_leaves_hashes_to_the_client(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    cp = upload(store, FILES)
    stored = tmp_path / cp.uuid / "data" / "model" / "weights.pt"
    stored.write_bytes(b"0123456789abcdeF")  # same size, other bytes: passed through as they are
    assert download(store, cp.uuid)["model/weights.pt"] == b"0123456789abcdeF"
    stored.write_bytes(b"0123")
    with pytest.raises(
        DataLoss, match="'model/weights.pt' of checkpoint .* the record says 16 bytes, storage holds 4"
    ):
        download(store, cp.uuid)


def test_local_storage_streams_even_when_urls_are_accepted(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    cp = upload(store, FILES)
    _, items = store.open_download(cp.uuid, urls=True)
    assert {c.path for c in map(chunk, items)} == set(FILES)  # chunks, no URLs
    assert store.begin_direct_upload(experiment_id=1, trial_id=1, total_batches=1, files=[("f", 1)]) is None
    assert uuid_dirs(tmp_path) == [cp.uuid]


def test_a_client_may_choose_the_uuid_a_core_api_script_was_told_beforehand(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    chosen = "0b3f09d7-bf25-4c18-84a5-2ef74adf595e"
    assert upload(store, FILES, uuid=chosen).uuid == chosen
    assert download(store, chosen) == FILES
    with pytest.raises(InvalidArgument, match="already exists"):
        begin(store, uuid=chosen)
    with pytest.raises(InvalidArgument, match="not a UUID"):
        begin(store, uuid="../escape")
    with pytest.raises(InvalidArgument, match="canonical"):
        begin(store, uuid=chosen.upper())


def test_shared_fs_storage_stays_under_the_allowed_roots_symlinks_followed(tmp_path: Path) -> None:
    """An experiment cannot make the store write outside its roots: not directly, via '..' or a link."""
    store = new_store(tmp_path / "store", tmp_path / "shared")
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "link").symlink_to(outside)
    for host_path in (str(outside), f"{tmp_path}/shared/../outside", f"{tmp_path}/shared/link"):
        with pytest.raises(InvalidArgument, match=r"outside the storage roots this cluster allows: .*shared"):
            begin(store, storage={"type": "shared_fs", "host_path": host_path})
    assert list(outside.iterdir()) == []
    cp = upload(store, FILES, storage={"type": "shared_fs", "host_path": f"{tmp_path}/shared/./sub"})
    assert (tmp_path / "shared" / "sub" / cp.uuid).is_dir()


def test_the_local_backend_never_touches_a_path_outside_its_root(tmp_path: Path) -> None:
    """Whatever key a caller passes ('..', an absolute path, a symlink out of the root), it is refused."""
    backend = LocalFilesystemBackend(tmp_path / "root")
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "root" / "escape").symlink_to(outside)
    for key in ("../outside/x", str(outside / "x"), "escape/x", "a/../../outside/x"):
        with pytest.raises(InvalidArgument, match="leads outside the storage root"):
            backend.put_bytes(key, b"nope")
        with pytest.raises(InvalidArgument, match="leads outside the storage root"):
            backend.open_write(key)
    with pytest.raises(InvalidArgument):
        backend.delete_prefix("escape")
    assert list(outside.iterdir()) == []
    backend.put_bytes("ok/x", b"yes")
    assert backend.get_bytes("ok/x") == b"yes"
