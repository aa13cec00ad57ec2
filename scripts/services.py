"""Real services on loopback for the fleet run and the tests: a mosquitto broker, a
throwaway PostgreSQL cluster and nginx, each with its own folder, each stopped by `stop()`.

PostgreSQL refuses to run as root; when this process is root (CI, a container) the
cluster's folder is given to the `postgres` user that Debian's package creates and the
server runs as that user (`runuser`). Authentication is `trust` on 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
PG_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
START_TIMEOUT_S = 20.0
PG_USER = "voice"


@contextlib.contextmanager
def sqlite_write_lock(path: Path) -> Iterator[None]:
    """Hold `path`'s SQLite write lock from a connection of its own, as an outside writer
    (a backup job, an operator's shell) would, until the block ends."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def pg_tool(name: str) -> str | None:
    """The path of a PostgreSQL server program (initdb, pg_ctl), or None when Debian's
    postgresql package is not installed."""
    for folder in PG_BIN_DIRS:
        if (folder / name).is_file():
            return str(folder / name)
    return shutil.which(name)


def postgres_available() -> bool:
    return pg_tool("initdb") is not None and pg_tool("pg_ctl") is not None


def nginx_available() -> bool:
    return shutil.which("nginx") is not None or Path("/usr/sbin/nginx").is_file()


def _wait_port(port: int, proc: subprocess.Popen[bytes] | None, what: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited at start:\n{_tail(log)}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {port} in {START_TIMEOUT_S:g} s:\n{_tail(log)}")


def _checked(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed: {done.stderr or done.stdout}")


def _tail(log: Path) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-20:])
    except OSError:
        return "(no log)"


class PostgresServer:
    """A PostgreSQL cluster made for this run: `start()`, `database(name)` → URL,
    `stop()` (fast shutdown) and the folder removed by `cleanup()`."""

    def __init__(self, port: int | None = None) -> None:
        initdb, pg_ctl = pg_tool("initdb"), pg_tool("pg_ctl")
        if initdb is None or pg_ctl is None:
            raise RuntimeError("PostgreSQL is not installed (Debian: apt-get install postgresql)")
        self._initdb, self._pg_ctl = initdb, pg_ctl
        self.port = port or free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="voice-agent-pg-"))
        self.data = self.folder / "data"
        self.log = self.folder / "postgres.log"
        self._as: list[str] = []
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            os.chown(self.folder, owner.pw_uid, owner.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]
        self.url = f"postgresql://{PG_USER}@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str) -> None:
        done = subprocess.run([*self._as, *argv], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{Path(argv[0]).name} failed: {done.stderr or done.stdout}")

    def start(self) -> None:
        if not (self.data / "PG_VERSION").exists():
            self._run(self._initdb, "-D", str(self.data), "-U", PG_USER, "--auth=trust",
                      "--no-sync", "-E", "UTF8", "--locale=C")  # fmt: skip
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 "
                   f"-c unix_socket_directories={self.folder} -c fsync=off "
                   "-c max_connections=50 -c shared_buffers=32MB")  # fmt: skip
        self._run(self._pg_ctl, "-D", str(self.data), "-l", str(self.log), "-o", options,
                  "-w", "-t", str(int(START_TIMEOUT_S)), "start")  # fmt: skip
        _wait_port(self.port, None, "postgres", self.log)

    def database(self, name: str) -> str:
        """Create database `name` (dropped first if it exists); its URL."""
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url.rsplit("/", 1)[0] + f"/{name}"

    def stop(self, mode: str = "fast") -> None:
        """pg_ctl stop (`fast`: disconnect sessions, roll back; `immediate`: a crash)."""
        if (self.data / "postmaster.pid").exists():
            self._run(self._pg_ctl, "-D", str(self.data), "-m", mode, "-w", "stop")

    def cleanup(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


class Nginx:
    """nginx run in the foreground from a config file written for this run:
    `config_for(folder)` gives its text, `folder` being where its temporary files go."""

    def __init__(self, config_for: Callable[[Path], str], port: int) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="voice-agent-nginx-"))
        self.port = port
        self.config = self.folder / "nginx.conf"
        self.config.write_text(config_for(self.folder), encoding="utf-8")
        self.log = self.folder / "error.log"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        (self.folder / "logs").mkdir(exist_ok=True)
        self._proc = subprocess.Popen(
            [nginx, "-p", str(self.folder), "-c", str(self.config),
             "-e", str(self.log), "-g", "daemon off; pid nginx.pid;"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        _wait_port(self.port, self._proc, "nginx", self.log)

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


class Broker:
    """mosquitto with persistence (a persistent subscriber's queue survives a restart).
    With `users` ({name: password}) it refuses anonymous clients; with `tls` it speaks
    only TLS, its certificate (made here, for 127.0.0.1) being its own CA: `ca_file`."""

    def __init__(self, folder: Path, port: int | None = None,
                 users: dict[str, str] | None = None, tls: bool = False) -> None:  # fmt: skip
        self.folder = folder
        self.port = port or free_port()
        self.url = f"{'mqtts' if tls else 'mqtt'}://127.0.0.1:{self.port}"
        self.config = folder / "mosquitto.conf"
        lines = [f"listener {self.port} 127.0.0.1", "persistence true",
                 f"persistence_location {folder}/",
                 f"log_dest file {folder}/mosquitto.log"]  # fmt: skip
        if os.geteuid() == 0:  # stay root: its own user cannot read a root-only folder
            lines.append("user root")
        if users:
            passwords = folder / "passwords"
            passwords.touch(mode=0o600)
            for name, password in users.items():
                _checked(["mosquitto_passwd", "-b", str(passwords), name, password])
            lines += ["allow_anonymous false", f"password_file {passwords}"]
        else:
            lines.append("allow_anonymous true")
        self.ca_file: Path | None = None
        if tls:
            key, cert = folder / "broker.key", folder / "broker.pem"
            _checked(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                      "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
                      "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])  # fmt: skip
            lines += [f"certfile {cert}", f"keyfile {key}"]
            self.ca_file = cert
        self.config.write_text("\n".join(lines) + "\n")
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self._proc = subprocess.Popen(
            [MOSQUITTO, "-c", str(self.config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                err = self._proc.stderr.read().decode() if self._proc.stderr else ""
                raise RuntimeError(f"mosquitto exited at start: {err}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"mosquitto did not listen on {self.port} in {START_TIMEOUT_S} s")

    def stop(self) -> None:
        """SIGTERM (mosquitto saves its persistence file), then wait."""
        if self._proc is None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(5.0)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(5.0)
        if self._proc.stderr is not None:
            self._proc.stderr.close()
        self._proc = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None
