"""mlaccel: start distributed multimodal learning tasks sooner on OpenStack."""

import pbr.version

version_info = pbr.version.VersionInfo('mlaccel')
__version__ = version_info.version_string()
