"""``ncclcheck report``: one self-contained page (HTML, or Markdown for an issue) from documents.

The flow is three steps, each usable alone (:func:`~.documents.load_documents`,
:func:`~.view.build_view`, :func:`~.page.render`)::

    docs = load_documents(["facts-a.json", "bench.json"])  # schema-checked, or one BadInput line
    view = build_view(docs)                                 # plain data: str/int/float/list/dict
    text = render(view, "html")                             # Jinja2 over report_templates/

Templates receive the view and nothing else: no live objects, so a report renders from saved
files on any machine. Keys that a document may lack get their defaults here, in Python, so the
templates use ``StrictUndefined`` and a typo in a template is an error, not a blank cell.

The HTML page loads nothing: CSS is inline, charts are inline SVG (:mod:`ncclcheck.charts`), and
a ``Content-Security-Policy`` of ``default-src 'none'`` makes the browser itself refuse any
request.

Modules: :mod:`~.documents` (loading), :mod:`~.cells` (formatting and outliers), :mod:`~.nodes`,
:mod:`~.findings`, :mod:`~.advice` (recommendations), :mod:`~.runs` (bench), :mod:`~.transport`
(what NCCL used, diagnoses), :mod:`~.view` (the whole page as data), :mod:`~.page` (Jinja2).
"""
