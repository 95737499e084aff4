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

"""Guest integration: cloud-init user-data that configures and starts taskd.

An image built with the ``mlaccel-taskd`` diskimage-builder element has
the daemon installed, its user :data:`DAEMON_USER` created and its systemd
unit enabled; the unit runs the daemon as that unprivileged user and waits
for cloud-init to write the configuration, so the daemon starts right after
cloud-init's network stage. :func:`user_data` writes that configuration
(and the unit too, for images made otherwise) and starts the service.

The user-data carries one VM's own credentials: its token, its TLS
identity (certificate and key of its TCP listener) and the certificate of
the launcher's readiness listener, which the daemon pins. Each file is
written mode 0600, owned by the daemon's user. These secrets protect the VM
from other VMs and from the network, not from its own processes: any
process in the guest can read its user-data from the metadata service.

``python -m mlaccel.taskd.guest unit`` prints the systemd unit; the element
installs it from there.
"""

import argparse
import configparser
import io
import re
import sys
import urllib.parse

import yaml

from mlaccel.taskd import protocol
from mlaccel.tasks import clip

CONF_PATH = '/etc/mlaccel/taskd.conf'
TOKEN_PATH = '/etc/mlaccel/taskd.token'
TLS_CERT_PATH = '/etc/mlaccel/taskd.crt'
TLS_KEY_PATH = '/etc/mlaccel/taskd.key'
#: The launcher's readiness listener certificate, pinned by the push.
READY_CA_PATH = '/etc/mlaccel/launcher.crt'
UNIT_NAME = 'mlaccel-taskd.service'
UNIT_PATH = '/etc/systemd/system/' + UNIT_NAME
EXECUTABLE = '/usr/local/bin/mlaccel-taskd'
#: The unprivileged system user the daemon (and so every task) runs as.
DAEMON_USER = 'mlaccel'
DAEMON_HOME = '/var/lib/mlaccel'

_TOKEN_RE = re.compile(r'^[A-Za-z0-9._~+/=-]{16,512}$')
_PRELOAD_RE = re.compile(r'^[A-Za-z_][\w.]*(:[A-Za-z_]\w*)?$')
_USER_RE = re.compile(r'^[a-z_][a-z0-9_-]{0,31}$')
_PEM_RE = re.compile(r'^(-----BEGIN [A-Z ]+-----\n[A-Za-z0-9+/=\n]+'
                     r'-----END [A-Z ]+-----\n?)+$')


def _check(ready_url, tcp_address, token, preload, tls_identity,
           ready_cert, user):
    if ready_url is not None:
        parts = urllib.parse.urlsplit(ready_url)
        if parts.scheme not in ('http', 'https') or not parts.hostname or \
                any(c.isspace() for c in ready_url):
            raise ValueError('ready_url %r is not an http(s) URL'
                             % ready_url)
        if parts.scheme == 'https' and not ready_cert:
            raise ValueError('an https ready_url needs the listener\'s '
                             'certificate (ready_cert)')
    if tcp_address is not None:
        protocol.parse_tcp_address(tcp_address)
        if token is None:
            raise ValueError('a TCP address needs a token')
    if token is not None and not _TOKEN_RE.match(token):
        raise ValueError('the token must be 16 to 512 URL-safe characters')
    for entry in preload:
        if not _PRELOAD_RE.match(entry):
            raise ValueError('preload entry %r is not "module" or '
                             '"module:function"' % entry)
    pems = [ready_cert] + ([tls_identity.cert_pem, tls_identity.key_pem]
                           if tls_identity else [])
    if not all(pem is None or _PEM_RE.match(pem) for pem in pems):
        raise ValueError('certificates and keys must be PEM text')
    if not _USER_RE.match(user):
        raise ValueError('%r is not a user name' % user)


def config_text(ready_url=None, tcp_address=None, token_file=None,
                preload=(), **options):
    """The daemon's configuration file (``[mlaccel_taskd]`` section)."""
    parser = configparser.ConfigParser(interpolation=None)
    section = {'preload': ','.join(preload)}
    for name, value in dict(options, ready_url=ready_url,
                            tcp_address=tcp_address,
                            token_file=token_file).items():
        if value is not None:
            if '\n' in str(value):
                raise ValueError('option %s contains a newline' % name)
            section[name] = str(value)
    parser['mlaccel_taskd'] = section
    out = io.StringIO()
    parser.write(out)
    return out.getvalue()


def systemd_unit(executable=EXECUTABLE, conf_path=CONF_PATH,
                 grace_period=30, user=DAEMON_USER):
    """A systemd unit running the daemon as ``user`` once configured."""
    return '\n'.join([
        '[Unit]',
        'Description=mlaccel warm task daemon',
        'After=cloud-init.service network-online.target',
        'Wants=network-online.target',
        'ConditionPathExists=%s' % conf_path,
        '',
        '[Service]',
        'ExecStart=%s --config-file %s' % (executable, conf_path),
        # Unprivileged: a task runs as this user, never as root.
        'User=%s' % user,
        'Group=%s' % user,
        'NoNewPrivileges=yes',
        'ProtectSystem=full',
        'PrivateTmp=yes',
        'RuntimeDirectory=mlaccel',
        'LogsDirectory=mlaccel',
        'KillMode=mixed',
        'KillSignal=SIGTERM',
        'TimeoutStopSec=%d' % (int(grace_period) + 15),
        'Restart=on-failure',
        'RestartPreventExitStatus=2',
        '',
        '[Install]',
        'WantedBy=multi-user.target',
        ''])


def user_data(ready_url=None, tcp_address=None, token=None,
              preload=clip.PRELOAD, install=None, executable=EXECUTABLE,
              tls_identity=None, ready_cert=None, user=DAEMON_USER,
              **options):
    """cloud-config user-data that configures and starts mlaccel-taskd.

    ``ready_url`` is where the daemon POSTs its readiness, pinning the
    listener's certificate ``ready_cert`` (PEM) for an https URL;
    ``tcp_address`` (with ``token``) makes it reachable from the launcher,
    over TLS with ``tls_identity`` (a :class:`mlaccel.tls.Identity` made
    for this VM only); ``preload`` names the modules to import and warm
    up. The daemon runs as ``user``. ``install``, a pip requirement,
    creates that user and installs the daemon first on images built without
    the element. Further ``options`` become ``[mlaccel_taskd]`` settings.
    Raises ``ValueError`` for a value that cannot be written safely.
    """
    preload = list(preload)
    _check(ready_url, tcp_address, token, preload, tls_identity,
           ready_cert, user)
    owner = '%s:%s' % (user, user)
    secrets = {}
    if token:
        secrets['token_file'] = (TOKEN_PATH, token + '\n')
    if tls_identity:
        secrets['tls_cert_file'] = (TLS_CERT_PATH, tls_identity.cert_pem)
        secrets['tls_key_file'] = (TLS_KEY_PATH, tls_identity.key_pem)
    if ready_cert:
        secrets['ready_cafile'] = (READY_CA_PATH, ready_cert)
    settings = dict(options, **{name: path for name, (path, _)
                                in secrets.items()})
    files = [{'path': CONF_PATH, 'permissions': '0600', 'owner': owner,
              'content': config_text(ready_url, tcp_address,
                                     preload=preload, **settings)},
             {'path': UNIT_PATH, 'permissions': '0644', 'owner': 'root:root',
              'content': systemd_unit(
                  executable, CONF_PATH, options.get('grace_period', 30),
                  user)}]
    files += [{'path': path, 'permissions': '0600', 'owner': owner,
               'content': content} for path, content in secrets.values()]
    document = {'write_files': files}
    commands = []
    if install:
        # Before write_files, which needs the owner to exist.
        document['bootcmd'] = [[
            'sh', '-c', 'getent passwd %s >/dev/null || useradd --system '
            '--create-home --home-dir %s --shell /usr/sbin/nologin %s'
            % (user, DAEMON_HOME, user)]]
        commands.append(['python3', '-m', 'pip', 'install', install])
    commands += [['systemctl', 'daemon-reload'],
                 ['systemctl', 'enable', '--now', UNIT_NAME]]
    document['runcmd'] = commands
    return '#cloud-config\n' + yaml.safe_dump(document, sort_keys=False)


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m mlaccel.taskd.guest')
    sub = parser.add_subparsers(dest='what', required=True)
    unit = sub.add_parser('unit', help='print the systemd unit')
    unit.add_argument('--executable', default=EXECUTABLE)
    unit.add_argument('--config-file', default=CONF_PATH)
    unit.add_argument('--user', default=DAEMON_USER,
                      help='user the daemon runs as (default: %(default)s)')
    args = parser.parse_args(argv)
    sys.stdout.write(systemd_unit(args.executable, args.config_file,
                                  user=args.user))
    return 0


if __name__ == '__main__':
    sys.exit(main())
