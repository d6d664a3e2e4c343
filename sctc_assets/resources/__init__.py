"""Dagster resources: upstream data, the model registry (which builds backends) and Parquet storage."""
