"""pedl agent: one per machine; registers its slots with the scheduler and runs harness processes."""
