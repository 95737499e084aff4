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

"""Warm start and readiness detection: cold process vs mlaccel-taskd.

Warm start: the time from the request to the first training step of the
CLIP-style example task (``mlaccel.tasks.clip``), for

- a cold process: ``python -m mlaccel.tasks.clip`` started per request;
- a taskd fork: a request to a real ``mlaccel-taskd`` that preloaded torch,
  torch._dynamo and the warmed-up model;
- a taskd persistent worker: the same daemon, ``mode="worker"``;

interleaved in rotating order, with the same seed per round, checking that
all three give the same result. The daemon's own preload time, the one-off
cost a fresh VM pays, is reported beside it (``preload_s``).

Readiness detection: the lag between a guest being ready and the launcher
knowing it. Push: real daemons POST to the launcher's real readiness
listener; the lag is arrival minus the daemon's ``ready_at``. Stock: Nova
cannot run in this benchmark, so openstacksdk's own
``conn.compute.wait_for_server`` with its default 2 s interval polls a
real HTTP endpoint that serves the compute API's server resource and flips
from BUILD to ACTIVE at a random moment; the lag is detection minus flip.
"""

import argparse
import concurrent.futures
import http.server
import importlib.util
import json
import os
import queue
import random
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from mlaccel.taskd import client
from mlaccel.tasks import clip

PRELOAD = ','.join(clip.PRELOAD)
ENTRY = 'clip'
TIMING = ('first_step_at', 'seconds')


class Daemon:
    """A real mlaccel-taskd process in its own directory.

    With a ``listener`` it pushes its readiness there for ``key``, signed
    with a token of its own and pinning the listener's certificate.
    """

    def __init__(self, workdir, name, listener=None, key=None, **options):
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir)
        self.address = 'unix:' + os.path.join(self.dir, 'taskd.sock')
        options = dict({'socket_path': self.address[5:],
                        'log_dir': os.path.join(self.dir, 'logs')}, **options)
        if listener is not None:
            token = secrets.token_urlsafe(32)
            options.update(ready_url=listener.url_for(key),
                           token_file=os.path.join(self.dir, 'token'),
                           ready_cafile=os.path.join(self.dir, 'ready.pem'))
            fd = os.open(options['token_file'],
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, 'w') as out:
                out.write(token)
            with open(options['ready_cafile'], 'w') as out:
                out.write(listener.cert_pem)
            self.arrived = queue.Queue()
            listener.expect(key, self.arrived.put, token)
        conf = os.path.join(self.dir, 'taskd.conf')
        with open(conf, 'w') as out:
            out.write('[mlaccel_taskd]\n')
            out.writelines('%s = %s\n' % kv for kv in options.items())
        self.log = open(os.path.join(self.dir, 'daemon.log'), 'w')
        self.process = subprocess.Popen(
            [sys.executable, '-m', 'mlaccel.cmd.taskd', '--config-file', conf],
            stdout=self.log, stderr=subprocess.STDOUT)

    def stop(self):
        self.process.terminate()
        self.process.wait(60)
        self.log.close()


def _outcome(result):
    return {k: v for k, v in result.items() if k not in TIMING}


def cold_start(steps, seed):
    """Seconds from request to first step of a cold process; result."""
    requested = time.time()
    out = subprocess.run(
        [sys.executable, '-m', 'mlaccel.tasks.clip', '--steps', str(steps),
         '--seed', str(seed), '--threads', '1'],
        capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.splitlines()[-1])
    return result['first_step_at'] - requested, result


def taskd_start(conn, mode, steps, seed):
    """Seconds from submit to first step under taskd; result."""
    requested = time.time()
    task_id = conn.submit(ENTRY, {'steps': steps, 'seed': seed}, threads=1,
                          mode=mode)
    status = conn.wait(task_id, timeout=600)
    if status['state'] != 'succeeded':
        raise RuntimeError('task %s: %s' % (status['state'],
                                            status['error']))
    return status['first_step_at'] - requested, status['result']


def push_lags(workdir, listener, count):
    """Readiness lags (s) of ``count`` daemon starts pushing to listener."""
    lags = []
    for index in range(count):
        key = 'bench-%d' % index
        daemon = Daemon(workdir, 'ready-%d' % index, listener, key,
                        workers=0)
        try:
            readiness = daemon.arrived.get(timeout=120)
            lags.append(readiness.received_at - readiness.ready_at)
        finally:
            daemon.stop()
            listener.forget(key)
    return lags


class _FakeCompute(http.server.BaseHTTPRequestHandler):
    """The compute API's version document and server resources.

    A server is ACTIVE from its flip time (``server.flips[id]``) on.
    """

    def do_GET(self):
        base = 'http://%s:%d' % self.server.server_address[:2]
        if self.path.rstrip('/') == '/v2.1':
            body = {'version': {
                'id': 'v2.1', 'status': 'CURRENT', 'version': '2.96',
                'min_version': '2.1',
                'links': [{'rel': 'self', 'href': base + '/v2.1/'}]}}
        else:
            server_id = self.path.rstrip('/').rpartition('/')[2]
            flip = self.server.flips.get(server_id)
            if flip is None:
                self.send_error(404)
                return
            status = 'ACTIVE' if time.time() >= flip else 'BUILD'
            body = {'server': {'id': server_id, 'name': server_id,
                               'status': status}}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def poll_lags(count, max_flip=4.0):
    """Lags (s) of openstacksdk's default wait_for_server, concurrently."""
    from keystoneauth1 import noauth
    from keystoneauth1 import session
    from openstack.compute.v2 import server as sdk_server
    import openstack.connection

    httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _FakeCompute)
    httpd.flips = {}
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    endpoint = 'http://127.0.0.1:%d/v2.1' % httpd.server_address[1]
    rng = random.Random(7)

    def trial(index):
        conn = openstack.connection.Connection(
            session=session.Session(auth=noauth.NoAuth()),
            compute_endpoint_override=endpoint)
        server_id = 'server-%d' % index
        flip = time.time() + rng.uniform(0.2, max_flip)
        httpd.flips[server_id] = flip
        conn.compute.wait_for_server(
            sdk_server.Server(id=server_id, status='BUILD'))
        return time.time() - flip

    try:
        with concurrent.futures.ThreadPoolExecutor(count) as pool:
            return list(pool.map(trial, range(count)))
    finally:
        httpd.shutdown()
        httpd.server_close()


def _ms(values):
    return {'p50': statistics.median(values) * 1000,
            'min': min(values) * 1000, 'max': max(values) * 1000}


def _row(name, values):
    stats = _ms(values)
    return '%-36s %5d %10.1f %10.1f %10.1f' % (
        name, len(values), stats['p50'], stats['min'], stats['max'])


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m mlaccel_lab.bench taskd',
                                     description=__doc__.split('\n')[0])
    parser.add_argument('--repeat', type=int, default=5,
                        help='rounds of cold / fork / worker starts')
    parser.add_argument('--steps', type=int, default=2,
                        help='training steps per task')
    parser.add_argument('--ready-repeat', type=int, default=6,
                        help='daemon starts and stock waits measured')
    args = parser.parse_args(argv)
    if importlib.util.find_spec('torch') is None:
        parser.exit(2, 'the taskd benchmark runs the example task, which '
                    'needs torch: install mlaccel[task]\n')

    from mlaccel.launcher import ready_listener

    workdir = tempfile.mkdtemp(prefix='mlaccel-bench-taskd-')
    listener = ready_listener.ReadinessListener('127.0.0.1').start()
    warm = None
    try:
        boot = time.time()
        warm = Daemon(workdir, 'warm', listener, 'warm', preload=PRELOAD,
                      workers=1)
        warm_ready = warm.arrived.get(timeout=600)
        print('taskd warm after %.2f s (preloaded %s)'
              % (warm_ready.ready_at - boot, ', '.join(warm_ready.preloaded)))
        times = {'cold': [], 'fork': [], 'worker': []}
        same = True
        with client.TaskdClient(warm_ready.address) as conn:
            # The one-off cost a fresh VM pays before the speedup.
            preload_s = conn.health()['preload_s']
            for round_ in range(args.repeat):
                kinds = list(times)
                kinds = kinds[round_ % 3:] + kinds[:round_ % 3]
                results = {}
                for kind in kinds:
                    if kind == 'cold':
                        took, result = cold_start(args.steps, round_)
                    else:
                        took, result = taskd_start(conn, kind, args.steps,
                                                   round_)
                    times[kind].append(took)
                    results[kind] = _outcome(result)
                same = same and results['cold'] == results['fork'] == \
                    results['worker']
                print('round %d: cold %.0f ms, fork %.0f ms, worker %.0f ms'
                      % (round_ + 1, times['cold'][-1] * 1000,
                         times['fork'][-1] * 1000,
                         times['worker'][-1] * 1000))
        pushes = [warm_ready.received_at - warm_ready.ready_at]
        pushes += push_lags(workdir, listener, args.ready_repeat - 1)
        polls = poll_lags(args.ready_repeat)
    finally:
        if warm is not None:
            warm.stop()
        listener.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    print()
    print('%-36s %5s %10s %10s %10s' % ('request -> first training step',
                                        'n', 'p50 ms', 'min ms', 'max ms'))
    print(_row('cold process (python -m ...)', times['cold']))
    print(_row('taskd fork', times['fork']))
    print(_row('taskd persistent worker', times['worker']))
    print('same result for the same seed (cold, fork, worker): %s'
          % ('yes' if same else 'NO'))
    print()
    print('%-36s %5s %10s %10s %10s' % ('readiness detection lag', 'n',
                                        'p50 ms', 'min ms', 'max ms'))
    print(_row('taskd push -> launcher listener', pushes))
    print(_row('openstacksdk wait_for_server (2 s)', polls))
    cold, fork = _ms(times['cold'])['p50'], _ms(times['fork'])['p50']
    print('RESULT warm_start_speedup=%.1f warm_start_p50_ms=%.1f '
          'ready_detect_ms=%.1f cold_p50_ms=%.1f worker_p50_ms=%.1f '
          'stock_detect_ms=%.1f preload_s=%.2f same_result=%d'
          % (cold / fork, fork, _ms(pushes)['p50'], cold,
             _ms(times['worker'])['p50'], _ms(polls)['p50'], preload_s,
             int(same)))
    return 0 if same else 1
