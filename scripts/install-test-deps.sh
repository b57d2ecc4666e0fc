#!/usr/bin/env bash
# Installs everything the test suite needs, idempotently, with no questions asked:
# Debian packages (kcat, a JDK, Maven), krust itself (editable, so python/ edits need no reinstall),
# the Python Kafka clients with every compression codec, and the Java client's jars + test program.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
java_dir="$repo/tests/java"

step() { printf '==> %s\n' "$*"; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

missing_debian_packages=()
command -v kcat >/dev/null || missing_debian_packages+=(kcat)
command -v javac >/dev/null || missing_debian_packages+=(default-jdk-headless)
command -v mvn >/dev/null || missing_debian_packages+=(maven)
if [ "${#missing_debian_packages[@]}" -gt 0 ]; then
    step "apt-get install ${missing_debian_packages[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing_debian_packages[@]}" >/dev/null
else
    step "kcat, javac and mvn already installed"
fi

pip_install() {
    "$python" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore "$@"
}

# The [spark] extra: pyspark, pyarrow and pandas for the Spark data source's tests (tests/spark),
# which run a local Spark on the JDK installed above.
# KRUST_TEST_CARGO_PROFILE (scripts/test sets it to ci): the cargo profile of that build, for the
# suite's `cargo test` and clippy to reuse; unset, the release profile.
if [ -n "${KRUST_TEST_CARGO_PROFILE:-}" ]; then
    export MATURIN_PEP517_ARGS="--profile $KRUST_TEST_CARGO_PROFILE"
fi
# Until the distribution was renamed krust-broker it was called krust: an old editable install of
# this project under that name would own the same `krust-broker` script and pytest plugin.
# PyPI's unrelated `krust` package is left alone.
if "$python" -m pip show krust 2>/dev/null | grep -q '^Summary: A broker that speaks the Apache Kafka'; then
    step "pip uninstall krust (this project's former distribution name)"
    "$python" -m pip uninstall --quiet --yes --root-user-action=ignore krust
fi
step "pip install -e '.[spark]' (builds the krust._core extension with maturin)"
pip_install -e "$repo[spark]"

# An editable install leaves krust's modules uncompiled, and where PYTHONDONTWRITEBYTECODE is
# set (it is on the machines this project is built on) every broker a test starts would compile
# all of them again (about 0.2 s a start). Python ignores a .pyc whose source has changed since.
step "compile python/krust to bytecode"
"$python" -m compileall -q "$repo/python/krust" >/dev/null

# kafka-python imports python-snappy, lz4 and zstandard for its codecs (crc32c speeds up CRC
# checks); aiokafka imports cramjam for snappy, lz4 and zstd. gzip is in the standard library.
# cryptography makes the TLS tests' certificates (tests/integration/tls_certs.py).
step "pip install test tools (pytest, pytest-xdist, ruff, mypy 1.x) and Kafka clients (+ codecs)"
pip_install \
    "pytest>=8" "pytest-timeout>=2.3" "pytest-xdist>=3.6" "ruff>=0.6" "mypy>=1.13,<2" "hypothesis>=6" \
    "confluent-kafka>=2.6" "cryptography>=42" \
    "kafka-python[crc32c,lz4,snappy,zstd]>=3" \
    "aiokafka[lz4,snappy,zstd]>=0.12"

# Debian's Maven prints stray colour codes even with -q: show its output only when it fails.
# A copy of the pom beside the jars marks them as its dependencies: an unchanged pom is skipped.
copy_maven_dependencies() {
    local pom="$1" into="$2" maven_output
    if [ -f "$into/.pom.xml" ] && cmp -s "$pom" "$into/.pom.xml"; then
        return
    fi
    if ! maven_output="$(mvn -B -q -f "$pom" dependency:copy-dependencies 2>&1)"; then
        printf '%s\n' "$maven_output" >&2
        exit 1
    fi
    cp "$pom" "$into/.pom.xml"
}

step "mvn dependency:copy-dependencies (kafka-clients jars into tests/java/build/libs)"
copy_maven_dependencies "$java_dir/pom.xml" "$java_dir/build/libs"

step "mvn dependency:copy-dependencies (Kafka's tools into tests/java/build/tools-libs)"
copy_maven_dependencies "$java_dir/tools/pom.xml" "$java_dir/build/tools-libs"

step "mvn dependency:copy-dependencies (Spark's Kafka connector into tests/java/build/spark-kafka-libs)"
copy_maven_dependencies "$java_dir/spark-kafka/pom.xml" "$java_dir/build/spark-kafka-libs"

# javac when the class is missing or older than its source or the jars.
compile_java() {
    local source="$1" into="$2" class_path="$3" class
    class="$into/$(basename "$source" .java).class"
    if [ -f "$class" ] && [ "$class" -nt "$source" ] && [ "$class" -nt "$java_dir/build/libs/.pom.xml" ]; then
        return
    fi
    javac -nowarn -d "$into" ${class_path:+-cp "$class_path"} "$source"
}

step "javac tests/java/src/KrustJavaClient.java into tests/java/build/classes"
compile_java "$java_dir/src/KrustJavaClient.java" "$java_dir/build/classes" "$java_dir/build/libs/*"

# Runs the tools' and the Java client's main methods in one JVM per pytest worker
# (tests/integration/java_server.py).
step "javac tests/java/src/MainServer.java into tests/java/build/server-classes"
compile_java "$java_dir/src/MainServer.java" "$java_dir/build/server-classes" ""

step "test dependencies ready"
