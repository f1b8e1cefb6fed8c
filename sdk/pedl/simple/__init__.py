"""The Simple Model Definition: a plain Keras training script that PEDL runs as a trial.

Experiment config::

    entrypoint:
      script: train.py          # relative to the model definition directory
      args: ["--units", "64"]   # sys.argv[1:] for the script

The script runs unchanged (as `__main__`, cwd = the model definition directory) except that it
reads hyperparameters with `pedl.get_hyperparameter(name)`. PEDL intercepts its first
`keras.Model.fit(...)` call: the compiled model and the data arguments (x/y/sample_weight arrays
batched by batch_size, a batched tf.data.Dataset, a keras.utils.PyDataset or a started Python
generator with steps_per_epoch; validation_data, validation_split, validation_batch_size,
validation_steps; shuffle) become a KerasTrial controller. Keras 2's `fit_generator`,
`evaluate_generator` and `predict_generator` work as aliases of fit, evaluate and predict.
From then on PEDL trains it in steps of batches_per_step, validates and checkpoints
when the searcher asks, and resumes a restarted trial from its checkpoint exactly; `fit` never
returns to the script, so code after it does not run. epochs, steps_per_epoch, callbacks and
verbose are superseded by the experiment config; class_weight is refused.

A generator is resumed by replay: the restarted trial re-runs the script under the same seeds
and draws (without training) the batches drawn before the checkpoint; a fingerprint of the next
batch, stored in the checkpoint, shows whether the generator gave the same data again
(`reproducibility.replay_mismatch: fail | warn`, see `pedl.keras._replay`).

With `resources.slots_per_trial > 1` every slot runs the script, under the scope of a
`tf.distribute.MultiWorkerMirroredStrategy` started before it, and the captured fit trains
data-parallel exactly as a KerasTrial on several slots does (see `pedl.keras._distributed`).
"""

from pathlib import Path

from pedl.model_def import ModelDefinition
from pedl.simple._trial import ScriptTrial


def script_model_definition(
    directory: Path | str, script: str, args: tuple[str, ...] = ()
) -> ModelDefinition:
    """The model definition of a script entrypoint, for the harness and `run_local` alike."""
    from pedl.simple._capture import script_path

    root = Path(directory).resolve()
    script_path(root, script)  # a missing script fails here, before anything runs
    return ModelDefinition(
        directory=root,
        package="",
        trial_class=ScriptTrial.for_script(root, script, args),
        make_data_loaders=None,
        download_data=None,
    )


__all__ = ["ScriptTrial", "script_model_definition"]
