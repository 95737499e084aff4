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

"""Import and warm up a task's heavy modules before the daemon is ready."""

import contextlib
import importlib
import sys

from oslo_log import log as logging

LOG = logging.getLogger(__name__)


class PreloadError(Exception):
    """A configured preload failed; the daemon must not start."""


def parse(entries):
    """``["mod", "mod:func"]`` -> ``[(module, function or None)]``."""
    parsed = []
    for entry in entries:
        module, _, func = entry.strip().partition(':')
        if not module or (func == '' and entry.strip().endswith(':')):
            raise PreloadError('preload entry %r is not "module" or '
                               '"module:function"' % entry)
        parsed.append((module, func or None))
    return parsed


@contextlib.contextmanager
def single_thread():
    """Run torch (if loaded) on one thread, then restore its thread count.

    A parallel torch op in the daemon would start an OpenMP thread pool,
    and children forked afterwards hang inside it.
    """
    torch = sys.modules.get('torch')
    if torch is None:
        yield
        return
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def preload(entries, warmup=True):
    """Import every entry and, if ``warmup``, call its hook; return names.

    Raises :class:`PreloadError` naming the entry and the cause for the
    first one that fails.
    """
    loaded = []
    for module_name, func_name in parse(entries):
        try:
            module = importlib.import_module(module_name)
        except BaseException as exc:
            raise PreloadError('cannot preload module %s: %s: %s' % (
                module_name, type(exc).__name__, exc)) from exc
        loaded.append(module_name)
        if func_name is None:
            continue
        hook = getattr(module, func_name, None)
        if not callable(hook):
            raise PreloadError('preload hook %s:%s does not exist'
                               % (module_name, func_name))
        if not warmup:
            continue
        try:
            with single_thread():
                hook()
        except BaseException as exc:
            raise PreloadError('warm-up hook %s:%s failed: %s: %s' % (
                module_name, func_name, type(exc).__name__, exc)) from exc
        LOG.info('Warmed up %s:%s', module_name, func_name)
    return loaded
