"""RetrievePropertiesEx pages like a real vCenter; discovery follows (and survives) them."""

from __future__ import annotations

from provision.discovery import HOST_PROPERTIES


def test_discovery_asks_for_one_option_per_host_not_the_whole_list():
    assert "config.option" not in HOST_PROPERTIES
    assert 'config.option["VMkernel.Boot.atsSupport"]' in HOST_PROPERTIES
