"""An all-in-one OpenStack cloud on loopback, for tests and experiments.

``python -m mlaccel.testing.aio up`` stands up MariaDB, RabbitMQ, Redis,
keystone, glance (file store), placement, nova (API, conductor, scheduler
and two computes running :mod:`mlaccel.testing.virt`) and cinder (fake
volume driver) from the Python environment it runs in, with mlaccel enabled
by ``mlaccel-config`` exactly as the devstack plugin enables it. Every
process is started in its own session, recorded by pid and carries a marker
in its environment; ``down`` stops the recorded ones and then sweeps any
process still carrying the marker, so nothing is left behind.
"""
