"""Kubernetes without a cluster: the pod environment each job API gives (:mod:`.podenv`),
manifests that run probe, bench and the hunt (:mod:`.render`), node labels over REST
(:mod:`.label`)."""
