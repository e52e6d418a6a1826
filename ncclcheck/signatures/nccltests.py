"""nccl-tests tables pasted into a report: wrong results, and a bus bandwidth of zero (issue 13)."""

from __future__ import annotations

from ncclcheck.signatures.base import Signature

NCCL_TESTS_WRONG = Signature(
    id="log-nccl-tests-wrong",
    title="nccl-tests found wrong values in the results",
    severity="error",
    cause="nccl-tests checks every result (-c 1, the default); '#wrong' counts elements that "
          "differ from the expected value and 'Out of bounds values' sums them. Wrong data from a "
          "collective points at corrupted transfers: a faulty GPU or NIC, a broken P2P path "
          "(PCIe ACS/IOMMU), or mismatched NCCL builds.",
    fix="Find the size and transport where it starts (NCCL_DEBUG=INFO); rerun with "
        "NCCL_P2P_DISABLE=1, then NCCL_SHM_DISABLE=1, then NCCL_IB_DISABLE=1 to isolate the path; "
        "check GPU health (dcgmi diag) and the NIC counters.",
    docs="https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md; "
         "nccl-tests src/common.cu (CheckData)")

NCCL_TESTS_ONE_RANK = Signature(
    id="log-nccl-tests-one-rank",
    title="nccl-tests ran as several one-rank jobs (bus bandwidth 0)",
    severity="error",
    cause="busbw = algbw x 2(n-1)/n for all_reduce (and (n-1)/n for the others): it is 0 only "
          "when a test has one rank. Under mpirun that means each process ran alone: nccl-tests "
          "was built without MPI support (MPI=1), or launched without mpirun.",
    fix="Build nccl-tests with `make MPI=1 MPI_HOME=...` and run it under mpirun (one process "
        "per GPU, -g 1), or run one process with -g <gpus per node> on a single node.",
    docs="https://github.com/NVIDIA/nccl-tests#usage; nccl-tests doc/PERFORMANCE.md (bus "
         "bandwidth)")

DERIVED = (NCCL_TESTS_WRONG, NCCL_TESTS_ONE_RANK)
