"""The exception a Core API script died of, read from its stderr's last traceback."""

from __future__ import annotations

from pathlib import Path

from pedl.harness.script_stderr import exception_line


def test_the_last_traceback_names_the_exception_and_the_model_definitions_innermost_line(tmp_path) -> None:
    model = tmp_path / "model"
    text = (
        "epoch 1\n"
        "Traceback (most recent call last):\n"
        '  File "/elsewhere/old.py", line 3, in <module>\n'
        "KeyError: 'first'\n"
        "Traceback (most recent call last):\n"
        f'  File "{model}/train.py", line 248, in <module>\n'
        "    main()\n"
        f'  File "{model}/lib/util.py", line 12, in load\n'
        "    x = y\n"
        '  File "/usr/lib/python3.11/pathlib.py", line 871, in __new__\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    )
    assert exception_line(text, model) == (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (at lib/util.py:12)"
    )


def test_a_relative_frame_is_the_working_directorys_and_an_exception_without_a_message_stands() -> None:
    text = 'Traceback (most recent call last):\n  File "train.py", line 5, in <module>\nKeyboardInterrupt\n'
    assert exception_line(text, Path("/m")) == "KeyboardInterrupt (at train.py:5)"
    inline = 'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\nNameError: n\n'
    assert exception_line(inline, Path("/m")) == "NameError: n"


def test_output_without_a_traceback_names_nothing() -> None:
    assert exception_line("ValueError: printed by the script itself\n", Path("/m")) == ""
    assert exception_line("", Path("/m")) == ""
    assert exception_line("Traceback (most recent call last):\n  (cut off)\n", Path("/m")) == ""
