"""Which packages the distribution holds; everything else is in pyproject.toml.

``kernels/`` lives at the top of the repository but is installed as
``dispatch_jit.kernels``: a popular unrelated distribution owns the bare name
``kernels``.  pyproject's ``packages.find`` cannot rename what it finds, so the
list is built here by discovery: every subpackage of ``dispatch_jit/`` and of
``kernels/`` (a folder with an ``__init__.py``), present or added later, goes
into the wheel without editing this file.  tests/test_packaging.py checks that
no folder of Python files is left out.
"""

from setuptools import find_packages, setup

KERNELS = "dispatch_jit.kernels"

setup(
    packages=find_packages(include=["dispatch_jit", "dispatch_jit.*"])
    + [KERNELS] + [f"{KERNELS}.{p}" for p in find_packages("kernels")],
    # a subpackage dispatch_jit.kernels.x is found in kernels/x through this mapping
    package_dir={"dispatch_jit": "dispatch_jit", KERNELS: "kernels"},
)
