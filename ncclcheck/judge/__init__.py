"""Judging a whole log or a paste: the checks that read the state :mod:`ncclcheck.logparse` built.

:mod:`ncclcheck.signatures` declares what can be found (ids, severities, fixes, citations) and
the line patterns logparse matches while it reads; this package stands above both and raises the
findings that need the whole log (cross-rank disagreements, missing lines) or a whole paste.
Parsing (logparse/) imports signatures/, judging (judge/) imports both: one direction only.
"""
