"""`experiment create` refuses shared_fs checkpoint storage outside the roots the operator allows."""

from __future__ import annotations

from pathlib import Path

import pytest

from pedl.config import ExperimentConfig, parse_experiment_config
from pedl_checkpoint_store.config import parse_config
from pedl_checkpoint_store.storage_roots import resolved_roots
from pedl_scheduler.storage_check import StorageCheckError, check_checkpoint_storage


def config(host_path: str, storage_path: str = "") -> ExperimentConfig:
    extra = f", storage_path: {storage_path}" if storage_path else ""
    return parse_experiment_config(
        "searcher: {name: single, metric: loss, max_length: {batches: 10}}\n"
        f"checkpoint_storage: {{type: shared_fs, host_path: {host_path}{extra}}}\n"
    )


def test_a_host_path_under_an_allowed_root_is_accepted(tmp_path: Path) -> None:
    roots = resolved_roots([tmp_path / "a", tmp_path / "b"])
    check_checkpoint_storage(config(str(tmp_path / "b" / "team1")), roots)
    check_checkpoint_storage(config(str(tmp_path / "a"), "sub/dir"), roots)


@pytest.mark.parametrize("where", ["/any/path", "{tmp}/a/../elsewhere", "{tmp}/a/link", "/"])
def test_anything_else_is_refused_with_one_line_naming_the_allowed_roots(tmp_path: Path, where: str) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    roots = resolved_roots([tmp_path / "a"])
    with pytest.raises(StorageCheckError) as e:
        check_checkpoint_storage(config(where.format(tmp=tmp_path)), roots)
    message = str(e.value)
    assert "\n" not in message
    assert "is outside the storage roots this cluster allows" in message
    assert str(tmp_path / "a") in message and "--allowed-storage-root" in message


def test_the_store_allows_its_own_root_unless_roots_are_listed(tmp_path: Path) -> None:
    assert parse_config(["--storage-path", str(tmp_path)], env={}).allowed_storage_roots == ()
    cfg = parse_config(["--allowed-storage-root", "/a", "--allowed-storage-root", "/b"], env={})
    assert cfg.allowed_storage_roots == (Path("/a"), Path("/b"))
    env = {"PEDL_CHECKPOINT_STORE_ALLOWED_STORAGE_ROOT": "/c:/d"}
    assert parse_config([], env=env).allowed_storage_roots == (Path("/c"), Path("/d"))
