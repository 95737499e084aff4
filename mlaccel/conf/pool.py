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
    cfg.IntOpt(
        'leader_lease',
        default=10,
        min=2,
        help='Seconds a pool manager\'s lead, and any pool lock, lasts '
             'after its holder last renewed it (tooz\'s lock_timeout, unless '
             '[mlaccel_statebus] backend_url sets one; renewed every half '
             'lease). When the leading manager dies, another takes over '
             'within this plus its round interval. Shorter fails over '
             'sooner; a leader cut off from the bus for longer than this '
             'loses its lead, and stops acting at its next round.'),
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
    cfg.StrOpt(
        'project_id',
        help='Id of the project the launcher\'s and the pool manager\'s '
             'credentials act in, for credentials that do not name one '
             '(a bare token, for example). When the credentials do name a '
             'project, it must be this one. A pool belongs to one project: '
             'launches claim only members of their own project\'s pools, '
             'after Nova confirmed each server is that project\'s, and a '
             'manager tends only the pools of its project. When the project '
             'is unknown (the credentials name none and this is unset) or '
             'the two disagree, nothing is claimed (every VM is created '
             'fresh), no pool is created and the manager tends no pool; '
             'an error says why.'),
    cfg.IntOpt(
        'demand_records',
        default=5000,
        min=1,
        help='The most launch asks kept per project in the pools\' demand '
             'record (in state_dir, beside the pools): every launch that may '
             'claim members records the key it asked for, its VMs and how '
             'many members it got, whether a pool exists for the key or '
             'not, and the fresh overhead of the VMs made for its misses. '
             'The oldest asks go first.'),
    cfg.FloatOpt(
        'demand_max_age',
        default=8 * 86400.0,
        min=60.0,
        help='Seconds a launch ask is kept in the demand record. Longer '
             'than a day, so that daily patterns can be seen.'),
    cfg.BoolOpt(
        'learn',
        default=False,
        help='Whether the pool manager makes, sizes and retires pools by '
             'itself from the recorded demand ("learned" pools), for the '
             'projects in learn_projects, within the budget '
             '(budget_members, budget_idle_vm_hours). Pools an operator '
             'made are never touched and are served first: their idle '
             'members count against the budget.'),
    cfg.ListOpt(
        'learn_projects',
        default=[],
        help='Ids of the projects whose demand may make learned pools: '
             'opt-in per project. A manager tends only its own project\'s '
             'pools, so this lists that project to turn learning on.'),
    cfg.ListOpt(
        'learn_images',
        default=[],
        help='Ids of the images learned pools may hold; empty: any image '
             'the project can boot (Glance shows it to the project). An '
             'image the project cannot see is never pooled.'),
    cfg.ListOpt(
        'learn_flavors',
        default=[],
        help='Ids of the flavors learned pools may hold; empty: any.'),
    cfg.IntOpt(
        'budget_members',
        default=8,
        min=0,
        help='The most warm (idle) members of the project\'s pools at '
             'once, learned and operator-made together; the learned pools '
             'get what the operator\'s leave.'),
    cfg.FloatOpt(
        'budget_idle_vm_hours',
        default=96.0,
        min=0.0,
        help='The most VM-hours the learned pools\' members may cost over '
             'any 24 hours, from each member\'s create request to its claim '
             'or deletion (an operator\'s pool\'s warm member counts 24). '
             'The manager spends them in the hours the project\'s recorded '
             'days were busy, up to budget_members at once, and holds '
             'fewer members in the quiet ones; while no day of demand is '
             'recorded, budget_idle_vm_hours / 24 members at once. The '
             'members\' time over the last 24 hours is recorded beside the '
             'demand; the manager never lets it pass this.'),
    cfg.IntOpt(
        'cloud_budget_members',
        min=0,
        help='The most warm members the pools of all projects together may '
             'hold, when the projects\' pool managers share one state_dir '
             'and state bus: each manager counts the other projects\' '
             'members and learned targets against it, planning under a '
             'lock of the whole store, so the bound holds whatever the '
             'managers do at once. Operators\' pools count first, and no '
             'project goes beyond its own budget_members. Unset: each '
             'project\'s budget only.'),
    cfg.FloatOpt(
        'cloud_budget_idle_vm_hours',
        min=0.0,
        help='The most idle VM-hours a day the warm members of all '
             'projects together may cost, each member counted idle all day '
             '(projects do not share one daily rhythm), so it allows '
             'cloud_budget_idle_vm_hours / 24 members at once. Unset: each '
             'project\'s budget only.'),
    cfg.IntOpt(
        'learn_max_size',
        default=10,
        min=1,
        help='The most members one learned pool may hold.'),
]
