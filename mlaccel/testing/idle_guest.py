"""A minimal guest for the test virt driver: prints that it is up, then
idles until SIGTERM. Lets tests check a guest's start and stop without
the task daemon."""

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
