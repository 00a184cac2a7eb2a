"""Real ``redis-server`` processes for the tests: private ones a test may stop, wipe and restart
(:class:`RedisProcess`), and the suite's shared server (:func:`shared_server_url`): the one named by
``SIMHASH_TEST_REDIS_URL``, else one the suite starts itself on a free loopback port, with an
append-only file in a temporary directory, stopped when the tests end."""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

REDIS_ENV = "SIMHASH_TEST_REDIS_URL"
MISSING = (f"redis-server is not installed and {REDIS_ENV} is not set: apt-get install redis-server (the suite "
           f"then starts its own), or start one with persistence on and set {REDIS_ENV}=redis://127.0.0.1:PORT/0")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisProcess:
    """A private redis-server on 127.0.0.1 (AOF in its own directory, synced every second) that a test may stop,
    wipe and restart."""

    def __init__(self, directory: Path, *args: str, password: str | None = None,
                 tls: tuple[Path, Path] | None = None) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            reason = MISSING
            if os.environ.get("CI"):
                pytest.fail(f"CI is set, so the Redis tests must run: {reason}", pytrace=False)
            pytest.skip(reason)
        self.port = free_port()
        self.password = password
        self.tls = tls
        ports = ["--port", str(self.port)]
        if tls:  # TLS only: plain connections are refused
            ports = ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", str(tls[0]),
                     "--tls-key-file", str(tls[1]), "--tls-auth-clients", "no"]
        self.directory = directory
        self.argv = [binary, *ports, "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
                     "--appendfsync", "everysec", "--dir", str(directory), *args]
        if password:
            self.argv += ["--requirepass", password]
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"{'rediss' if self.tls else 'redis'}://{auth}127.0.0.1:{self.port}/0"

    @property
    def client_params(self) -> dict[str, Any]:
        return {"ssl_ca_certs": str(self.tls[0])} if self.tls else {}

    def start(self) -> None:
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                import redis

                client = redis.Redis.from_url(self.url, **self.client_params)
                client.ping()
                client.close()
                return
            except Exception:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise
                time.sleep(0.02)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None



def shared_server_url() -> str:
    """The shared test server's URL: ``SIMHASH_TEST_REDIS_URL`` when set, else a server of the suite's
    own (its URL then set in the environment, so that child processes use it too)."""
    url = os.environ.get(REDIS_ENV)
    if url:
        return url
    directory = Path(tempfile.mkdtemp(prefix="simhash-test-redis-"))
    server = RedisProcess(directory)

    def stop() -> None:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)

    atexit.register(stop)
    os.environ[REDIS_ENV] = server.url
    return server.url
