"""Generate (or check) the Python stubs in sdk/pedl/v1 from protos/pedl/v1.

The stubs are produced by grpcio-tools 1.62, whose output imports under both the
protobuf 4.25 runtime (the TensorFlow 2.15 environment) and protobuf 7 (the main one).
The type stubs (*_pb2.pyi, *_pb2_grpc.pyi) that mypy reads come from mypy-protobuf, whose
enum and gRPC stub/servicer types are precise. The generator lives in its own small venv
under .cache/ because it pins protobuf < 5.

    python scripts/gen_protos.py           # regenerate sdk/pedl/v1
    python scripts/gen_protos.py --check   # exit 1 when the committed stubs are stale
"""

from __future__ import annotations

import argparse
import filecmp
import os
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
OUT_DIR = ROOT / "sdk" / "pedl" / "v1"
TOOLS_VERSION = "1.62.3"
PROTOBUF_VERSION = "4.25.9"
MYPY_PROTOBUF_VERSION = "3.6.0"
GEN_VENV = ROOT / ".cache" / f"protoc-grpcio-tools-{TOOLS_VERSION}-mypy-protobuf-{MYPY_PROTOBUF_VERSION}"
INIT = '"""Generated gRPC/protobuf stubs of the pedl.v1 API (scripts/gen_protos.py)."""\n'


def generator_python() -> Path:
    python = GEN_VENV / "bin" / "python"
    if not python.exists():
        venv.EnvBuilder(with_pip=True, clear=True).create(GEN_VENV)
        subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                f"grpcio-tools=={TOOLS_VERSION}",
                f"protobuf=={PROTOBUF_VERSION}",
                f"mypy-protobuf=={MYPY_PROTOBUF_VERSION}",
            ],
            check=True,
        )
    return python


def generate(out_root: Path) -> Path:
    """Writes pedl/v1/*.py under out_root and returns that package directory."""
    protos = sorted(str(p.relative_to(PROTO_ROOT)) for p in (PROTO_ROOT / "pedl" / "v1").glob("*.proto"))
    subprocess.run(
        [
            str(generator_python()),
            "-m",
            "grpc_tools.protoc",
            f"-I{PROTO_ROOT}",
            f"--plugin=protoc-gen-mypy={GEN_VENV / 'bin' / 'protoc-gen-mypy'}",
            f"--plugin=protoc-gen-mypy_grpc={GEN_VENV / 'bin' / 'protoc-gen-mypy_grpc'}",
            f"--python_out={out_root}",
            f"--mypy_out=quiet:{out_root}",
            f"--grpc_python_out={out_root}",
            f"--mypy_grpc_out=quiet:{out_root}",
            *protos,
        ],
        check=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    package = out_root / "pedl" / "v1"
    (package / "__init__.py").write_text(INIT)
    # mypy-protobuf marks its _ServicerContext (both a sync and an aio context) with an inline
    # ignore; [tool.mypy] disables that one check for the generated modules instead, so every
    # inline ignore left in sdk/ is hand-written and says why.
    for stub in package.glob("*_pb2_grpc.pyi"):
        text = stub.read_text()
        stub.write_text(text.replace("  # type: ignore[misc, type-arg]\n", "\n"))
    return package


def stale_files(generated: Path) -> list[str]:
    names = {p.name for p in generated.iterdir() if p.is_file()}
    names |= {p.name for p in OUT_DIR.glob("*") if p.is_file()} if OUT_DIR.exists() else set()
    return sorted(
        n
        for n in names
        if not (generated / n).exists()
        or not (OUT_DIR / n).exists()
        or not filecmp.cmp(generated / n, OUT_DIR / n, shallow=False)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed stubs differ")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        generated = generate(Path(tmp))
        stale = stale_files(generated)
        if args.check:
            if stale:
                print(
                    f"stale generated stubs in {OUT_DIR}: {', '.join(stale)}; "
                    "run: python scripts/gen_protos.py",
                    file=sys.stderr,
                )
                return 1
            return 0
        OUT_DIR.mkdir(parents=True, exist_ok=True)
        for old in OUT_DIR.glob("*"):
            if old.is_file():
                old.unlink()
        for new in generated.iterdir():
            if new.is_file():
                (OUT_DIR / new.name).write_bytes(new.read_bytes())
    return 0


if __name__ == "__main__":
    sys.exit(main())
