"""ctest's entry to the Python suite (python/CMakeLists.txt): runs pytest on this directory, or
exits 77 -- which ctest reports as skipped -- when NumPy or pytest is not installed for this
interpreter."""

import os
import sys

try:
    import numpy  # noqa: F401
    import pytest
except ImportError as e:
    if __name__ == "__main__":
        print(f"Python tests skipped: {e} (apt-get install python3-numpy python3-pytest)")
        sys.exit(77)
    raise

if __name__ == "__main__":  # not again in the spawn children of the IPC tests (__mp_main__)
    here = os.path.dirname(os.path.abspath(__file__))
    # No .pytest_cache in the source tree; -rs says why each skipped test skipped.
    sys.exit(pytest.main([here, "-q", "-rs", "-p", "no:cacheprovider"] + sys.argv[1:]))
