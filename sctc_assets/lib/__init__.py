"""Pure-Python core of sctc-assets: no Dagster imports here, so everything is usable from a notebook."""
