"""HTTP transports: the only code that opens sockets. trio + h11 + httpx. Files:

- ``protocol``: the :class:`Transport` protocol every transport implements.
- ``lean``: HTTP/1.1 on h11 and trio, one connection per inference slot (self-hosted servers).
- ``chunked``: the lean transport's decoder of chunked bodies (sans-IO; h11's rules, without
  an event per chunk).
- ``hosted``: httpx, for hosted APIs (HTTP/2, proxies, the system's trust store).
- ``factory``: picking a transport for a base URL.
"""
