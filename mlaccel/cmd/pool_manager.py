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

"""``mlaccel-pool-manager``: keep the warm pools filled, healthy and sized.

Runs the manager (:mod:`mlaccel.pool.manager`) until SIGTERM or SIGINT,
reloading the configuration's mutable options on SIGHUP and telling
systemd when it is ready (:mod:`mlaccel.daemon`); only the leader among
several managers acts. Exit status 2 for bad usage.
"""

import argparse
import signal
import sys
import threading

import openstack
from oslo_config import cfg

from mlaccel.cmd import common
from mlaccel.cmd import pool as pool_cmd
from mlaccel import daemon
from mlaccel.pool import cli as pool_cli
from mlaccel.pool import manager as pool_manager
from mlaccel.pool import store as pool_store

PROG = 'mlaccel-pool-manager'


def main(argv=None):
    """Console script ``mlaccel-pool-manager``."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description='Keep the warm pools filled, healthy and sized; only '
                    'the leader among several managers acts.')
    pool_cmd.add_common(parser)
    args = parser.parse_args(argv)
    try:
        conf = pool_cli.configure(args.config_file, args.debug, PROG)
    except (cfg.Error, ValueError) as exc:
        return common.error(PROG, exc, common.USAGE)
    locks = pool_store.BusLocks(conf)
    manager = pool_manager.PoolManager(
        openstack.connect(cloud=args.cloud), pool_cli.open_store(conf, locks),
        conf, leader_lock=locks)
    failed = []

    def run():
        try:
            manager.run()
        except BaseException as exc:
            failed.append(exc)
        # Ended by itself (it failed): stop the process.
        signal.raise_signal(signal.SIGTERM)

    worker = threading.Thread(target=run, name=PROG)

    def stop():
        manager.stop()
        worker.join()
        if failed:
            raise failed[0]

    try:
        daemon.serve(conf, PROG, worker.start, stop)
    finally:
        locks.stop()
    return 0


if __name__ == '__main__':
    sys.exit(main())
