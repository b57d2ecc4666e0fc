"""The wheel of scripts/build-wheel.sh, installed into a clean venv, runs a broker that a client
produces to and consumes from. Slow (~30 s with a warm cargo build directory: the wheel, a venv
and pip installing krust's dependencies into it) because that is what a team does with the wheel;
it is one test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from .broker_process import BrokerProcess
from .clients import CLIENTS_BY_NAME, consume_all, produce_samples
from .records import assert_read_back

REPO = Path(__file__).parents[2]
BUILD_TIMEOUT_S = 1200


def build_wheel(out: Path) -> Path:
    """The wheel, built with the suite's cargo profile (scripts/test's KRUST_TEST_CARGO_PROFILE)
    so that it reuses the extension's build; the release profile otherwise."""
    env = dict(os.environ)
    if "KRUST_TEST_CARGO_PROFILE" in env:
        env["KRUST_WHEEL_PROFILE"] = env["KRUST_TEST_CARGO_PROFILE"]
    # In a session of its own, so that a timeout stops cargo and rustc too, not only the script.
    build = subprocess.Popen(
        ["bash", str(REPO / "scripts" / "build-wheel.sh"), "--out", str(out)],
        env=env,
        start_new_session=True,
    )
    try:
        assert build.wait(timeout=BUILD_TIMEOUT_S) == 0, "scripts/build-wheel.sh failed"
    finally:
        if build.poll() is None:
            os.killpg(build.pid, signal.SIGKILL)
            build.wait()
    (wheel,) = out.glob("krust_broker-*.whl")
    return wheel


def clean_venv(path: Path) -> Path:
    """A venv that sees nothing of this checkout or of the test's site-packages."""
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=120)
    return path / "bin"


# Run outside scripts/test (no KRUST_TEST_CARGO_PROFILE), the wheel is a release build from
# scratch: minutes, not seconds.
@pytest.mark.timeout(BUILD_TIMEOUT_S + 300)
def test_the_wheel_installs_into_a_clean_venv_and_serves_clients(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path / "dist")
    assert "-cp311-abi3-manylinux" in wheel.name, wheel.name
    with zipfile.ZipFile(wheel) as contents:
        names = contents.namelist()
    assert "krust/_core.abi3.so" in names
    assert any(name.endswith("pyspark_krust/__init__.py") for name in names), names

    bin_dir = clean_venv(tmp_path / "venv")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": ""}
    subprocess.run(
        [str(bin_dir / "pip"), "install", "--quiet", "--disable-pip-version-check", str(wheel)],
        env={**env, "PIP_CACHE_DIR": str(Path.home() / ".cache" / "pip")},
        check=True,
        timeout=600,
    )
    where = subprocess.run(
        [str(bin_dir / "python"), "-c", "import krust; print(krust.__file__, krust.__version__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert where.startswith(str(tmp_path / "venv")), where

    broker = BrokerProcess(tmp_path, env=env, executable=str(bin_dir / "krust-broker")).start()
    try:
        assert "listening on PLAINTEXT://127.0.0.1:" in broker.stdout_text()
        confluent = CLIENTS_BY_NAME["confluent-kafka"]
        produced = produce_samples(
            confluent, broker.bootstrap, "from-the-wheel", count=3, codec="zstd"
        )
        assert_read_back(produced, consume_all(confluent, broker.bootstrap, "from-the-wheel", 3))
    finally:
        broker.stop()
