"""The zlops configuration: one typed settings object, validated at the edge.

A YAML file is loaded with :func:`load_config`; every error names the file, the key path and
what is expected, e.g. ``zlops.yaml: suites.demo-ops.rounds: expected an integer >= 1, got 'five'``.
Secrets (the Slack token) never live here: they come from the environment or an Airflow connection.
"""

from __future__ import annotations

import math
import os
import re
import string
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from zlops.config.path import DEFAULT_HOME
from zlops.errors import BackendUnavailable, ConfigError
from zlops.host.contention import DEFAULT_CONTENTION_WAIT_S, DEFAULT_MAX_FOREIGN_CPU_PCT, DEFAULT_MAX_STEAL_PCT
from zlops.model import Thresholds

#: Placeholders a suite's ``command`` may use; each is filled by the runner per shard.
COMMAND_PLACEHOLDERS = {
    "results": "absolute path of the results file the harness must write",
    "device": "the device index this shard runs on",
    "devices": "comma-separated device indices of the shard (same as device for one device)",
    "rounds": "the suite's rounds",
    "worktree": "absolute path of the commit's git worktree",
    "artifacts": "absolute path of the shard's artifact folder",
    "variant": "the variant (runtime) this shard measures; 'default' for suites that declare none",
    "cases": "partitioned suites: the shard's cases, comma-joined ('' = every case); suites with select: the "
             "cases' selection tokens joined by select.join (select.every = every case)",
    "cases_file": "partitioned suites: a file with the shard's cases, one per line (empty = every case)",
    "p": "campaign suites: the number of devices the shard's case runs on (len of {devices})",
    "stack": "campaign suites: the stack (implementation) the shard measures; 'default' when the campaign names none",
    "case": "campaign suites: the campaign case (problem) name, e.g. allreduce",
    "size": "campaign suites: the message size in bytes ('' when the campaign has no sizes)",
}
#: the placeholders that carry a shard's share of a partitioned suite
CASE_PLACEHOLDERS = frozenset({"cases", "cases_file"})
#: the placeholders only a campaign suite fills (zlops.campaign.plan)
CAMPAIGN_PLACEHOLDERS = frozenset({"p", "stack", "case", "size"})

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
_CRON_FIELD = re.compile(r"^[0-9*/,\-A-Za-z?LW#]+$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PoolConfig(_Strict):
    """A device pool: a backend and the device indices zlops may use on this host."""

    backend: str = Field(description="device backend: cpu, cuda, musa, ascend, rocm (or an alias)")
    devices: list[int] | Literal["auto"] = Field(
        default="auto", json_schema_extra={"accepts": "a list of device numbers like [0, 1] or 'auto'"},
        description="device indices, one benchmark process each; 'auto' picks the longest "
                                    "consecutive run of idle devices (at most 4) when a run starts")
    host: str | None = Field(default=None, pattern=NAME_PATTERN,
                             description="host the pool's devices are attached to: a name under hosts (or, "
                                         "without a hosts section, the Celery queue itself)")
    require_idle: bool | None = Field(
        default=None, description="wait for (then skip) a device a foreign process is using; default: on for "
                                  "accelerators, off for cpu")
    # host contention (zlops.host.contention); unset: the global contention section's value
    max_foreign_cpu_pct: float | None = Field(
        default=None, ge=0, description="other processes' CPU during the run (% of one CPU, mean) beyond which a "
                                        "shard is invalid")
    max_host_load: float | None = Field(default=None, ge=0, description="1-minute load average a shard waits "
                                                                      "to fall under before it runs")
    max_steal_pct: float | None = Field(default=None, ge=0, le=100, description="hypervisor steal (%) beyond "
                                                                               "which a shard is invalid")
    contention_wait_s: float | None = Field(default=None, ge=0, description="how long a shard waits for the "
                                                                          "host to quiet down before it runs")
    contention_gate: bool | None = Field(default=None, description="false: contention is measured and reported, "
                                         "never a reason a shard is invalid (default: contention.gate)")
    measure: Literal["nightly", "paired"] = Field(
        default="nightly", description="nightly: tonight's commit alone, judged against the stored baseline; "
                                       "paired: tonight's commit and its baseline commit in interleaved fresh "
                                       "processes on each device, judged from those pairs (about twice the "
                                       "processes; for CPU pools and shared CI runners: docs/config.md, paired)")

    @property
    def explicit_devices(self) -> list[int] | None:
        return None if self.devices == "auto" else list(self.devices)

    @property
    def idle_required(self) -> bool:
        return self.require_idle if self.require_idle is not None else self.backend != "cpu"

    @field_validator("devices")
    @classmethod
    def _unique_nonneg(cls, v: list[int] | str) -> list[int] | str:
        if isinstance(v, str):
            return v
        if not v:
            raise ValueError("name at least one device index, or use 'auto'")
        if any(d < 0 for d in v):
            raise ValueError("device indices must be >= 0")
        if len(set(v)) != len(v):
            raise ValueError(f"device indices must be unique, got {v}")
        return v

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, v: str) -> str:
        from zlops.backends import resolve_backend_name

        # pydantic turns only ValueError into a located error; anything else would escape without
        # the file and key path
        try:
            return resolve_backend_name(v)
        except BackendUnavailable as exc:
            raise ValueError(str(exc)) from None


class HostConfig(_Strict):
    """A device host: the Celery queue its worker consumes (one worker per host, concurrency = devices)."""

    queue: str | None = Field(default=None, pattern=NAME_PATTERN, description="Celery queue (default: the name)")
    labels: list[str] = Field(default_factory=list, description="free-form labels (vendor, model, rack)")


class PartitionConfig(_Strict):
    """Split a suite's cases over each pool's devices, longest first (zlops.run.partition), instead of
    running the whole suite on every device."""

    cases: list[str] | None = Field(default=None, description="the suite's case names")
    list_command: list[str] | None = Field(
        default=None, description="argv run in the worktree with the suite's venv; prints one case name a line")
    history_runs: int = Field(default=3, ge=1, le=50,
                              description="accepted earlier nights whose per-case durations weigh the cases")

    @model_validator(mode="after")
    def _one_source(self) -> PartitionConfig:
        if (self.cases is None) == (self.list_command is None):
            raise ValueError("give exactly one of cases (a list of names) or list_command (an argv list)")
        if self.list_command is not None and (not self.list_command or not self.list_command[0].strip()):
            raise ValueError("list_command must be a non-empty argv list like [\"python\", \"bench.py\", \"--list\"]")
        if self.cases is not None:
            check_case_names(self.cases)
        return self


class SelectConfig(_Strict):
    """Run only some cases of a suite that is not partitioned (an A/B of tonight's suspects): each zlops
    case name maps to the harness's selection token, and the tokens, joined, fill ``{cases}``.
    FlagGems: ``token: '^([^/]+)/'`` (the op, which is the test's pytest mark), ``join: ' or '`` and
    ``-m "{cases}"`` in the command; see docs/recipes/flaggems.md and :mod:`zlops.run.selection`."""

    token: str = Field(default="^(.*)$", description="regex searched in a zlops case name; its first group (or "
                       "the whole match) is the harness's selection token")
    join: str = Field(default=",", description="what joins the tokens in {cases}, e.g. ' or ' for pytest -m/-k")
    every: str = Field(default="", description="{cases} on a run of every case (the nightly); pytest's -m '' and "
                       "-k '' select everything")

    @field_validator("token")
    @classmethod
    def _regex(cls, v: str) -> str:
        try:
            pattern = re.compile(v)
        except re.error as exc:
            raise ValueError(f"not a regular expression ({exc})") from None
        if pattern.groups > 1:
            raise ValueError("use at most one capturing group (the token); make the others (?:...)")
        return v

    @field_validator("join")
    @classmethod
    def _join(cls, v: str) -> str:
        if not v:
            raise ValueError("join must not be empty (tokens would run together); e.g. ',' or ' or '")
        return v


class CampaignGridConfig(_Strict):
    """The cartesian product a campaign runs: every case x P x variant x stack (x size)."""

    cases: list[str] = Field(default_factory=lambda: ["default"], min_length=1,
                             description="campaign case (problem) names, e.g. [allreduce, allgather]")
    p: list[int] = Field(min_length=1, description="device counts, e.g. [1, 2] or [2, 4, 8]")
    variants: list[str] = Field(default_factory=lambda: ["default"], min_length=1,
                                description="variants (e.g. ring, tree, mesh), passed as {variant}")
    stacks: list[str] = Field(default_factory=lambda: ["default"], min_length=1,
                              description="stacks (implementations, e.g. nccl, simpler, pypto), passed as {stack}")
    sizes: list[int] = Field(default_factory=list, description="message sizes in bytes, passed as {size}; "
                             "empty: the cases carry no size")

    @field_validator("cases", "variants", "stacks")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        for name in v:
            if not re.match(NAME_PATTERN, name):
                raise ValueError(f"{name!r} must match {NAME_PATTERN} (letters, digits, . _ -)")
        if len(set(v)) != len(v):
            raise ValueError(f"names must be unique, got {v}")
        return v

    @field_validator("p", "sizes")
    @classmethod
    def _positive_unique(cls, v: list[int]) -> list[int]:
        if any(x < 1 for x in v):
            raise ValueError(f"expected integers >= 1, got {v}")
        if len(set(v)) != len(v):
            raise ValueError(f"values must be unique, got {v}")
        return sorted(v)


class CampaignConfig(_Strict):
    """A collective-communication campaign (zlops.campaign.plan): one shard = one case on P devices, held
    together by a gang lease; series per (case, size, P, variant, stack, metric), plus derived
    strong-scaling efficiency and paired stack ratios (zlops.campaign.scaling)."""

    grid: CampaignGridConfig | None = Field(default=None, description="the grid of cases, P, variants, stacks, "
                                            "sizes")
    generator: list[str] | None = Field(
        default=None, description="argv run in the worktree with the suite's venv; prints a JSON list of "
        "{case, p, variant?, stack?, size?} objects (the seed's cases/generate.py)")
    ratios: list[list[str]] = Field(default_factory=list, description="paired stack ratios [numerator, "
                                    "denominator], e.g. [[pypto, simpler]]: execute time of one over the other")
    scaling_metric: str = Field(default="execute_s", description="the time metric strong-scaling efficiency "
                                "and stack ratios are derived from")
    history_runs: int = Field(default=3, ge=1, le=50, description="accepted earlier nights whose shard "
                              "durations weigh the campaign's shards (gang LPT)")

    @model_validator(mode="after")
    def _one_source(self) -> CampaignConfig:
        if (self.grid is None) == (self.generator is None):
            raise ValueError("give exactly one of grid (cases, p, variants, stacks, sizes) or generator (an argv list)")
        if self.generator is not None and (not self.generator or not self.generator[0].strip()):
            raise ValueError("generator must be a non-empty argv list like [\"python\", \"cases/generate.py\", "
                             "\"--json\"]")
        for i, pair in enumerate(self.ratios):
            if len(pair) != 2 or pair[0] == pair[1] or not all(re.match(NAME_PATTERN, s) for s in pair):
                raise ValueError(f"ratios[{i}]: expected [numerator stack, denominator stack], two different "
                                 f"stack names, got {pair}")
            if self.grid is not None and not set(pair) <= set(self.grid.stacks):
                raise ValueError(f"ratios[{i}]: stacks {sorted(set(pair) - set(self.grid.stacks))} are not in "
                                 f"grid.stacks {self.grid.stacks}")
        return self


def check_case_names(cases: list[str], *, comma_joined: bool = False) -> None:
    """Names a partitioned suite can pass to its harness: non-blank, unique, one line each."""
    if not cases:
        raise ValueError("the case list is empty")
    for name in cases:
        if not name.strip() or "\n" in name or "\r" in name:
            raise ValueError(f"case name {name!r} must be non-blank and on one line")
        if comma_joined and "," in name:
            raise ValueError(f"case name {name!r} contains a comma; pass the cases with {{cases_file}} instead")
    dupes = sorted({c for c in cases if cases.count(c) > 1})
    if dupes:
        raise ValueError(f"case names repeat: {dupes}")


def command_placeholders(argv: list[str]) -> set[str]:
    return {name for arg in argv for _, name, _, _ in string.Formatter().parse(arg) if name is not None}


class ForgeConfig(_Strict):
    """Where a suite's PR compares answer: a check on the pull request (zlops.forge, docs/forge.md).

    The token and the webhook secret are secrets: they come from the Airflow connection ``conn_id``
    (password = token, extra ``webhook_secret``) or, outside Airflow, from ``token_env`` and
    ``webhook_secret_env``; never from this file."""

    kind: Literal["github", "gitlab"] = Field(description="github (Checks API, commit status fallback) or gitlab "
                                              "(commit status + a merge-request note)")
    api_url: str | None = Field(default=None, pattern=r"^https?://[^\s]+$", json_schema_extra={
        "accepts": "an http(s) URL like https://api.github.com or https://gitlab.example.com/api/v4"},
        description="the forge's REST API (default: https://api.github.com, https://gitlab.com/api/v4)")
    repo: str = Field(pattern=r"^(?:[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+|[1-9][0-9]{0,11})$", json_schema_extra={
        "accepts": "owner/name (GitHub), group/project or a numeric project id (GitLab)"})
    conn_id: str = Field(default="zlops_forge", pattern=r"^[A-Za-z0-9_.-]{1,250}$",
                         description="Airflow connection: password = the token, extra webhook_secret")
    token_env: str = Field(default="ZLOPS_FORGE_TOKEN", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
                           description="environment variable holding the token outside Airflow (CLI, receiver)")
    webhook_secret_env: str = Field(default="ZLOPS_FORGE_WEBHOOK_SECRET", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
                                    description="environment variable holding the webhook secret outside Airflow")
    check_name: str = Field(default="zlops", min_length=1, max_length=100, pattern=r"^[^\x00-\x1f]+$",
                            description="the check's (status's) name on the commit")
    fail_on: Literal["potential", "regression", "severe"] = Field(
        default="regression", description="the least verdict that fails the check: potential (any flagged "
        "change), regression (confirmed beyond potential_pct; the simple judge: beyond regression_pct) or severe")
    trigger_label: str | None = Field(default="zlops-compare", max_length=100,
                                      description="a PR label that triggers the compare (null: comments only)")
    links_url: str | None = Field(default=None, pattern=r"^https?://[^\s]+$", json_schema_extra={
        "accepts": "the URL of the zlops pages, like https://airflow.example.com/zlops"},
        description="base URL of the zlops pages the check links to (report, series)")
    compare_timeout_s: int = Field(default=6 * 3600, ge=60, le=7 * 86400, description="a compare the receiver "
                                   "started that has not concluded after this long: its check is closed neutral "
                                   "(timed out) by the next sweep (zlops forge serve every minute, a flush of checks)")
    replay_window_s: int = Field(default=86400, ge=60, le=30 * 86400, description="replay protection: a delivery "
                                 "whose comment or label event is older than this is refused, and every delivery "
                                 "(by body and by id) is remembered this long: a replay runs nothing")
    rate_window_s: int = Field(default=3600, ge=60, le=7 * 86400, description="the window of the rate limits")
    rate_per_pr: int = Field(default=6, ge=1, le=1000, description="compares one pull request may trigger per "
                             "rate_window_s")
    rate_per_user: int = Field(default=10, ge=1, le=1000, description="triggers (and refusals) one commenter may "
                               "cause per rate_window_s; past it the receiver answers 429 and writes nothing")

    @property
    def api(self) -> str:
        """The REST API's base URL, without a trailing slash."""
        default = "https://api.github.com" if self.kind == "github" else "https://gitlab.com/api/v4"
        return (self.api_url or default).rstrip("/")


class KernelsConfig(_Strict):
    """``kernels:`` of a suite: record a kernel inventory per shard and attribute alerts to it
    (docs/kernels.md). ``kernels: triton`` is short for ``kernels: {provider: triton}``."""

    provider: str = Field(default="triton", description="the toolchain whose compiled kernels are recorded: "
                          "triton (reads the shard's own TRITON_CACHE_DIR); cuobjdump, ascend, musa and none record "
                          "'no inventory' with the reason")
    map: dict[str, str] = Field(default_factory=dict, json_schema_extra={
        "accepts": "op regex -> kernel regex, like {'mean': '^mean_dim_kernel', 'copy': '_copy_kernel'}"},
        description="which kernels belong to an op family: the first op regex that matches the family whole "
                    "gives the kernel regex searched in kernel names; default: the name holds the op as a word")
    max_per_shard: int = Field(default=2000, ge=1, le=100000, description="kernels kept per shard (sorted by "
                               "name); the rest are counted as dropped")
    skip_same_in_bisect: bool = Field(default=False, description="a bisection step whose commit (one run) "
                                      "compiled the regressed ops' kernels as one end of the range did, while the "
                                      "ends' kernels differ, takes that end's outcome without an A/B")
    seed: bool = Field(default=True, description="seed each nightly shard's own Triton cache from the newest earlier "
                       "accepted night's caches of the suite on the pool, so unchanged kernels are taken, not "
                       "compiled again; the inventory still lists only the kernels the process used")
    seed_max_mib: int = Field(default=512, ge=1, le=65536, description="at most this much of the earlier night's "
                              "caches is staged as a shard's seed (MiB); the rest is left out and counted")
    seed_max_folders: int = Field(default=5000, ge=1, le=100000, description="at most this many cache folders "
                                  "(kernels and launcher modules) are staged as a shard's seed")

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, v: str) -> str:
        from zlops.kernels.providers import PROVIDER_NAMES

        if v not in PROVIDER_NAMES:
            raise ValueError(f"unknown kernel provider {v!r}; known: {', '.join(PROVIDER_NAMES)}")
        return v

    @field_validator("map")
    @classmethod
    def _regexes(cls, v: dict[str, str]) -> dict[str, str]:
        for op_re, kernel_re in v.items():
            for what, pattern in (("op regex", op_re), ("kernel regex", kernel_re)):
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ValueError(f"{what} {pattern!r} is not a regular expression: {exc}") from None
        return v


class CanaryConfig(_Strict):
    """``canary:`` of a suite, opt-in: a recall canary (zlops.judge.canary, docs/triage.md). On a schedule of
    nights zlops plants a known slowdown as a series of its own, ``<case> [canary]``: the source case's samples
    of the night scaled by ``1 + slowdown_pct/100`` (a rate divided by it), the same samples unscaled on the
    other nights. The judge, the A/B and its budget treat it as any series; it never pages anybody, and the
    trust ledger counts whether and on which night it was confirmed (recall)."""

    case: str = Field(min_length=1, max_length=450, pattern=r"^[^\x00-\x1f]+$", json_schema_extra={
        "accepts": "the name of one case the suite measures, as the report prints it, e.g. 'abs/float16/(4096x4096)'"},
        description="the measured case whose samples the canary replays, scaled")
    metric: str | None = Field(default=None, min_length=1, max_length=100, description="the one metric of the "
                               "case to plant (default: every metric the case reports)")
    pools: list[str] | None = Field(default=None, json_schema_extra={"accepts": "a list of the suite's pools"},
                                    description="the pools to plant on (default: every pool of the suite)")
    slowdown_pct: float = Field(default=5.0, gt=0, le=100, description="the planted slowdown in percent: a time "
                                "is multiplied by 1 + slowdown_pct/100, a rate divided by it")
    every_nights: int = Field(default=14, ge=2, le=366, description="an episode starts every this many nights "
                              "(the suite's nightly runs counted from the canary's first night; the first "
                              "episode after that many nights of history)")
    hold_nights: int = Field(default=3, ge=1, le=365, description="how many nights an episode keeps the "
                             "slowdown planted (the nights the judge has to confirm it); below every_nights")
    enabled: bool = Field(default=True, description="false: plant nothing (the section kept, switched off)")

    @field_validator("case")
    @classmethod
    def _not_a_canary(cls, v: str) -> str:
        from zlops.model import CANARY_MARK

        if v.endswith(CANARY_MARK) or not v.strip():
            raise ValueError(f"name a measured case, not a canary's series (drop {CANARY_MARK.strip()!r}), got {v!r}")
        return v

    @model_validator(mode="after")
    def _quiet_nights_between(self) -> CanaryConfig:
        if self.hold_nights >= self.every_nights:
            raise ValueError(f"hold_nights ({self.hold_nights}) must be below every_nights ({self.every_nights}): "
                             "an episode needs quiet nights after it, e.g. every_nights: 14, hold_nights: 3")
        return self


class SuiteConfig(_Strict):
    """One benchmark suite: where its code lives, how to install and run it, where it runs."""

    repo: str = Field(description="local path or git URL of the upstream repository")
    branch: str = Field(default="main", pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$",
                        json_schema_extra={"accepts": "a branch name like main or release/1.2 (letters, digits, "
                                                      "'.', '_', '/', '-')"})
    install: list[list[str]] = Field(default_factory=list,
                                     json_schema_extra={"accepts": 'a list of argv lists like [["pip", "install", "."]]'},
                                     description="argv lists run inside the suite's venv, in the worktree")
    command: list[str] = Field(min_length=1, json_schema_extra={
        "accepts": 'an argv list like ["python", "bench.py", "--out", "{results}"]'}, description="argv of the benchmark; placeholders {results} ...")
    format: str = Field(description="results format: zlops-json, pytest-benchmark, ...")
    pools: list[str] = Field(min_length=1)
    rounds: int = Field(default=5, ge=1, le=100000)
    timeout_s: float = Field(default=1800, gt=0)
    schedule: str | None = Field(default="0 2 * * *", json_schema_extra={
        "accepts": "a 5-field cron expression like '0 2 * * *', or @daily, @hourly ... (null: triggered only)"})
    system_site_packages: bool = False
    python: str | None = Field(default=None, description="interpreter the suite's venv is made from "
                               "(default: the one running zlops)")
    env: dict[str, str] = Field(default_factory=dict, description="extra environment for install and run")
    env_public: list[str] = Field(default_factory=list, json_schema_extra={"accepts": "a list of names of env"},
                                  description="names of env whose values are recorded in shard manifests; the "
                                              "others are recorded by name with the value *** (secrets by default)")
    dependency_files: list[str] = Field(
        default_factory=lambda: ["pyproject.toml", "setup.py", "setup.cfg", "requirements*.txt"],
        description="globs (relative to the repo root) whose content keys the environment cache",
    )
    results_name: str = Field(default="results.json", pattern=r"^[A-Za-z0-9_.-]{1,100}$")
    pins: list[str] = Field(default_factory=list, description="files in the repo whose content pins a revision "
                            "(e.g. pto_isa.pin); recorded in every run's identity")
    partition: PartitionConfig | None = Field(
        default=None, description="split the cases over each pool's devices (the command takes {cases} or "
                                  "{cases_file}); default: every device runs the whole suite")
    select: SelectConfig | None = Field(
        default=None, description="map case names to the harness's selection tokens so {cases} can run only some "
                                  "cases of a suite that is not partitioned (the A/B of tonight's suspects)")
    inert_paths: list[str] = Field(
        default_factory=list,
        json_schema_extra={"accepts": "a list of fnmatch globs relative to the repo root ('*' crosses '/'), "
                                      "e.g. ['*.md', 'docs/*']"},
        description="paths whose changes cannot change what the benchmarks measure: suspects against a baseline "
                    "commit that differs from tonight's only in these paths get no A/B (it would compare the same "
                    "code with itself); they stay suspects. Default [] (every differing commit gets its A/B)")
    partial_exit_codes: list[int] = Field(
        default_factory=list, json_schema_extra={"accepts": "a list of exit codes 1-255, e.g. [1]"},
        description="exit codes (besides 0) that mean some of the harness's cases failed while the results it wrote "
                    "are valid (pytest: 1, 'some tests failed'): the shard stays ok with a 'partial' note, the cases "
                    "it did not write are missing that night; any other non-zero exit fails the shard")
    results_glob: str | None = Field(
        default=None, description="the harness names its results file itself (FlagGems: 'result*.log'): the command "
                                  "runs in the shard's artifact folder and the one file matching this glob there "
                                  "becomes {results}")
    timer: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:+-]{0,63}$",
                              description="the timer the harness measures with (recorded in run_identity.json); "
                                          "default: what the harness declares, else what its format says, else the "
                                          "backend's")
    variants: list[str] = Field(default_factory=list, description="variants (runtimes) a PR compare runs one after "
                                "another, passed as {variant}; empty: one variant, 'default'")
    results_max_mib: float | None = Field(default=None, gt=0, description="size limit of this suite's results "
                                          "file in MiB (default: the global results_max_mib)")
    headline_metric: str | None = Field(default=None, description="the metric a PR compare's overall line counts "
                                        "(e.g. effective); default: each case's first metric")
    campaign: CampaignConfig | None = Field(
        default=None, description="a collective campaign: shards of one case on P devices each (gang leases), "
                                  "see docs/campaigns.md")
    forge: ForgeConfig | None = Field(
        default=None, description="post the PR compare's outcome as a check on the pull request and "
                                  "accept /zlops compare from it, see docs/forge.md")
    kernels: KernelsConfig | None = Field(
        default=None, json_schema_extra={"accepts": "triton, or a mapping like {provider: triton, map: {...}}"},
        description="record the compiled kernels of every shard and attribute alerts to them (docs/kernels.md); "
                    "default: off")
    canary: CanaryConfig | None = Field(
        default=None, description="a recall canary: plant a known slowdown of one case on a schedule and count "
                                  "whether the nightly confirms it (docs/triage.md, recall canaries); default: off")

    @field_validator("kernels", mode="before")
    @classmethod
    def _kernels_short(cls, v: Any) -> Any:
        return {"provider": v} if isinstance(v, str) else v

    @property
    def stored_format(self) -> str:
        """The format of the results file a shard leaves for ingest: a campaign lane combines its
        gang shards' results (each in ``format``) into one zlops-json file (zlops.campaign.run)."""
        return "zlops-json" if self.campaign is not None else self.format

    @field_validator("variants")
    @classmethod
    def _variant_names(cls, v: list[str]) -> list[str]:
        for name in v:
            if not re.match(NAME_PATTERN, name):
                raise ValueError(f"variant {name!r} must match {NAME_PATTERN}")
        if len(set(v)) != len(v):
            raise ValueError(f"variants must be unique, got {v}")
        return v

    @model_validator(mode="after")
    def _public_env_names(self) -> SuiteConfig:
        unknown = sorted(set(self.env_public) - set(self.env))
        if unknown:
            raise ValueError(f"env_public names {', '.join(unknown)}, which env does not set; env sets: "
                             f"{', '.join(sorted(self.env)) or 'nothing'}")
        return self

    @field_validator("install")
    @classmethod
    def _argv_lists(cls, v: list[list[str]]) -> list[list[str]]:
        for i, argv in enumerate(v):
            if not argv or not argv[0].strip():
                raise ValueError(f"install[{i}] must be a non-empty argv list like [\"pip\", \"install\", \".\"]")
        return v

    @field_validator("command")
    @classmethod
    def _placeholders(cls, v: list[str]) -> list[str]:
        for arg in v:
            for _, name, spec, conv in string.Formatter().parse(arg):
                if name is None:
                    continue
                if name not in COMMAND_PLACEHOLDERS:
                    raise ValueError(
                        f"unknown placeholder {{{name}}} in {arg!r}; "
                        f"known: {', '.join('{' + k + '}' for k in COMMAND_PLACEHOLDERS)}")
                if spec or conv:
                    raise ValueError(f"placeholder {{{name}}} takes no format spec or conversion in {arg!r}")
        return v

    @model_validator(mode="after")
    def _partition_placeholders(self) -> SuiteConfig:
        used = command_placeholders(self.command) & CASE_PLACEHOLDERS
        if self.partition is not None and self.select is not None:
            raise ValueError("give partition or select, not both: a partitioned suite's case names are already the "
                             "harness's own")
        if self.partition is not None and not used:
            raise ValueError("partition: the command must pass the shard's cases with {cases} or {cases_file}")
        if self.select is not None and "cases" not in used:
            raise ValueError("select: the command must pass the selection with {cases} (e.g. \"-m\", \"{cases}\")")
        if self.select is not None and "cases_file" in used:
            raise ValueError("select fills {cases} only; drop {cases_file}")
        if self.partition is None and self.select is None and used:
            raise ValueError(f"command uses {{{sorted(used)[0]}}} but the suite has no partition section "
                             "(nor a select section)")
        if self.partition is not None and self.partition.cases is not None and "cases" in used:
            check_case_names(self.partition.cases, comma_joined=True)
        campaign_used = command_placeholders(self.command) & CAMPAIGN_PLACEHOLDERS
        if self.campaign is None and campaign_used:
            raise ValueError(f"command uses {{{sorted(campaign_used)[0]}}} but the suite has no campaign section")
        if self.campaign is not None:
            if self.partition is not None or self.select is not None:
                raise ValueError("campaign: a campaign suite has its own shards; drop partition and select")
            if self.results_glob is not None:
                raise ValueError("campaign: results_glob is not supported; pass {results} to the harness")
            if self.partial_exit_codes:
                raise ValueError("campaign: partial_exit_codes is not supported; a campaign lane's shards must exit 0")
            if "devices" not in command_placeholders(self.command):
                raise ValueError("campaign: the command must pass the shard's devices with {devices} (a comma list)")
            if self.campaign.grid is not None and self.campaign.grid.sizes and \
                    "size" not in command_placeholders(self.command):
                raise ValueError("campaign: grid.sizes is set, so the command must pass {size}")
        return self

    @model_validator(mode="after")
    def _canary_refs(self) -> SuiteConfig:
        canary = self.canary
        if canary is None:
            return self
        unknown = sorted(set(canary.pools or ()) - set(self.pools))
        if unknown:
            raise ValueError(f"canary.pools: {', '.join(unknown)} not among the suite's pools "
                             f"({', '.join(self.pools)}); name some of those, or leave pools out for all of them")
        if self.partition is not None and self.partition.cases is not None and canary.case not in self.partition.cases:
            raise ValueError(f"canary.case: {canary.case!r} is not one of partition.cases; name one of them, e.g. "
                             f"{self.partition.cases[0]!r}")
        return self

    @field_validator("partial_exit_codes")
    @classmethod
    def _partial_codes(cls, v: list[int]) -> list[int]:
        bad = [c for c in v if not 1 <= c <= 255]
        if bad:
            raise ValueError(f"partial_exit_codes: {bad} are not exit codes 1-255 (0 is always a success; a signal "
                             "is never partial)")
        return sorted(set(v))

    @field_validator("results_glob")
    @classmethod
    def _glob(cls, v: str | None) -> str | None:
        if v is not None and (not v.strip() or "/" in v or "\\" in v or v in (".", "..")):
            raise ValueError("expected a file-name glob without a folder, like 'result*.log'")
        return v

    @field_validator("format")
    @classmethod
    def _known_format(cls, v: str) -> str:
        from zlops.formats import format_names

        if v not in format_names():
            raise ValueError(f"unknown results format {v!r}; known: {', '.join(format_names())}")
        return v

    @field_validator("schedule")
    @classmethod
    def _cron(cls, v: str | None) -> str | None:
        if v is None or v.startswith("@"):
            return v
        fields = v.split()
        if len(fields) != 5 or not all(_CRON_FIELD.match(f) for f in fields):
            raise ValueError(f"expected a 5-field cron expression like '0 2 * * *' or @daily, got {v!r}")
        return v


class SlackConfig(_Strict):
    channel: str = "#perf-nightly"
    token_env: str = Field(default="SLACK_BOT_TOKEN",
                           description="environment variable that holds the bot token (CLI use)")
    conn_id: str = Field(default="slack_api_default", description="Airflow connection id (DAG use)")
    base_url: str | None = Field(default=None, description="Slack Web API base URL (tests, proxies)")


class ThresholdsConfig(_Strict):
    potential_pct: float = Field(default=2.0, gt=0, le=100)
    regression_pct: float = Field(default=5.0, gt=0, le=1000)

    @model_validator(mode="after")
    def _ordered(self) -> ThresholdsConfig:
        if self.regression_pct < self.potential_pct:
            raise ValueError(
                f"regression_pct ({self.regression_pct}) must be >= potential_pct ({self.potential_pct})")
        return self

    def to_thresholds(self) -> Thresholds:
        return Thresholds(self.potential_pct, self.regression_pct)


class ContentionConfig(_Strict):
    """Host contention limits for every pool (a pool's own keys win); on by default (zlops.host.contention).

    ``null`` for a limit turns that figure's gate off (it is still measured); ``gate: false`` turns
    the whole gate off, the foreign-device-process rule of accelerator pools included.
    """

    gate: bool = Field(default=True, description="false: contention is measured and reported, never a gate")
    max_foreign_cpu_pct: float | None = Field(default=DEFAULT_MAX_FOREIGN_CPU_PCT, ge=0,
                                              description="see pools.<name>.max_foreign_cpu_pct")
    max_host_load: float | None = Field(default=None, ge=0, description="see pools.<name>.max_host_load")
    max_steal_pct: float | None = Field(default=DEFAULT_MAX_STEAL_PCT, ge=0, le=100,
                                        description="see pools.<name>.max_steal_pct")
    contention_wait_s: float = Field(default=DEFAULT_CONTENTION_WAIT_S, ge=0,
                                     description="see pools.<name>.contention_wait_s")


class PairedConfig(_Strict):
    """Paired nights (``pools.<name>.measure: paired``, :mod:`zlops.judge.paired`): how many interleaved pairs of
    base and head runs a device measures per night, within what budget, and how a pair is gated."""

    min_pairs: int = Field(default=5, ge=2, description="pairs a paired night always measures (when the budget "
                           "allows) before it may stop as decided")
    max_pairs: int = Field(default=10, ge=2, description="most pairs a paired night measures per device")
    budget_s: float = Field(default=900, gt=0, description="device seconds a paired night may spend per device, "
                            "retries of discarded pairs included")
    equivalence_pct: float | None = Field(default=None, gt=0, description="a series is cleared (unchanged) when "
                                          "the CI of its paired change lies inside +-this (default: "
                                          "thresholds.potential_pct)")
    max_foreign_cpu_diff_pct: float | None = Field(
        default=50.0, ge=0, description="a pair is invalid when other processes' CPU (% of one CPU, mean over "
        "the run) differs by more than this between its two runs (null: never)")
    quiet_wait_s: float = Field(default=20, ge=0, description="how long a discarded pair waits for the host to "
                                "quiet before it is measured again")

    @model_validator(mode="after")
    def _ordered(self) -> PairedConfig:
        if self.max_pairs < self.min_pairs:
            raise ValueError(f"max_pairs ({self.max_pairs}) must be >= min_pairs ({self.min_pairs})")
        return self


class NoiseConfig(_Strict):
    """Knobs of the noise-aware judge (``judge: noise``); see docs/statistics.md for the defaults."""

    k: float = Field(default=3.0, gt=0, description="noise sigmas a change must exceed")
    min_nights: int = Field(default=6, ge=2, description="accepted nights before between-night noise is trusted")
    window: int = Field(default=30, ge=3, description="nights the noise model and the reference use")
    alpha: float = Field(default=0.002, gt=0, lt=1, description="A/B rank-test significance")
    ab_pairs: int = Field(default=8, ge=0, description="most interleaved A/B pairs per confirmation (0: no A/B)")
    ab_min_pairs: int = Field(default=5, ge=2, description="pairs an A/B starts with; more are added while "
                              "suspects stay undecided, up to ab_pairs, within the budget")
    ab_budget: int = Field(default=200, ge=0, description="most suspects confirmed by A/B per night and pool")
    ab_budget_share: float = Field(default=0.25, gt=0, le=10, description="A/B device time per night and pool, "
                                   "as a share of tonight's benchmark time on that pool")
    ab_budget_s: float | None = Field(default=None, gt=0, description="A/B device seconds per night and pool "
                                      "(overrides ab_budget_share and ab_budget_floor_s)")
    ab_budget_floor_s: float = Field(default=300.0, ge=0, description="the least A/B device seconds per night and "
                                     "pool whatever the night's length: a small suite's top suspects always get a "
                                     "decisive A/B (FlagGems on an H200: ~15 s a process, 5 pairs ~150 s)")
    ab_budget_max_s: float = Field(default=3600.0, gt=0, description="the hard ceiling of a pool's A/B device "
                                   "seconds per night (the nightly window)")
    max_throttle_share: float = Field(default=0.2, ge=0, le=1, description="busy telemetry samples below 90% of "
                                      "peak clock that make a shard invalid")
    temp_limit_c: float | None = Field(default=None, description="a shard hotter than this is invalid")
    device_change: Literal["ab", "warn"] = Field(default="ab", description="a night whose baseline ran on other "
                                                 "physical devices (their recorded ids differ): ab = its measured "
                                                 "series are suspects for the same-device A/B; warn = judged by the "
                                                 "nights, with a warning (e.g. a `devices: auto` pool whose picks move)")

    @model_validator(mode="after")
    def _ab_can_decide(self) -> NoiseConfig:
        # smallest two-sided exact Mann-Whitney p of n vs n runs (zlops.stats.min_mwu_pvalue; kept free
        # of scipy here because DAG files load the config at parse time)
        def min_p(n: int) -> float:
            return min(1.0, 2.0 / math.comb(2 * n, n))

        if self.ab_pairs and min_p(self.ab_pairs) > self.alpha:
            need = next(n for n in range(2, 200) if min_p(n) <= self.alpha)
            raise ValueError(f"ab_pairs {self.ab_pairs} cannot reach alpha {self.alpha:g}; use at least {need} "
                             "(or 0 to confirm by consecutive nights only)")
        return self

    def policy(self, thresholds: Thresholds) -> Any:
        from zlops.stats import Policy

        return Policy(potential_pct=thresholds.potential_pct, regression_pct=thresholds.regression_pct, k=self.k,
                      min_nights=self.min_nights, window=self.window, alpha=self.alpha,
                      ab_pairs=max(self.ab_pairs, 1), ab_budget=self.ab_budget,
                      max_throttle_share=self.max_throttle_share, temp_limit_c=self.temp_limit_c,
                      device_change_ab=self.device_change == "ab")


class BisectConfig(_Strict):
    """Automatic bisection of confirmed regressions (docs/bisect.md)."""

    auto: bool = Field(default=True, description="the nightly's report step requests a bisection (zlops_bisect DAG) "
                       "for each newly confirmed regression whose range spans more than one commit")
    builds_per_night: int = Field(default=16, ge=0, description="commits a pool's bisections may build per night "
                                  "(rolling budget_window_h); past it a bisection pauses and the next request resumes it")
    device_s_per_night: float = Field(default=3600, ge=0, description="device seconds a pool's bisections may "
                                      "spend per night (rolling budget_window_h)")
    budget_window_h: float = Field(default=24, gt=0, description="the window the per-night budget is counted over")
    min_pairs: int = Field(default=4, ge=2, description="A/B pairs a step starts with")
    max_pairs: int = Field(default=24, ge=2, description="A/B pairs a step adds while its CI straddles the line")
    extend_pairs: int = Field(default=64, ge=2, description="past max_pairs, a step whose CI still straddles the "
                              "line adds pairs up to this many while its estimate is far enough from the line for "
                              "them to settle it; then the step is unclear, measured once more (retest) and skipped")
    confidence: float = Field(default=0.95, gt=0, lt=1, description="confidence of the CI a step is judged by")
    statistic: Literal["shift", "median"] = Field(default="shift", description="what a step's CI is of: shift (the "
                                                  "Hodges-Lehmann shift of the runs, rank CI; needs 4 pairs at 95%, "
                                                  "5 at 99%) or median (bootstrap CI of the median ratio; decides "
                                                  "from 2 pairs)")
    retest: bool = Field(default=True, description="an unclear commit is measured once more (a fresh A/B) before "
                         "the search skips it for good")
    line_share: float = Field(default=0.5, gt=0, lt=1, description="a case's line between good and bad, as a share "
                              "of the change the range's ends reproduced (never below thresholds.potential_pct)")
    max_commits: int = Field(default=512, ge=2, description="longest range bisected (first-parent commits)")
    nightly_grace_h: float = Field(default=12, gt=0, description="a nightly of a suite on the pool started within "
                                   "this many hours and still running makes a bisection yield (pause) before its "
                                   "next benchmark process")

    @model_validator(mode="after")
    def _pairs(self) -> BisectConfig:
        if self.min_pairs > self.max_pairs:
            raise ValueError(f"min_pairs {self.min_pairs} is above max_pairs {self.max_pairs}")
        if self.extend_pairs < self.max_pairs:
            raise ValueError(f"extend_pairs {self.extend_pairs} is below max_pairs {self.max_pairs}")
        if self.statistic == "shift":
            from zlops.bisect.search import min_pairs_for

            need = min_pairs_for(self.confidence)
            if self.extend_pairs < need:
                raise ValueError(f"statistic shift at confidence {self.confidence:g} needs at least {need} pairs, "
                                 f"extend_pairs is {self.extend_pairs} (raise it, or use statistic: median)")
        return self


class Config(_Strict):
    """The whole configuration. Build it with :func:`load_config` or :func:`parse_config`."""

    # ``locks_dir`` is the key; the field has another name so that ``config.locks_dir`` is always the
    # resolved folder. A dump writes the key, so model_dump() -> parse_config() round-trips.
    model_config = ConfigDict(extra="forbid", frozen=True, validate_by_name=True, validate_by_alias=True,
                              serialize_by_alias=True)

    home: Path = Field(default=Path(DEFAULT_HOME), validate_default=True,
                       json_schema_extra={"accepts": "a folder path like ~/.zlops"})  # the default needs expanding too
    database: str | None = Field(default=None, description="SQLAlchemy URL; default sqlite under home")
    database_retry_s: float = Field(default=60, ge=0, description="how long transient database faults (a "
                                    "refused connect, a terminated connection) are retried before a step fails")
    hosts: dict[str, HostConfig] = Field(default_factory=dict,
                                         description="device hosts (Celery queues); pools name theirs with host")
    pools: dict[str, PoolConfig]
    suites: dict[str, SuiteConfig]
    thresholds: ThresholdsConfig = Field(default_factory=ThresholdsConfig)
    slack: SlackConfig | None = None
    judge: Literal["simple", "noise"] = Field(
        default="noise", description="noise: per-series noise model + same-device A/B confirmation (zlops.stats); "
                                     "simple: the seed's fixed 2%/5% rule on the change of medians")
    noise: NoiseConfig = Field(default_factory=lambda: NoiseConfig())
    contention: ContentionConfig = Field(default_factory=lambda: ContentionConfig())
    paired: PairedConfig = Field(default_factory=lambda: PairedConfig())
    bisect: BisectConfig = Field(default_factory=lambda: BisectConfig())
    allow_caliber_mismatch: bool = Field(default=False, description="publish deltas across calibers (still "
                                         "printed as !!! [caliber])")
    env_cache_size: int = Field(default=8, ge=1, description="environment templates kept under home/envs")
    device_wait_s: float = Field(default=600, ge=0,
                                 description="how long a shard waits for a device another benchmark holds")
    promote_min_ok_share: float = Field(
        default=1.0, gt=0, le=1, description="share of each pool's planned shards that must end OK for a night to "
        "become a baseline (default 1.0: every shard; a night with a failed device is measured and reported, "
        "never promoted)")
    baseline_depth: int = Field(default=2000, ge=1,
                                description="how many ancestor commits are searched for a baseline")
    locks_dir_setting: Path | None = Field(
        default=None, alias="locks_dir", description="host-wide folder of device leases, shared by every config "
        "on the host (default: $ZLOPS_LOCKS_DIR, else /var/lock/zlops when writable, else <tmp>/zlops-locks-<uid>)")
    git_timeout_s: float = Field(default=900, gt=0, description="limit of one git fetch; past it git's whole "
                                 "process group is killed")
    results_max_mib: float = Field(default=256, gt=0, description="size limit of a results file in MiB")
    results_parse_timeout_s: float = Field(default=300, gt=0, description="bound on parsing one results file")

    @model_validator(mode="after")
    def _paired_can_confirm(self) -> Config:
        # a paired night confirms on the rank test at noise.alpha (zlops.judge.paired.judge_pairs): its most pairs
        # must be able to reach it (smallest two-sided exact Mann-Whitney p of n vs n runs: 2 / C(2n, n))
        if any(p.measure == "paired" for p in self.pools.values()):
            need = next(n for n in range(2, 200) if 2.0 / math.comb(2 * n, n) <= self.noise.alpha)
            if self.paired.max_pairs < need:
                raise ValueError(f"paired.max_pairs {self.paired.max_pairs} cannot reach noise.alpha "
                                 f"{self.noise.alpha:g}; use at least {need}")
        return self

    @field_validator("home", "locks_dir_setting", mode="before")
    @classmethod
    def _expand_home(cls, v: Any) -> Any:
        if isinstance(v, (str, Path)):
            return Path(os.path.expandvars(os.path.expanduser(str(v)))).absolute()
        return v

    @field_validator("pools", "suites")
    @classmethod
    def _names(cls, v: dict[str, Any]) -> dict[str, Any]:
        for name in v:
            if not re.match(NAME_PATTERN, name):
                raise ValueError(f"name {name!r} must match {NAME_PATTERN} (letters, digits, . _ -)")
        if not v:
            raise ValueError("at least one entry is required")
        return v

    @field_validator("hosts")
    @classmethod
    def _host_names(cls, v: dict[str, HostConfig]) -> dict[str, HostConfig]:
        queues: dict[str, str] = {}
        for name, host in v.items():
            if not re.match(NAME_PATTERN, name):
                raise ValueError(f"name {name!r} must match {NAME_PATTERN} (letters, digits, . _ -)")
            queue = host.queue or name
            if queue in queues:
                raise ValueError(f"hosts {queues[queue]!r} and {name!r} both use the Celery queue {queue!r}; "
                                 "each host needs its own")
            queues[queue] = name
        return v

    @model_validator(mode="after")
    def _cross_refs(self) -> Config:
        for sname, suite in self.suites.items():
            for p in suite.pools:
                if p not in self.pools:
                    raise ValueError(
                        f"suites.{sname}.pools: pool {p!r} is not defined under pools "
                        f"(defined: {', '.join(sorted(self.pools))})")
        if self.hosts:
            for pname, pool in self.pools.items():
                if pool.host is not None and pool.host not in self.hosts:
                    raise ValueError(f"pools.{pname}.host: host {pool.host!r} is not defined under hosts "
                                     f"(defined: {', '.join(sorted(self.hosts))})")
        # one Airflow pool (one slot) per (zlops pool, device): two zlops pools naming the same device of
        # the same host would be two slots for one device, leaving only the host-local lock between them
        owner: dict[tuple[str | None, str, int], str] = {}
        for pname, pool in sorted(self.pools.items()):
            for device in pool.explicit_devices or ():
                key = (self.queue_of(pname), pool.backend, device)
                if key in owner:
                    raise ValueError(f"pools.{pname}.devices: {pool.backend} device {device} on host "
                                     f"{pool.host or '(none)'} is already in pool {owner[key]!r}; a device belongs "
                                     "to one pool (one Airflow slot per device)")
                owner[key] = pname
        return self

    def queue_of(self, pool: str) -> str | None:
        """The Celery queue of a pool's device tasks: its host's queue; None runs them anywhere."""
        host = self.pools[pool].host
        if host is None:
            return None
        spec = self.hosts.get(host)
        return (spec.queue or host) if spec is not None else host

    def host_queues(self) -> dict[str, int]:
        """Celery queue -> devices on that host (the worker's concurrency), for every declared host."""
        out = {(h.queue or name): 0 for name, h in self.hosts.items()}
        for pname, pool in self.pools.items():
            queue = self.queue_of(pname)
            if queue is not None:
                out[queue] = out.get(queue, 0) + len(pool.explicit_devices or ())
        return dict(sorted(out.items()))

    # --- derived paths -------------------------------------------------------------------------
    @property
    def database_url(self) -> str:
        if self.database is None:
            return f"sqlite:///{self.home / 'zlops.db'}"
        url = os.path.expandvars(self.database)
        if url.startswith("sqlite:///~"):
            url = "sqlite:///" + os.path.expanduser(url[len("sqlite:///"):])
        return url

    @property
    def mirrors_dir(self) -> Path:
        return self.home / "mirrors"

    @property
    def worktrees_dir(self) -> Path:
        return self.home / "worktrees"

    @property
    def envs_dir(self) -> Path:
        return self.home / "envs"

    @property
    def artifacts_dir(self) -> Path:
        return self.home / "artifacts"

    @property
    def locks_dir(self) -> Path:
        """Where device leases live: the ``locks_dir`` key, else host-wide (zlops.host.locks.default_locks_dir),
        never under home: two configs on one host share their devices' leases."""
        from zlops.host.locks import default_locks_dir

        return self.locks_dir_setting if self.locks_dir_setting is not None else default_locks_dir()

    @property
    def run_locks_dir(self) -> Path:
        """Locks of one home's own steps (preparing a run's worktree, planning its partition)."""
        return self.home / "locks"

    def results_max_bytes(self, suite: str) -> int:
        mib = self.suite(suite).results_max_mib or self.results_max_mib
        return int(mib * 1024 * 1024)

    def suite(self, name: str) -> SuiteConfig:
        try:
            return self.suites[name]
        except KeyError:
            raise ConfigError(f"unknown suite {name!r}; configured suites: {', '.join(sorted(self.suites))}") from None

    def thresholds_value(self) -> Thresholds:
        return self.thresholds.to_thresholds()

    def measures_paired(self, pool: str) -> bool:
        """Whether the pool's nights are paired (``pools.<name>.measure: paired``); False for a pool this
        config does not name (a PR compare variant's ``pool.variant``: its pool's mode)."""
        own = self.pools.get(pool) or self.pools.get(pool.split(".", 1)[0])
        return own is not None and own.measure == "paired"

    def host_limits(self, pool: str) -> Any:
        """The pool's contention limits (:class:`zlops.host.contention.HostLimits`): its own keys, else the
        global ``contention`` section's (a pool this config does not name has only the global ones)."""
        from zlops.host.contention import HostLimits

        own, glob = self.pools.get(pool), self.contention

        def pick(name: str) -> Any:
            value = getattr(own, name) if own is not None else None
            return getattr(glob, name) if value is None else value

        enabled = own.contention_gate if own is not None and own.contention_gate is not None else glob.gate
        return HostLimits(max_foreign_cpu_pct=pick("max_foreign_cpu_pct"), max_host_load=pick("max_host_load"),
                          max_steal_pct=pick("max_steal_pct"), contention_wait_s=float(pick("contention_wait_s")),
                          enabled=enabled)


def parse_config(data: Any, *, source: str = "<config>") -> Config:
    """Validate an already-loaded mapping; errors name ``source`` and the key path."""
    from zlops.config.errors import format_errors

    if data is None:
        raise ConfigError(f"{source}: the file is empty: expected a mapping with at least pools and suites "
                          "(see docs/config.md)")
    if not isinstance(data, dict):
        kind = {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(type(data), "value")
        raise ConfigError(f"{source}: expected a mapping at the top level, got a {kind}")
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_errors(source, exc, Config)) from None


def load_config(path: str | os.PathLike[str]) -> Config:
    """Load and validate a YAML config file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{p}: config file not found (pass --config PATH or set ZLOPS_CONFIG)") from None
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read config file: {exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(yaml_problem(p, text, exc)) from None
    return parse_config(data, source=str(p))


#: PyYAML contexts that name an opener never closed (a '[', '{' or quote): the mistake is where it
#: opened, while PyYAML's problem mark is where it gave up looking, often past the end of the file
_UNCLOSED = ("while parsing a flow", "while scanning a quoted scalar")


def yaml_problem(path: Path, text: str, exc: yaml.YAMLError) -> str:
    """``file:line: not valid YAML: problem`` and the line itself, for the line where the mistake is.

    PyYAML reports where it noticed the problem (``problem_mark``) and, for a construct left open,
    where that construct started (``context_mark``): an unclosed ``[`` is noticed at the next
    ``key:`` or at the end of the file, so the line it opened on is the one to fix.
    """
    problem = str(getattr(exc, "problem", None) or exc).strip()
    mark = getattr(exc, "problem_mark", None)
    context = str(getattr(exc, "context", None) or "")
    opened = getattr(exc, "context_mark", None)
    lines = text.splitlines()
    if opened is not None and context.startswith(_UNCLOSED) and (mark is None or mark.line > opened.line):
        noticed = "the end of the file" if mark is None or mark.line >= len(lines) else f"line {mark.line + 1}"
        row = lines[opened.line] if opened.line < len(lines) else ""
        opener = row[opened.column] if opened.column < len(row) else "bracket"
        problem = f"the {opener!r} opened here is never closed ({problem}, at {noticed})"
        mark = opened
    if mark is None:
        return f"{path}: not valid YAML: {problem}"
    line = min(mark.line, max(len(lines) - 1, 0))
    shown = lines[line] if lines else ""
    caret = " " * (mark.column if mark.line == line else len(shown)) + "^"
    gutter = " " * len(str(line + 1))
    return f"{path}:{line + 1}: not valid YAML: {problem}\n  {line + 1} | {shown}\n  {gutter} | {caret}"


def config_from_env(default: str | None = None) -> Config:
    """Load the config named by ``ZLOPS_CONFIG`` (how DAG files and workers find it)."""
    path = os.environ.get("ZLOPS_CONFIG", default)
    if not path:
        raise ConfigError("ZLOPS_CONFIG is not set: point it at your zlops.yaml")
    return load_config(path)
