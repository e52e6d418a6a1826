"""Jinja2 over report_templates/: StrictUndefined, autoescaped HTML, Markdown filters."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Iterable

from ncclcheck.errors import BadInput
from ncclcheck.report.documents import load_documents
from ncclcheck.report.view import build_view

FORMATS = ("html", "md")
#: Templates live in report_templates/ at the top of the source tree; the wheel ships them
#: inside the package (``ncclcheck/report_templates`` is a link to that folder).
TEMPLATE_DIRS = (Path(__file__).resolve().parent.parent / "report_templates",
                 Path(__file__).resolve().parent.parent.parent / "report_templates")


def md_cell(value: Any) -> str:
    """Text safe inside a GitHub Markdown table cell: pipes escaped, one line, no raw HTML.

    >>> md_cell("a|b\\n<c>")
    'a\\\\|b &lt;c&gt;'
    """
    return (str(value).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")
            .replace(">", "&gt;").replace("\r", " ").replace("\n", " "))


def md_text(value: Any) -> str:
    """Prose for Markdown: no raw HTML, no accidental headings or list markers at line starts.

    >>> md_text("<b>x</b>\\n# y")
    '&lt;b&gt;x&lt;/b&gt; # y'
    """
    return " ".join(str(value).replace("<", "&lt;").replace(">", "&gt;").split())


def md_code(value: Any) -> str:
    """Inline code that survives a backtick in the value.

    >>> md_code("NCCL_X=1"), md_code("a`b")
    ('`NCCL_X=1`', '`` a`b ``')
    """
    value = str(value).replace("\n", " ")
    return f"`` {value} ``" if "`" in value else f"`{value}`"


def template_dir() -> Path:
    """The folder holding report.html.j2 (inside the installed package, or the source tree)."""
    for folder in TEMPLATE_DIRS:
        if (folder / "report.html.j2").is_file():
            return folder
    raise FileNotFoundError(f"report templates not found in {', '.join(map(str, TEMPLATE_DIRS))}")


def environment() -> Any:
    """The Jinja2 environment: StrictUndefined, autoescape for HTML, Markdown filters."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir())),
        undefined=jinja2.StrictUndefined,
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "html.j2", "svg"),
                                            default_for_string=True, default=False),
        keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(md_cell=md_cell, md_text=md_text, md_code=md_code,
                       shell_quote=shlex.quote)
    return env


def render(view: dict[str, Any], fmt: str = "html") -> str:
    """The page for ``view`` in ``fmt`` (``html`` or ``md``)."""
    if fmt not in FORMATS:
        raise BadInput(f"--format {fmt}: one of {', '.join(FORMATS)}")
    return environment().get_template(f"report.{fmt}.j2").render(report=view)


def make_report(paths: Iterable[str], fmt: str = "html", title: str | None = None,
                generated_at: str | None = None) -> str:
    """Load the documents at ``paths`` and render the report: what ``ncclcheck report`` prints."""
    return render(build_view(load_documents(paths), title, generated_at), fmt)


def format_for(output: str | None, fmt: str | None) -> str:
    """``--format``, else the output file's extension (``.md``), else HTML.

    >>> format_for("r.md", None), format_for("r.html", None), format_for(None, "md")
    ('md', 'html', 'md')
    >>> format_for("-", None)
    'html'
    """
    if fmt:
        return fmt
    if output and output.lower().endswith((".md", ".markdown")):
        return "md"
    return "html"
