"""Named operations on the scheduler's tables, grouped by what they hold; the only SQL in pedl.

Each takes the `Storage` first. Writes whose result nobody waits on are deferred (`Storage.defer`):
inside a transaction they land with it, outside one at once.
"""
