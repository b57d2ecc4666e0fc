#!/usr/bin/env bash
# Checks that vendor/kafka-protocol differs from the published crate only where krust marked
# it: cargo fetches kafka-protocol =0.18.0 from crates.io into a throwaway project (no patch),
# then every hunk of the diff must add at least one line and every added line must carry a
# `krust:` comment. Files may be missing from the vendored copy only if not vendored on
# purpose (tests, lock file, toolchain pin); no file may exist only in the vendored copy
# except vendor/README.md's subject, the copy itself.
set -euo pipefail

version="0.18.0"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
vendored="$repo/vendor/kafka-protocol"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

mkdir -p "$scratch/src"
touch "$scratch/src/lib.rs"
cat >"$scratch/Cargo.toml" <<EOF
[package]
name = "krust-vendor-check"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
kafka-protocol = "=$version"

[workspace]
EOF
cargo fetch --quiet --manifest-path "$scratch/Cargo.toml"
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
published="$(find "$cargo_home/registry/src" -maxdepth 2 -type d -name "kafka-protocol-$version" | head -n 1)"
if [ -z "$published" ]; then
    echo "check-vendor: cargo fetched no kafka-protocol-$version" >&2
    exit 1
fi

status=0
# Left out of the vendored copy on purpose; .cargo_vcs_info.json and Cargo.toml.orig are
# registry packaging files.
not_vendored='^(tests/.*|Cargo\.lock|rust-toolchain\.toml|\.cargo_vcs_info\.json|Cargo\.toml\.orig)$'
while read -r file; do
    if ! [[ "$file" =~ $not_vendored ]]; then
        echo "check-vendor: $file is in the published crate but not vendored" >&2
        status=1
    fi
done < <(comm -23 <(cd "$published" && find . -type f | sed 's|^\./||' | sort) \
    <(cd "$vendored" && find . -type f | sed 's|^\./||' | sort))
while read -r file; do
    echo "check-vendor: $file exists only in the vendored copy" >&2
    status=1
done < <(comm -13 <(cd "$published" && find . -type f | sed 's|^\./||' | sort) \
    <(cd "$vendored" && find . -type f | sed 's|^\./||' | sort))

# Every hunk adds a marked line (so a deletion is explained too); every added line is marked.
diff -ru --exclude=tests --exclude=Cargo.lock --exclude=rust-toolchain.toml \
    --exclude=.cargo_vcs_info.json --exclude=Cargo.toml.orig "$published" "$vendored" \
    >"$scratch/vendor.diff" || true
awk '
    /^\+\+\+ / { file = $2; next }
    /^--- / { next }
    /^@@/ { if (hunk != "" && !added) { print "check-vendor: " hunk " removes lines without a krust: line"; bad = 1 }
            hunk = file " " $2 " " $3; added = 0; next }
    /^\+/ { added = 1
            if ($0 !~ /krust:/) { print "check-vendor: unmarked line in " file ": " substr($0, 2); bad = 1 } }
    END { if (hunk != "" && !added) { print "check-vendor: " hunk " removes lines without a krust: line"; bad = 1 }
          exit bad }
' "$scratch/vendor.diff" >&2 || status=1

changed="$(grep -c '^+[^+]' "$scratch/vendor.diff" || true)"
if [ "$status" -eq 0 ]; then
    echo "check-vendor: vendor/kafka-protocol = kafka-protocol $version + $changed marked lines"
fi
exit "$status"
