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

"""A stand-in for the Neutron API: every collection is empty.

Nova always talks to Neutron (on delete, on boot without networks and in
its info-cache heal). The all-in-one cloud has no networking, so servers
boot with ``networks='none'`` and this WSGI app answers Nova's reads:
``GET /v2.0/<collection>`` gives an empty list, quotas are unlimited, and
anything else is refused with 404 so that a real need for Neutron is seen.
"""

import json


def _reply(start_response, status, body):
    raw = json.dumps(body).encode()
    start_response(status, [('Content-Type', 'application/json'),
                            ('Content-Length', str(len(raw)))])
    return [raw]


def application(environ, start_response):
    path = environ.get('PATH_INFO', '').rstrip('/')
    if environ.get('REQUEST_METHOD') != 'GET':
        return _reply(start_response, '404 Not Found',
                      {'NeutronError': {'message': 'not in the stand-in'}})
    if path in ('', '/v2.0'):
        return _reply(start_response, '200 OK', {'versions': [
            {'id': 'v2.0', 'status': 'CURRENT', 'links': []}]})
    parts = path.split('/')
    if len(parts) >= 3 and parts[1] == 'v2.0':
        collection = parts[2].split('.')[0]
        if collection == 'quotas':
            return _reply(start_response, '200 OK', {'quota': {
                'network': -1, 'subnet': -1, 'port': -1, 'router': -1,
                'floatingip': -1, 'security_group': -1,
                'security_group_rule': -1}})
        if collection == 'extensions':
            return _reply(start_response, '200 OK', {'extensions': []})
        if len(parts) == 3:
            return _reply(start_response, '200 OK', {collection: []})
    return _reply(start_response, '404 Not Found',
                  {'NeutronError': {'message': 'not in the stand-in'}})
