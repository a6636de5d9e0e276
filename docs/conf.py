"""Sphinx configuration for the modlin documentation.

Build with::

    python -m sphinx -W --keep-going -b html docs docs/_build/html
"""

import modlin

project = "modlin"
author = "the modlin developers"
copyright = "the modlin developers"
release = modlin.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "numpydoc",
]

root_doc = "index"
exclude_patterns = ["_build"]

# autodoc: show the public aliases of modlin.typing in signatures instead of
# their (long) expansions; numpydoc's Parameters sections carry the types.
autodoc_type_aliases = {
    "ArrayLike": "modlin.typing.ArrayLike",
    "IntegerArray": "modlin.typing.IntegerArray",
}
autodoc_member_order = "bysource"

# numpydoc: members of Plan are listed explicitly in reference.rst, so no
# autosummary tables of class members are generated.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True

html_theme = "alabaster"
html_theme_options = {
    "description": "Exact A @ B mod p on floating-point GEMMs",
    "fixed_sidebar": True,
}
html_title = f"modlin {release}"
