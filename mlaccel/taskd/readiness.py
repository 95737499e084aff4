"""Pushing the daemon's readiness to the launcher's HTTP listener."""

import json
import socket
import time
import urllib.parse
import urllib.request

from oslo_log import log as logging

from mlaccel.taskd import protocol

LOG = logging.getLogger(__name__)

UNSPECIFIED = ('', '0.0.0.0', '::')


def key_of(url):
    """The key the launcher put in the URL: its last path segment."""
    return urllib.parse.urlsplit(url).path.rstrip('/').rpartition('/')[2]


def reachable_host(url):
    """This host's address on the route to ``url``'s host.

    A daemon bound to 0.0.0.0 must tell the launcher an address it can
    reach; the source address of a (never sent) UDP "connection" to the
    launcher is that address. No packet leaves the host.
    """
    parts = urllib.parse.urlsplit(url)
    infos = socket.getaddrinfo(parts.hostname, parts.port or 80,
                               type=socket.SOCK_DGRAM)
    family, _, _, _, sockaddr = infos[0]
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        probe.connect(sockaddr)
        return probe.getsockname()[0]


def notice(url, address, ready_at, preloaded, pid):
    """The JSON body of the readiness POST."""
    return {'v': protocol.VERSION, 'key': key_of(url), 'address': address,
            'ready_at': ready_at, 'preloaded': list(preloaded), 'pid': pid}


def push(url, body, attempts=8, timeout=2.0, first_backoff=0.1):
    """POST ``body`` as JSON to ``url``; retry with doubling backoff.

    Returns True once the listener answered with a 2xx status, False when
    every attempt failed (logged; the daemon serves anyway).
    """
    data = json.dumps(body).encode()
    # The listener is on the cloud's network: never go through a proxy.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    backoff = first_backoff
    for attempt in range(1, attempts + 1):
        req = urllib.request.Request(
            url, data=data, method='POST',
            headers={'Content-Type': 'application/json'})
        try:
            with opener.open(req, timeout=timeout) as resp:
                resp.read()
            LOG.info('Readiness pushed to %s (attempt %d)', url, attempt)
            return True
        except OSError as exc:
            LOG.warning('Readiness push to %s failed (attempt %d/%d): %s',
                        url, attempt, attempts, exc)
        if attempt < attempts:
            time.sleep(backoff)
            backoff *= 2
    return False
