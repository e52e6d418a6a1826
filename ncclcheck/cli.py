"""The ``ncclcheck`` command line: parse options, call one function, render. No logic here.

Each command's work lives in its own module (``probe.py``, ``record.py``, ``bench/``,
``recommend.py``, ``diagnose.py``, ``report.py``); rendering lives in ``render/``. Heavy modules
are imported inside the command that needs them, so ``ncclcheck --help`` stays fast and nothing on
the probe's path imports torch.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from ncclcheck import __version__
from ncclcheck.cliopts import GreedyOption, show_usage_error, stdout_dash
from ncclcheck.errors import BadInput, NcclcheckError
from ncclcheck.exitcodes import ExitCode
from ncclcheck.textsafe import printable, printable_lines, safe_console

SEVERITIES = ("info", "warning", "error")


class Ctx:
    """Per-invocation state: the consoles, created in the group callback (tests inject their own)."""

    def __init__(self, out: Any = None, err: Any = None) -> None:
        self._out, self._err = out, err

    @property
    def out(self) -> Any:
        """A rich Console on stdout."""
        if self._out is None:
            self._out = safe_console()
        return self._out

    @property
    def err(self) -> Any:
        """A rich Console on stderr."""
        if self._err is None:
            self._err = safe_console(stderr=True)
        return self._err


def emit(text: str, output: str | None) -> None:
    """Write a document to ``-o FILE`` atomically, or to stdout."""
    if output and output != "-":
        from ncclcheck.schema import write_atomic

        write_atomic(output, text)
    else:
        click.echo(text, nl=False)


def exit_for_findings(findings: list[dict], fail_on: str | None) -> None:
    """Exit 3 when a finding is at or above ``--fail-on``."""
    if fail_on:
        floor = SEVERITIES.index(fail_on)
        if any(SEVERITIES.index(f["severity"]) >= floor for f in findings):
            sys.exit(ExitCode.FINDINGS)


fail_on_option = click.option(
    "--fail-on", type=click.Choice(SEVERITIES), default=None,
    help="Exit 3 when a finding has this severity or worse.")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "-V", "--version", prog_name="ncclcheck")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Make multi-node NCCL training networks work, and run fast.

    \b
    Exit codes: 0 ok, 1 runtime error, 2 usage or bad input,
                3 findings at or above --fail-on.
    """
    if ctx.obj is None:
        ctx.obj = Ctx()


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the facts document as JSON.")
@click.option("-o", "--output", metavar="FILE", callback=stdout_dash,
              help="Write the facts JSON to FILE (atomically; - for stdout).")
@click.option("--root", default="/", show_default=True, metavar="PATH",
              help="Read files under PATH (a mounted host tree, an unpacked sos report).")
@click.option("--replay", metavar="DIR", help="Probe a recorded host folder instead of this machine.")
@click.option("--only", metavar="SECTIONS", help="Comma-separated sections to collect.")
@click.option("--hostfile", metavar="FILE",
              help="Probe every host of FILE over ssh (formats as bench) into a cluster document.")
@click.option("--nodes", type=click.IntRange(1), metavar="N", help="Only the first N hosts.")
@click.option("--ssh-config", metavar="FILE", help="ssh config for the nodes (ssh -F).")
@click.option("--remote-python", metavar="PATH",
              help="Python with ncclcheck on the nodes (default: this interpreter's path).")
@click.option("--timeout", type=click.FloatRange(min=1), default=120, show_default=True,
              metavar="S", help="Seconds per host, connection included.")
@click.option("--connect-timeout", type=click.FloatRange(min=1), default=10, show_default=True,
              metavar="S", help="Seconds for ssh to connect.")
@click.option("--concurrency", type=click.IntRange(1), default=32, show_default=True,
              metavar="N", help="Hosts probed at once.")
@click.option("--out-dir", metavar="DIR", help="Also write one facts file per host into DIR.")
@click.option("--launcher", type=click.Choice(("ssh", "slurm")), default=None,
              help="How to reach the nodes: ssh (--hostfile) or slurm (srun, one task per node; "
                   "the default inside salloc/sbatch without --hostfile).")
@click.option("--from", "from_paths", cls=GreedyOption, metavar="DIR|FILE...",
              help="Load facts collected elsewhere (srun, pdsh, Kubernetes) instead of probing.")
@fail_on_option
@click.pass_obj
def probe(obj: Ctx, as_json: bool, output: str | None, root: str, replay: str | None,
          only: str | None, hostfile: str | None, nodes: int | None, ssh_config: str | None,
          remote_python: str | None, timeout: float, connect_timeout: float, concurrency: int,
          out_dir: str | None, launcher: str | None, from_paths: tuple,
          fail_on: str | None) -> None:
    """Collect facts about this node: GPUs, NCCL libraries, network, IB/RoCE, limits, env.

    \b
    With --hostfile (or --from), facts from every node, and what differs between them:
      ncclcheck probe --hostfile hosts -o cluster.json --out-dir facts/
      ncclcheck probe --from facts/          # files from srun, pdsh, Kubernetes
      salloc -N2 ncclcheck probe --launcher slurm -o cluster.json
    """
    from ncclcheck import probe as probe_mod
    from ncclcheck.schema import dumps

    if output and output != "-" and os.path.isdir(output):
        raise BadInput(f"-o {output}: is a directory, not a file")
    from ncclcheck.slurm import choose_launcher

    launcher = choose_launcher(launcher, hostfile, list(from_paths), root, replay)
    if hostfile or from_paths or launcher == "slurm":
        from ncclcheck.cluster import collect_cluster, exit_code, write_per_host
        from ncclcheck.render.cluster import render_cluster

        doc = collect_cluster(hostfile, nodes, ssh_config, remote_python, timeout,
                              connect_timeout, concurrency, list(from_paths), only, launcher)
        for path in write_per_host(doc, out_dir) if out_dir else []:
            obj.err.print(f"facts written to {path}", markup=False, highlight=False)
        if output and output != "-":
            if doc["nodes"] or not doc.get("failed"):
                emit(dumps(doc), output)
            else:
                click.echo(f"ncclcheck: note: every host failed: {output} is not written (an "
                           "earlier file stays as it was)", err=True)
        if as_json or output == "-":
            click.echo(dumps(doc), nl=False)
        render_cluster(obj.err if (as_json or output) else obj.out, doc)
        exit_for_findings([f for n in doc["nodes"] for f in n.get("findings", [])], fail_on)
        sys.exit(exit_code(doc))
    host = probe_mod.open_host(root, replay)
    doc = probe_mod.collect_facts(host, only.split(",") if only else None)
    if output and output != "-":
        emit(dumps(doc), output)
    if as_json or output == "-":  # "-o -" is the JSON on stdout, as --json
        click.echo(dumps(doc), nl=False)
    elif not output:
        from ncclcheck.render.facts import render_facts

        render_facts(obj.out, doc)
    else:
        from ncclcheck.render.facts import render_findings

        render_findings(obj.err, doc.get("findings", []))
        obj.err.print(f"facts written to {output}", markup=False, highlight=False)
    exit_for_findings(doc.get("findings", []), fail_on)


@cli.command()
@click.argument("folder", metavar="DIR")
@click.option("--root", default="/", show_default=True, metavar="PATH",
              help="Record files under PATH instead of /.")
@click.option("--scrub/--no-scrub", default=True, show_default=True,
              help="Replace hostnames, IP addresses (also in /proc/net hex), MACs, IB GUIDs, "
                   "UUIDs, container ids, serials and the /home user name, consistently.")
@click.pass_obj
def record(obj: Ctx, folder: str, root: str, scrub: bool) -> None:
    """Record what the probe reads on this node into DIR, to replay or attach to a bug report."""
    from ncclcheck.record import record_host

    path = record_host(folder, root=root, scrub=scrub)
    obj.err.print(f"recorded to {path} (replay: ncclcheck probe --replay {path})",
                  markup=False, highlight=False)


# --- rank command (rank.py) -----------------------------------------------------------------
@cli.command()
@click.option("--hostfile", required=True, metavar="FILE",
              help="Hostfile (DeepSpeed/MPI 'host slots=N', pssh 'user@host:port', or a list).")
@click.option("--nodes", type=int, metavar="N", help="Use the first N hosts of the hostfile.")
@click.option("--port-range", default="29500-29599", show_default=True, metavar="LO-HI",
              help="Every node prints LO; if LO is busy on the master, it fails and names a "
                   "free port of the range for --master-port.")
@click.option("--master-port", type=click.IntRange(1, 65535), metavar="PORT",
              help="Use this MASTER_PORT (checked free on the master).")
@click.option("--export", "export", is_flag=True, help="Prefix each line with 'export '.")
@click.option("--json", "as_json", is_flag=True, help="Print the values as JSON.")
@click.pass_obj
def rank(obj: Ctx, hostfile: str, nodes: int | None, port_range: str, master_port: int | None,
         export: bool, as_json: bool) -> None:
    """Print NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT for this node, for torchrun.

    \b
    eval "$(ncclcheck rank --hostfile hosts)"
    torchrun --nnodes=$NNODES --node-rank=$NODE_RANK --nproc-per-node=8 \\
             --master-addr=$MASTER_ADDR --master-port=$MASTER_PORT train.py

    Every node prints the same MASTER_PORT, or the master fails (exit 1) and names the
    --master-port to give every node.
    """
    import json

    from ncclcheck.hostfile import load_hostfile
    from ncclcheck.rank import format_shell, parse_port_range, rank_assignments

    targets = load_hostfile(hostfile, nodes)
    notes: list[str] = []
    values = rank_assignments(targets, port_range=parse_port_range(port_range),
                              master_port=master_port, source=hostfile, notes=notes)
    for note in notes:
        click.echo(f"ncclcheck: note: {note}", err=True)
    click.echo(json.dumps(values) if as_json else format_shell(values, export), nl=as_json)
# --- end rank ---


# --- bench command (bench/) -------------------------------------------------------
BENCH_OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall", "sendrecv")


@cli.command()
@click.option("--op", type=click.Choice(BENCH_OPS), default=None,
              help="Collective to measure (default all_reduce); with --import, the file's op.")
@click.option("-b", "--min-bytes", default="8", show_default=True, metavar="SIZE",
              help="Smallest size (K, M, G = 1024^n, as nccl-tests).")
@click.option("-e", "--max-bytes", default="128M", show_default=True, metavar="SIZE",
              help="Largest size.")
@click.option("-f", "--step-factor", type=click.IntRange(2), default=2, show_default=True,
              help="Multiply the size by this each step.")
@click.option("-w", "--warmup", type=click.IntRange(0), default=5, show_default=True,
              help="Untimed ops before each timed block.")
@click.option("-n", "--iters", type=click.IntRange(1), default=20, show_default=True,
              help="Ops per timed block.")
@click.option("-d", "--dtype", default="float", show_default=True,
              help="Data type: float, half, bfloat16, double, int8, uint8, int32, int64.")
@click.option("-c", "--check", type=click.IntRange(0, 1), default=1, show_default=True,
              is_flag=False, flag_value=1, metavar="0|1",
              help="Verify results and count #wrong; a non-zero #wrong fails the run.")
@click.option("-a", "--average", default="mean", show_default=True,
              metavar="mean|max|min|rank0",
              help="How the ranks' times combine into the time column (nccl-tests -a 0-3).")
@click.option("--procs", type=click.IntRange(1), metavar="N",
              help="Ranks per node (default: one per GPU; 2 CPU ranks on one GPU-less node).")
@click.option("--backend", type=click.Choice(("auto", "nccl", "gloo")), default="auto",
              show_default=True, help="auto: NCCL when every node has a GPU, else gloo.")
@click.option("--nodes", type=click.IntRange(1), metavar="N",
              help="Use the first N hosts of --hostfile.")
@click.option("--hostfile", metavar="FILE", help="Hosts to run on over ssh, one per line.")
@click.option("--launcher", type=click.Choice(("ssh", "slurm")), default=None,
              help="ssh (--hostfile) or slurm (srun, one rank per node; the default inside "
                   "salloc/sbatch without --hostfile).")
@click.option("--ssh-config", metavar="FILE", help="ssh config for the nodes (ssh -F).")
@click.option("--remote-python", metavar="PATH",
              help="Python on the other nodes (default: this interpreter's path).")
@click.option("--connect-timeout", type=click.FloatRange(min=1), default=10, show_default=True,
              metavar="S", help="ssh ConnectTimeout for the nodes, in seconds.")
@click.option("--master-addr", metavar="ADDR",
              help="Rendezvous address (default: the first node, as ssh reached it).")
@click.option("--master-port", type=click.IntRange(1, 65535), metavar="PORT",
              help="Rendezvous port (default: a free port on the first node).")
@click.option("--timeout", type=click.FloatRange(min=1), default=300, show_default=True,
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
@click.option("--link-rate", type=click.FloatRange(min=0, min_open=True), metavar="GB/s",
              help="Link rate to report the peak busbw against (GB/s, 1e9 bytes/s).")
@click.option("--pairwise", is_flag=True,
              help="Fleet hunt: rounds of node pairs (sendrecv at -e); name slow nodes and links.")
@click.option("--rounds", type=click.IntRange(1), metavar="K",
              help="With --pairwise: K rounds (~2*log2(N)) instead of all pairs, then confirm.")
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
          rounds: int | None = None) -> None:
    """Measure collective bandwidth like nccl-tests, over torch.distributed (NCCL or gloo).

    \b
    Examples:
      ncclcheck bench -b 8 -e 128M -f 2                  # this node, one rank per GPU
      ncclcheck bench --procs 4 -e 16M                   # no GPU: 4 CPU ranks over gloo
      ncclcheck bench --nodes 2 --hostfile hosts --json -o bench.json
      torchrun --nproc-per-node 8 -m ncclcheck bench     # inside a launcher
      ncclcheck bench --compare a.env b.env              # candidate configurations
      ncclcheck bench --import all_reduce_perf.log --json
      ncclcheck bench --pairwise --hostfile hosts -e 64M  # which node or link is slow
    """
    from ncclcheck.bench.command import BenchRequest, run_command

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
        pairwise=pairwise, rounds=rounds)
    run_command(request, obj.out, obj.err)
# --- end bench ---


# --- recommend and rules commands (recommend.py) --------------------------------------------
@cli.command()
@click.option("--probe", "probe_paths", cls=GreedyOption, metavar="FILE...",
              help="Facts files, folders of them, or cluster documents (default: probe this node).")
@click.option("--bench", "bench_paths", cls=GreedyOption, metavar="FILE...",
              help="Bench documents (ncclcheck bench, --compare, --import) to decide ties.")
@click.option("--format", "fmt", type=click.Choice(["env", "shell", "deepspeed", "json"]),
              default="env", show_default=True, help="What stdout (or -o) gets.")
@click.option("-o", "--output", metavar="FILE", callback=stdout_dash,
              help="Write to FILE (atomically) instead of stdout.")
@click.option("--explain", is_flag=True, help="Print every reason in full (stderr).")
@click.option("--quiet", "-q", is_flag=True, help="No explanation on stderr.")
@click.option("--verify", is_flag=True,
              help="Load the result with the real libnccl (NCCL_CONF_FILE, ncclGetUniqueId).")
@click.option("--nccl-lib", metavar="PATH", help="The libnccl --verify loads.")
@click.option("--candidates-dir", metavar="DIR",
              help="Write one env file per candidate of each tie, for bench --compare.")
@fail_on_option
@click.pass_obj
def recommend(obj: Ctx, probe_paths: tuple, bench_paths: tuple, fmt: str, output: str | None,
              explain: bool, quiet: bool, verify: bool, nccl_lib: str | None,
              candidates_dir: str | None, fail_on: str | None) -> None:
    """Recommend NCCL settings for every node: stdout is an env file, reasons go to stderr.

    \b
      ncclcheck recommend > nccl.env                     # this node
      ncclcheck probe --hostfile hosts -o cluster.json
      ncclcheck recommend --probe cluster.json --explain > nccl.env
      ncclcheck recommend --probe facts/*.json --bench compare.json --format shell
      ncclcheck recommend --probe cluster.json --verify -o nccl.env
    """
    from ncclcheck.cluster import gc_paused
    from ncclcheck.recommend import run_command

    with gc_paused():  # the whole short-lived command: 1,000 facts files parse 3x faster
        doc, text, problems = run_command(list(probe_paths), list(bench_paths), fmt,
                                          verify=verify, nccl_lib=nccl_lib,
                                          candidates_dir=candidates_dir, output=output)
        verified = not verify or doc["verify"]["ok"]
        if verified:  # a file that failed --verify is never written
            emit(text, output)
        if not quiet:
            from ncclcheck.render.recommend import render_explanation, render_verify

            render_explanation(obj.err, doc, explain)
            if verify:
                render_verify(obj.err, doc["verify"])
    if not verified:
        raise NcclcheckError("verify failed, nothing written: "
                             + "; ".join(doc["verify"]["problems"]))
    exit_for_findings(problems, fail_on)


@cli.command()
@click.option("--explain", is_flag=True, help="Also print each rule's why, fix and citation.")
@click.option("--json", "as_json", is_flag=True, help="Print the registry as JSON.")
@click.pass_obj
def rules(obj: Ctx, explain: bool, as_json: bool) -> None:
    """List the rules recommend and probe run: id, scope, severity, what they read and set."""
    from ncclcheck.rules import ALL_RULES

    if as_json:
        import json

        keys = ("id", "title", "severity", "scope", "reads", "sets", "why", "docs", "fix")
        click.echo(json.dumps([{k: getattr(r, k).value if k == "severity" else getattr(r, k)
                                for k in keys} for r in ALL_RULES], indent=2))
        return
    from ncclcheck.render.recommend import render_rules

    render_rules(obj.out, list(ALL_RULES), explain)
# --- end recommend ---


# --- diagnose command (diagnose.py) ---------------------------------------------------------
@cli.command()
@click.argument("files", nargs=-1, required=True, metavar="FILE... | -")
@click.option("--json", "as_json", is_flag=True, help="Print the diagnosis document as JSON.")
@click.option("-o", "--output", metavar="FILE", callback=stdout_dash,
              help="Write the diagnosis JSON to FILE (atomically).")
@fail_on_option
@click.pass_obj
def diagnose(obj: Ctx, files: tuple[str, ...], as_json: bool, output: str | None,
             fail_on: str | None) -> None:
    """Explain NCCL logs (NCCL_DEBUG=INFO/WARN output and tracebacks) from any launcher.

    \b
    Reads plain or gzip files, or - for standard input, streaming:
      torchrun ... 2>&1 | ncclcheck diagnose -
      ncclcheck diagnose node*.log.gz --json -o diagnosis.json
    """
    from ncclcheck.diagnose import diagnose_files
    from ncclcheck.schema import dumps

    doc = diagnose_files(list(files))
    if output and output != "-":
        emit(dumps(doc), output)
    if as_json or output == "-":
        click.echo(dumps(doc), nl=False)
    else:
        from ncclcheck.render.diagnose import render_diagnosis

        render_diagnosis(obj.out if not output else obj.err, doc)
        if output:
            obj.err.print(f"diagnosis written to {output}")
    exit_for_findings(doc["findings"], fail_on)
# --- end diagnose ---


# --- report command (report.py) -------------------------------------------------------------
@cli.command()
@click.argument("documents", nargs=-1, required=True, metavar="DOC...")
@click.option("-o", "--output", metavar="FILE", callback=stdout_dash,
              help="Write the report to FILE (atomically) instead of stdout.")
@click.option("--format", "fmt", type=click.Choice(["html", "md"]), default=None,
              help="html (one self-contained page) or md (Markdown for an issue). "
                   "Default: md when FILE ends in .md, else html.")
@click.option("--title", metavar="TEXT", help="The page title (default: names the nodes).")
@click.pass_obj
def report(obj: Ctx, documents: tuple[str, ...], output: str | None, fmt: str | None,
           title: str | None) -> None:
    """Render facts, cluster, bench, recommendation and diagnosis documents as one page.

    \b
    ncclcheck report facts-*.json bench.json nccl-rec.json -o report.html
    ncclcheck report facts-*.json diagnosis.json --format md > report.md
    """
    from ncclcheck.report import format_for, make_report

    emit(printable_lines(make_report(documents, format_for(output, fmt), title)), output)
    if output and output != "-":
        obj.err.print(f"report written to {output}", markup=False, highlight=False)
# --- end report ---


# --- tune command (tune/; options in clitune.py) -----------------------------------------------
def _add_tune() -> None:
    from ncclcheck.clitune import tune

    cli.add_command(tune)


_add_tune()
# --- end tune ---


# --- schema command (validate.py) -----------------------------------------------------------
@cli.command("schema")
@click.argument("name", required=False, metavar="[NAME]")
def schema_cmd(name: str | None) -> None:
    """Print the JSON Schema of a document (facts, cluster, bench, diagnosis, recommendation).

    \b
      ncclcheck schema                 # the names
      ncclcheck schema facts > facts.schema.json
    """
    import json

    from ncclcheck import validate

    if not name:
        click.echo("\n".join(validate.KINDS))
        return
    click.echo(json.dumps(validate.definition(name.removeprefix("ncclcheck/")), indent=1,
                          sort_keys=True))
# --- end schema ---


def main(argv: list[str] | None = None, obj: Ctx | None = None) -> None:
    """Entry point: run the CLI, turn every failure into one line and an exit code."""
    try:
        rv = cli.main(args=argv, prog_name="ncclcheck", standalone_mode=False, obj=obj)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        show_usage_error(exc)
        sys.exit(ExitCode.USAGE if isinstance(exc, click.UsageError) or exc.exit_code == 2
                 else exc.exit_code)
    except click.exceptions.Abort:
        click.echo("ncclcheck: interrupted", err=True)
        sys.exit(130)
    except NcclcheckError as exc:
        click.echo(f"ncclcheck: error: {printable(exc)}", err=True)
        sys.exit(exc.code)
    except KeyboardInterrupt:
        click.echo("ncclcheck: interrupted", err=True)
        sys.exit(130)
    except RecursionError:  # only input nested deeper than any document ncclcheck writes
        click.echo("ncclcheck: error: an input is nested too deeply", err=True)
        sys.exit(ExitCode.USAGE)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(ExitCode.OK)
    except Exception as exc:  # last resort: one line, never a traceback
        if os.environ.get("NCCLCHECK_DEBUG"):
            raise
        click.echo(f"ncclcheck: internal error: {type(exc).__name__}: {printable(exc)} "
                   "(set NCCLCHECK_DEBUG=1 for the traceback)", err=True)
        sys.exit(ExitCode.ERROR)
    sys.exit(rv if isinstance(rv, int) else ExitCode.OK)
