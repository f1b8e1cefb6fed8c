"""One module per schema revision, oldest first; never edit a released one, add a new one."""
