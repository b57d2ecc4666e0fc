#!/usr/bin/env bash
# Builds krust's wheel once, to install anywhere without Rust: one abi3 wheel (any CPython
# >= 3.11) tagged manylinux for the oldest glibc its symbols allow, in dist/ (or the directory
# given as --out). Needs Rust >= 1.88 (rustup) and a Python >= 3.11 with pip; maturin is
# installed into that Python if it is missing.
#
#   bash scripts/build-wheel.sh                 # release build into dist/
#   bash scripts/build-wheel.sh --out /tmp/w    # elsewhere
#   KRUST_WHEEL_PROFILE=ci bash scripts/build-wheel.sh   # another cargo profile (the tests')
#
# Then: pip install dist/krust_broker-*.whl  (or '...whl[spark]' for the Spark data source)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
out="$repo/dist"
if [ "${1:-}" = "--out" ] && [ -n "${2:-}" ]; then
    out="$2"
    shift 2
fi
if [ "$#" -gt 0 ]; then
    echo "usage: bash scripts/build-wheel.sh [--out DIR]" >&2
    exit 2
fi

# The same bounds as pyproject.toml's build-system.
if ! "$python" -m maturin --version >/dev/null 2>&1; then
    "$python" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
        "maturin>=1.9.4,<2"
fi

profile=(--release)
if [ -n "${KRUST_WHEEL_PROFILE:-}" ]; then
    profile=(--profile "$KRUST_WHEEL_PROFILE")
fi
started=$SECONDS
# pyproject.toml's [tool.maturin] says what goes in: python/krust, the extension, and the Spark
# data source as the wheel's purelib data.
cd "$repo"
"$python" -m maturin build "${profile[@]}" --out "$out" --quiet
wheel="$(ls -t "$out"/krust_broker-*.whl | head -n 1)"
echo "built $wheel in $((SECONDS - started)) s"
