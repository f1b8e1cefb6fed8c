"""The `single` searcher: one trial, trained to max length, then the search ends."""

from pedl.config import parse_experiment_config
from pedl.searcher import Close, Create, Shutdown, ValidateAfter, make_search_method, restore_search_method

CONFIG = """
hyperparameters:
  learning_rate: {type: log, minval: -4, maxval: -1}
  layers: {type: int, minval: 1, maxval: 4}
  fixed: 3
searcher: {name: single, metric: error, max_steps: 5}
batches_per_step: 20
"""


def test_single_creates_one_trial_trains_it_to_max_length_and_shuts_down() -> None:
    config = parse_experiment_config(CONFIG)
    searcher = make_search_method(config, seed=7)
    create, validate, close = searcher.initial_operations()
    assert isinstance(create, Create) and isinstance(validate, ValidateAfter)
    assert close == Close(create.request_id)  # its whole life is known up front
    assert validate.length == 100
    assert 1e-4 <= create.hparams["learning_rate"] <= 1e-1 and create.hparams["fixed"] == 3
    assert searcher.on_validation_completed(create.request_id, 0.5, 100) == [Close(create.request_id)]
    assert searcher.on_trial_closed(create.request_id) == [Shutdown()]
    assert searcher.progress() == 1.0


def test_the_same_seed_samples_the_same_trial_and_snapshots_restore_it() -> None:
    config = parse_experiment_config(CONFIG)
    first = make_search_method(config, seed=11).initial_operations()
    assert make_search_method(config, seed=11).initial_operations() == first
    searcher = make_search_method(config, seed=11)
    searcher.initial_operations()
    restored = restore_search_method(config, 11, searcher.snapshot())
    assert restored.snapshot() == searcher.snapshot()


def test_a_trial_that_exits_early_fails_the_search() -> None:
    searcher = make_search_method(parse_experiment_config(CONFIG), seed=1)
    create, *_ = searcher.initial_operations()
    assert searcher.on_trial_exited_early(create.request_id) == [Shutdown(failure=True)]


def test_a_trial_that_ended_itself_fails_no_search() -> None:
    """Determined counts only errored trials as failures: INVALID_HP and USER_REQUESTED_STOP end the
    search, which COMPLETES."""
    for reason in ("INVALID_HP", "USER_REQUESTED_STOP"):
        searcher = make_search_method(parse_experiment_config(CONFIG), seed=1)
        create, *_ = searcher.initial_operations()
        assert searcher.on_trial_exited_early(create.request_id, reason) == [Shutdown(failure=False)]
