"""The Cinder mirror-volume cache: golden volumes cloned for every new
volume created from an image (see ``doc/source/admin/cinder.rst``)."""
