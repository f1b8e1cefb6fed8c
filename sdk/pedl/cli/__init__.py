"""The `pedl` / `det` command line: experiments, trials, agents and a local cluster."""
