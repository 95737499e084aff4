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

"""``mlaccel-cinder-cache``: the mirror-volume cache, by hand.

Works through Cinder's API as Cinder's internal tenant (a clouds.yaml
entry, ``--os-cloud``, scoped to that project, or ``--project`` to scope
it): golden volumes are that project's volumes.

``list`` shows every golden volume: image, volume, backend, size, pinned,
seconds its fill took. ``prewarm IMAGE`` makes the image's golden volume
now, pinned, by creating a volume from it marked ``mlaccel_prewarm=true``
and deleting that volume once it is made. ``evict IMAGE`` deletes the
image's golden volumes (pinned or not), on one backend with ``--host``.
Bad input or a failure: one line on stderr, status 1 (2 for usage).
"""

import argparse
import json
import sys
import time

import openstack

from mlaccel.cinder import metadata
from mlaccel.cmd import common
from mlaccel.cmd import statebus as statebus_cmd

IMAGE_KEY = metadata.IMAGE_KEY
PINNED_KEY = metadata.PINNED_KEY
COST_KEY = metadata.COST_KEY
PREWARM_KEY = metadata.PREWARM_KEY
HOST_ATTR = 'os-vol-host-attr:host'

Failure = statebus_cmd.Failure


def _parser():
    parser = statebus_cmd._Parser(prog='mlaccel-cinder-cache',
                                  description=__doc__)
    parser.add_argument('--os-cloud', help='clouds.yaml entry '
                        '(default: $OS_CLOUD)')
    parser.add_argument('--project', help='project id to scope to: '
                        'Cinder\'s internal tenant')
    sub = parser.add_subparsers(dest='command', required=True,
                                parser_class=statebus_cmd._Parser)
    listing = sub.add_parser('list', help='list golden volumes')
    listing.add_argument('--json', action='store_true')
    prewarm = sub.add_parser('prewarm', help='make an image golden now')
    prewarm.add_argument('image', help='image id')
    prewarm.add_argument('--size', type=_size, default=1,
                         help='GiB of the volume made (at least the '
                              'image\'s size); default 1')
    prewarm.add_argument('--volume-type')
    prewarm.add_argument('--availability-zone')
    prewarm.add_argument('--timeout', type=statebus_cmd._positive_seconds,
                         default=3600.0, help='seconds to wait')
    evict = sub.add_parser('evict', help='delete an image\'s golden volumes')
    evict.add_argument('image', help='image id')
    evict.add_argument('--host', help='only on this backend (host@backend)')
    return parser


def _size(text):
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(
            'must be a whole number of GiB above 0, not %r' % text)
    return int(text)


def _connect(args):
    options = {'project_id': args.project} if args.project else {}
    return openstack.connect(cloud=args.os_cloud, **options)


def _call(response, what):
    if response.status_code >= 400:
        try:
            body = response.json()
            detail = next(iter(body.values())).get('message', body)
        except Exception:
            detail = response.text[:200]
        raise Failure('%s: HTTP %d: %s' % (what, response.status_code,
                                           detail))
    return response.json() if response.content else {}


def golden_volumes(conn, image=None):
    """The internal tenant's golden volumes (of ``image``), as dicts."""
    volumes, marker = [], None
    while True:
        params = {'limit': 500}
        if marker:
            params['marker'] = marker
        page = _call(conn.block_storage.get('/volumes/detail',
                                            params=params),
                     'listing volumes')['volumes']
        volumes += [v for v in page
                    if IMAGE_KEY in (v.get('metadata') or {})
                    and image in (None, v['metadata'][IMAGE_KEY])]
        if len(page) < params['limit']:
            return volumes
        marker = page[-1]['id']


def _list(conn, args):
    rows = [{'image_id': v['metadata'][IMAGE_KEY], 'volume_id': v['id'],
             'host': v.get(HOST_ATTR), 'size_gb': v['size'],
             'status': v['status'],
             'pinned': v['metadata'].get(PINNED_KEY) == 'true',
             'fill_seconds': float(v['metadata'].get(COST_KEY) or 0)}
            for v in golden_volumes(conn)]
    rows.sort(key=lambda r: (r['image_id'], r['host'] or ''))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print('%-36s  %-36s  %-24s %5s %-9s %6s %8s' % (
        'IMAGE', 'GOLDEN VOLUME', 'BACKEND', 'GiB', 'STATUS', 'PINNED',
        'FILL s'))
    for r in rows:
        print('%-36s  %-36s  %-24s %5d %-9s %6s %8.1f' % (
            r['image_id'], r['volume_id'], r['host'] or '-', r['size_gb'],
            r['status'], 'yes' if r['pinned'] else 'no',
            r['fill_seconds']))
    return 0


def _wait(conn, volume_id, timeout):
    deadline = time.monotonic() + timeout
    while True:
        volume = _call(conn.block_storage.get('/volumes/%s' % volume_id),
                       'reading volume %s' % volume_id)['volume']
        if volume['status'] not in ('creating', 'downloading'):
            return volume
        if time.monotonic() > deadline:
            raise Failure('volume %s still %s after %.0f s'
                          % (volume_id, volume['status'], timeout))
        time.sleep(1.0)


def _prewarm(conn, args):
    body = {'size': args.size, 'imageRef': args.image,
            'name': 'mlaccel-prewarm-%s' % args.image,
            'metadata': {PREWARM_KEY: 'true'}}
    if args.volume_type:
        body['volume_type'] = args.volume_type
    if args.availability_zone:
        body['availability_zone'] = args.availability_zone
    volume = _call(conn.block_storage.post('/volumes',
                                           json={'volume': body}),
                   'pre-warm of image %s' % args.image)['volume']
    try:
        volume = _wait(conn, volume['id'], args.timeout)
    finally:
        conn.block_storage.delete('/volumes/%s' % volume['id'])
    if volume['status'] != 'available':
        raise Failure('pre-warm of image %s failed: its volume ended %s '
                      '(see "openstack volume message list")'
                      % (args.image, volume['status']))
    golden = golden_volumes(conn, args.image)
    print('image %s is golden: %s' % (args.image, ', '.join(
        '%s on %s' % (v['id'], v.get(HOST_ATTR) or '-') for v in golden)))
    return 0


def _evict(conn, args):
    golden = [v for v in golden_volumes(conn, args.image)
              if args.host in (None, v.get(HOST_ATTR),
                               (v.get(HOST_ATTR) or '').split('#')[0])]
    if not golden:
        raise Failure('image %s has no golden volume%s' % (
            args.image, ' on %s' % args.host if args.host else ''))
    for v in golden:
        _call(conn.block_storage.delete('/volumes/%s' % v['id']),
              'deleting golden volume %s' % v['id'])
        print('evicted image %s: golden volume %s on %s deleted'
              % (args.image, v['id'], v.get(HOST_ATTR) or '-'))
    return 0


_COMMANDS = {'list': _list, 'prewarm': _prewarm, 'evict': _evict}


def main(argv=None):
    try:
        args = _parser().parse_args(argv)
        conn = _connect(args)
        return _COMMANDS[args.command](conn, args)
    except Failure as exc:
        message, status = str(exc), exc.status
    except openstack.exceptions.SDKException as exc:
        message, status = str(exc), 1
    return common.error('mlaccel-cinder-cache', ' '.join(message.split()),
                        status)


if __name__ == '__main__':
    sys.exit(main())
