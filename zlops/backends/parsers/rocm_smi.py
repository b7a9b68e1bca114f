"""Parse ``rocm-smi --json`` (AMD ROCm and Hygon DTK builds).

Recorded inputs: ``tests/data/rocm-smi/`` (gpustack test data: an RX 7700/7800 XT on ROCm 6.2.4
and a Hygon DCU on DTK 24.04.3). The document is ``{"card0": {...}, ...}`` (plus ``"system"``
with some flags); every value is a **string** and units live in the key names, whose spelling
differs between vendors (``VRAM Total Memory (B)`` vs ``vram Total Memory (MiB)``, ``GPU use (%)``
vs ``DCU use (%)``; Hygon even has an empty key). Keys are therefore matched case-insensitively
by regex, and memory is converted from the unit the key names.
"""

from __future__ import annotations

import json
import re
from typing import Any

from zlops.backends.base import DeviceInfo
from zlops.backends.parsers import mib, number
from zlops.host.telemetry import TelemetrySample

_CARD = re.compile(r"^card(\d+)$", re.IGNORECASE)
_VRAM_TOTAL = re.compile(r"^vram total memory \((b|kib|mib|gib|kb|mb|gb)\)$", re.IGNORECASE)
_VRAM_USED = re.compile(r"^vram total used memory \((b|kib|mib|gib|kb|mb|gb)\)$", re.IGNORECASE)
_USE = re.compile(r"^(gpu|dcu) use \(%\)$", re.IGNORECASE)
_TEMP = (re.compile(r"^temperature \(sensor edge\) \(c\)$", re.IGNORECASE),
         re.compile(r"^temperature \(sensor junction\) \(c\)$", re.IGNORECASE))
_POWER = (re.compile(r"^(current socket|average) graphics package power \(w\)$", re.IGNORECASE),
          re.compile(r"graphics package power \(w\)$", re.IGNORECASE))
_SCLK = re.compile(r"^sclk clock speed:?$", re.IGNORECASE)
_MCLK = re.compile(r"^mclk clock speed:?$", re.IGNORECASE)
_MODEL = (re.compile(r"^card series$", re.IGNORECASE), re.compile(r"^device name$", re.IGNORECASE),
          re.compile(r"^card model$", re.IGNORECASE))
_DRIVER = re.compile(r"^driver version$", re.IGNORECASE)


def _find(card: dict[str, Any], *patterns: re.Pattern[str]) -> tuple[str | None, re.Match[str] | None]:
    """The first value whose (stripped) key matches one of ``patterns``, tried in order."""
    for pattern in patterns:
        for key, value in card.items():
            m = pattern.search(str(key).strip())
            if m and value not in (None, ""):
                return str(value), m
    return None, None


def _memory(card: dict[str, Any], pattern: re.Pattern[str]) -> float | None:
    value, m = _find(card, pattern)
    return mib(value, m.group(1)) if m else None


def _clock(card: dict[str, Any], pattern: re.Pattern[str]) -> float | None:
    value, _ = _find(card, pattern)
    if value is None:
        return None
    m = re.search(r"(\d+(?:\.\d+)?)\s*mhz", value, re.IGNORECASE)  # "(1000Mhz)"
    return float(m.group(1)) if m else number(value)


def _cards(text: str) -> tuple[list[tuple[int, dict[str, Any]]], dict[str, Any]]:
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise ValueError("rocm-smi --json: expected an object of cards")
    cards = sorted((int(m.group(1)), v) for k, v in doc.items()
                   if isinstance(v, dict) and (m := _CARD.match(str(k).strip())))
    system = doc.get("system") if isinstance(doc.get("system"), dict) else {}
    return cards, system or {}


def parse_rocm_smi(text: str) -> list[DeviceInfo]:
    """Devices of ``rocm-smi --json``: model, VRAM used/total in MiB, driver where ``system`` has it.
    rocm-smi's JSON has no per-card process count, so ``processes`` is None (unknown)."""
    cards, system = _cards(text)
    driver, _ = _find(system, _DRIVER)
    devices = []
    for index, card in cards:
        model, _ = _find(card, *_MODEL)
        vendor, _ = _find(card, re.compile(r"^card vendor$", re.IGNORECASE))
        unique, _ = _find(card, re.compile(r"^unique id$", re.IGNORECASE))
        use, _ = _find(card, _USE)
        devices.append(DeviceInfo(
            index=index, model=model or "unknown", memory_used_mib=_memory(card, _VRAM_USED),
            memory_total_mib=_memory(card, _VRAM_TOTAL), driver=driver,
            extra={"vendor": vendor, "unique_id": unique, "util_pct": number(use)}))
    return devices


def parse_rocm_smi_samples(text: str) -> list[TelemetrySample]:
    """Telemetry samples from ``rocm-smi --json`` (add ``--showclocks`` for the clock columns)."""
    cards, _ = _cards(text)
    samples = []
    for index, card in cards:
        temp, _ = _find(card, *_TEMP)
        power, _ = _find(card, *_POWER)
        use, _ = _find(card, _USE)
        samples.append(TelemetrySample(
            index=index, sm_clock_mhz=_clock(card, _SCLK), mem_clock_mhz=_clock(card, _MCLK), temp_c=number(temp),
            power_w=number(power), util_pct=number(use), mem_used_mib=_memory(card, _VRAM_USED)))
    return samples


__all__ = ["parse_rocm_smi", "parse_rocm_smi_samples"]
