"""Warm pools: task VMs already running a warm task daemon.

A pool (:mod:`mlaccel.pool.spec`) holds servers of one project that are
interchangeable for a launch. The pool manager (:mod:`mlaccel.pool.manager`)
keeps each pool at the size measured demand asks for
(:mod:`mlaccel.pool.sizing`); the launcher claims members
(:mod:`mlaccel.pool.claims`) before it creates any VM. Members' credentials
and the claims live in a private directory (:mod:`mlaccel.pool.store`),
serialised by a lock on the state bus.
"""
