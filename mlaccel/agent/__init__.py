# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""The compute-node agent, ``mlaccel-agent``.

It runs beside nova-compute and is the producer of the node's host report
(:mod:`mlaccel.hostreport`):

- :mod:`~mlaccel.agent.novaconf` reads what it needs of nova.conf;
- :mod:`~mlaccel.agent.inventory` scans Nova's image cache;
- :mod:`~mlaccel.agent.cachefile` puts a verified image file into it the
  way nova-compute would;
- :mod:`~mlaccel.agent.fetchers` (stevedore plugins) and
  :mod:`~mlaccel.agent.prefetch` pre-fetch hot images
  (:mod:`~mlaccel.agent.hot`);
- :mod:`~mlaccel.agent.builds` and :mod:`~mlaccel.agent.notifications`
  pace builds from Nova's versioned notifications;
- :mod:`~mlaccel.agent.report` assembles and publishes the report;
- :mod:`~mlaccel.agent.service` is the daemon.
"""

import warnings

AGENT_VERSION = 'mlaccel-agent 1'

# The agent runs on native threads; futurist imports eventlet only to offer
# it, and eventlet warns at import. A daemon's stderr is for its own words.
warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')
