"""The harness's exit (`exit_now`): the trial's exit hooks and finalizers run and its exit code stands,
while torch's own at-exit finalizers (which only unregister kernels from its dispatcher) are skipped."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

EXITING = textwrap.dedent(
    """
    import atexit, sys, tempfile, weakref
    from pathlib import Path

    import torch
    import torch.library

    import pedl.harness._exit as harness_exit
    from pedl.harness.main import exit_now

    out = Path(sys.argv[1])
    library = torch.library.Library("pedl_exit_test", "DEF")
    library.define("twice(Tensor x) -> Tensor")
    torch_finalizers = [
        f for f in weakref.finalize._registry if f.peek() and f.peek()[1] is torch.library._del_library
    ]

    class Held:
        pass

    held = Held()
    weakref.finalize(held, lambda: (out / "finalizer").write_text("ran"))
    kept = tempfile.TemporaryDirectory()
    (out / "tmpdir").write_text(kept.name)
    atexit.register(lambda: (out / "atexit").write_text("ran"))
    real = harness_exit.skip_teardown_finalizers

    def counted():
        skipped = real()
        (out / "skipped").write_text(str(skipped))
        (out / "torch_atexit").write_text(str(sum(f.atexit for f in torch_finalizers)))
        return skipped

    harness_exit.skip_teardown_finalizers = counted
    import pedl.harness.main as harness_main
    harness_main.skip_teardown_finalizers = counted
    print("trial output", flush=False)
    exit_now(int(sys.argv[2]))
    """
)


def _exit(tmp_path: Path, code: int) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "exiting.py"
    script.write_text(EXITING)
    return subprocess.run(
        [sys.executable, str(script), str(tmp_path), str(code)], capture_output=True, text=True, timeout=300
    )


def test_exit_runs_the_trials_hooks_skips_torchs_and_keeps_the_code(tmp_path: Path) -> None:
    done = _exit(tmp_path, 3)
    assert done.returncode == 3, done.stderr
    assert "trial output" in done.stdout  # flushed before the exit
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "finalizer").read_text() == "ran"  # the trial's own finalizer at exit
    assert not Path((tmp_path / "tmpdir").read_text()).exists()  # a TemporaryDirectory cleaned up
    assert int((tmp_path / "skipped").read_text()) >= 1  # the test's library, torch's own besides
    assert (tmp_path / "torch_atexit").read_text() == "0"


def test_exit_code_zero_stands(tmp_path: Path) -> None:
    done = _exit(tmp_path, 0)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "atexit").read_text() == "ran"


def test_nothing_skipped_without_torch() -> None:
    """A harness that never imported torch skips nothing (and imports nothing to find out)."""
    probe = (
        "import sys; from pedl.harness._exit import skip_teardown_finalizers; "
        "print(skip_teardown_finalizers(), 'torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["0", "False"], done.stderr
