"""`experiment create --follow` and `experiment wait` on a terminal: a live table of the search, as
Ray Tune's progress reporter shows one, drawn with `rich`; the closing "best trial" line everywhere.

`SearchView` is pure: it turns the experiment snapshot each poll reads into a table and lines.
`LiveOutput` shows them: on a terminal (and without NO_COLOR) a table redrawn in place with each
event line printed above it; otherwise plain lines, as a log or a pipe wants them.
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

from pedl._metrics import from_struct
from pedl.cli import render
from pedl.v1 import scheduler_pb2

# Rows the live table shows: every running trial, then the newest ended ones up to this many.
MAX_ROWS = 20


def _number(value: float) -> str:
    return render.format_value(value)


class SearchView:
    """What the table shows of one experiment snapshot (GetExperimentResponse)."""

    def __init__(self, response: scheduler_pb2.GetExperimentResponse) -> None:
        self.response = response

    @property
    def metric(self) -> str:
        return self.response.experiment.searcher_metric

    def best_trial(self) -> scheduler_pb2.Trial | None:
        scored = [t for t in self.response.trials if t.HasField("best_validation_metric")]
        if not scored:
            return None
        sign = 1.0 if self.response.experiment.smaller_is_better else -1.0
        return min(scored, key=lambda t: (sign * t.best_validation_metric, t.id))

    def rows(self) -> list[list[str]]:
        """Running trials first, then the newest ended ones; each: id, state, batches, best metric,
        hyperparameters."""
        trials = sorted(self.response.trials, key=lambda t: t.id)
        live = [t for t in trials if t.state not in render.TERMINAL_TRIAL_STATES]
        ended = [t for t in trials if t.state in render.TERMINAL_TRIAL_STATES]
        shown = (live + ended[::-1])[:MAX_ROWS]
        return [
            [
                str(t.id),
                render.trial_state(t.state),
                str(t.total_batches),
                _number(t.best_validation_metric) if t.HasField("best_validation_metric") else "",
                render.format_hparams(from_struct(t.hparams)),
            ]
            for t in shown
        ]

    def counts(self) -> str:
        states: dict[str, int] = {}
        for t in self.response.trials:
            name = render.trial_state(t.state)
            states[name] = states.get(name, 0) + 1
        return ", ".join(f"{n} {state}" for state, n in sorted(states.items())) or "no trials yet"

    def best_line(self) -> str:
        """'Best trial 7: validation_loss=0.12 at batches 400 (lr=0.1, ...)', or why there is none."""
        best = self.best_trial()
        if best is None:
            what = self.metric or "a validation metric"
            return f"No trial of experiment {self.response.experiment.id} has reported {what}"
        hparams = render.format_hparams(from_struct(best.hparams))
        line = f"Best trial {best.id}: {self.metric}={_number(best.best_validation_metric)}"
        return line + f" after {best.total_batches} batches" + (f" ({hparams})" if hparams else "")

    def table(self) -> Any:
        from rich.table import Table

        experiment = self.response.experiment
        state = render.experiment_state(experiment.state)
        table = Table(
            title=f"Experiment {experiment.id} {state}: {self.counts()}",
            caption=self.best_line(),
            title_justify="left",
            caption_justify="left",
        )
        for header, justify in (("Trial", "right"), ("State", "left"), ("Batches", "right")):
            table.add_column(header, justify=justify)  # type: ignore[arg-type]  # rich's Literal
        table.add_column(f"Best {self.metric}" if self.metric else "Best", justify="right")
        table.add_column("Hyperparameters", overflow="fold")
        for row in self.rows():
            table.add_row(*row)
        return table


def live_wanted(stream: TextIO = sys.stdout) -> bool:
    """A redrawn table only on a terminal, and never with NO_COLOR or TERM=dumb."""
    return stream.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


class LiveOutput:
    """Event lines and the live table; `with LiveOutput(live) as out: out.line(...); out.show(view)`."""

    def __init__(self, live: bool) -> None:
        self._live_wanted = live
        self._live: Any = None

    def __enter__(self) -> LiveOutput:
        if self._live_wanted:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(console=Console(), auto_refresh=False, transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
            self._live = None

    def line(self, text: str) -> None:
        if self._live is not None:
            self._live.console.print(text, markup=False, highlight=False)
        else:
            print(text, flush=True)

    def show(self, view: SearchView) -> None:
        if self._live is not None:
            self._live.update(view.table(), refresh=True)

    def finish(self, view: SearchView) -> None:
        """The last table stays on screen (the live one is redrawn away); the best trial's line
        always ends the output."""
        if self._live is not None:
            self._live.console.print(view.table())
        print(view.best_line(), flush=True)
