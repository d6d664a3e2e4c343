"""Tokenization of the names in each script (Section 4.6.2, Appendix C.9): regional_names → tokenization_counts
(Table 37), one row per tokenizer of the tokenizer registry (`data/tokenizers.yaml`)."""

import gc
from pathlib import Path
from typing import Optional

import dagster as dg
import pandas as pd
from pydantic import Field

from sctc_assets.assets.catalog import catalogued, content_version
from sctc_assets.assets.metadata import table_metadata
from sctc_assets.lib.name import tokenization as tk
from sctc_assets.lib.paths import default_tokenizers_path

GROUP = "name"


class TokenizationConfig(dg.Config):
    registry: Optional[str] = Field(default=None, description="Tokenizer registry YAML; default $SCTC_TOKENIZERS, "
                                                              "else data/tokenizers.yaml.")
    tokenizers: Optional[list[str]] = Field(default=None, description="Registry keys to count with; default: the "
                                                                      "entries marked `default: true`.")
    files_dir: Optional[str] = Field(default=None, description="Where vocabularies converted from GGUF files are "
                                                               "kept; default tokenizers/ of the machine's "
                                                               "download cache, where the downloads go too.")


@catalogued
@dg.asset(group_name=GROUP, kinds={"pandas", "parquet"})
def tokenization_counts(context: dg.AssetExecutionContext, config: TokenizationConfig,
                        regional_names: pd.DataFrame) -> dg.Output[pd.DataFrame]:
    """Table 37: per tokenizer, mean and SD (np.std, ddof 0) of the token counts of the Mainland names, the same
    converted to Traditional (OpenCC s2t), the Taiwanese names and the same converted to Simplified (t2s), and
    Student's t-test of each original list vs its conversion, counting the special tokens the paper model's
    tokenizer adds as `tab_37.py` does. Tokenizers that cannot be loaded here are skipped and named."""
    registry_path = Path(config.registry) if config.registry else default_tokenizers_path()
    registry = tk.load_registry(registry_path)
    keys = config.tokenizers or [key for key, entry in registry.items() if entry.default]
    unknown = [key for key in keys if key not in registry]
    if unknown:
        raise tk.TokenizerRegistryError(f"{registry_path}: no tokenizer {unknown} (known: {', '.join(registry)})")
    files_dir = Path(config.files_dir) if config.files_dir else tk.default_files_dir()
    lists = tk.name_lists(regional_names)
    rows, unavailable = [], {}
    for key in keys:
        entry = registry[key]
        try:
            encode = tk.load_tokenizer(entry, files_dir)
        except tk.TokenizerUnavailable as exc:
            unavailable[key] = str(exc)
            context.log.warning(f"tokenization_counts: {key} skipped ({exc})")
            continue
        rows.append(tk.count_row(entry, tk.token_counts(encode, lists, added=entry.added_special_tokens)))
        del encode
        gc.collect()  # GGUF and hub tokenizers are large; keep one in memory at a time
    if not rows:
        raise dg.Failure(f"tokenization_counts: no tokenizer could be loaded: {unavailable}")
    table = pd.DataFrame(rows)
    return dg.Output(table, data_version=content_version(table), metadata=table_metadata(
        table, preview_rows=len(table), registry=str(registry_path),
        list_sizes=dg.MetadataValue.json({name: len(names) for name, names in lists.items()}),
        unavailable=dg.MetadataValue.json(unavailable)))


TOKENIZATION_ASSETS = [tokenization_counts]
