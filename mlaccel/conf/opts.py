"""Entry point for ``oslo-config-generator --namespace mlaccel``."""

from mlaccel import conf


def list_opts():
    return conf.list_opts()
