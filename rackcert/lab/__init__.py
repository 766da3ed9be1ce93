"""The embedded lab: the vcsim rack twin (and, where present, SSH test hosts).

`rackcert lab up` starts it from a spec, `rackcert lab down` stops it. The twin
itself lives in `rackcert.lab.twin`; it is also what the test fixtures start.
"""
