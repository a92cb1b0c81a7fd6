#!/usr/bin/env bash
# Makes sure the virtual environment with python/requirements-test.txt (PyTorch,
# numpy, pytest, from PyPI) exists, and prints its python. It lives in
# GRADCOMM_VENV (default ~/.cache/gradcomm/venv-torch) and is reused while the
# requirements file is unchanged. Messages go to standard error.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${GRADCOMM_VENV:-$HOME/.cache/gradcomm/venv-torch}
stamp="$venv/.requirements.sha256"
want=$(sha256sum python/requirements-test.txt | cut -d' ' -f1)

if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  command -v python3 >/dev/null || { echo "python_venv: python3 not found" >&2; exit 1; }
  if ! python3 -c "import venv, ensurepip" 2>/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 && apt-get install -y -qq python3-venv >&2
  fi
  echo "python_venv: creating $venv (PyTorch from PyPI: a few GB the first time)" >&2
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --upgrade pip >&2
  "$venv/bin/pip" install -q --progress-bar off -r python/requirements-test.txt >&2
  echo "$want" > "$stamp"
fi
echo "$venv/bin/python"
