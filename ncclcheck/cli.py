"""The ``ncclcheck`` command line: parse options, call one function, render. No logic here.

Each command's work lives in its own module (``probe.py``, ``record.py``, ``bench/``,
``recommend.py``, ``diagnose.py``, ``report.py``); rendering lives in ``render/``. Heavy modules
are imported inside the command that needs them, so ``ncclcheck --help`` stays fast and nothing on
the probe's path imports torch.
"""

from __future__ import annotations

import errno
import os
import sys

import click

from ncclcheck import __version__
from ncclcheck.clibase import (  # noqa: F401  (re-exported: callers import them here)
    SEVERITIES,
    Ctx,
    emit,
    exit_for_findings,
    fail_on_option,
)
from ncclcheck.clibench import bench
from ncclcheck.cliopts import (MAX_NODES, EvalCommand, FullHelpGroup, GreedyOption, IntRange,
                               show_usage_error, stdout_dash)
from ncclcheck.clik8s import k8s
from ncclcheck.cliprobe import probe
from ncclcheck.errors import NcclcheckError
from ncclcheck.exitcodes import ExitCode
from ncclcheck.textsafe import printable, printable_lines, shorten


@click.group(cls=FullHelpGroup,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "-V", "--version", prog_name="ncclcheck")
# DeepSpeed's launcher (deepspeed/launcher/launch.py) and torch.distributed.launch put
# --local_rank=N (torch >= 2.0: --local-rank=N) between the module and its arguments:
# 'python -m ncclcheck --local_rank=0 bench'. Accepted there and ignored (LOCAL_RANK is read).
@click.option("--local_rank", "--local-rank", "local_rank", hidden=True, metavar="N")
@click.pass_context
def cli(ctx: click.Context, local_rank: str | None) -> None:
    """Make multi-node NCCL training networks work, and run fast.

    \b
    Exit codes: 0 ok, 1 runtime error, 2 usage or bad input,
                3 findings at or above --fail-on.
    """
    if ctx.obj is None:
        ctx.obj = Ctx()


# probe (probe.py, cluster.py; options in cliprobe.py) and bench (bench/; options in clibench.py)
cli.add_command(probe)
cli.add_command(bench)
cli.add_command(k8s)  # k8s render / k8s label (ncclcheck/k8s/; options in clik8s.py)


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
@cli.command(cls=EvalCommand)
@click.option("--hostfile", metavar="FILE",
              help="Hostfile (DeepSpeed/MPI 'host slots=N', pssh 'user@host:port', or a list). "
                   "Without it: the pod's Kubernetes job API, or mpirun (once per node).")
@click.option("--nodes", type=IntRange(1, MAX_NODES), metavar="N", help="Use the first N hosts of the hostfile.")
@click.option("--port-range", default="29500-29599", show_default=True, metavar="LO-HI",
              help="Every node prints LO; if LO is busy on the master, it fails and names a "
                   "free port of the range for --master-port.")
@click.option("--master-port", type=IntRange(1, 65535), metavar="PORT",
              help="Use this MASTER_PORT (checked free on the master).")
@click.option("--export", "export", is_flag=True, help="Prefix each line with 'export '.")
@click.option("--json", "as_json", is_flag=True, help="Print the values as JSON.")
@click.pass_obj
def rank(obj: Ctx, hostfile: str | None, nodes: int | None, port_range: str,
         master_port: int | None, export: bool, as_json: bool) -> None:
    """Print NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT for this node, for torchrun.

    \b
    eval "$(ncclcheck rank --hostfile hosts)"
    torchrun --nnodes=$NNODES --node-rank=$NODE_RANK --nproc-per-node=8 \\
             --master-addr=$MASTER_ADDR --master-port=$MASTER_PORT train.py

    In a pod of an MPIJob, PyTorchJob, TrainJob, JobSet or LeaderWorkerSet, or under mpirun
    (one process per node), 'ncclcheck rank' alone reads what the controller or mpirun set.
    Every node prints the same MASTER_PORT, or the master fails (exit 1) and names the
    --master-port to give every node. On failure stdout is '(exit N)', so the eval fails too
    and a 'bash -e' script stops there.
    """
    import json

    from ncclcheck.rank import format_shell, rank_values

    notes: list[str] = []
    values = rank_values(hostfile, nodes, port_range, master_port, notes)
    for note in notes:
        click.echo(f"ncclcheck: note: {note}", err=True)
    click.echo(json.dumps(values) if as_json else format_shell(values, export), nl=as_json)
# --- end rank ---




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
@click.option("--dump-dir", metavar="DIR", help="Shared storage for the next hang's Flight "
              "Recorder dumps and NCCL logs (the file's last section).")
@fail_on_option
@click.pass_obj
def recommend(obj: Ctx, probe_paths: tuple, bench_paths: tuple, fmt: str, output: str | None,
              explain: bool, quiet: bool, verify: bool, nccl_lib: str | None,
              candidates_dir: str | None, dump_dir: str | None, fail_on: str | None) -> None:
    """Recommend NCCL settings for every node: stdout is an env file, reasons go to stderr.

    \b
      ncclcheck recommend > nccl.env                     # this node
      ncclcheck probe --hostfile hosts -o cluster.json
      ncclcheck recommend --probe cluster.json --explain > nccl.env
      ncclcheck recommend --probe facts/*.json --bench compare.json --format shell
      ncclcheck recommend --probe cluster.json --verify -o nccl.env
      ncclcheck recommend --probe cluster.json --dump-dir /shared/hang > nccl.env
    """
    from ncclcheck.cluster import gc_paused
    from ncclcheck.recommend.command import run_command

    with gc_paused():  # the whole short-lived command: 1,000 facts files parse 3x faster
        doc, text, problems = run_command(list(probe_paths), list(bench_paths), fmt,
                                          verify=verify, nccl_lib=nccl_lib,
                                          candidates_dir=candidates_dir, output=output,
                                          dump_dir=dump_dir)
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
    """Print the JSON Schema of a document (facts, cluster, bench, pairwise, diagnosis,
    recommendation, tune).

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


# --- expected command (expected/) -----------------------------------------------------------
@cli.command("expected")
@click.argument("class_ids", nargs=-1, metavar="[CLASS]...")
@click.option("--json", "as_json", is_flag=True, help="Print the table (or the classes) as JSON.")
def expected_cmd(class_ids: tuple[str, ...], as_json: bool) -> None:
    """The table of expected busbw by hardware class: range, what it holds for, sources.

    \b
      ncclcheck expected               # every class with its range and sources
      ncclcheck expected ib-ndr nvlink-h100-8 --json
    """
    from ncclcheck.expected.table import select

    chosen = select(class_ids)
    if as_json:
        import json

        click.echo(json.dumps(chosen, indent=1))
        return
    from ncclcheck.render.expected import render_table

    click.echo(render_table(chosen), nl=False)
# --- end expected ---


def raise_or_report(exc: BaseException) -> None:
    """An internal error: one line and exit 1 (``NCCLCHECK_DEBUG=1``: the traceback)."""
    if os.environ.get("NCCLCHECK_DEBUG"):
        raise exc
    click.echo(f"ncclcheck: internal error: {type(exc).__name__}: {printable(shorten(exc))} "
               "(set NCCLCHECK_DEBUG=1 for the traceback)", err=True)
    sys.exit(ExitCode.ERROR)


def main(argv: list[str] | None = None, obj: Ctx | None = None) -> None:
    """Entry point: run the CLI, turn every failure into one line and an exit code."""
    try:  # text that is not valid Unicode (a lone surrogate, argv's \udcff) is written escaped
        sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        pass
    from ncclcheck.infile import start_command

    start_command()
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
        click.echo(f"ncclcheck: error: {printable(shorten(exc))}", err=True)
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
    except OSError as exc:
        if exc.errno not in (errno.ENAMETOOLONG, errno.ELOOP):
            raise_or_report(exc)
        click.echo(f"ncclcheck: error: {printable(shorten(exc))}", err=True)  # a path given
        sys.exit(ExitCode.USAGE)
    except Exception as exc:  # last resort: one line, never a traceback
        raise_or_report(exc)
    sys.exit(rv if isinstance(rv, int) else ExitCode.OK)
