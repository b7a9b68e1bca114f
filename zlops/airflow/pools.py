"""Create one Airflow pool with one slot per configured device (``zlops airflow sync-pools``)."""

from __future__ import annotations

import logging

from zlops.airflow import device_pool_name
from zlops.config.settings import Config

log = logging.getLogger(__name__)


def planned_pools(config: Config) -> dict[str, str]:
    """Pool name -> description for every device of every configured pool."""
    out = {}
    for name, pool in sorted(config.pools.items()):
        for device in pool.explicit_devices or ():  # 'auto' pools get no Airflow pools (CLI only)
            queue = config.queue_of(name)
            where = f" on host {pool.host} (queue {queue})" if pool.host else ""
            out[device_pool_name(name, device)] = f"zlops: {pool.backend} device {device} of pool {name}{where}"
    return out


def sync_pools(config: Config) -> list[str]:
    """Create or update the pools (1 slot each) in the Airflow metadata database; returns their names."""
    from airflow.models.pool import Pool

    names = []
    for name, description in planned_pools(config).items():
        Pool.create_or_update_pool(name=name, slots=1, description=description, include_deferred=False)
        names.append(name)
        log.info("airflow pool %s: 1 slot", name)
    return names
