"""GPU tier of the Python tests (a package, so that its conftest does not shadow tests/python/conftest.py)."""
