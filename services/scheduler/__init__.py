"""The pedl scheduler (master): experiments, trials, searchers, slot scheduling and the database."""
