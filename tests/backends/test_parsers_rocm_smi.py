"""rocm-smi --json parser on recorded AMD (ROCm 6.2.4) and Hygon (DTK 24.04.3) outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zlops.backends.parsers.rocm_smi import parse_rocm_smi, parse_rocm_smi_samples

DATA = Path(__file__).resolve().parents[1] / "data" / "rocm-smi"
AMD = DATA / "amd-gpu-6.2.4-rocm-smi.json"
HYGON = DATA / "hygon-gpu-24.04.3-rocm-smi.json"


def test_amd_vram_in_bytes_and_gpu_use() -> None:
    (card,) = parse_rocm_smi(AMD.read_text())
    assert (card.index, card.model) == (0, "Navi 32 [Radeon RX 7700 XT / 7800 XT]")
    assert card.memory_total_mib == pytest.approx(17163091968 / 2**20)
    assert card.memory_used_mib == pytest.approx(11615076352 / 2**20)
    assert card.processes is None and card.extra["util_pct"] == 100.0
    (s,) = parse_rocm_smi_samples(AMD.read_text())
    assert (s.temp_c, s.power_w, s.util_pct, s.sm_clock_mhz) == (45.0, 53.0, 100.0, None)


def test_hygon_lower_case_vram_in_mib_dcu_use_and_an_empty_key() -> None:
    (card,) = parse_rocm_smi(HYGON.read_text())
    assert (card.model, card.memory_used_mib, card.memory_total_mib) == ("DCU xxxx", 2.0, 65520.0)
    assert card.extra["vendor"] == "Chengdu Haiguang IC Design Co., Ltd." and card.extra["util_pct"] == 0.0
    (s,) = parse_rocm_smi_samples(HYGON.read_text())
    assert (s.temp_c, s.power_w, s.util_pct, s.mem_used_mib) == (41.0, 80.0, 0.0, 2.0)


def test_cards_are_ordered_and_system_gives_the_driver() -> None:
    doc = json.loads(AMD.read_text())
    doc["card1"] = {**doc["card0"], "sclk clock speed:": "(2124Mhz)", "mclk clock speed:": "(1249Mhz)"}
    doc["system"] = {"Driver version": "6.8.5"}
    cards = parse_rocm_smi(json.dumps({"card1": doc["card1"], "card0": doc["card0"], "system": doc["system"]}))
    assert [c.index for c in cards] == [0, 1] and {c.driver for c in cards} == {"6.8.5"}
    s1 = parse_rocm_smi_samples(json.dumps(doc))[1]
    assert (s1.index, s1.sm_clock_mhz, s1.mem_clock_mhz) == (1, 2124.0, 1249.0)
