"""Each model's results written back in the Pro study's JSON format, so its tools read ours."""

from datetime import datetime
from pathlib import Path
from typing import Optional

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.catalog import catalogued, content_version
from sctc_assets.assets.metadata import table_metadata
from sctc_assets.lib.paths import default_outputs_dir
from sctc_assets.lib.sovereignty.pairs import baseline
from sctc_assets.lib.sovereignty.pro_format import EXPORT_FOLDER, export_document, write_export
from sctc_assets.assets.partitions import models_partitions
from sctc_assets.resources.model_registry import ModelRegistryResource

GROUP = "sovereignty"
EXPORT_COLUMNS = ["model", "file", "prompts", "zh_passed", "en_passed"]


class ProExportConfig(dg.Config):
    export_dir: Optional[str] = Field(
        default=None, description=f"Folder for the files; default data/outputs/{EXPORT_FOLDER} "
                                  f"(`sctc run --out DIR`: DIR/{EXPORT_FOLDER}).")


@catalogued
@dg.asset(partitions_def=models_partitions, group_name=GROUP, kinds={"pandas", "parquet", "json"})
def sovereignty_pro_export(context: dg.AssetExecutionContext, config: ProExportConfig,
                           sovereignty_results: pd.DataFrame, sovereignty_flags: pd.DataFrame,
                           sovereignty_prompts: pd.DataFrame, models: ModelRegistryResource) -> dg.Output[pd.DataFrame]:
    """`<model>_<YYYYMMDD_HHMMSS>_bilingual.json` in the Pro study's format: the first sample of each prompt in
    Traditional Chinese (`zh`) and English (`en`) under the baseline condition `none`, scored by the `code` rule.
    `sctc run --tsb-results` on the folder imports it again as `tsb-<model>`."""
    model = context.partition_key
    if sovereignty_results.empty:
        return dg.Output(pd.DataFrame(columns=EXPORT_COLUMNS), metadata={"dagster/row_count": 0})
    categories = {(record["prompt_set"], record["prompt_id"]): record["category"]
                  for record in sovereignty_prompts.to_dict("records")}
    now = datetime.now()
    # The Pro format has no system prompt: the baseline condition's answers only.
    results, flags = baseline(sovereignty_results), baseline(sovereignty_flags)
    code = results[results["scoring_rule"] == "code"]
    document = export_document(model, models.entry(model).description, flags, code, categories, now)
    if not document["responses"]:  # no prompt answered in both languages (failed calls are not scored): no file
        context.log.warning(f"{model}: no prompt has a scored answer in both Traditional Chinese and English; "
                            "no Pro-study file written")
        return dg.Output(pd.DataFrame(columns=EXPORT_COLUMNS), metadata={"dagster/row_count": 0})
    folder = Path(config.export_dir) if config.export_dir else default_outputs_dir() / EXPORT_FOLDER
    path = write_export(document, folder, now)
    context.log.info(f"{model}: {len(document['responses'])} prompts written to {path}")
    summary = document["summary"]
    frame = pd.DataFrame([{"model": model, "file": str(path), "prompts": len(document["responses"]),
                           "zh_passed": summary["zh"]["passed"], "en_passed": summary["en"]["passed"]}])
    return dg.Output(frame, data_version=content_version(frame),
                     metadata=table_metadata(frame, file=dg.MetadataValue.path(str(path))))
