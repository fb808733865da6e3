"""Start Debian's real Prometheus (``/usr/bin/prometheus``) on a loopback port.

Used by ``scaler demo`` and by the tests. Scrape targets live in a file_sd file, so
they can change while Prometheus runs. History can be loaded before start with
``promtool tsdb create-blocks-from openmetrics`` (``import_openmetrics``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from scaler.errors import UnreachableError

# promtool turns a week of a fleet's series (about 420,000 lines) into blocks in 15-20 s alone on
# 2 cores, several times that when other test workers share them: the bound is for a stuck
# promtool, not a slow one.
PROMTOOL_TIMEOUT_S = 600


class PrometheusNotInstalledError(UnreachableError):
    """The Prometheus or promtool binary is not installed; the message says where it looked."""

    pass


def find_binary(name: str = "prometheus") -> str:
    """The Prometheus (or promtool) binary: $SCALER_PROMETHEUS_BIN's folder, PATH, then /usr/bin."""
    override = os.environ.get("SCALER_PROMETHEUS_BIN")
    candidates = []
    if override:
        candidates.append(str(Path(override).with_name(name)) if name != "prometheus" else override)
    found = shutil.which(name)
    if found:
        candidates.append(found)
    candidates.append(f"/usr/bin/{name}")
    for path in candidates:
        if Path(path).is_file() and os.access(path, os.X_OK):
            return path
    raise PrometheusNotInstalledError(
        f"{name} not found (looked at {', '.join(candidates)});"
        " install Debian's package: apt-get install prometheus"
    )


def free_port() -> int:
    """A loopback TCP port that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalPrometheus:
    """A Prometheus server in a temporary folder, scraping the given targets."""

    def __init__(
        self,
        scrape_interval_s: float = 1.0,
        workdir: str | Path | None = None,
        port: int | None = None,
        extra_args: Sequence[str] = (),
        retention: str = "30d",
    ) -> None:
        self.binary = find_binary("prometheus")
        # How long Prometheus keeps samples; history imported at fixed past dates needs more.
        self.retention = retention
        self.scrape_interval_s = scrape_interval_s
        self._tmp = None if workdir else tempfile.TemporaryDirectory(prefix="scaler-prom-")
        self.workdir = Path(workdir) if workdir else Path(self._tmp.name)  # type: ignore[union-attr]
        self.data_dir = self.workdir / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.extra_args = list(extra_args)
        self.process: subprocess.Popen[bytes] | None = None
        self._log = self.workdir / "prometheus.log"

    @property
    def url(self) -> str:
        """The server's base URL on loopback."""
        return f"http://127.0.0.1:{self.port}"

    def set_targets(self, targets: Sequence[str], job: str = "scrape") -> None:
        """Replace the scrape targets (host:port); Prometheus picks the change up within seconds."""
        groups = [{"targets": list(targets), "labels": {"job": job}}] if targets else []
        path = self.workdir / "targets.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(groups))
        tmp.replace(path)

    def _config(self) -> dict[str, Any]:
        interval = f"{max(round(self.scrape_interval_s * 1000), 100)}ms"  # Prometheus durations are integers
        return {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "scrape_configs": [
                {
                    "job_name": "scrape",
                    "honor_labels": True,
                    "scrape_interval": interval,
                    "scrape_timeout": interval,
                    "file_sd_configs": [
                        {"files": [str(self.workdir / "targets.json")], "refresh_interval": "1s"}
                    ],
                },
                {
                    "job_name": "prometheus",
                    "scrape_interval": interval,
                    "static_configs": [{"targets": [f"127.0.0.1:{self.port}"]}],
                },
            ],
        }

    def import_openmetrics(self, text: str) -> None:
        """Load history before start: ``promtool tsdb create-blocks-from openmetrics``."""
        if self.process is not None:
            raise RuntimeError("import history before start()")
        source = self.workdir / "history.om"
        source.write_text(text if text.endswith("# EOF\n") else text + "# EOF\n")
        subprocess.run(
            [
                find_binary("promtool"),
                "tsdb",
                "create-blocks-from",
                "openmetrics",
                str(source),
                str(self.data_dir),
            ],
            check=True,
            capture_output=True,
            timeout=PROMTOOL_TIMEOUT_S,
        )

    def start(self, targets: Sequence[str] = (), timeout_s: float = 30.0) -> LocalPrometheus:
        """Write the config and start Prometheus, waiting until it is ready; returns self."""
        if not (self.workdir / "targets.json").exists() or targets:
            self.set_targets(targets)
        config = self.workdir / "prometheus.yml"
        config.write_text(yaml.safe_dump(self._config()))
        args = [
            self.binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={self.data_dir}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--web.enable-lifecycle",
            f"--storage.tsdb.retention.time={self.retention}",
            "--log.level=warn",
            *self.extra_args,
        ]
        with open(self._log, "ab") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        self.wait_ready(timeout_s)
        return self

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        """Wait for ``/-/ready``; RuntimeError if Prometheus exits, TimeoutError after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.process.returncode}: {self.log_tail()}")
            with (
                contextlib.suppress(OSError, urllib.error.URLError),
                urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as reply,  # noqa: S310 - loopback
            ):
                if reply.status == 200:
                    return
            time.sleep(0.1)
        raise TimeoutError(f"prometheus not ready after {timeout_s}s: {self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines of Prometheus' log, or empty when unreadable."""
        try:
            return "\n".join(self._log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def query(self, promql: str) -> list[dict[str, Any]]:
        """Instant query through the HTTP API (for tests and the demo)."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=10) as reply:  # noqa: S310 - loopback
            body = json.loads(reply.read())
        if body.get("status") != "success":
            raise RuntimeError(f"query failed: {body}")
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def wait_for(self, promql: str, timeout_s: float = 30.0) -> list[dict[str, Any]]:
        """Wait until an instant query returns at least one series."""
        deadline = time.monotonic() + timeout_s
        while True:
            result = self.query(promql)
            if result or time.monotonic() > deadline:
                return result
            time.sleep(0.2)

    def stop(self) -> None:
        """Terminate Prometheus (killing it after 10 s) and forget the process."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.process = None

    def close(self) -> None:
        """Stop Prometheus and remove its temporary folder, if it made one."""
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> LocalPrometheus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
