"""The experiment's error names its first failing trial's cause: the harness's one-line cause where
it gave one, even after other stderr output (TensorFlow's start-up lines), else the error's first line."""

from __future__ import annotations

from pedl_scheduler.experiments.failures import cause_line


def test_the_harness_line_is_the_cause_whatever_stderr_said_before() -> None:
    error = (
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
        "pedl.harness: the model definition uses np.int, an alias NumPy removed (at data.py:67) "
        "(not restarted)"
    )
    assert (
        cause_line(error)
        == "the model definition uses np.int, an alias NumPy removed (at data.py:67) (not restarted)"
    )


def test_without_a_harness_line_the_first_line_stands() -> None:
    assert cause_line("\n  ValueError: bad lr\nTraceback...\n") == "ValueError: bad lr"
    assert cause_line("") == ""
