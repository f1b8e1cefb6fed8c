"""Starting and stopping a local pedl cluster (checkpoint store, scheduler, agents) as OS processes.

`pedl.cluster.launcher` starts and stops it; `pedl.cluster.paths` says where its state lives. This
package imports nothing itself: the token store needs only `paths`, and the CLI's start time pays
for the launcher only in `pedl cluster`.
"""
