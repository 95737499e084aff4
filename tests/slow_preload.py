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
