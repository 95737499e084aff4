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

"""``mlaccel-statebus``: look at and feed the state bus by hand.

``show`` prints every host report the scheduler would see, with its age
and the id of the key that signed it; ``publish`` puts a report (JSON, as
the agent writes it) on the bus and keeps it there until interrupted, for
trying the scheduler plugins before the agent runs; ``keygen`` makes the
deployment key readers hold, ``rotate`` puts a new one in front of it, and
``derive`` makes the keys of hosts, for their publishers.
"""

import argparse
import json
import math
import signal
import sys
import time

from oslo_config import cfg
from oslo_log import log as logging
import tooz

from mlaccel.cmd import common
from mlaccel import conf as mlaccel_conf
from mlaccel import hostreport
from mlaccel import periodic
from mlaccel import statebus
from mlaccel.statebus import keys
from mlaccel.statebus import publisher
from mlaccel.statebus import reader
from mlaccel.statebus import url as bus_url


class Failure(Exception):
    """Ends the command with this one-line message and a status."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


class _Parser(argparse.ArgumentParser):
    """Reports a usage error in one line, status 2."""

    def error(self, message):
        raise Failure('usage error: %s (see %s --help)'
                      % (message, self.prog), 2)


def _positive_seconds(text):
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(
            'must be a number of seconds above 0, not %r' % text)
    return value


def read_bus(conf):
    """A :class:`~mlaccel.statebus.reader.ReportCache` after one read.

    :raises Failure: the bus cannot be read (its URL's secrets masked).
    """
    cache = reader.ReportCache(conf)
    try:
        cache.refresh()
    finally:
        cache.stop()
    if not cache.healthy:
        raise Failure('state bus %s cannot be read: %s' % (
            statebus.safe_url(conf), common.one_line(
                statebus.redact(conf, cache.last_error))))
    return cache


def _show(conf, args):
    cache = read_bus(conf)
    snapshot = cache.current()
    reports = sorted(snapshot.reports.values(), key=lambda r: r.host)
    if args.json:
        print(json.dumps([dict(r.to_dict(), key_id=cache.key_id(r.host))
                          for r in reports], indent=2))
        return 0
    print('%-24s %8s %6s %8s %6s %6s  %s' % (
        'host', 'age s', 'fresh', 'images', 'builds', 'limit', 'key'))
    for r in reports:
        print('%-24s %8.1f %6s %8d %6d %6d  %s' % (
            r.host, r.age(snapshot.now), snapshot.get(r.host) is not None,
            len(r.cached_images), r.builds_in_flight, r.build_limit,
            cache.key_id(r.host) or '(unsigned)'))
    return 0


def _read_report(path):
    try:
        if path == '-':
            raw = sys.stdin.read()
        else:
            with open(path) as f:
                raw = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise Failure('cannot read report %s: %s'
                      % (path, getattr(exc, 'strerror', None) or exc))
    try:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise hostreport.InvalidReport(
                'report is a JSON %s, not an object' % type(data).__name__)
        data.setdefault('version', hostreport.VERSION)
        data.setdefault('timestamp', time.time())
        return hostreport.parse(json.dumps(data))
    except (ValueError, RecursionError) as exc:
        raise Failure('invalid report %s: %s' % (path, exc), 2)


def _publish(conf, args):
    report = _read_report(args.report)
    pub = publisher.Publisher(report.host, conf)

    def publish():
        # Re-stamped each time: readers judge freshness by it.
        pub.publish(hostreport.HostReport(**{
            **vars(report), 'timestamp': time.time()}))

    try:
        if args.once:
            publish()
        else:
            # SIGINT and SIGTERM are waited for, not raised wherever they
            # land: an exception between a lock's acquire and its release
            # would leave the publisher's lock held and its stop hanging.
            # Blocked first, so that the loop's thread never takes them.
            signals = {signal.SIGINT, signal.SIGTERM}
            signal.pthread_sigmask(signal.SIG_BLOCK, signals)
            loop = periodic.Periodic('mlaccel-statebus-publish',
                                     args.interval, publish)
            loop.start()
            signal.sigwait(signals)
            loop.stop()
    finally:
        if not args.once:
            pub.stop()
    return 0


def _keygen(conf, args):
    keys.write_key(args.output, keys.generate())
    print('wrote a new deployment key to %s; give it to the readers only '
          '([mlaccel_statebus] deployment_key_file)' % args.output)
    return 0


def _deployment_key_file(conf, args):
    path = args.deployment_key_file or conf.mlaccel_statebus.\
        deployment_key_file
    if not path:
        raise Failure('%s needs --deployment-key-file (or '
                      '[mlaccel_statebus] deployment_key_file)'
                      % args.command, 2)
    return path


def _rotate(conf, args):
    path = _deployment_key_file(conf, args)
    new, dropped = keys.rotate(path)
    print('key %s is now the current key in %s, the previous one still '
          'valid%s; derive the hosts\' keys again and give them to the '
          'hosts, then retire the previous key with another rotate or by '
          'deleting its line' % (new, path, ''.join(
              '; dropped key %s' % kid for kid in dropped)))
    return 0


def _derive(conf, args):
    path = _deployment_key_file(conf, args)
    for host in args.host:
        if not host or host != host.strip() or len(host.split()) != 1:
            raise Failure('--host must be a host name without blanks', 2)
    host_keys = keys.derive_all(keys.read_deployment_keys(path), args.host)
    keys.write_key(args.output, keys.format_host_keys(host_keys))
    print('wrote the keys of host %s to %s (key %s current); give it to '
          'that host only ([mlaccel_statebus] host_key_file)'
          % (', '.join(args.host), args.output, host_keys[0].id))
    return 0


def _parser():
    parser = _Parser(prog='mlaccel-statebus', description=__doc__)
    parser.add_argument('--config-file', action='append', default=[],
                        help='configuration file(s) with [mlaccel_statebus]')
    sub = parser.add_subparsers(dest='command', required=True,
                                parser_class=_Parser)
    show = sub.add_parser('show', help='print every host report')
    show.add_argument('--json', action='store_true')
    pub = sub.add_parser('publish', help='publish a host report')
    pub.add_argument('report', help='JSON file of the report, or - for stdin')
    pub.add_argument('--interval', type=_positive_seconds, default=5.0,
                     help='seconds between re-publications (above 0)')
    pub.add_argument('--once', action='store_true',
                     help='publish once and exit; the bus expires the report '
                          'after its liveness timeout')
    keygen = sub.add_parser(
        'keygen', help='make a new deployment key (file mode 0600)')
    keygen.add_argument('--output', required=True,
                        help='file to create; an existing one is kept')
    rotate = sub.add_parser(
        'rotate', help='put a new deployment key first in the file, keep '
                       'the current one as the previous, drop older ones')
    derive = sub.add_parser(
        'derive', help='make the keys of hosts from the deployment keys')
    for command in (rotate, derive):
        command.add_argument('--deployment-key-file',
                             help='the deployment keys (default: '
                                  '[mlaccel_statebus] deployment_key_file)')
    derive.add_argument('--host', required=True, action='append',
                        help='a host name the keys sign for, as Nova knows '
                             'the host (cinder-volume: host@backend); may '
                             'be given several times')
    derive.add_argument('--output', required=True,
                        help='file to create; an existing one is kept')
    return parser


def _load_conf(args):
    conf = cfg.ConfigOpts()
    mlaccel_conf.register_opts(conf)
    logging.register_options(conf)
    # Log lines go to stderr: stdout is the command's output (e.g. JSON).
    conf.set_default('use_stderr', True)
    try:
        conf([], project='mlaccel', default_config_files=args.config_file,
             default_config_dirs=[])
        for opt in mlaccel_conf.statebus.OPTS:
            getattr(conf.mlaccel_statebus, opt.dest)
    except (cfg.Error, ValueError) as exc:
        raise Failure('configuration: %s'
                      % bus_url.redact(' '.join(str(exc).split()),
                                       _raw_url(conf)), 2)
    logging.setup(conf, 'mlaccel')
    return conf


def _raw_url(conf):
    try:
        return conf.mlaccel_statebus.backend_url
    except Exception:
        return None


_COMMANDS = {'show': _show, 'publish': _publish, 'keygen': _keygen,
             'rotate': _rotate, 'derive': _derive}


def _check_bus_conf(conf, command):
    """Refuse a bad URL or key file before anything touches the bus."""
    opts = conf.mlaccel_statebus
    bus_url.tooz_url(opts.backend_url)
    if opts.deployment_key_file:
        keys.read_deployment_keys(opts.deployment_key_file)
    elif command == 'show' and not opts.allow_unsigned_reports:
        raise Failure('show needs [mlaccel_statebus] deployment_key_file '
                      '(or allow_unsigned_reports, in a test cloud): '
                      'reports are used only signed', 2)


def main(argv=None):
    conf = None
    try:
        args = _parser().parse_args(argv)
        conf = _load_conf(args)
        if args.command in ('show', 'publish'):
            _check_bus_conf(conf, args.command)
        return _COMMANDS[args.command](conf, args)
    except Failure as exc:
        message, status = str(exc), exc.status
    except (keys.KeyFileError, bus_url.BackendError,
            publisher.HostClaimed) as exc:
        message, status = str(exc), 1
    except (tooz.ToozError, OSError) as exc:
        message, status = 'state bus %s: %s' % (
            statebus.safe_url(conf), exc), 1
    if conf is not None:
        message = statebus.redact(conf, message)
    print('mlaccel-statebus: ' + ' '.join(message.split()), file=sys.stderr)
    return status


if __name__ == '__main__':
    sys.exit(main())
