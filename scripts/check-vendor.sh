#!/usr/bin/env bash
# Checks that each crate under vendor/ differs from its published version only where krust
# marked it: cargo fetches the published crates from crates.io into a throwaway project (no
# patch), then every hunk of the diff must add at least one line and every added line must
# carry a `krust:` comment. Files may be missing from a vendored copy only if not vendored on
# purpose (tests, lock file, toolchain pin); no file may exist only in the vendored copy.
# vendor/README.md says what each copy changes and why.
set -euo pipefail

# name version, one per vendored crate.
crates=(
    "kafka-protocol 0.18.0"
    "base2histogram 0.2.3"
)
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

mkdir -p "$scratch/src"
touch "$scratch/src/lib.rs"
{
    printf '[package]\nname = "krust-vendor-check"\nversion = "0.0.0"\nedition = "2021"\n'
    printf 'publish = false\n\n[dependencies]\n'
    for crate in "${crates[@]}"; do
        read -r name version <<<"$crate"
        printf '%s = "=%s"\n' "$name" "$version"
    done
    printf '\n[workspace]\n'
} >"$scratch/Cargo.toml"
cargo fetch --quiet --manifest-path "$scratch/Cargo.toml"
cargo_home="${CARGO_HOME:-$HOME/.cargo}"

# Left out of a vendored copy on purpose; .cargo_vcs_info.json and Cargo.toml.orig are
# registry packaging files.
not_vendored='^(tests/.*|Cargo\.lock|rust-toolchain(\.toml)?|\.cargo_vcs_info\.json|Cargo\.toml\.orig)$'

check_crate() {
    local name="$1" version="$2" vendored="$repo/vendor/$1" published status=0
    published="$(find "$cargo_home/registry/src" -maxdepth 2 -type d -name "$name-$version" | head -n 1)"
    if [ -z "$published" ]; then
        echo "check-vendor: cargo fetched no $name-$version" >&2
        return 1
    fi
    while read -r file; do
        if ! [[ "$file" =~ $not_vendored ]]; then
            echo "check-vendor: $name: $file is in the published crate but not vendored" >&2
            status=1
        fi
    done < <(comm -23 <(cd "$published" && find . -type f | sed 's|^\./||' | sort) \
        <(cd "$vendored" && find . -type f | sed 's|^\./||' | sort))
    while read -r file; do
        echo "check-vendor: $name: $file exists only in the vendored copy" >&2
        status=1
    done < <(comm -13 <(cd "$published" && find . -type f | sed 's|^\./||' | sort) \
        <(cd "$vendored" && find . -type f | sed 's|^\./||' | sort))

    # Every hunk adds a marked line (so a deletion is explained too); every added line is marked.
    diff -ru --exclude=tests --exclude=Cargo.lock --exclude=rust-toolchain.toml \
        --exclude=rust-toolchain --exclude=.cargo_vcs_info.json --exclude=Cargo.toml.orig \
        "$published" "$vendored" >"$scratch/$name.diff" || true
    awk -v crate="$name" '
        /^\+\+\+ / { file = $2; next }
        /^--- / { next }
        /^@@/ { if (hunk != "" && !added) { print "check-vendor: " hunk " removes lines without a krust: line"; bad = 1 }
                hunk = file " " $2 " " $3; added = 0; next }
        /^\+/ { added = 1
                if ($0 !~ /krust:/) { print "check-vendor: unmarked line in " file ": " substr($0, 2); bad = 1 } }
        END { if (hunk != "" && !added) { print "check-vendor: " hunk " removes lines without a krust: line"; bad = 1 }
              exit bad }
    ' "$scratch/$name.diff" >&2 || status=1

    local changed
    changed="$(grep -c '^+[^+]' "$scratch/$name.diff" || true)"
    if [ "$status" -eq 0 ]; then
        echo "check-vendor: vendor/$name = $name $version + $changed marked lines"
    fi
    return "$status"
}

status=0
for crate in "${crates[@]}"; do
    read -r name version <<<"$crate"
    check_crate "$name" "$version" || status=1
done
if [ "$(find "$repo/vendor" -mindepth 1 -maxdepth 1 -type d | wc -l)" -ne "${#crates[@]}" ]; then
    echo "check-vendor: vendor/ holds a crate this script does not check" >&2
    status=1
fi
exit "$status"
