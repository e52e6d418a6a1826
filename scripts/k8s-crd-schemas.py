#!/usr/bin/env python3
"""Write tests/fixtures/k8s/crds/*.json: the openAPIV3Schema of each job API's CRD at a pinned tag.

The CRD YAML is read with ``git show TAG:PATH`` from mirrors of the projects' repositories (the
development sandbox's ``/work/.mirror/<owner>+<name>/repo``; pass ``--mirror DIR`` elsewhere).
Needs PyYAML in the development environment only (ncclcheck itself never imports it):

    .venv/bin/pip install pyyaml && .venv/bin/python scripts/k8s-crd-schemas.py

Descriptions are dropped (they are most of the bytes and validate nothing); SOURCES.json keeps
repository, tag, commit and path for each schema.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "k8s" / "crds"
#: api -> (repository, tag, CRD path, served version)
CRDS = {
    "mpijob": ("kubeflow/mpi-operator", "v0.8.0", "manifests/base/kubeflow.org_mpijobs.yaml",
               "v2beta1"),
    "pytorchjob": ("kubeflow/training-operator", "v1.9.0",
                   "manifests/base/crds/kubeflow.org_pytorchjobs.yaml", "v1"),
    "trainjob": ("kubeflow/trainer", "v2.3.0",
                 "manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml", "v1alpha1"),
    "trainingruntime": ("kubeflow/trainer", "v2.3.0",
                        "manifests/base/crds/trainer.kubeflow.org_trainingruntimes.yaml",
                        "v1alpha1"),
    "jobset": ("kubernetes-sigs/jobset", "v0.12.0",
               "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml", "v1alpha2"),
    "lws": ("kubernetes-sigs/lws", "v0.10.0",
            "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml", "v1"),
}


def strip(node):
    """The schema without descriptions."""
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mirror", default="/work/.mirror")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    sources = {}
    for api, (repo, tag, path, version) in CRDS.items():
        git = Path(args.mirror) / repo.replace("/", "+") / "repo"
        commit = subprocess.run(["git", "-C", str(git), "rev-parse", f"{tag}^{{commit}}"],
                                check=True, capture_output=True, text=True).stdout.strip()
        text = subprocess.run(["git", "-C", str(git), "show", f"{tag}:{path}"], check=True,
                              capture_output=True, text=True).stdout
        crd = yaml.safe_load(text)
        served = next(v for v in crd["spec"]["versions"] if v["name"] == version)
        schema = strip(served["schema"]["openAPIV3Schema"])
        (OUT / f"{api}.json").write_text(json.dumps(schema, sort_keys=True,
                                                    separators=(",", ":")) + "\n")
        sources[api] = {"repository": f"https://github.com/{repo}", "tag": tag, "commit": commit,
                        "path": path, "group": crd["spec"]["group"],
                        "kind": crd["spec"]["names"]["kind"], "version": version}
    (OUT / "SOURCES.json").write_text(json.dumps(sources, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
