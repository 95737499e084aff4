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

"""Options of warm pools: where their state lives, how they are sized."""

from oslo_config import cfg

GROUP = cfg.OptGroup(
    'mlaccel_pool',
    title='mlaccel warm pools',
    help='Warm pools keep task VMs of a project running with a warm task '
         'daemon, so that a launch takes them instead of waiting for new '
         'VMs to be created and warmed. "mlaccel launch" claims members of '
         'a matching pool first; "mlaccel-pool-manager" keeps each pool at '
         'the size measured demand asks for. Every idle member costs what '
         'a running VM costs; "mlaccel pool list" shows the idle VM-seconds '
         'each pool spent and their share per task served.')

OPTS = [
    cfg.StrOpt(
        'state_dir',
        default='/var/lib/mlaccel/pools',
        help='Directory of the pools\' state: members, their tokens and '
             'pinned certificates, claims and costs. It must be private '
             '(mode 0700, created so) to the user that runs the launcher and '
             'the pool manager: the tokens give control of the members\' '
             'task daemons. Launchers and managers on several hosts need it '
             'on a shared file system; they serialise their changes through '
             'locks on the state bus ([mlaccel_statebus] backend_url).'),
    cfg.BoolOpt(
        'claim',
        default=True,
        help='Whether "mlaccel launch" takes VMs from a matching warm pool '
             '(same project, image, flavor, preload profile, server group, '
             'network and task daemon port) before creating any.'),
    cfg.FloatOpt(
        'lock_timeout',
        default=10.0,
        min=0.1,
        help='Seconds to wait for a pool\'s lock on the state bus. A launch '
             'that cannot get it (the bus is down or slow) creates all its '
             'VMs fresh and claims nothing.'),
    cfg.FloatOpt(
        'interval',
        default=5.0,
        min=0.1,
        help='Seconds between two rounds of the pool manager: reconcile each '
             'pool with Nova, check its idle members\' daemons, resize it.'),
    cfg.FloatOpt(
        'arrival_window',
        default=600.0,
        min=1.0,
        help='Seconds of past demand (VMs asked for by launches) the pool '
             'manager averages to get the arrival rate. Shorter follows '
             'bursts sooner; longer keeps the pool steadier.'),
    cfg.FloatOpt(
        'margin',
        default=0.5,
        min=0.0,
        help='Safety margin over Little\'s law: a pool keeps '
             'ceil(arrival rate x refill lead time x (1 + margin)) idle '
             'members, between its minimum and maximum size.'),
    cfg.FloatOpt(
        'default_lead_time',
        default=60.0,
        min=0.0,
        help='Refill lead time (seconds from a create request to a warm '
             'daemon) assumed until a pool has measured its own.'),
    cfg.IntOpt(
        'refill_parallelism',
        default=4,
        min=1,
        help='Members the pool manager creates at once per pool.'),
    cfg.FloatOpt(
        'build_timeout',
        default=600.0,
        min=1.0,
        help='Seconds a new member has to become warm; a member that takes '
             'longer is deleted.'),
    cfg.FloatOpt(
        'health_timeout',
        default=5.0,
        min=0.1,
        help='Seconds an idle member\'s task daemon has to answer a health '
             'check, and a claimed member\'s daemon to take its new token '
             '(a launch waits at most this long for a member whose daemon '
             'hangs, then creates that VM fresh).'),
    cfg.IntOpt(
        'health_failures',
        default=2,
        min=1,
        help='Consecutive failed health checks after which an idle member '
             'is deleted and replaced. A member is never handed to a task '
             'while its daemon does not answer: the launcher checks it when '
             'it claims it.'),
    cfg.FloatOpt(
        'capacity_backoff',
        default=300.0,
        min=0.0,
        help='Longest time, in seconds, a pool does not grow after creating '
             'a member failed (Nova found no capacity, the project is over '
             'quota, or the build failed): meanwhile it shrinks to what it '
             'holds and launches create their VMs fresh. The first failure '
             'pauses growth for capacity_backoff_first seconds; each further '
             'refill that fails in a row doubles the pause, up to this.'),
    cfg.FloatOpt(
        'capacity_backoff_first',
        default=15.0,
        min=0.0,
        help='Seconds a pool does not grow after the first failed refill; '
             'see capacity_backoff. A short first pause lets a pool recover '
             'at once from a single failed build, while a pool that keeps '
             'failing (no capacity, over quota) soon waits the longest.'),
    cfg.IntOpt(
        'max_tasks',
        default=10,
        min=1,
        help='Default reuse policy of a new pool: a member serves at most '
             'this many tasks, then it is deleted. After each task a member '
             'is returned only if its task ended and left no process.'),
]
