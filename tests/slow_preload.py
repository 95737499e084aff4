"""A task daemon preload that takes a known time.

It lives outside ``tests.functional``, whose import applies Nova's eventlet
patching to the daemon that preloads it.

taskd imports this module and calls :func:`warm` before it reports ready.
The seconds come from ``MLACCEL_TEST_PRELOAD_DELAY``; the window the
warm-up took is appended, as one JSON line, to the file named by
``MLACCEL_TEST_PRELOAD_LOG``.
"""

import json
import os
import time


def warm():
    start = time.time()
    time.sleep(float(os.environ.get('MLACCEL_TEST_PRELOAD_DELAY', '0')))
    end = time.time()
    path = os.environ.get('MLACCEL_TEST_PRELOAD_LOG')
    if path:
        with open(path, 'a') as stream:
            stream.write(json.dumps({'pid': os.getpid(), 'start': start,
                                     'end': end}) + '\n')
