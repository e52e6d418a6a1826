"""What some GPU platforms cannot do by design, known once for the rules and the log judges.

DGX Spark's integrated GB10 cannot expose cudaMalloc memory to PCIe devices, so GPUDirect RDMA
(nvidia-peermem, dma-buf, GDRCopy) does not work there by design
(https://docs.nvidia.com/dgx/dgx-spark-porting-guide/porting/cuda.html): NCCL's network
connections go through host memory, and nothing is to be loaded or fixed.
"""

from __future__ import annotations

#: GPU name (as NVML and nvidia-smi report it, and nccl-tests prints it) -> the platform where
#: GPUDirect RDMA is unsupported by design.
NO_GDR_BY_DESIGN = {"NVIDIA GB10": "DGX Spark (GB10)"}
