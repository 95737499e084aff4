"""Guest integration: cloud-init user-data that configures and starts taskd.

An image built with the ``mlaccel-taskd`` diskimage-builder element has
the daemon installed and its systemd unit enabled; the unit waits for
cloud-init to write the configuration, so the daemon starts right after
cloud-init's network stage. :func:`user_data` writes that configuration
(and the unit too, for images made otherwise) and starts the service.

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

CONF_PATH = '/etc/mlaccel/taskd.conf'
TOKEN_PATH = '/etc/mlaccel/taskd.token'
UNIT_NAME = 'mlaccel-taskd.service'
UNIT_PATH = '/etc/systemd/system/' + UNIT_NAME
EXECUTABLE = '/usr/local/bin/mlaccel-taskd'
#: Preloads of the shipped CLIP-style task.
EXAMPLE_PRELOAD = ('torch', 'torch._dynamo', 'mlaccel.tasks.clip:warm')

_TOKEN_RE = re.compile(r'^[A-Za-z0-9._~+/=-]{16,512}$')
_PRELOAD_RE = re.compile(r'^[A-Za-z_][\w.]*(:[A-Za-z_]\w*)?$')


def _check(ready_url, tcp_address, token, preload):
    if ready_url is not None:
        parts = urllib.parse.urlsplit(ready_url)
        if parts.scheme not in ('http', 'https') or not parts.hostname or \
                any(c.isspace() for c in ready_url):
            raise ValueError('ready_url %r is not an http(s) URL'
                             % ready_url)
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
                 grace_period=30):
    """A systemd unit running the daemon once its configuration exists."""
    return '\n'.join([
        '[Unit]',
        'Description=mlaccel warm task daemon',
        'After=cloud-init.service network-online.target',
        'Wants=network-online.target',
        'ConditionPathExists=%s' % conf_path,
        '',
        '[Service]',
        'ExecStart=%s --config-file %s' % (executable, conf_path),
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
              preload=EXAMPLE_PRELOAD, install=None, executable=EXECUTABLE,
              **options):
    """cloud-config user-data that configures and starts mlaccel-taskd.

    ``ready_url`` is where the daemon POSTs its readiness; ``tcp_address``
    (with ``token``) makes it reachable from the launcher; ``preload``
    names the modules to import and warm up. ``install``, a pip
    requirement, installs the daemon first on images built without the
    element. Further ``options`` become ``[mlaccel_taskd]`` settings.
    Raises ``ValueError`` for a value that cannot be written safely.
    """
    preload = list(preload)
    _check(ready_url, tcp_address, token, preload)
    files = [{'path': CONF_PATH, 'permissions': '0644', 'owner': 'root:root',
              'content': config_text(
                  ready_url, tcp_address, TOKEN_PATH if token else None,
                  preload, **options)},
             {'path': UNIT_PATH, 'permissions': '0644', 'owner': 'root:root',
              'content': systemd_unit(
                  executable, CONF_PATH,
                  options.get('grace_period', 30))}]
    if token:
        files.append({'path': TOKEN_PATH, 'permissions': '0600',
                      'owner': 'root:root', 'content': token + '\n'})
    commands = []
    if install:
        commands.append(['python3', '-m', 'pip', 'install', install])
    commands += [['systemctl', 'daemon-reload'],
                 ['systemctl', 'enable', '--now', UNIT_NAME]]
    document = {'write_files': files, 'runcmd': commands}
    return '#cloud-config\n' + yaml.safe_dump(document, sort_keys=False)


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m mlaccel.taskd.guest')
    sub = parser.add_subparsers(dest='what', required=True)
    unit = sub.add_parser('unit', help='print the systemd unit')
    unit.add_argument('--executable', default=EXECUTABLE)
    unit.add_argument('--config-file', default=CONF_PATH)
    args = parser.parse_args(argv)
    sys.stdout.write(systemd_unit(args.executable, args.config_file))
    return 0


if __name__ == '__main__':
    sys.exit(main())
