"""Kernel inventories in the store (SQLite and PostgreSQL): idempotent per shard, read back per pool,
and an alert's attribution built from them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from triton_cache_factory import flaggems_like

from zlops.alerts.explain import alert_attribution
from zlops.alerts.lifecycle import Alert, AlertState
from zlops.config.settings import parse_config
from zlops.kernels.attribution import KERNEL_CHANGED, NO_INVENTORY, OUTSIDE
from zlops.kernels.inventory import Inventory, capped, none
from zlops.kernels.triton import parse_cache
from zlops.model import RunStatus
from zlops.store import Store
from zlops.store.models import KernelInventoryRow, KernelRow


def _alert(make: Any, case: str = "amax/float16/(64x64)", base: int = 1, head: str = "head") -> Alert:
    t = make.when(1)
    return Alert(id=7, suite="ops", pool="npu", case=case, metric="latency", unit="ms", lower_is_better=True,
                 state=AlertState.CONFIRMED, opened_run=head, last_run=head, base_value=1.0, band_pct=2.0,
                 first_base_sha=make.sha(base), first_head_sha=make.sha(2), last_head_sha=make.sha(2),
                 last_change_pct=9.0, worst_worse_pct=9.0, thread_notification_id=None, thread_ts=None,
                 channel_id=None, note="", opened_at=t, updated_at=t)


def _night(store: Store, make: Any, tmp_path: Path, key: str, sha: int, *, changed: dict | None = None,
           ident: dict | None = None) -> None:
    store.upsert_run(make.run(key, sha=sha, accepted=True, status=RunStatus.DONE, day=sha))
    for device in (0, 1):
        store.record_shard(key, make.shard(device=device), identity=ident or {"driver": "550.54"},
                           telemetry={"sm_clock_median_mhz": 1980.0})
        flaggems_like(tmp_path / key / str(device), 12, changed=changed, size=200)
        store.record_kernels(key, "npu", device, parse_cache(tmp_path / key / str(device)))


def _count(store: Store, model: type) -> int:
    with store.session() as s:
        return s.query(model).count()


def test_inventory_is_replaced_not_duplicated(store: Store, make: Any, tmp_path: Path) -> None:
    _night(store, make, tmp_path, "n1", 1)
    assert _count(store, KernelRow) == 24 and _count(store, KernelInventoryRow) == 2
    inv = parse_cache(tmp_path / "n1" / "0")
    store.record_kernels("n1", "npu", 0, capped(inv, 5))   # a retried ingest, this time capped
    store.record_kernels("n1", "npu", 0, capped(inv, 5))
    assert _count(store, KernelRow) == 12 + 5 and _count(store, KernelInventoryRow) == 2
    pool = store.pool_inventory("n1", "npu")
    assert pool is not None and [len(i.kernels) for i in pool.inventories] == [5, 12]
    assert pool.inventories[0].dropped == 7 and pool.identity == {"driver": "550.54"}
    assert {k.name for k in pool.inventories[1].kernels} == {k.name for k in inv.kernels}
    store.record_kernels("n1", "npu", 1, none("cuobjdump", "not implemented"))
    again = store.pool_inventory("n1", "npu")
    assert again is not None and again.inventories[1].state == "none" and again.inventories[1].kernels == ()
    assert store.pool_inventory("nope", "npu") is None


def test_alert_attribution_from_the_stored_nights(store: Store, make: Any, tmp_path: Path) -> None:
    config = parse_config({"home": str(tmp_path / "home"), "pools": {"npu": {"backend": "cpu", "devices": [0]}},
                               "suites": {"ops": {"repo": ".", "command": ["x"], "format": "zlops-json",
                                                  "pools": ["npu"], "kernels": "triton"}}})
    _night(store, make, tmp_path, "base", 1)
    _night(store, make, tmp_path, "head", 2, changed={"amax_kernel": {"num_warps": 8}},
           ident={"driver": "560.28"})
    a = store.read(alert_attribution, _alert(make), config)
    assert a.kind == KERNEL_CHANGED and a.text.startswith("kernel code changed: amax_kernel (compiled code ")
    assert a.text.endswith("num_warps 4 -> 8); run identity differs: driver 550.54 -> 560.28")
    b = store.read(alert_attribution, _alert(make, case="fill_scalar/float32"), config)
    assert b.kind == OUTSIDE
    # the baseline commit has no stored night: no inventory, said so
    c = store.read(alert_attribution, _alert(make, base=9), config)
    assert c.kind == NO_INVENTORY and c.text.startswith("no inventory: the baseline night recorded no kernel")
    # a suite without kernels: says so in one line
    plain = config.model_copy(update={"suites": {"ops": config.suites["ops"].model_copy(update={"kernels": None})}})
    d = store.read(alert_attribution, _alert(make), plain)
    assert d.text == "no inventory: suite ops declares no kernel toolchain (kernels: triton records one)"


def test_the_kernel_seed_is_the_newest_earlier_accepted_night_with_kernels_on_the_pool(
        store: Store, make: Any, tmp_path: Path) -> None:
    """zlops.store.kernels.seed_shards: one read, whatever the history (zlops.kernels.seed)."""
    ok = parse_cache(flaggems_like(tmp_path / "c", 2, size=100)[0].parent)
    nights = {  # run: (day, accepted, inventories on npu's devices)
        "n1": (1, True, {0: ok, 1: ok}), "n2": (2, True, {0: Inventory(provider="triton", state="ok")}),
        "n3": (3, False, {0: ok}), "n4": (4, False, {}), "n5": (5, True, {0: ok}),
        "n6": (6, True, {0: none("triton", "cannot read")})}
    for key, (day, accepted, invs) in nights.items():
        store.upsert_run(make.run(key, accepted=accepted, status=RunStatus.DONE, day=day))
        for device, inv in invs.items():
            store.record_shard(key, make.shard(device=device, artifact_dir=tmp_path / key / str(device)))
            store.record_kernels(key, "npu", device, inv)
    both = ("n1", [(0, str(tmp_path / "n1" / "0")), (1, str(tmp_path / "n1" / "1"))])
    # n2's inventory is empty, n3 is not accepted, n5 started after n4, n6 could not read its cache
    assert store.kernel_seed_shards("ops", "npu", run_key="n4") == both
    assert store.kernel_seed_shards("ops", "npu", run_key="n5") == both
    assert store.kernel_seed_shards("ops", "npu", run_key="n7") == ("n5", [(0, str(tmp_path / "n5" / "0"))])
    assert store.kernel_seed_shards("ops", "gpu", run_key="n4") is None
    assert store.kernel_seed_shards("ops", "npu", run_key="n1") is None
    assert store.kernel_seed_shards("other", "npu", run_key="n4") is None
