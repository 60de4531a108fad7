"""setuptools' build of the memarea package (pyproject.toml has the metadata): the Python files,
plus the compiled extension memarea/_native.abi3.so where the CMake build made one.

The extension is CMake's (python/CMakeLists.txt builds it with the library, into
<build>/python/memarea/): pip packs that file rather than compiling it again, so the package
and the library come from one build. The build directory is $MEMAREA_BUILD_DIR, else this
checkout's build/default. Without one the package is the Python files alone, which run on
ctypes (docs/python.md). With it the wheel is tagged cp311-abi3 for this platform: the
extension is built against CPython's 3.11 limited API and loads on 3.11 and later.
"""

import os

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
NATIVE_NAME = "_native.abi3.so"


def _native_extension():
    build = os.environ.get("MEMAREA_BUILD_DIR")
    path = os.path.join(build or os.path.join(HERE, "..", "build", "default"), "python",
                        "memarea", NATIVE_NAME)
    if os.path.isfile(path):
        return os.path.realpath(path)
    if build:  # asked for by name: its absence is an error, not a reason to pack less
        raise SystemExit(f"memarea: MEMAREA_BUILD_DIR={build} has no python/memarea/"
                         f"{NATIVE_NAME}: build it (cmake --build {build}) or unset the variable")
    return None


NATIVE = _native_extension()


class BuildPy(build_py):
    """build_py that adds the CMake-built extension to the package."""

    def run(self):
        super().run()
        if NATIVE and not getattr(self, "editable_mode", False):
            # An editable install runs the checkout's package, which finds the extension in
            # the build tree beside the library (memarea/_ext.py).
            self.copy_file(NATIVE, os.path.join(self.build_lib, "memarea", NATIVE_NAME))


class MaybeBinaryDistribution(Distribution):
    """A platform wheel when it carries the extension, a pure one otherwise."""

    def has_ext_modules(self):
        return NATIVE is not None


setup(cmdclass={"build_py": BuildPy}, distclass=MaybeBinaryDistribution,
      options={"bdist_wheel": {"py_limited_api": "cp311"}} if NATIVE else {})
