"""Every rule cites NCCL's docs at pages that still resolve, or its source at a release tag;
version claims match NCCL's source at the tags (issue 17, checked with git show <tag>:<path>)."""

from __future__ import annotations

import re

import pytest

from ncclcheck.rules import ALL_RULES
from ncclcheck.rules import (cloud_azure_topo_file, ib_gdr_not_ready, ib_roce_gid_index,
                             ib_timeout_retry, limits_shm_too_small)

DOCS = "https://docs.nvidia.com/deeplearning/nccl/"
#: Pages of NCCL's docs a rule may cite (troubleshooting.html is an index since the 2.30 docs).
PAGES = re.compile(r"^https://docs\.nvidia\.com/deeplearning/nccl/(install-guide/index\.html"
                   r"|user-guide/docs/(env\.html|troubleshooting/(gpu_troubleshooting"
                   r"|networking_troubleshooting|runtime_and_mpi_issues)\.html)(#[a-z0-9-]+)?)$")
SOURCE = re.compile(r"^https://github\.com/NVIDIA/nccl/blob/v2\.\d+\.\d+-1/src/[\w/.]+$")


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.id)
def test_docs_cite_a_resolving_page_or_a_tagged_source(rule):
    if rule.id.startswith("cloud-efa"):  # aws-ofi-nccl's own documentation
        assert rule.docs.startswith("https://github.com/aws/aws-ofi-nccl/")
        return
    assert "/docs/troubleshooting.html" not in rule.docs, "old anchors no longer resolve"
    assert PAGES.match(rule.docs) or SOURCE.match(rule.docs), rule.docs


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.id)
def test_no_unpinned_source_link(rule):
    assert "/blob/master/" not in rule.docs or "aws-ofi-nccl" in rule.docs
    assert "/docs/troubleshooting.html#" not in rule.why + rule.fix


def test_version_boundaries_match_the_source_tags():
    assert "2.26.3" in limits_shm_too_small.RULE.why  # cudawrap.cc fallback, v2.26.3-1
    assert "from 2.26.5" not in limits_shm_too_small.RULE.why
    assert "since 2.23" in cloud_azure_topo_file.RULE.why  # NCCL_CONF_FILE, param.cc v2.23.4-1
    assert "(NCCL >= 2.23)" in cloud_azure_topo_file.RULE.fix
    assert "2.30.7" in ib_timeout_retry.RULE.why  # the IB_TIMEOUT hint, net_ib/common.h
    for text in (ib_roce_gid_index.RULE.why, ib_roce_gid_index.RULE.fix,
                 ib_roce_gid_index.__doc__):
        assert "should normally not be set" not in text and "leave it unset" not in text
    assert "2.23" in ib_gdr_not_ready.RULE.why  # /sys/module/nvidia_peermem, net_ib.cc v2.23.4-1


# -- cluster-nccl-version-mismatch: one release, and what a mix does by version -------------------

def _nodes(*versions):
    from ncclcheck.rules.cluster_nccl_version_mismatch import RULE
    nodes = [{"hostname": f"n{i}", "sections": {"nccl": {"status": "ok", "data": {
        "versions": [v], "torch_loads": {"version": v}}}}} for i, v in enumerate(versions)]
    from ncclcheck.rules.engine import evaluate
    return evaluate([RULE], nodes)["findings"]


def test_builds_of_one_release_for_different_cuda_are_one_version():
    assert _nodes("2.21.5", "2.21.5+cuda12.2", "2.21.5") == []


def test_the_mismatch_error_is_promised_only_from_2_23():
    [new] = _nodes("2.23.4", "2.23.4", "2.26.2")
    assert "Mismatched NCCL version detected" in new["message"]
    [old] = _nodes("2.21.5", "2.21.5", "2.23.4")
    assert "Mismatched" not in old["message"] and "fail unpredictably" in old["message"]
