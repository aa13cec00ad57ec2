"""The fleet's deployment files: the shipped examples in deploy/ are exactly what
`voice-agent deploy write` produces, nginx accepts the generated file, and bad flags get
a clear message."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from scripts.fleet import nginx_main
from scripts.services import nginx_available
from voice_agent.cli import EXIT_USAGE, main
from voice_agent.deploy import NGINX_FILE, SYSTEMD_FILE, Worker, nginx_config, systemd_unit

SHIPPED = Path(__file__).resolve().parents[2] / "deploy"


def test_the_shipped_examples_are_what_the_command_writes(tmp_path: Path) -> None:
    assert main(["deploy", "write", str(tmp_path)]) == 0
    for name in (NGINX_FILE, SYSTEMD_FILE):
        assert (tmp_path / name).read_text() == (SHIPPED / name).read_text(), (
            f"deploy/{name} is out of date: run `voice-agent deploy write deploy`"
        )


def test_the_files_follow_the_flags(tmp_path: Path) -> None:
    argv = ["deploy", "write", str(tmp_path), "--worker", "10.0.0.5:9001", "--worker",
            "10.0.0.6:9001", "--listen", "127.0.0.1:8443", "--drain-timeout-s", "120"]  # fmt: skip
    assert main(argv) == 0
    site = (tmp_path / NGINX_FILE).read_text()
    assert "server 10.0.0.5:9001 " in site and "server 10.0.0.6:9001 " in site
    assert "listen 127.0.0.1:8443;" in site and "proxy_next_upstream_tries 2;" in site
    unit = (tmp_path / SYSTEMD_FILE).read_text()
    assert "TimeoutStopSec=135" in unit and "DRAIN_TIMEOUT_S=120" in unit


@pytest.mark.parametrize(
    "argv",
    [["--worker", "nohost"], ["--worker", "h:70000"], ["--drain-timeout-s", "-1"]],
)
def test_bad_flags_get_a_message(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["deploy", "write", str(tmp_path), *argv]) == EXIT_USAGE
    assert "voice-agent deploy:" in capsys.readouterr().err
    assert not (tmp_path / NGINX_FILE).exists()


def test_worker_parse_and_empty_fleet() -> None:
    assert Worker.parse("[::1]:8081") == Worker("[::1]", 8081)
    with pytest.raises(ValueError):
        nginx_config([])
    assert "TimeoutStopSec=15" in systemd_unit(0)


@pytest.mark.skipif(not nginx_available(), reason="nginx is not installed (scripts/setup.sh)")
def test_nginx_accepts_the_generated_file(tmp_path: Path) -> None:
    site = nginx_config([Worker("127.0.0.1", 8081), Worker("127.0.0.1", 8082)], "127.0.0.1:18080")
    config = tmp_path / "nginx.conf"
    config.write_text(nginx_main(site, tmp_path))
    done = subprocess.run(
        ["nginx", "-t", "-p", str(tmp_path), "-c", str(config), "-e", str(tmp_path / "err.log"),
         "-g", f"pid {tmp_path}/nginx.pid;"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "syntax is ok" in done.stderr
