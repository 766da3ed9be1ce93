"""The embedded lab: stand-ins for a rack (vcsim twin, SSH test hosts) on one machine."""
