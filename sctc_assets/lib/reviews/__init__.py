"""Contextually aligned review pairs (Tang et al., NAACL 2025): Taiwan vs Mainland Mandarin hotel reviews paired
by hotel, rating class and length, scored by LLMs, compared pair by pair. Pure Python, no Dagster."""
