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

"""A separate agent-like process that publishes one host report and waits.

Run as ``python -m tests.unit.statebus.report_publisher URL HOST KEY_FILE
STATE_DIR``; prints
``published <timestamp>`` once the report is on the bus, then sleeps until
it is killed.
"""

import sys
import time

from oslo_config import cfg

from mlaccel import conf as mlaccel_conf
from mlaccel import hostreport
from mlaccel.statebus import publisher


def main(argv):
    url, host, key_file, state_dir = argv
    conf = cfg.ConfigOpts()
    mlaccel_conf.register_opts(conf)
    conf([], project='mlaccel', default_config_files=[],
         default_config_dirs=[])
    conf.set_override('backend_url', url, 'mlaccel_statebus')
    conf.set_override('host_key_file', key_file, 'mlaccel_statebus')
    conf.set_override('publisher_state_dir', state_dir, 'mlaccel_statebus')
    report = hostreport.HostReport(host, time.time(), frozenset({'img-1'}),
                                   builds_in_flight=1, build_limit=4)
    publisher.Publisher(host, conf).publish(report)
    print('published %r' % report.timestamp, flush=True)
    while True:
        time.sleep(60)


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
