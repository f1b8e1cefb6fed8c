"""`determined.tensorboard` (TorchWriter, TFWriter, ...) is refused: pedl's TensorBoard shows the
metrics trials report (`pedl tensorboard EXPERIMENT_ID`) and uploads no event files a trial writes
itself. `pedl experiment create` refuses a model definition importing it; this covers the rest."""

raise ImportError(
    "determined.tensorboard (Determined's TensorBoard metric writers) is not supported by pedl: pedl's "
    "TensorBoard (`pedl tensorboard EXPERIMENT_ID`) shows the metrics a trial reports, so return the "
    "values from train_batch/evaluate_batch instead"
)
