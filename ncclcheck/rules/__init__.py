"""The rule registry. Explicit and ordered: a rule exists when it is listed here.

``NODE_RULES`` run on each node's facts (``ncclcheck probe`` shows their findings);
``CLUSTER_RULES`` run over every node at once (``ncclcheck recommend``).
"""

from __future__ import annotations

from ncclcheck.rules import (cloud_azure_topo_file, cloud_efa_plugin_owned,
                             cluster_cuda_version_mismatch, cluster_driver_version_mismatch,
                             cluster_ib_ports_down, cluster_mtu_mismatch,
                             cluster_nccl_version_mismatch, env_debug_vars_set,
                             gpu_p2p_unsupported, ib_gdr_not_ready, ib_hca_select,
                             ib_roce_gid_index, ib_timeout_retry, limits_memlock_limited,
                             limits_shm_too_small, nccl_ibverbs_unloadable, nccl_library_missing,
                             nccl_version_multiple, net_socket_ifname, net_socket_threads,
                             net_transport)
from ncclcheck.rules import (cluster_container_bridged, cluster_net_plugin_partial,
                             cluster_rail_cross_nic, cluster_ranks_split_netns,
                             gpu_cuda_driver_too_old, gpu_nic_affinity, host_hostname_loopback,
                             net_firewall_blocks_peers, net_rp_filter_strict,
                             net_same_subnet_nics, platform_acs_iommu, platform_fabric_not_ready)
from ncclcheck.rules import (cluster_mnnvl_not_ready, env_ll128_buffsize, gpu_mig_enabled,
                             ib_pci_write_ordering, ib_roce_lossless, limits_remove_ipc,
                             nccl_ras_diagnostics)
from ncclcheck.rules.base import Rule

NODE_RULES: tuple[Rule, ...] = (
    limits_shm_too_small.RULE,
    limits_memlock_limited.RULE,
    limits_remove_ipc.RULE,
    nccl_ibverbs_unloadable.RULE,
    nccl_library_missing.RULE,
    nccl_version_multiple.RULE,
    ib_gdr_not_ready.RULE,
    ib_roce_lossless.RULE,
    ib_pci_write_ordering.RULE,
    net_same_subnet_nics.RULE,
    net_rp_filter_strict.RULE,
    net_firewall_blocks_peers.RULE,
    host_hostname_loopback.RULE,
    gpu_nic_affinity.RULE,
    platform_acs_iommu.RULE,
    platform_fabric_not_ready.RULE,
    gpu_cuda_driver_too_old.RULE,
    gpu_mig_enabled.RULE,
    env_ll128_buffsize.RULE,
    nccl_ras_diagnostics.RULE,
)
CLUSTER_RULES: tuple[Rule, ...] = (
    net_socket_ifname.RULE,
    net_transport.RULE,
    ib_hca_select.RULE,
    ib_roce_gid_index.RULE,
    ib_timeout_retry.RULE,
    net_socket_threads.RULE,
    cluster_nccl_version_mismatch.RULE,
    cluster_driver_version_mismatch.RULE,
    cluster_cuda_version_mismatch.RULE,
    cluster_mtu_mismatch.RULE,
    cluster_ib_ports_down.RULE,
    gpu_p2p_unsupported.RULE,
    env_debug_vars_set.RULE,
    cloud_efa_plugin_owned.RULE,
    cloud_azure_topo_file.RULE,
    cluster_container_bridged.RULE,
    cluster_net_plugin_partial.RULE,
    cluster_rail_cross_nic.RULE,
    cluster_ranks_split_netns.RULE,
    cluster_mnnvl_not_ready.RULE,
)
ALL_RULES: tuple[Rule, ...] = NODE_RULES + CLUSTER_RULES
