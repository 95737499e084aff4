"""``mlaccel-statebus``: look at and feed the state bus by hand.

``show`` prints every host report the scheduler would see, with its age;
``publish`` puts a report (JSON, as the agent writes it) on the bus and
keeps it there until interrupted, for trying the scheduler plugins before
the agent runs.
"""

import argparse
import json
import sys
import time

from oslo_config import cfg
from oslo_log import log as logging

from mlaccel import conf as mlaccel_conf
from mlaccel import hostreport
from mlaccel.statebus import publisher
from mlaccel.statebus import reader


def _show(conf, args):
    cache = reader.ReportCache(conf)
    cache.refresh()
    if not cache.healthy:
        print('state bus %s cannot be read'
              % conf.mlaccel_statebus.backend_url, file=sys.stderr)
        return 1
    snapshot = cache.snapshot()
    cache.stop()
    reports = sorted(snapshot.reports.values(), key=lambda r: r.host)
    if args.json:
        print(json.dumps([r.to_dict() for r in reports], indent=2))
        return 0
    print('%-24s %8s %6s %8s %6s %6s %10s' % (
        'host', 'age s', 'fresh', 'images', 'builds', 'limit', 'warm'))
    for r in reports:
        print('%-24s %8.1f %6s %8d %6d %6d %10d' % (
            r.host, r.age(snapshot.now), snapshot.get(r.host) is not None,
            len(r.cached_images), r.builds_in_flight, r.build_limit,
            r.warm_slots))
    return 0


def _publish(conf, args):
    with open(args.report) if args.report != '-' else sys.stdin as f:
        raw = f.read()
    try:
        data = json.loads(raw)
        data.setdefault('version', hostreport.VERSION)
        data.setdefault('timestamp', time.time())
        report = hostreport.parse(json.dumps(data))
    except (ValueError, hostreport.InvalidReport) as exc:
        print('invalid report: %s' % exc, file=sys.stderr)
        return 2
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


def main(argv=None):
    parser = argparse.ArgumentParser(prog='mlaccel-statebus',
                                     description=__doc__)
    parser.add_argument('--config-file', action='append', default=[],
                        help='configuration file(s) with [mlaccel_statebus]')
    sub = parser.add_subparsers(dest='command', required=True)
    show = sub.add_parser('show', help='print every host report')
    show.add_argument('--json', action='store_true')
    pub = sub.add_parser('publish', help='publish a host report')
    pub.add_argument('report', help='JSON file of the report, or - for stdin')
    pub.add_argument('--interval', type=float, default=5.0,
                     help='seconds between re-publications')
    pub.add_argument('--once', action='store_true',
                     help='publish once and exit; the bus expires the report '
                          'after its liveness timeout')
    args = parser.parse_args(argv)

    conf = cfg.ConfigOpts()
    mlaccel_conf.register_opts(conf)
    logging.register_options(conf)
    conf([], project='mlaccel', default_config_files=args.config_file)
    logging.setup(conf, 'mlaccel')
    return {'show': _show, 'publish': _publish}[args.command](conf, args)


if __name__ == '__main__':
    sys.exit(main())
