"""rackcert under Slurm: the lines for the site's slurm.conf and a small Slurm client.

Why a package of its own: the CLI, the bench launcher and the health check all talk to
Slurm the same way (one environment, one timeout, one error line), and the slurm.conf
lines are one pure function of the spec.
"""
