"""`python -m sctc_assets.lib.schemas > docs/tables.md`: the column reference generated from the schemas."""

from sctc_assets.lib.schemas import TABLE_SCHEMAS, markdown

print(markdown(TABLE_SCHEMAS), end="")
