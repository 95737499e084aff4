# Sphinx configuration of the mlaccel documentation.

extensions = [
    'openstackdocstheme',
    'oslo_config.sphinxext',
    'oslo_config.sphinxconfiggen',
]

config_generator_config_file = [
    ('../../etc/oslo-config-generator/mlaccel.conf', '_static/mlaccel'),
]

openstackdocs_repo_name = 'openstack/mlaccel'
openstackdocs_use_storyboard = False
openstackdocs_auto_name = False
project = 'mlaccel'
copyright = 'mlaccel developers'
master_doc = 'index'
exclude_patterns = ['_build']
pygments_style = 'native'
html_theme = 'openstackdocs'
html_static_path = ['_static']
