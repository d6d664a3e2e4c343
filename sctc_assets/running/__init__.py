"""How `sctc run` drives Dagster: its instance, its logs, Ctrl-C, dead-run sweeps and the skip of unchanged inputs."""
