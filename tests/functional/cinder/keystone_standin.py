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

"""A stand-in for Keystone's token API, in a process of its own.

``python keystone_standin.py`` prints the port it
listens on (loopback), answers password logins (``POST /v3/auth/tokens``)
with a token and a catalog holding one image endpoint, :data:`GLANCE`, and
answers ``GET /logins`` with how many logins it has served. Each login
costs a real Keystone a password hash: the tests count them.
"""

import datetime
import http.server
import json
import sys

GLANCE = 'http://glance.example:9292'


class Keystone(http.server.BaseHTTPRequestHandler):
    """Keystone's token API, as much as a password login needs."""

    logins = 0

    def do_GET(self):
        self._reply(200, {'logins': Keystone.logins})

    def do_POST(self):
        self.rfile.read(int(self.headers['Content-Length']))
        Keystone.logins += 1
        expires = (datetime.datetime.now(datetime.timezone.utc)
                   + datetime.timedelta(hours=1))
        self._reply(201, {'token': {
            'methods': ['password'],
            'expires_at': expires.strftime('%Y-%m-%dT%H:%M:%S.000000Z'),
            'user': {'id': 'u', 'name': 'cinder',
                     'domain': {'id': 'default', 'name': 'Default'}},
            'project': {'id': 'p', 'name': 'service',
                        'domain': {'id': 'default', 'name': 'Default'}},
            'catalog': [{'type': 'image', 'name': 'glance', 'endpoints': [
                {'interface': 'public', 'region': 'RegionOne',
                 'url': GLANCE}]}]}},
            token='token-%d' % Keystone.logins)

    def _reply(self, status, doc, token=None):
        body = json.dumps(doc).encode()
        self.send_response(status)
        if token:
            self.send_header('X-Subject-Token', token)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    server = http.server.HTTPServer(('127.0.0.1', 0), Keystone)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == '__main__':
    sys.exit(main())
