"""The core library imports without Airflow (GPU hosts run `zlops ...` from the shell)."""

from __future__ import annotations

import subprocess
import sys

STEPS = ["zlops.steps." + m for m in ("context", "fetch", "prepare", "run_device", "ingest", "compare", "confirm",
                                      "report", "promote", "cleanup")]
CORE = ["zlops", "zlops.cli.app", "zlops.config.settings", *STEPS, "zlops.judge.evidence", "zlops.steps.nightly",
        "zlops.demo", "zlops.run.runner", "zlops.host.envs", "zlops.host.gitops", "zlops.store", "zlops.judge.compare",
        "zlops.judge.judges", "zlops.report", "zlops.slack.notify",
        "zlops.formats.zlops_json", "zlops.formats.pytest_benchmark", "zlops.backends.cpu", "zlops.backends.cuda",
        "zlops.alerts.lifecycle", "zlops.slack.announce", "zlops.slack.outbox", "zlops.slack.summary",
        "zlops.report.night_figures",
        "zlops.report.figures", "zlops.report.html", "zlops.cli.alerts", "zlops.triage.actions", "zlops.triage.series",
        "zlops.triage.night", "zlops.triage.trust", "zlops.cli.digest"]


def test_core_modules_import_without_airflow_or_vendor_sdks() -> None:
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('airflow', 'torch', 'torch_npu', 'torch_musa', 'pynvml', 'triton'):\n"
        "            raise ImportError('blocked for this test: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        f"for m in {CORE!r}:\n"
        "    __import__(m)\n"
        "heavy = [m for m in ('matplotlib', 'scipy') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
