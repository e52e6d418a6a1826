"""ncclcheck: make multi-node NCCL training networks work, and run fast."""

__version__ = "0.1.0"
