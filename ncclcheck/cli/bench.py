"""The ``ncclcheck bench`` command line (registered on the group in :mod:`ncclcheck.cli.main`):
parse, call :func:`ncclcheck.benchcmd.run_command`, render. No logic here."""

from __future__ import annotations

import click

from ncclcheck.cli.context import Ctx
from ncclcheck.cli.options import (
    MAX_ITERS,
    MAX_NODES,
    MAX_PROCS,
    MAX_TIMEOUT_S,
    FloatRange,
    IntRange,
    stdout_dash,
)


BENCH_OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall", "sendrecv")


@click.command()
@click.option("--op", type=click.Choice(BENCH_OPS), default=None,
              help="Collective to measure (default all_reduce); with --import, the file's op.")
@click.option("-b", "--min-bytes", default="8", show_default=True, metavar="SIZE",
              help="Smallest size (K, M, G = 1024^n, as nccl-tests).")
@click.option("-e", "--max-bytes", default="128M", show_default=True, metavar="SIZE",
              help="Largest size (over gloo, CPU ranks without a GPU: 8M unless given).")
@click.option("-f", "--step-factor", type=IntRange(2, 1 << 20), default=2, show_default=True,
              help="Multiply the size by this each step.")
@click.option("-w", "--warmup", type=IntRange(0, MAX_ITERS), default=5, show_default=True,
              help="Untimed ops before each timed block.")
@click.option("-n", "--iters", type=IntRange(1, MAX_ITERS), default=20, show_default=True,
              help="Ops per timed block.")
@click.option("-d", "--dtype", default="float", show_default=True,
              help="Data type: float, half, bfloat16, double, int8, uint8, int32, int64.")
@click.option("-c", "--check", type=IntRange(0, 1), default=1, show_default=True,
              is_flag=False, flag_value=1, metavar="0|1",
              help="Verify results and count #wrong; a non-zero #wrong fails the run.")
@click.option("-a", "--average", default="mean", show_default=True,
              metavar="mean|max|min|rank0",
              help="How the ranks' times combine into the time column (nccl-tests -a 0-3).")
@click.option("--procs", type=IntRange(1, MAX_PROCS), metavar="N",
              help="Ranks per node (default: one per GPU; 2 CPU ranks on one GPU-less node).")
@click.option("--backend", type=click.Choice(("auto", "nccl", "gloo")), default="auto",
              show_default=True, help="auto: NCCL when every node has a GPU, else gloo.")
@click.option("--nodes", type=IntRange(1, MAX_NODES), metavar="N",
              help="Use the first N hosts of --hostfile.")
@click.option("--hostfile", metavar="FILE", help="Hosts to run on over ssh, one per line.")
@click.option("--launcher", type=click.Choice(("ssh", "slurm")), default=None,
              help="ssh (--hostfile) or slurm (srun, one rank per node; the default inside "
                   "salloc/sbatch without --hostfile).")
@click.option("--ssh-config", metavar="FILE", help="ssh config for the nodes (ssh -F).")
@click.option("--remote-python", metavar="PATH",
              help="Python on the other nodes (default: this interpreter's path).")
@click.option("--connect-timeout", type=FloatRange(1, 3600), default=10, show_default=True,
              metavar="S", help="ssh ConnectTimeout for the nodes, in seconds.")
@click.option("--master-addr", metavar="ADDR",
              help="Rendezvous address (default: the first node, as ssh reached it).")
@click.option("--master-port", type=IntRange(1, 65535), metavar="PORT",
              help="Rendezvous port (default: a free port on the first node).")
@click.option("--timeout", type=FloatRange(1, MAX_TIMEOUT_S), default=300, show_default=True,
              metavar="S", help="Bound on rendezvous and on each collective, in seconds.")
@click.option("--env", "env_assignments", multiple=True, metavar="KEY=VALUE",
              help="Run under this setting (repeatable).")
@click.option("--env-file", "env_files", multiple=True, metavar="FILE",
              help="Run under the settings in an env file (NAME=value lines).")
@click.option("--compare", is_flag=True,
              help="Run once per env file given as arguments; print busbw side by side.")
@click.option("--import", "import_path", metavar="FILE",
              help="Read nccl-tests output (- for stdin) instead of measuring.")
@click.option("--nccl-log-dir", metavar="DIR",
              help="Keep the ranks' NCCL_DEBUG logs here (default: a temporary directory).")
@click.option("--link-rate", type=FloatRange(min=0, max=1e6, min_open=True), metavar="GB/s",
              help="Link rate to report the peak busbw against (GB/s, 1e9 bytes/s).")
@click.option("--probe", "probe_files", multiple=True, metavar="FACTS",
              help="Facts of the nodes (ncclcheck probe/cluster JSON) for the expected-bandwidth "
                   "verdict: NIC rates, NVLink, topology (repeatable).")
@click.option("--pairwise", is_flag=True,
              help="Fleet hunt: rounds of node pairs (sendrecv, a time per pair); name slow "
                   "nodes and links.")
@click.option("--rounds", type=IntRange(1, 1000), metavar="K",
              help="With --pairwise: K rounds (~2*log2(N)) instead of all pairs, then confirm.")
@click.option("--budget", default="10m", show_default=True, metavar="DURATION",
              help="With --pairwise: the hunt's wall time (90s, 10m, 1h); sets the time per pair.")
@click.option("--json", "as_json", is_flag=True, help="Print the bench document as JSON.")
@click.option("-o", "--output", metavar="FILE", callback=stdout_dash,
              help="Write the bench JSON to FILE (atomically).")
@click.argument("compare_files", nargs=-1, metavar="[ENV_FILE]...")
@click.pass_obj
def bench(obj: Ctx, op: str | None, min_bytes: str, max_bytes: str, step_factor: int,
          warmup: int, iters: int, dtype: str, check: int, average: str, procs: int | None,
          backend: str,
          nodes: int | None, hostfile: str | None, ssh_config: str | None,
          remote_python: str | None, connect_timeout: float, master_addr: str | None,
          master_port: int | None,
          timeout: float, env_assignments: tuple, env_files: tuple, compare: bool,
          import_path: str | None, nccl_log_dir: str | None, link_rate: float | None,
          as_json: bool, output: str | None, compare_files: tuple,
          launcher: str | None = None, pairwise: bool = False,
          rounds: int | None = None, probe_files: tuple = (), budget: str = "10m") -> None:
    """Measure collective bandwidth like nccl-tests, over torch.distributed (NCCL or gloo).

    \b
    Examples:
      ncclcheck bench -b 8 -e 128M -f 2                  # this node, one rank per GPU
      ncclcheck bench --procs 4 -e 16M                   # no GPU: 4 CPU ranks over gloo
      ncclcheck bench --nodes 2 --hostfile hosts --json -o bench.json
      torchrun --nproc-per-node 8 -m ncclcheck bench     # inside a launcher
      ncclcheck bench --compare a.env b.env              # candidate configurations
      ncclcheck bench --import all_reduce_perf.log --json
      ncclcheck bench --import all_reduce_perf.log --probe facts.json  # judge it
      ncclcheck bench --pairwise --hostfile hosts        # which node or link is slow
    """
    from click.core import ParameterSource

    from ncclcheck.bench.command import BenchRequest
    from ncclcheck.benchcmd import run_command

    given = tuple(name for name in ("max_bytes", "warmup", "iters", "timeout", "budget")
                  if click.get_current_context().get_parameter_source(name)
                  is not ParameterSource.DEFAULT)
    request = BenchRequest(
        op=op, min_bytes=min_bytes, max_bytes=max_bytes, step_factor=step_factor,
        warmup=warmup, iters=iters, dtype=dtype, check=check, average=average, procs=procs,
        backend=backend,
        nodes=nodes, hostfile=hostfile, ssh_config=ssh_config, remote_python=remote_python,
        connect_timeout=connect_timeout, master_addr=master_addr, master_port=master_port,
        timeout=timeout,
        env_assignments=list(env_assignments), env_files=list(env_files), compare=compare,
        compare_files=list(compare_files), import_path=import_path, nccl_log_dir=nccl_log_dir,
        link_rate=link_rate, as_json=as_json, output=output, launcher=launcher,
        pairwise=pairwise, rounds=rounds, budget=budget, probe=list(probe_files),
        given=given, gloo_end="max_bytes" not in given)
    run_command(request, obj.out, obj.err)
