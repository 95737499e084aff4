#    Licensed under the Apache License, Version 2.0 (the "License"); you may
#    not use this file except in compliance with the License. You may obtain
#    a copy of the License at
#
#         http://www.apache.org/licenses/LICENSE-2.0
#
#    Unless required by applicable law or agreed to in writing, software
#    distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
#    WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
#    License for the specific language governing permissions and limitations
#    under the License.

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
