"""Test-only parts of mlaccel: never configure them in a production cloud.

- :mod:`mlaccel.testing.virt`: a Nova test virt driver built on Nova's fake
  driver that really fetches images into the host's image cache and really
  starts the guest process named by an instance's user-data.
- :mod:`mlaccel.testing.aio`: an all-in-one OpenStack cloud on loopback for
  the tempest plugin, the devstack plugin's test and functional tests.
"""
