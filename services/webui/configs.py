"""The web UI's pages and REST routes read the experiment's typed config through the clients' one
decoder (`pedl.config.received`, shared with the CLI and the SDK); this names it for the web UI."""

from pedl.config.received import SOURCE, experiment_config, hparam_space, masked_raw, trial_length

__all__ = ["SOURCE", "experiment_config", "hparam_space", "masked_raw", "trial_length"]
