"""mlaccel-taskd: the warm task daemon that runs inside a task VM.

It preloads and warms up a task's heavy modules once, pushes its readiness
to the launcher, and then starts each submitted task by forking itself (or
in a persistent worker), so that a task reaches its first training step in
a fraction of a cold start. Clients speak :mod:`mlaccel.taskd.protocol`
through :class:`mlaccel.taskd.client.TaskdClient`.
"""
