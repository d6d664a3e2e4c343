"""Dagster assets, one folder per benchmark."""
