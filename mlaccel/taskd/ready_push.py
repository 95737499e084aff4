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

"""Pushing the daemon's readiness to the launcher's listener.

The notice and its signature are defined in :mod:`mlaccel.readiness`; this
module only sends them: over HTTPS pinned to the launcher's certificate
(``[mlaccel_taskd] ready_cafile``), signed with the VM's token, retried with
exponential backoff while the listener cannot be reached.
"""

import http.client
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request

from oslo_log import log as logging
import tenacity

from mlaccel import readiness
from mlaccel import tls

LOG = logging.getLogger(__name__)

UNSPECIFIED = readiness.WILDCARDS
notice = readiness.notice


def reachable_host(url):
    """This host's address on the route to ``url``'s host.

    A daemon bound to 0.0.0.0 must tell the launcher an address it can
    reach; the source address of a (never sent) UDP "connection" to the
    launcher is that address. No packet leaves the host.
    """
    parts = urllib.parse.urlsplit(url)
    infos = socket.getaddrinfo(parts.hostname, parts.port or 443,
                               type=socket.SOCK_DGRAM)
    family, _, _, _, sockaddr = infos[0]
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        probe.connect(sockaddr)
        return probe.getsockname()[0]


class _Refused(Exception):
    """The listener answered and refused: retrying cannot help."""


def _opener(url, cafile):
    # The listener is on the cloud's network: never go through a proxy.
    handlers = [urllib.request.ProxyHandler({})]
    if urllib.parse.urlsplit(url).scheme == 'https':
        if not cafile:
            raise ValueError('an https readiness URL needs the launcher\'s '
                             'certificate (ready_cafile)')
        with open(cafile) as stream:
            pinned = stream.read()
        handlers.append(urllib.request.HTTPSHandler(
            context=tls.client_context(pinned_cert_pem=pinned)))
    return urllib.request.build_opener(*handlers)


def push(url, body, token=None, cafile=None, attempts=8, timeout=2.0,
         first_backoff=0.1, max_backoff=10.0):
    """POST the notice ``body`` (a dict) to ``url``, signed with ``token``.

    Connection failures and 5xx replies are retried up to ``attempts``
    times with a backoff doubling from ``first_backoff``; a 4xx reply is
    final, and so is a listener whose certificate is not the pinned one.
    Returns True once the listener accepted the notice, False
    otherwise (logged; the daemon serves anyway). Raises ``ValueError`` for
    an https URL without ``cafile`` and ``OSError`` if it cannot be read.
    """
    data = readiness.encode(body)
    headers = {'Content-Type': 'application/json'}
    if token:
        headers[readiness.SIGNATURE_HEADER] = readiness.sign(token, data)
    opener = _opener(url, cafile)

    def attempt():
        request = urllib.request.Request(url, data=data, method='POST',
                                         headers=headers)
        try:
            with opener.open(request, timeout=timeout) as reply:
                reply.read()
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                raise _Refused('%s %s' % (exc.code, exc.read()[:300]))
            raise
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, ssl.SSLCertVerificationError):
                raise _Refused('the listener is not the launcher the '
                               'certificate names: %s' % exc.reason)
            raise

    def log_retry(state):
        LOG.warning('Readiness push to %s failed (attempt %d/%d): %s',
                    url, state.attempt_number, attempts,
                    state.outcome.exception())

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(attempts),
        wait=tenacity.wait_exponential(multiplier=first_backoff,
                                       min=first_backoff, max=max_backoff),
        retry=tenacity.retry_if_exception_type(
            (OSError, http.client.HTTPException)),
        before_sleep=log_retry, reraise=True)
    try:
        retrying(attempt)
    except _Refused as exc:
        LOG.error('The launcher refused the readiness push to %s: %s',
                  url, exc)
        return False
    except (OSError, http.client.HTTPException) as exc:
        LOG.error('Readiness push to %s failed %d times, last: %s',
                  url, attempts, exc)
        return False
    LOG.info('Readiness pushed to %s', url)
    return True
