"""GPU names (nccl-tests' ``# Rank`` lines, NVML, torch) into the model the table is keyed by.

>>> [gpu_model(n) for n in ("NVIDIA H100 80GB HBM3", "A100-SXM4-40GB", "NVIDIA H200",
...                         "NVIDIA GeForce RTX 5090", "Tesla T4", "NVIDIA B200")]
['H100', 'A100', 'H200', 'RTX 5090', 'T4', 'B200']
>>> nvlink_capable("NVIDIA A100-PCIE-40GB"), nvlink_capable("NVIDIA H100 80GB HBM3")
(False, True)
>>> pcie_gen("NVIDIA GeForce RTX 4090"), pcie_gen("NVIDIA H100 PCIe"), pcie_gen("Tesla T4")
(4, 5, 3)
"""

from __future__ import annotations

import re

#: Models in the NVLink classes (SXM/HGX parts; their PCIe cards say "PCIe").
NVLINK_MODELS = ("GB200", "GB300", "B200", "B300", "H200", "H100", "H800", "H20", "A100", "A800",
                 "V100")
#: PCIe generation of cards without NVLink (the P2P classes exist for Gen4 and Gen5).
GEN5 = re.compile(r"RTX 50\d\d|RTX PRO 6000 Blackwell|H100 PCIe|H100 NVL|H200 NVL|B200 PCIe", re.I)
GEN4 = re.compile(r"RTX [34]0\d\d|RTX A\d000|RTX 6000 Ada|\bA10G?\b|\bA16\b|\bA30\b|\bA40\b|\bL4\b|"
                  r"\bL40S?\b|\bL20\b|A100[- ]PCIE|A800[- ]PCIE|\bA2\b", re.I)


def gpu_model(name: str | None) -> str | None:
    """The model in a GPU name: ``H100``, ``A100``, ``RTX 4090``...; None for none."""
    if not name:
        return None
    text = name.replace("NVIDIA", "").replace("Tesla", "").replace("GeForce", "").strip()
    for model in NVLINK_MODELS:
        if re.search(rf"\b{model}\b", text):
            return model
    m = re.search(r"RTX (PRO )?\d{4}|RTX A\d000|\b[ALT]\d+[GS]?\b|\bV100\b|\bP100\b", text)
    return m.group(0) if m else (text or None)


def nvlink_capable(name: str | None) -> bool:
    """Whether the GPU is an SXM/HGX part (NVLink and NVSwitch), not its PCIe card."""
    if not name or re.search(r"PCI-?E|\bNVL\b", name, re.I):
        return False
    return gpu_model(name) in NVLINK_MODELS


def pcie_gen(name: str | None) -> int | None:
    """The PCIe generation of a card (3, 4, 5), None when the name does not tell."""
    if not name:
        return None
    if GEN5.search(name):
        return 5
    if GEN4.search(name):
        return 4
    if re.search(r"\bT4\b|V100|P100|P40|RTX 20\d\d", name):
        return 3
    return None
