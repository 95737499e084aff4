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

"""A separate pool-manager-like process that takes the leader lock.

Run as ``python -m tests.unit.pool.leader_process URL LEASE``; prints
``leading`` once its manager holds the leader lock of the state bus at
``URL``, whose lease is ``LEASE`` seconds (``[mlaccel_pool]
leader_lease``), then keeps asking, as a manager's rounds do, until it is
killed.
"""

import sys
import time

from oslo_config import cfg

from mlaccel import conf as mlaccel_conf
from mlaccel.pool import manager as pool_manager
from mlaccel.pool import store as pool_store


def main(argv):
    url, lease = argv
    conf = cfg.ConfigOpts()
    mlaccel_conf.register_opts(conf)
    conf([], project='mlaccel', default_config_files=[],
         default_config_dirs=[])
    conf.set_override('backend_url', url, 'mlaccel_statebus')
    conf.set_override('leader_lease', int(lease), 'mlaccel_pool')
    manager = pool_manager.PoolManager(None, None, conf,
                                       leader_lock=pool_store.BusLocks(conf))
    said = False
    while True:
        if manager.is_leader() and not said:
            print('leading', flush=True)
            said = True
        time.sleep(0.2)


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
