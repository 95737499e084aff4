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

"""A minimal guest for the test virt driver: up, then idle until SIGTERM.

It prints that it is up. Lets tests check a guest's start and stop without
the task daemon.
"""

import os
import signal
import sys
import threading


def main():
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    print('mlaccel idle guest up: pid %d instance %s'
          % (os.getpid(), os.environ.get('MLACCEL_INSTANCE_UUID', '?')),
          flush=True)
    done.wait()
    print('mlaccel idle guest stopping', flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
