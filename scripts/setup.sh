#!/usr/bin/env bash
# Create .venv with a supported Python (3.9-3.11) and install the pinned requirements.
# Re-running is cheap: packages are reinstalled only when requirements.txt changed.
#
# Why 3.9-3.11: TensorFlow 2.15 (the last release with Keras 2 built in, which
# tensorflow-addons' SGDW and vit-keras 0.1.2 need) ships wheels for CPython 3.9-3.11 only.
# Choose an interpreter with PYTHON=/path/to/python3.x bash scripts/setup.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

VENV=.venv
STAMP="$VENV/.requirements.sha256"

supported() {  # prints "3.x" and succeeds when $1 is a Python 3.9-3.11
  "$1" -c 'import sys; v = sys.version_info[:2]; print("%d.%d" % v); sys.exit(0 if (3, 9) <= v <= (3, 11) else 1)' 2>/dev/null
}

if [ -x "$VENV/bin/python" ] && ! supported "$VENV/bin/python" >/dev/null; then
  echo "setup: $VENV uses an unsupported Python; recreating it." >&2
  rm -rf "$VENV"
fi

if [ ! -x "$VENV/bin/python" ]; then
  candidates=("${PYTHON:-}" python3.11 python3.10 python3.9 python3)
  chosen=""
  for candidate in "${candidates[@]}"; do
    [ -n "$candidate" ] || continue
    command -v "$candidate" >/dev/null 2>&1 || continue
    if supported "$candidate" >/dev/null; then chosen=$candidate; break; fi
    if [ -n "${PYTHON:-}" ] && [ "$candidate" = "$PYTHON" ]; then
      if found=$("$candidate" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null); then
        echo "setup: error: PYTHON=$PYTHON is Python $found; this project needs Python 3.9, 3.10 or 3.11" >&2
      else
        echo "setup: error: PYTHON=$PYTHON does not run; point it at a Python 3.9, 3.10 or 3.11" >&2
      fi
      echo "       (TensorFlow 2.15, tensorflow-addons and vit-keras 0.1.2 have no builds for newer Pythons)." >&2
      exit 2
    fi
  done
  if [ -z "$chosen" ]; then
    echo "setup: error: no Python 3.9, 3.10 or 3.11 found (tried: python3.11 python3.10 python3.9 python3)." >&2
    echo "       TensorFlow 2.15, which this project pins, supports only those versions." >&2
    echo "       Install one (e.g. pyenv install 3.11) or point PYTHON=/path/to/python3.11 at it." >&2
    exit 2
  fi
  echo "setup: creating $VENV with $chosen ($(supported "$chosen"))"
  "$chosen" -m venv "$VENV"
fi

wanted=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ "$(cat "$STAMP" 2>/dev/null || true)" != "$wanted" ]; then
  echo "setup: installing pinned requirements into $VENV (first time: a few minutes)"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet -r requirements.txt
  echo "$wanted" > "$STAMP"
fi
