"""A PropertyCollector page fetched through the session's stub and parsed as it streams in.

pyVmomi turns every XML element of an answer into a typed DataObject through Python
expat handlers: about 10 us an element, and a vCenter at its configuration maximum
(2,500 hosts, 10,000 VMs) answers discovery with some 2.5 million elements, 25 s of
controller CPU before rackcert reads a field. Discovery needs a few fields of each
object, so it sends the same request on the same stub (its session cookie, TLS
context and connection pool; pyVmomi serializes the request) and hands the body to
ElementTree's C parser, which builds each ObjectContent element in C and yields it as
it closes: the caller converts it and it is cleared at once, so one object's elements
are held at a time, never a whole page of SOAP objects.

A fault (HTTP 500) is deserialized by pyVmomi exactly as InvokeMethod would and raised
as the same MethodFault; a connection that drops mid-answer raises what http.client
raises (transient faults, which discovery retries). What is not parsed here is left
to pyVmomi: `keep` gets each page's raw body for a caller that wants pyVmomi's objects
as well (capture).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.client import HTTPException
from http.cookies import SimpleCookie
from typing import Any

from provision.roundtrips import note_call
from rackcert.core.errors import RackcertError

XSI = "http://www.w3.org/2001/XMLSchema-instance"
XSI_TYPE = f"{{{XSI}}}type"
# Bytes handed to the parser at a time: large enough that the Python loop around the C
# parser costs nothing, small enough that one chunk is all that waits unparsed.
CHUNK = 256 * 1024


@dataclass
class Page:
    """What one streamed page said besides its objects: the continuation token and the
    number of objects; `classes` caches what its xsi:type names resolve to (Reader)."""

    token: str | None = None
    objects: int = 0
    classes: dict[str, Any] = field(default_factory=dict)


OnObject = Callable[[ET.Element, Page], None]
OnToken = Callable[[str], None]


@dataclass
class Sent:
    """A request written to a pooled connection, its answer not read yet: vCenter works on
    it meanwhile (the next page, while the one before is read)."""

    stub: Any
    info: Any
    conn: Any


def send(mo: Any, method: str, args: list[Any]) -> Sent:
    """Serialize and send `method` of `mo` as pyVmomi's InvokeMethod does, on a connection
    from its stub's pool (a second one while another answer is still being read)."""
    from pyVmomi import SoapAdapter, VmomiSupport

    stub = mo._stub
    if not isinstance(stub, SoapAdapter.SoapStubAdapter):
        raise TypeError(f"a streamed call needs pyVmomi's SoapStubAdapter, not {type(stub)}")
    info = type(mo)._GetMethodInfo(method)
    args = list(args) + [None] * (len(info.params) - len(args))
    for param, arg in zip(info.params, args, strict=True):
        VmomiSupport.CheckField(param, arg)  # what pyVmomi's own call checks first
    request = stub.SerializeRequest(mo, info, args)
    conn = stub.GetConnection()
    note_call(stub)
    try:
        conn.request("POST", stub.path, request, _headers(stub))
    except (OSError, HTTPException):
        _drop(stub, conn)
        raise
    return Sent(stub, info, conn)


def receive(
    sent: Sent,
    on_object: OnObject,
    keep: list[bytes] | None = None,
    on_token: OnToken | None = None,
) -> Page:
    """Read the answer to `sent`, handing each `objects` element to `on_object` as it
    closes (then cleared); `on_token` hears the continuation token as soon as it arrives,
    ahead of the page's objects (`_parse`); `keep` receives the raw body. A fault (HTTP
    500) is deserialized by pyVmomi and raised as its MethodFault; the connection goes back
    to the pool unless reading failed (then it and the pool are dropped, as pyVmomi does)."""
    from pyVmomi import SoapAdapter, VmomiSupport

    stub, conn = sent.stub, sent.conn
    try:
        resp = conn.getresponse()
    except (OSError, HTTPException):
        _drop(stub, conn)
        raise
    _keep_cookie(stub, resp)
    if resp.status not in (200, 500):
        conn.close()
        raise HTTPException(f"{resp.status} {resp.reason}")
    try:
        body = _reader(resp)
        if resp.status == 500:
            fault = SoapAdapter.SoapResponseDeserializer(stub).Deserialize(
                body.read(), sent.info.result
            )
            resp.read()
            stub.ReturnConnection(conn)
            if isinstance(fault, BaseException):
                raise fault
            raise Exception(f"vCenter answered HTTP 500 without a fault: {fault!r}")
        page = _parse(body, _namespace(stub), on_object, keep, on_token)
        resp.read()
    except BaseException as exc:
        if not isinstance(exc, VmomiSupport.GetVmodlType("vmodl.MethodFault")):
            _drop(stub, conn)
        raise
    stub.ReturnConnection(conn)
    return page


def call_streamed(
    mo: Any,
    method: str,
    args: list[Any],
    on_object: OnObject,
    keep: list[bytes] | None = None,
    on_token: OnToken | None = None,
) -> Page:
    """`send` then `receive`: one call whose answer is parsed as it streams in."""
    return receive(send(mo, method, args), on_object, keep, on_token)


def _drop(stub: Any, conn: Any) -> None:
    """As pyVmomi does on a failed exchange: the server is probably sick, drop the cached
    connections."""
    conn.close()
    stub.DropConnections()


def _namespace(stub: Any) -> str:
    from pyVmomi import VmomiSupport

    return str(VmomiSupport.GetWsdlNamespace(stub.version))


def _parse(
    body: Any,
    ns: str,
    on_object: OnObject,
    keep: list[bytes] | None,
    on_token: OnToken | None = None,
) -> Page:
    """Feed the body to ElementTree's pull parser; objects out as they close, then cleared.

    In the vim25 schema only RetrieveResult has a property named `objects` (pyVmomi's type
    tables; the vSAN types that reuse the name live in vSAN's own namespace), so every
    `{urn:vim25}objects` element is one ObjectContent of the page. The token is read from
    `returnval` itself when it closes (SAML credentials have `token` fields too), and
    `on_token` hears it early: RetrieveResult is the sequence token, objects (vim25 WSDL)
    and an ObjectContent starts with its `obj`, so a `token` that is the first element of
    the page to close is the page's own. A token that came later is only read at the end.
    """
    page = Page()
    parser: Any = ET.XMLPullParser(events=("end",))  # typeshed: events untyped
    chunks: list[bytes] = []
    objects_tag, returnval_tag = f"{{{ns}}}objects", f"{{{ns}}}returnval"
    token_tag = f"{{{ns}}}token"
    early: str | None = None
    watching = on_token is not None  # until the page's first element closes (see above)
    while True:
        chunk = body.read(CHUNK)
        if not chunk:
            break
        if keep is not None:
            chunks.append(chunk)
        for item in _feed(parser, chunk):
            if item.tag == objects_tag:
                page.objects += 1
                on_object(item, page)
                item.clear()
            elif item.tag == returnval_tag:
                page.token = item.findtext(token_tag) or None
            elif watching:
                watching = False
                if item.tag == token_tag and item.text and on_token is not None:
                    early = item.text
                    on_token(early)
    list(_feed(parser, None))
    if early is not None and early != page.token:
        raise RackcertError(
            f"vCenter's answer names two page tokens ({early!r} first, then {page.token!r})"
        )
    if keep is not None:
        keep.append(b"".join(chunks))
    return page


def _feed(parser: Any, chunk: bytes | None) -> Iterator[Any]:
    """Feed (or close, for None) the pull parser and yield the elements that closed. An
    answer that is not well-formed XML is one line naming where it broke (the pull parser
    raises it from feed, close or while its events are read)."""
    try:
        if chunk is None:
            parser.close()
        else:
            parser.feed(chunk)
        for _event, item in parser.read_events():
            yield item
    except ET.ParseError as exc:
        raise RackcertError(f"vCenter's answer is not well-formed XML: {exc}") from None


def _headers(stub: Any) -> dict[str, str]:
    """The headers pyVmomi's InvokeMethod sends (SoapAdapter.SoapStubAdapter.InvokeMethod)."""
    from pyVmomi import SoapAdapter

    headers = {
        "Cookie": stub.cookie,
        "SOAPAction": stub.versionId,
        "Content-Type": f"text/xml; charset={SoapAdapter.XML_ENCODING}",
        "User-Agent": f"pyvmomi {SoapAdapter.version_info_str} rackcert-discovery",
    }
    headers.update(getattr(stub, "_customHeaders", None) or {})
    if getattr(stub, "_acceptCompressedResponses", False):
        headers["Accept-Encoding"] = "gzip, deflate"
    return headers


def _keep_cookie(stub: Any, resp: Any) -> None:
    """A renewed session cookie is kept on the stub, as pyVmomi's InvokeMethod does."""
    from pyVmomi import SoapAdapter

    cookie = resp.getheader("Set-Cookie") or resp.getheader("set-cookie")
    if not cookie:
        return
    stub.cookie = cookie
    session = SimpleCookie(cookie).get(SoapAdapter.COOKIE_NAME)
    if session:
        SoapAdapter.SoapStubAdapterBase.SetSessionId(stub, session.value)


def _reader(resp: Any) -> Any:
    """The body, uncompressed where the server compressed it (pyVmomi's GzipReader)."""
    from pyVmomi import SoapAdapter

    encoding = (resp.getheader("Content-Encoding") or "identity").lower()
    if encoding == "gzip":
        return SoapAdapter.GzipReader(resp, encoding=SoapAdapter.GzipReader.GZIP)
    if encoding == "deflate":
        return SoapAdapter.GzipReader(resp, encoding=SoapAdapter.GzipReader.DEFLATE)
    return resp
