"""Prometheus metrics from rackcert's verdicts, for the rack between certifications.

Why: platform teams watch racks in Prometheus (DCGM exporter for GPUs, node_exporter for
hosts, Alertmanager for the pager). Validate, the Slurm health check and bench write their
verdicts here as the exposition format, so a check that fails after an upgrade, or a node
that drifted from its certified run, pages someone instead of waiting in a JSON file.

- `labels`: node strings are untrusted; made safe and bounded before they become labels.
- `families`: the metric families built from stage records (prometheus_client's format).
- `drift`: this run against the rack's last certified run, item by item.
- `bench_figures`: the one adapter from bench.json to figures per node, GPU and link.
- `textfile`: node_exporter's textfile collector convention (temp file, then rename).
- `latest`: the latest run of each spec, for `rackcert serve`'s /metrics.
"""
