#!/usr/bin/env bash
# Installs what the build and the tests need, only where it is missing (Debian packages and PyPI).
set -euo pipefail
need_apt=()
command -v cmake >/dev/null || need_apt+=(cmake)
command -v g++ >/dev/null || need_apt+=(g++)
command -v make >/dev/null || need_apt+=(make)
[ -f /usr/include/gtest/gtest.h ] || need_apt+=(libgtest-dev)
command -v python3 >/dev/null || need_apt+=(python3 python3-pip)
# Python.h: the extension flexattn._C is built by `make test` (bindings/).
if command -v python3 >/dev/null && ! python3 -c "import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))"; then
  need_apt+=(python3-dev)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]} (apt)"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
# numpy: the tests check that the .npy files flexattn writes load in numpy; pytest: tests/python.
if ! python3 -c "import numpy, pytest" 2>/dev/null; then
  echo "setup: installing numpy pytest (pip)"
  python3 -m pip install -q numpy pytest 2>/dev/null || python3 -m pip install -q --break-system-packages numpy pytest
fi
# nanobind: the Python extension flexattn._C (bindings/, FLEXATTN_BUILD_PYTHON=ON) is built with it.
if ! python3 -c "import nanobind" 2>/dev/null; then
  echo "setup: installing nanobind (pip)"
  python3 -m pip install -q nanobind 2>/dev/null || python3 -m pip install -q --break-system-packages nanobind
fi
