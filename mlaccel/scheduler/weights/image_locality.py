"""Prefer hosts whose image cache already holds the requested image."""

from mlaccel.scheduler.weights import base


class ImageLocalityWeigher(base.RequestWeigher):
    """Weight 1 for a host that holds the image, 0 for one that does not.

    A host's report says what its image cache holds. A host without a fresh
    report counts as holding the image when an instance of it runs there,
    judged only from instances Nova already loaded in full: a stub would
    lazy-load ``image_ref`` with one database query per instance.
    """

    MULTIPLIER_OPT = 'image_locality_weight_multiplier'

    def __init__(self):
        super().__init__()
        # host -> (instances dict id, its size, frozenset of image refs):
        # the walk over a host's instances is redone only when they change.
        self._images_by_host = {}

    def weigh_hosts(self, hosts, view):
        image_id = view.start.image_id
        if image_id is None or not view.policy.image_locality:
            return [0.0] * len(hosts)
        get = view.reports.get
        weights = []
        for host_state in hosts:
            report = get(host_state.host)
            if report is not None:
                images = report.cached_images
            else:
                images = self._running_images(host_state)
            weights.append(1.0 if image_id in images else 0.0)
        return weights

    def _running_images(self, host_state):
        instances = host_state.instances
        key = (id(instances), len(instances))
        cached = self._images_by_host.get(host_state.host)
        if cached is not None and cached[0] == key:
            return cached[1]
        images = frozenset(
            inst.image_ref for inst in list(instances.values())
            if inst.obj_attr_is_set('image_ref') and inst.image_ref)
        self._images_by_host[host_state.host] = (key, images)
        return images
