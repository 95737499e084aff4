"""The tempest plugin of mlaccel (entry point ``tempest.test_plugins``)."""
