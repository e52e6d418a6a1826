"""What a failed job leaves behind, read by ``ncclcheck diagnose DIR|FILE...`` (issue 22).

:mod:`.inputs` walks a folder and takes each file by content; :mod:`.unpickle` reads pickles
admitting no callable; :mod:`.fr` compacts Flight Recorder dumps; :mod:`.text` and :mod:`.ras`
read torchrun, srun, torch, gloo and NCCL RAS lines; :mod:`.verdict` (dumps) and
:mod:`.textjudge` (text only) find the first desynchronised collective and the culprits;
:mod:`.advice` gives the class, next step, stacks and disagreements; :mod:`.job` joins them.
"""
