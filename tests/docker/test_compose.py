"""docker/: the image and the compose file of a multi-host deployment.

The structure is checked always (YAML against the example config: one worker per host, on its
queue, concurrency = its devices); the compose file is also validated by Debian's docker-compose
1.29 (``config -q`` works offline, no engine needed) where that binary is installed, else skipped.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from zlops.config.settings import load_config

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
COMPOSE = DOCKER / "docker-compose.yaml"
SECRETS = {"ZLOPS_JWT_SECRET": "j" * 64, "ZLOPS_SECRET_KEY": "s" * 64, "ZLOPS_DB_PASSWORD": "p" * 32}
CONTROL = {"postgres", "redis", "airflow-init", "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor",
           "airflow-triggerer"}


def _compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return data


def _option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_one_worker_per_host_on_its_queue_with_a_slot_per_device() -> None:
    services = _compose()["services"]
    assert set(services) >= CONTROL
    config = load_config(DOCKER / "zlops.example.yaml")
    workers = {name: s for name, s in services.items() if s.get("command", [None])[:2] == ["celery", "worker"]}
    queues = {_option(s["command"], "--queues"): int(_option(s["command"], "--concurrency"))
              for s in workers.values()}
    assert queues.pop("default") >= 1  # the control tasks
    assert queues == config.host_queues() == {"gpu-a": 8, "npu-a": 8, "musa-a": 8}
    hostnames = [_option(s["command"], "--celery-hostname") for s in workers.values()]
    assert len(set(hostnames)) == len(hostnames)
    for name, s in workers.items():
        assert s["environment"]["DUMB_INIT_SETSID"] == "0", f"{name}: celery must get SIGTERM (warm shutdown)"


def test_device_passthrough_per_vendor() -> None:
    services = _compose()["services"]
    nvidia = services["worker-gpu-a"]["deploy"]["resources"]["reservations"]["devices"][0]
    assert nvidia["driver"] == "nvidia" and "gpu" in nvidia["capabilities"]
    ascend = services["worker-npu-a"]
    assert {"/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"} <= set(ascend["devices"])
    assert sum(1 for d in ascend["devices"] if re.fullmatch(r"/dev/davinci\d+", d)) == 8
    assert any(v.startswith("/usr/local/Ascend/driver:") for v in ascend["volumes"])
    assert ascend["profiles"] == ["ascend"]
    musa = services["worker-musa-a"]
    assert musa["runtime"] == "mthreads" and musa["profiles"] == ["musa"]


def test_every_airflow_component_shares_the_secrets_and_the_execution_api() -> None:
    data = _compose()
    env = data["x-airflow-env"]
    assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"].endswith(":8080/execution/")
    assert "ZLOPS_JWT_SECRET:?" in env["AIRFLOW__API_AUTH__JWT_SECRET"]
    for name, service in data["services"].items():
        if name in ("postgres", "redis"):
            continue
        assert service["environment"]["AIRFLOW__API_AUTH__JWT_SECRET"] == env["AIRFLOW__API_AUTH__JWT_SECRET"], name


def test_the_image_is_airflow_33_with_zlops_and_a_working_celery() -> None:
    text = (DOCKER / "Dockerfile").read_text()
    assert re.search(r"^ARG AIRFLOW_IMAGE=apache/airflow:3\.3\.\d+", text, re.M)
    assert 'pip install --no-cache-dir "apache-airflow==${AIRFLOW_VERSION}" "/opt/zlops[airflow]"' in text
    extra = "\n".join(line for line in (REPO / "pyproject.toml").read_text().splitlines() if "celery" in line)
    assert '"celery<5.7"' in extra and "apache-airflow-providers-celery" in extra  # the extra the image installs


@pytest.mark.skipif(shutil.which("docker-compose") is None,
                    reason="docker-compose is not installed (apt-get install -y --no-install-recommends "
                           "docker-compose); it validates the compose file offline")
def test_docker_compose_validates_the_file_offline() -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp"), **SECRETS}
    ok = subprocess.run(["docker-compose", "-f", str(COMPOSE), "config", "-q"], env=env, capture_output=True,
                        text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    services = subprocess.run(["docker-compose", "-f", str(COMPOSE), "config", "--services"], env=env,
                              capture_output=True, text=True, timeout=60, check=True).stdout.split()
    assert set(services) >= CONTROL | {"worker-control", "worker-gpu-a", "worker-npu-a", "worker-musa-a"}
    missing = subprocess.run(["docker-compose", "-f", str(COMPOSE), "config", "-q"],
                             env={k: v for k, v in env.items() if k != "ZLOPS_JWT_SECRET"}, capture_output=True,
                             text=True, timeout=60)
    assert missing.returncode != 0 and "ZLOPS_JWT_SECRET" in missing.stderr
