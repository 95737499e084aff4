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
the daemon installed (root's, read-only to everyone else), the task user
:data:`TASK_USER` created and the systemd unit enabled; the unit waits for
cloud-init to write the configuration, so the daemon starts right after
cloud-init's network stage. :func:`user_data` writes that configuration
(and the unit too, for images made otherwise), makes sure the task user
exists and starts the service.

The daemon runs as root, confined by the unit to the capabilities it needs
(:data:`CAPABILITIES`), started without the user site directory and with
Python's environment variables ignored; every task process and persistent
worker drops to :data:`TASK_USER` before it runs a task. Root rather than
an unprivileged user holding ``CAP_SETUID``: a root process that sets all
its uids to another user loses every capability (the kernel clears them),
whereas an unprivileged holder of ``CAP_SETUID`` keeps it across the
switch unless each child clears it, and could become uid 0 anyway. So a
task can neither signal the daemon, nor read its files, nor change the
code or configuration it runs with, and a later holder of a pooled VM
meets a daemon no earlier task could reach.

The user-data carries one VM's own credentials: its token, its TLS
identity (certificate and key of its TCP listener) and the certificate of
the launcher's readiness listener, which the daemon pins. Each file is
written mode 0600, owned by root. These secrets protect the VM from other
VMs and from the network, not from its own processes: any process in the
guest can read its user-data from the metadata service.

``python -m mlaccel.taskd.guest unit`` prints the systemd unit; the element
installs it from there.
"""

import argparse
import configparser
import io
import json
import re
import sys
import urllib.parse

from mlaccel.taskd import protocol

CONF_PATH = '/etc/mlaccel/taskd.conf'
TOKEN_PATH = '/etc/mlaccel/taskd.token'
TLS_CERT_PATH = '/etc/mlaccel/taskd.crt'
TLS_KEY_PATH = '/etc/mlaccel/taskd.key'
#: The launcher's readiness listener certificate, pinned by the push.
READY_CA_PATH = '/etc/mlaccel/launcher.crt'
UNIT_NAME = 'mlaccel-taskd.service'
UNIT_PATH = '/etc/systemd/system/' + UNIT_NAME
EXECUTABLE = '/usr/local/bin/mlaccel-taskd'
#: The unprivileged system user every task runs as (not the daemon's).
TASK_USER = 'mlaccel-task'
#: What the daemon, root, keeps: switch to the task user (SETUID, SETGID),
#: signal and kill its tasks (KILL), give a task its log (CHOWN) and read
#: the task's log back (DAC_READ_SEARCH). Tasks keep none of them.
CAPABILITIES = ('CAP_SETUID', 'CAP_SETGID', 'CAP_KILL', 'CAP_CHOWN',
                'CAP_DAC_READ_SEARCH')

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
    _check_user(user)


def _check_user(name):
    if not _USER_RE.match(name):
        raise ValueError('%r is not a user name' % name)


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
                 grace_period=30, task_user=TASK_USER):
    """A systemd unit running the daemon once configured.

    The daemon runs as root with :data:`CAPABILITIES` only, its tasks as
    ``task_user`` (``[mlaccel_taskd] task_user``, given in the unit's
    environment so that an operator's configuration file cannot drop it by
    accident), without the user site directory.
    """
    _check_user(task_user)
    return '\n'.join([
        '[Unit]',
        'Description=mlaccel warm task daemon',
        'After=cloud-init.service network-online.target',
        'Wants=network-online.target',
        'ConditionPathExists=%s' % conf_path,
        '',
        '[Service]',
        'ExecStart=%s --config-file %s' % (executable, conf_path),
        # Root, so that each task can drop to the task user for good and
        # cannot signal the daemon or change its files; no user site
        # directory in the daemon's Python (the element's executable also
        # runs it with python -I).
        'User=root',
        'Environment=PYTHONNOUSERSITE=1 OS_MLACCEL_TASKD__TASK_USER=%s'
        % task_user,
        'CapabilityBoundingSet=%s' % ' '.join(CAPABILITIES),
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


def task_user_command(task_user=TASK_USER):
    """A command making ``task_user`` unless it exists; the element's too.

    A system user with a home of its own under /var/lib and no login
    shell, refused by cron and at, so that a task cannot schedule what
    would run after its claim.
    """
    _check_user(task_user)
    return ['sh', '-c', (
        'getent passwd {0} >/dev/null || useradd --system --user-group '
        '--create-home --home-dir /var/lib/{0} --shell /usr/sbin/nologin '
        '{0}; for f in /etc/cron.deny /etc/at.deny; do grep -qsx {0} "$f" '
        '|| echo {0} >> "$f"; done').format(task_user)]


def user_data(ready_url=None, tcp_address=None, token=None,
              preload=(), install=None, executable=EXECUTABLE,
              tls_identity=None, ready_cert=None, task_user=TASK_USER,
              **options):
    """cloud-config user-data that configures and starts mlaccel-taskd.

    ``ready_url`` is where the daemon POSTs its readiness, pinning the
    listener's certificate ``ready_cert`` (PEM) for an https URL;
    ``tcp_address`` (with ``token``) makes it reachable from the launcher,
    over TLS with ``tls_identity`` (a :class:`mlaccel.tls.Identity` made
    for this VM only); ``preload`` names the modules to import and warm
    up. The daemon runs as root and its tasks as ``task_user``, created
    first if the image lacks it. ``install``, a pip requirement, installs
    the daemon first on images built without the element. Further
    ``options`` become ``[mlaccel_taskd]`` settings.
    Raises ``ValueError`` for a value that cannot be written safely.
    """
    preload = list(preload)
    _check(ready_url, tcp_address, token, preload, tls_identity,
           ready_cert, task_user)
    owner = 'root:root'
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
                  task_user)}]
    files += [{'path': path, 'permissions': '0600', 'owner': owner,
               'content': content} for path, content in secrets.values()]
    document = {'bootcmd': [task_user_command(task_user)],
                'write_files': files}
    commands = []
    if install:
        commands.append(['python3', '-m', 'pip', 'install', install])
    commands += [['systemctl', 'daemon-reload'],
                 ['systemctl', 'enable', '--now', UNIT_NAME]]
    document['runcmd'] = commands
    # JSON is YAML: cloud-init reads it as it is, no YAML library needed.
    return '#cloud-config\n' + json.dumps(document, indent=1)


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m mlaccel.taskd.guest')
    sub = parser.add_subparsers(dest='what', required=True)
    unit = sub.add_parser('unit', help='print the systemd unit')
    add_user = sub.add_parser('task-user', help='print the shell command '
                              'that creates the task user')
    add_user.add_argument('--task-user', default=TASK_USER)
    unit.add_argument('--executable', default=EXECUTABLE)
    unit.add_argument('--config-file', default=CONF_PATH)
    unit.add_argument('--task-user', default=TASK_USER,
                      help='user the tasks run as (default: %(default)s)')
    args = parser.parse_args(argv)
    if args.what == 'task-user':
        sys.stdout.write(task_user_command(args.task_user)[2] + '\n')
        return 0
    sys.stdout.write(systemd_unit(args.executable, args.config_file,
                                  task_user=args.task_user))
    return 0


if __name__ == '__main__':
    sys.exit(main())
