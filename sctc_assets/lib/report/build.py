"""Build the audit report: sections, scorecard and provenance rendered with Jinja2 into `index.html` and
`report.md`, every figure saved as `figures/<name>.png` and `.svg`, and a `manifest.json` listing them."""

from __future__ import annotations

import json
import math
import multiprocessing
import shutil
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import jinja2
import pandas as pd

from sctc_assets.lib.atomic_files import replacing, write_text
from sctc_assets.lib.report.document import Missing, Section, TableSpec
from sctc_assets.lib.report.formatting import keep_text_inside
from sctc_assets.lib.report.inputs import ReportInputs
from sctc_assets.lib.report.provenance import cost, model_details, platform_info, registry_entry, usage_count
from sctc_assets.lib.report.scorecard import scorecard

TEMPLATES = Path(__file__).parent / "templates"
PNG_DPI = 110
# SVG text as text (small files, searchable) and fixed ids (and no date), so identical data give identical files.
FIGURE_STYLE = {"svg.fonttype": "none", "svg.hashsalt": "sctc-report"}
# A spawned worker process costs about as much CPU to start (its imports, ~1 s) as drawing a few figures, so each
# worker must have at least this many figures to draw, else they are drawn in this process.
FIGURES_PER_WORKER = 4


@dataclass
class ReportResult:
    folder: Path
    html: Path
    markdown: Path
    manifest: Path
    figures: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    headline: dict[str, float] = field(default_factory=dict)  # small numeric summary for asset metadata


def _render(spec_name: str, draw: Callable[[], Any], figures_dir: Path) -> str | None:
    """Draw one figure and save it as PNG and SVG; the error text when it cannot be drawn."""
    import matplotlib

    try:
        with matplotlib.rc_context(FIGURE_STYLE):
            figure = draw()
            keep_text_inside(figure)  # a long model name widens the picture instead of being cut at its edge
            with replacing(figures_dir / f"{spec_name}.png") as staging:
                figure.savefig(staging, format="png", dpi=PNG_DPI, pil_kwargs={"compress_level": 3})
            with replacing(figures_dir / f"{spec_name}.svg") as staging:
                figure.savefig(staging, format="svg", metadata={"Date": None})
    except Exception as exc:  # one bad figure must not cost the whole report; the section says what failed
        return f"{type(exc).__name__}: {exc}"
    return None


def _save_figures(sections: list[Section], folder: Path, workers: int) -> list[str]:
    """Draw every figure (in up to `workers` processes, each with `FIGURES_PER_WORKER` or more figures) into
    `folder/figures/`; a figure that fails is dropped from its section, which says so."""
    figures_dir = folder / "figures"
    if figures_dir.exists():
        shutil.rmtree(figures_dir)  # a figure the data no longer supports must not linger from an earlier build
    figures_dir.mkdir(parents=True)
    specs = [(section, spec) for section in sections for spec in section.figures]
    errors: list[str | None] | None = None
    workers = min(workers, len(specs) // FIGURES_PER_WORKER)
    if workers > 1:
        # Fork only a single-threaded process (a threaded one, a Dagster run, may hold locks a child would inherit);
        # else spawn. Spawned workers import the caller's main module, so a script without an
        # `if __name__ == "__main__":` guard breaks the pool: then the figures are drawn here.
        method = "fork" if threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods() \
            else "spawn"
        context = multiprocessing.get_context(method)
        try:
            with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
                errors = list(pool.map(_render, [spec.name for _, spec in specs], [spec.draw for _, spec in specs],
                                       [figures_dir] * len(specs)))
        except BrokenProcessPool:
            errors = None
    if errors is None:
        errors = [_render(spec.name, spec.draw, figures_dir) for _, spec in specs]
    saved = []
    for (section, spec), error in zip(specs, errors):
        if error is None:
            saved.append(spec.name)
            continue
        section.blocks.remove(spec)
        section.missing.append(Missing(f"{spec.title}: could not be drawn ({error})",
                                       "report it as a bug of the audit report (sctc_assets/lib/report)"))
    return saved


def _readable_sections(inputs: ReportInputs) -> tuple[list[Section], ReportInputs]:
    """Every benchmark's section, and the inputs the scorecard may read. A benchmark whose tables cannot be read (a
    column missing: written by an older version of the platform, or not by it) is reported as missing, saying
    which tables and why; its tables are left out, so the rest of the report still comes."""
    sections = []
    for part in inputs.sections:
        key, module, prefix = part.benchmark, part.module, part.table_prefix
        try:
            section = module.section(inputs)
            for model in inputs.all_models():
                module.headline(inputs, model)
            sections.append(section)
            continue
        except Exception as exc:  # noqa: BLE001 — any unreadable table: the section says so instead of a crash
            error = f"{type(exc).__name__}: {exc}"
            column = exc.args[0] if isinstance(exc, KeyError) and exc.args else None
        own = [name for name in inputs.tables
               if name in inputs.benchmark_tables.get(key, ()) or name.startswith(prefix)]
        present = [name for name in own if not inputs.table(name).empty]
        blamed = [name for name in present if column is not None and column not in inputs.table(name).columns]
        inputs = replace(inputs, tables={**inputs.tables, **{name: pd.DataFrame() for name in own}})
        section = module.section(inputs)
        section.missing.insert(0, Missing(
            f"{' / '.join(blamed or present)} could not be read ({error}): a table written by an older version "
            "of the platform, or not by it; this section leaves it out",
            f"{module.HOW}, which rewrites it with this version"))
        sections.append(section)
    return sections, inputs


def _usage_rows(inputs: ReportInputs) -> list[dict[str, Any]]:
    rows = []
    for record in inputs.usage.to_dict("records") if not inputs.usage.empty else []:
        entry = inputs.registry.get(record["model"])
        spent = cost(record, entry)
        stored = record.get("stored_at")
        row = {**record, "cost": "–" if spent is None else f"${spent:,.4f}",
               "batched": f"{usage_count(record.get('batched')):,}",
               "stored_at": stored.strftime("%Y-%m-%d %H:%M UTC") if hasattr(stored, "strftime") else "–"}
        if inputs.is_replay(record["model"]):  # published answers: nothing was asked, cached or paid
            row.update(cached="–", new="– (published)", batched="–", cost="–", input_tokens="–", input_tokens_new="–",
                       output_tokens="–", output_tokens_new="–")
        rows.append(row)
    return rows


def _markdown_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                                     autoescape=jinja2.select_autoescape(["html.j2"]), trim_blocks=True,
                                     lstrip_blocks=True, keep_trailing_newline=True)
    environment.filters["md"] = _markdown_cell
    environment.filters["tojson_pretty"] = lambda value: json.dumps(value, ensure_ascii=False, indent=1,
                                                                    sort_keys=True, default=str)
    return environment


def _headline_numbers(table: TableSpec) -> dict[str, float]:
    """`<model>/<column>` → value of the scorecard's numeric cells (for a small metadata summary)."""
    numbers = {}
    for row in table.rows:
        for column, cell in zip(table.columns[1:], row[1:]):
            if isinstance(cell.sort, float) and not math.isnan(cell.sort):
                numbers[f"{row[0].text}/{column}"] = cell.sort
    return numbers


def build_report(inputs: ReportInputs, out_dir: Path, *, workers: int = 1) -> ReportResult:
    """Write `<out_dir>/report/` (index.html, report.md, manifest.json, figures/) and say what it holds.

    Figures are drawn in up to `workers` processes when > 1 and there are enough of them to pay for starting the
    processes (the caller's main module must be import-safe: guarded by `if __name__ == "__main__":`); by default
    in this process.
    """
    folder = Path(out_dir) / "report"
    folder.mkdir(parents=True, exist_ok=True)
    if "model_details" not in inputs.provenance:  # Table 3's origin column reads it
        details = {model: model_details(inputs.registry.get(model)) for model in inputs.all_models()}
        inputs = replace(inputs, provenance={**inputs.provenance, "model_details": details})
    sections, inputs = _readable_sections(inputs)
    card = scorecard(inputs)
    figures = _save_figures(sections, folder, workers)
    models = [row[0].text for row in card.rows]
    registry = [registry_entry(inputs.registry[model]) for model in models if model in inputs.registry]
    details = inputs.provenance["model_details"]
    context = {
        "generated_at": inputs.generated_at.strftime("%Y-%m-%d %H:%M:%S UTC"),
        "models": models, "scorecard": card, "sections": sections,
        "platform": inputs.provenance.get("platform") or platform_info(),
        "upstream": inputs.provenance.get("upstream") or {},
        "tables": inputs.provenance.get("tables") or {},
        "registry": registry, "details": {model: details[model] for model in models if details.get(model)},
        "usage": _usage_rows(inputs),
        "kinds": {model: inputs.kind(model) for model in models},
    }
    environment = _environment()
    html = folder / "index.html"
    markdown = folder / "report.md"
    write_text(html, environment.get_template("report.html.j2").render(**context))
    write_text(markdown, environment.get_template("report.md.j2").render(**context))
    missing = [f"{section.key}: {item.what}" for section in sections for item in section.missing]
    manifest = folder / "manifest.json"
    write_text(manifest, json.dumps({
        "generated_at": context["generated_at"], "models": models, "figures": figures,
        "sections": [section.key for section in sections], "missing": missing,
    }, indent=1, ensure_ascii=False))
    return ReportResult(folder=folder, html=html, markdown=markdown, manifest=manifest, figures=figures,
                        models=models, missing=missing, headline=_headline_numbers(card))
