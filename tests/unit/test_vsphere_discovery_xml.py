"""Discovery reads vCenter's XML itself (provision.soapstream, provision.objectcontent).

The oracle is pyVmomi: the same answer deserialized into pyVmomi's objects (capture
keeps both) and read the way discovery read them before it parsed the XML itself, with
the whole data objects rather than the single fields discovery now asks for.
"""

from __future__ import annotations

import pytest

from provision import soapstream


@pytest.mark.parametrize(
    "body", [b"<a><b></a>", b"<soapenv:Envelope xmlns:soapenv='x'><returnval>", b"\x00garbage"]
)
def test_an_answer_that_is_not_xml_is_one_line(body):
    import io

    from rackcert.core.errors import RackcertError

    with pytest.raises(RackcertError, match="not well-formed XML") as caught:
        soapstream._parse(io.BytesIO(body), "urn:vim25", lambda _item, _page: None, None)
    assert "\n" not in str(caught.value)
