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

"""``openstack mlaccel launch``: ``mlaccel launch`` inside OpenStackClient.

The options are ``mlaccel launch``'s own (:mod:`mlaccel.cmd.launch`), but
for those OSC has globally: the cloud is OSC's (``--os-cloud`` and the
other ``--os-*`` options), ``--debug`` and ``--quiet`` are OSC's. The
launch runs through :func:`mlaccel.launcher.api.launch` with OSC's
openstacksdk connection, claims warm pool members first as the script
does, writes the record with ``--output`` and shows it as ``openstack
mlaccel record show`` does. Progress goes to stderr (none with
``--quiet``). Exit status: 0 when every VM's task succeeded, 1 when the
launch failed or could not start, 130 when interrupted (SIGINT or
SIGTERM); the servers the launch made are deleted in every case (unless
``--keep-servers`` and the task succeeded).
"""

import functools
import signal

from osc_lib.command import command
from osc_lib import exceptions
from oslo_config import cfg

from mlaccel.cmd import common as cmd_common
from mlaccel.cmd import launch as launch_cmd
from mlaccel import conf as mlaccel_conf
from mlaccel.launcher import api
from mlaccel.launcher import record as launch_record
from mlaccel.osc import common
from mlaccel.osc import record
from mlaccel.pool import cli as pool_cli
from mlaccel.taskd import protocol

#: ``mlaccel launch`` options OSC has in its own form, or this command has
#: in another (``--config-file`` also honours ``$OS_MLACCEL_CONFIG_FILE``).
NOT_COPIED = frozenset(('help', 'cloud', 'debug', 'quiet', 'config_file'))

INTERRUPTED = 130


def _submit_options(parsed_args):
    """The task's :class:`~mlaccel.taskd.protocol.TaskSpec` fields."""
    submit = {'mode': parsed_args.mode}
    if parsed_args.threads:
        submit['threads'] = parsed_args.threads
    if parsed_args.seed is not None:
        submit['seed'] = parsed_args.seed
    return submit


class Launch(command.ShowOne):
    """Run a task on fresh or warm VMs and record its life cycle."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        # The script's options themselves, so that both take the same.
        for action in launch_cmd.build_parser()._actions:
            if action.dest not in NOT_COPIED:
                parser._add_action(action)
        common.add_config_file_option(parser)
        return parser

    def run(self, parsed_args):
        self.status = 0
        return super().run(parsed_args) or self.status

    def take_action(self, parsed_args):
        args = parsed_args
        conf = common.load_config(args, mlaccel_conf.launcher,
                                  mlaccel_conf.pool)
        submit = _submit_options(args)
        try:
            protocol.TaskSpec(args.task, args.task_args, **submit)
            if args.output:
                launch_cmd._check_output(args.output)
        except ValueError as exc:
            raise exceptions.CommandError(common.one_line(exc))
        conn = self.app.client_manager.sdk_connection
        result = self._launch(conn, conf, args, submit)
        if args.output:
            try:
                launch_record.write_json(result, args.output)
            except OSError as exc:
                self.log.error('cannot write the record: %s',
                               common.one_line(exc))
                self.status = self.status or 1
        if result['error']:
            self.log.error('%s: %s', result['outcome'], result['error'])
        leaked = result['cleanup'].get('leaked')
        if leaked:
            self.log.error('servers NOT deleted: %s', ', '.join(leaked))
            self.status = self.status or 1
        return record.show(result)

    def _launch(self, conn, conf, args, submit):
        """The record of the launch; sets ``status`` from its outcome."""
        quiet = getattr(self.app.options, 'verbose_level', 1) == 0
        progress = None if quiet else functools.partial(
            launch_cmd.print_progress, stream=self.app.stderr)
        previous = signal.signal(signal.SIGTERM, launch_cmd._terminate)
        try:
            warm_pool = pool_cli.claimer(conf, conn) if args.pool else None
            result = api.launch(
                conn, args.image, args.flavor, args.count, args.task,
                args.task_args,
                network=cmd_common.networks(conn, args.network),
                server_group=args.server_group, timeout=args.timeout,
                keep_servers=args.keep_servers, submit_options=submit,
                progress=progress, conf=conf, warm_pool=warm_pool,
                **launch_cmd._options(args))
            self.status = 0 if result['outcome'] == api.SUCCEEDED else 1
        except api.LaunchInterrupted as exc:
            result, self.status = exc.record, INTERRUPTED
        except (ValueError, TypeError, cfg.Error) as exc:
            raise exceptions.CommandError(common.one_line(exc))
        finally:
            signal.signal(signal.SIGTERM, previous)
        return result
