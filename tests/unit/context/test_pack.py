"""Packing model definitions: what gets in, what stays out, and the errors users see."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from pedl.context import ContextError, model_definition_name, pack, unpack


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return root


def names(data: bytes) -> set[str]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return {m.name for m in tar.getmembers() if not m.isdir()}


def packed_files(root: Path) -> set[str]:
    return {rel for rel, _ in pack(root).files}


def test_packs_everything_relative_to_the_directory(tmp_path: Path) -> None:
    ctx = write(tmp_path / "mnist", {"__init__.py": "", "model_def.py": "x = 1", "lib/util.py": "y"})
    result = pack(ctx)
    assert result.name == "mnist"
    assert names(result.data) == {"__init__.py", "model_def.py", "lib/util.py"}
    assert dict(result.files)["model_def.py"] == 5


def test_pyc_and_pycache_always_left_out_even_if_negated(tmp_path: Path) -> None:
    ctx = write(
        tmp_path / "m",
        {
            "a.py": "",
            "a.pyc": "x",
            "__pycache__/a.cpython-311.pyc": "x",
            "sub/__pycache__/b.txt": "x",
            ".pedlignore": "!*.pyc\n!__pycache__/\n",
        },
    )
    assert packed_files(ctx) == {"a.py", ".pedlignore"}


def test_pedlignore_negation_directories_anchoring_and_globstar(tmp_path: Path) -> None:
    ctx = write(
        tmp_path / "m",
        {
            "model.py": "",
            "a.log": "",
            "keep.log": "",
            "data/train.csv": "",
            "src/data/inner.py": "",
            "foo": "",
            "src/foo": "",
            "build/out.bin": "",
            "build/keep.py": "",
            "deep/x/y/z.ckpt": "",
            "w.ckpt": "",
            ".pedlignore": "*.log\n!keep.log\n/data/\n/foo\nbuild/\n!build/keep.py\n**/*.ckpt\n",
        },
    )
    assert packed_files(ctx) == {
        "model.py",
        "keep.log",
        "src/data/inner.py",
        "src/foo",
        ".pedlignore",
    }


def test_unanchored_pattern_matches_at_any_depth(tmp_path: Path) -> None:
    ctx = write(
        tmp_path / "m", {"model.py": "", "foo": "", "src/foo": "", "src/bar.py": "", ".detignore": "foo\n"}
    )
    assert packed_files(ctx) == {"model.py", "src/bar.py", ".detignore"}


def test_detignore_and_pedlignore_both_apply(tmp_path: Path) -> None:
    ctx = write(
        tmp_path / "m",
        {"model.py": "", "a.npy": "", "b.h5": "", ".detignore": "*.npy\n", ".pedlignore": "*.h5\n"},
    )
    assert packed_files(ctx) == {"model.py", ".detignore", ".pedlignore"}


def test_single_python_file(tmp_path: Path) -> None:
    write(tmp_path, {"my-model.py": "print(1)", "other.py": ""})
    result = pack(tmp_path / "my-model.py")
    assert result.name == "my_model"
    assert names(result.data) == {"my-model.py"}


@pytest.mark.parametrize(
    ("base", "expected"),
    [
        ("mnist", "mnist"),
        ("my-model v2", "my_model_v2"),
        ("2cifar", "_2cifar"),
        ("class", "class_"),
        ("---", "model_def"),
    ],
)
def test_name_is_a_python_identifier(tmp_path: Path, base: str, expected: str) -> None:
    (tmp_path / base).mkdir()
    assert model_definition_name(tmp_path / base) == expected


def test_errors_for_missing_wrong_kind_and_empty(tmp_path: Path) -> None:
    with pytest.raises(ContextError, match="does not exist"):
        pack(tmp_path / "nope")
    write(tmp_path, {"notes.txt": "x"})
    with pytest.raises(ContextError, match="directory or a .py file"):
        pack(tmp_path / "notes.txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ContextError, match="no files"):
        pack(tmp_path / "empty")
    ignored = write(tmp_path / "ign", {"a.py": "", ".pedlignore": "*\n"})
    with pytest.raises(ContextError, match="no files"):
        pack(ignored)


def test_too_large_lists_largest_files_and_suggests_pedlignore(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {f"f{i:02d}.bin": b"x" * (100 + i) for i in range(12)}
    files["dataset.npy"] = b"x" * 5000
    ctx = write(tmp_path / "m", files)
    with pytest.raises(ContextError) as err:
        pack(ctx, max_bytes=4000)
    message = str(err.value)
    assert ".pedlignore" in message and "\n" not in message  # one line
    assert "dataset.npy" in message and "f11.bin" in message
    assert message.index("dataset.npy") < message.index("f11.bin")
    assert "f00.bin" not in message and "f01.bin" not in message  # only the top 10


def test_packing_is_deterministic(tmp_path: Path) -> None:
    ctx = write(tmp_path / "m", {"a.py": "1", "b/c.py": "2"})
    first = pack(ctx).data
    os.utime(ctx / "a.py", (1, 1))
    assert pack(ctx).data == first


def test_symlinks_inside_kept_outside_skipped(tmp_path: Path) -> None:
    ctx = write(tmp_path / "m", {"model.py": "x", "lib/util.py": "u"})
    write(tmp_path, {"secret.txt": "s"})
    (ctx / "alias.py").symlink_to("model.py")
    (ctx / "libalias").symlink_to("lib")
    (ctx / "outside.txt").symlink_to(tmp_path / "secret.txt")
    result = pack(ctx)
    assert result.skipped == ["outside.txt"]
    dest = tmp_path / "out"
    unpack(result.data, dest)
    assert (dest / "alias.py").read_text() == "x"
    assert (dest / "libalias" / "util.py").read_text() == "u"
    assert not (dest / "outside.txt").exists()


def test_round_trip_gives_identical_files(tmp_path: Path) -> None:
    content = {
        "__init__.py": "from .m import T\n",
        "m.py": "class T: ...\n",
        "data/weights.bin": bytes(range(256)) * 50,
        "empty.txt": "",
        "nested/deep/file.cfg": "k=v",
    }
    ctx = write(tmp_path / "m", content)
    (ctx / "run.sh").write_text("#!/bin/sh\n")
    (ctx / "run.sh").chmod(0o755)
    dest = tmp_path / "out"
    unpack(pack(ctx).data, dest)
    for rel, expected in content.items():
        got = (dest / rel).read_bytes()
        assert got == (expected if isinstance(expected, bytes) else expected.encode())
    assert os.access(dest / "run.sh", os.X_OK)
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) == sorted(
        [*content, "run.sh"]
    )
