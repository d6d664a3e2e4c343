"""sctc-assets: Dagster assets that audit LLMs for bias across Chinese language varieties and English."""
