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

``show`` prints every host report the scheduler would see, with its age;
``publish`` puts a report (JSON, as the agent writes it) on the bus and
keeps it there until interrupted, for trying the scheduler plugins before
the agent runs; ``keygen`` makes the deployment secret readers hold and
``derive`` the key of one host, for its publisher.
"""

import argparse
import json
import math
import sys
import time

from oslo_config import cfg
from oslo_log import log as logging
import tooz

from mlaccel import conf as mlaccel_conf
from mlaccel import hostreport
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


def _show(conf, args):
    cache = reader.ReportCache(conf)
    try:
        cache.refresh()
    finally:
        cache.stop()
    if not cache.healthy:
        raise Failure('state bus %s cannot be read: %s'
                      % (statebus.safe_url(conf), cache.last_error))
    snapshot = cache.current()
    reports = sorted(snapshot.reports.values(), key=lambda r: r.host)
    if args.json:
        print(json.dumps([r.to_dict() for r in reports], indent=2))
        return 0
    print('%-24s %8s %6s %8s %6s %6s' % (
        'host', 'age s', 'fresh', 'images', 'builds', 'limit'))
    for r in reports:
        print('%-24s %8.1f %6s %8d %6d %6d' % (
            r.host, r.age(snapshot.now), snapshot.get(r.host) is not None,
            len(r.cached_images), r.builds_in_flight, r.build_limit))
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
    try:
        while True:
            # Re-stamped each time: readers judge freshness by it.
            report = hostreport.HostReport(**{
                **vars(report), 'timestamp': time.time()})
            pub.publish(report)
            if args.once:
                break
            time.sleep(args.interval)
    except KeyboardInterrupt:
        pass
    finally:
        if not args.once:
            pub.stop()
    return 0


def _keygen(conf, args):
    keys.write_key(args.output, keys.generate())
    print('wrote a new deployment key to %s; give it to the readers only '
          '([mlaccel_statebus] deployment_key_file)' % args.output)
    return 0


def _derive(conf, args):
    path = args.deployment_key_file or conf.mlaccel_statebus.\
        deployment_key_file
    if not path:
        raise Failure('derive needs --deployment-key-file (or '
                      '[mlaccel_statebus] deployment_key_file)', 2)
    if not args.host or args.host != args.host.strip():
        raise Failure('--host must be a host name without surrounding '
                      'blanks', 2)
    key = keys.derive(keys.read_deployment_key(path), args.host)
    keys.write_key(args.output, key.hex())
    print('wrote the key of host %s to %s; give it to that host only '
          '([mlaccel_statebus] host_key_file)' % (args.host, args.output))
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
        'keygen', help='make a new deployment secret (file mode 0600)')
    keygen.add_argument('--output', required=True,
                        help='file to create; an existing one is kept')
    derive = sub.add_parser(
        'derive', help='make the key of one host from the deployment secret')
    derive.add_argument('--deployment-key-file',
                        help='the deployment secret (default: '
                             '[mlaccel_statebus] deployment_key_file)')
    derive.add_argument('--host', required=True,
                        help='the host name the key signs for, as Nova '
                             'knows the host')
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
             'derive': _derive}


def _check_bus_conf(conf):
    """Refuse a bad URL or key file before anything touches the bus."""
    opts = conf.mlaccel_statebus
    bus_url.tooz_url(opts.backend_url)
    if opts.deployment_key_file:
        keys.read_deployment_key(opts.deployment_key_file)


def main(argv=None):
    conf = None
    try:
        args = _parser().parse_args(argv)
        conf = _load_conf(args)
        if args.command in ('show', 'publish'):
            _check_bus_conf(conf)
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
