"""pedl: train deep-learning models with hyperparameter search, scheduling and checkpoints.

Importing `pedl` stays cheap (no torch or TensorFlow): framework APIs live in
`pedl.pytorch`, `pedl.tensorflow` and `pedl.keras`.
"""

from pedl._trial_context import get_download_data_dir, get_hyperparameter, get_trial_seed

__version__ = "0.1.0"

__all__ = ["get_hyperparameter", "get_download_data_dir", "get_trial_seed", "__version__"]
