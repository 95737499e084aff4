"""Tempest plugin of mlaccel."""

import os

from tempest import config
from tempest.test_discover import plugins

from mlaccel.tempest import config as mlaccel_config


class MlaccelTempestPlugin(plugins.TempestPlugin):

    def load_tests(self):
        here = os.path.dirname(os.path.abspath(__file__))
        top_level = os.path.dirname(os.path.dirname(here))
        return os.path.join(here, 'tests'), top_level

    def register_opts(self, conf):
        config.register_opt_group(conf, config.service_available_group,
                                  [mlaccel_config.service_option])
        config.register_opt_group(conf, mlaccel_config.mlaccel_group,
                                  mlaccel_config.MlaccelGroup)

    def get_opt_lists(self):
        return [
            (mlaccel_config.mlaccel_group.name, mlaccel_config.MlaccelGroup),
            ('service_available', [mlaccel_config.service_option]),
        ]
