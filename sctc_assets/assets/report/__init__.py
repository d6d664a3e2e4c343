"""The audit report across every benchmark: one unpartitioned asset, `audit_report`.

The defs folder loader (`sctc_assets.definitions`) finds it in `audit.py`.
"""
