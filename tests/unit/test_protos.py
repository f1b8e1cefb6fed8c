"""The API definitions: lint-clean, and the committed stubs match them."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_buf_lint_passes() -> None:
    result = subprocess.run([str(BIN / "buf"), "lint"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_committed_stubs_are_fresh() -> None:
    result = subprocess.run(
        [sys.executable, "scripts/gen_protos.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_stubs_import_under_protobuf_4_25(tmp_path) -> None:
    """The TensorFlow 2.15 environment runs protobuf 4.25; the generator venv has it."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import gen_protos

    python = gen_protos.generator_python()
    code = (
        "import google.protobuf, sys; assert google.protobuf.__version__.startswith('4.25'); "
        "from pedl.v1 import scheduler_pb2, agent_pb2, harness_pb2, checkpoint_store_pb2, common_pb2; "
        "print(scheduler_pb2.Trial(id=3).id)"
    )
    result = subprocess.run([str(python), "-c", code], cwd=ROOT / "sdk", capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == "3", result.stderr
