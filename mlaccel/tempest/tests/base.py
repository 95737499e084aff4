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

"""Shared parts of the mlaccel tempest tests."""

import base64
import io
import os
import time

import openstack
from oslo_config import cfg as oslo_cfg
from tempest.api.compute import base
from tempest import config
from tempest.lib.common.utils import data_utils

CONF = config.CONF


class MlaccelAdminTest(base.BaseV2ComputeAdminTest):
    """Admin compute tests that need mlaccel in the cloud."""

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.service_available.mlaccel:
            raise cls.skipException('mlaccel is not enabled in this cloud')

    def connect(self):
        """An openstacksdk connection of the configured admin user."""
        conn = openstack.connect(
            auth_url=CONF.identity.uri_v3,
            username=CONF.auth.admin_username,
            password=CONF.auth.admin_password,
            project_name=CONF.auth.admin_project_name,
            user_domain_name=CONF.auth.admin_domain_name,
            project_domain_name=CONF.auth.admin_domain_name,
            region_name=CONF.identity.region)
        self.addCleanup(conn.close)
        return conn

    def create_image(self, size=2 * 1024 * 1024):
        """A new image of random bytes: cached on no host yet."""
        client = self.admin_image_client
        image = client.create_image(
            name=data_utils.rand_name(prefix=CONF.resource_name_prefix,
                                      name='mlaccel-image'),
            container_format='bare', disk_format='raw',
            visibility='public')
        self.addCleanup(client.wait_for_resource_deletion, image['id'])
        self.addCleanup(client.delete_image, image['id'])
        client.store_image_file(image['id'], io.BytesIO(os.urandom(size)))
        return image['id']

    def wait_for_report(self, host, image_id):
        """Wait until nova-scheduler has read ``host``'s report of the image.

        That is: until the report on the state bus lists the image, then
        one refresh interval of the scheduler's report cache.

        Returns at once when no bus is configured.
        """
        url = CONF.mlaccel.statebus_url
        if not url:
            return
        from mlaccel.statebus import reader
        conf = mlaccel_config()
        conf.set_override('backend_url', url, 'mlaccel_statebus')
        # Only waits for the report; nova-scheduler checks its signature.
        conf.set_override('allow_unsigned_reports', True, 'mlaccel_statebus')
        cache = reader.ReportCache(conf)
        deadline = time.monotonic() + CONF.mlaccel.report_timeout
        try:
            while True:
                cache.refresh()
                report = cache.snapshot().get(host)
                if report is not None and image_id in report.cached_images:
                    time.sleep(CONF.mlaccel.scheduler_refresh_interval + 0.5)
                    return
                if time.monotonic() > deadline:
                    self.fail('the report of %s did not list image %s '
                              'within %s s' % (host, image_id,
                                               CONF.mlaccel.report_timeout))
                time.sleep(0.5)
        finally:
            cache.stop()


def mlaccel_config(files=()):
    """mlaccel's options read from ``files``, on a private ``ConfigOpts``.

    Tempest owns the global one.
    """
    from mlaccel import conf as mlaccel_conf
    conf = oslo_cfg.ConfigOpts()
    mlaccel_conf.register_opts(conf)
    conf([], project='mlaccel', default_config_files=list(files))
    return conf


def cloud_config(command):
    """Base64 user-data whose cloud-config runs ``command``."""
    text = '#cloud-config\nruncmd:\n  - %s\n' % command
    return base64.b64encode(text.encode()).decode()
