# Sphinx configuration of the mlaccel release notes.

extensions = ['openstackdocstheme', 'reno.sphinxext']
openstackdocs_repo_name = 'openstack/mlaccel'
openstackdocs_auto_name = False
project = 'mlaccel Release Notes'
copyright = 'mlaccel developers'
master_doc = 'index'
html_theme = 'openstackdocs'
