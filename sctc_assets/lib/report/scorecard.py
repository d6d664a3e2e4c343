"""The scorecard: one row per model, each benchmark's headline result with its 95 % interval and marks."""

from __future__ import annotations

from sctc_assets.lib.report import models as model_order
from sctc_assets.lib.report.document import Cell, TableSpec
from sctc_assets.lib.report.inputs import ReportInputs

def scorecard(inputs: ReportInputs) -> TableSpec:
    columns = ["Model"]
    groups = [("", 1)]
    for part in inputs.sections:  # each part's module has HEADLINE_COLUMNS and headline(inputs, model)
        label, module = part.scorecard_label, part.module
        columns += [column.split(": ", 1)[1] for column in module.HEADLINE_COLUMNS]
        groups.append((label, len(module.HEADLINE_COLUMNS)))
    rows = []
    for model in model_order.ordered(inputs.all_models()):
        row = [Cell(model, sort=model, detail=inputs.kind(model))]
        for part in inputs.sections:
            row += part.module.headline(inputs, model)
        rows.append(row)
    return TableSpec(
        title="Scorecard", columns=columns, groups=groups, rows=rows, sortable=True, table_id="scorecard",
        caption="Percentages with 95 % intervals in brackets (hover a cell for the method) and significance "
                "marks (*** p < .001, ** < .01, * < .05, NS). Term: labels = the row's label source (upstream, the "
                "authors' labels, for replay models; else a judge's, else the rules'; hover it for what it is) over "
                "n, the answers per script, a reduced run (fewer trials than the paper's 15) marked; S/T = prompted "
                "in Simplified/Traditional Chinese. Names: Mainland share of "
                "the valid answers, z-test against 50 %, BH-adjusted. Sovereignty: Pro-study code rule, "
                "Traditional Chinese vs English, mark on LBS = exact McNemar p (BH). Reviews: Δ = second − first "
                "variety of the pair (by default Mainland − Taiwan Mandarin reviews; each cell's note names it). "
                "Click a column header to sort.")
