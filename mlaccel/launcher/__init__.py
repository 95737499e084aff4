"""The task launcher behind ``mlaccel launch``; see ``api.launch``."""
