"""One Redis server as the Redis index talks to it: connecting, retries, errors, and a connection of
each thread's own on which the index runs its optimistic transactions.

Nothing here knows the index's keys or its rule (:mod:`.store`, :mod:`..rule`): this is how commands
reach the server. :meth:`Server.link` gives the calling thread its own binary connection (a
``WATCH`` holds on the connection that sent it, so a transaction never shares one) and
:class:`Link` sends several commands in one write and reads their replies. :data:`READ_SCRIPT`
(``read.lua``, read-only) returns many hash fields as one reply. Connection errors and timeouts are
retried a bounded number of times with a doubling delay, then raised as the index's errors naming
the server, whose password is never shown.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from ..base import IndexOpenError, IndexWriteError, SimhashIndexError

hiredis: Any
try:  # the C protocol codec redis-py also uses when it is installed (the [hiredis] extra)
    hiredis = importlib.import_module("hiredis")
except ImportError:  # pragma: no cover - depends on the install
    hiredis = None

DEFAULT_PREFIX = "simhash"
#: Compare-and-set of one key (``EVAL SWAP 1 key expected new``): a record rewritten only if nobody
#: changed it since it was read; 1 when it was.
SWAP = "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) return 1 end return 0"
#: The read-only script that answers many hash fields in one reply (shipped as package data).
READ_SCRIPT = resources.files(__package__).joinpath("read.lua").read_text(encoding="utf-8")
#: The oldest server the index runs on (``SET … KEEPTTL`` and ``HSET`` of several fields).
MIN_SERVER = (6, 0, 0)

Arg = bytes | str | int | float


def redacted(url: str) -> str:
    """``url`` without its password (in the authority or a ``password=`` query parameter)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        userinfo, _, hostport = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:***@{hostport}"
    query = parts.query
    if query:
        pairs = [(k, "***" if k.lower() == "password" else v) for k, v in parse_qsl(query, keep_blank_values=True)]
        query = urlencode(pairs, safe="*")
    return parts._replace(netloc=netloc, query=query).geturl()


def split_prefix(url: str) -> tuple[str, str]:
    """``(url without ?prefix=…, prefix)``: the prefix is ours, redis-py must not see it."""
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    prefixes = [v for k, v in pairs if k == "prefix"]
    prefix = prefixes[-1] if prefixes else DEFAULT_PREFIX
    if not prefix or any(c in prefix for c in "{}"):
        raise IndexOpenError(f"{redacted(url)}: prefix must be non-empty, without braces, not {prefix!r}")
    rest = urlencode([(k, v) for k, v in pairs if k != "prefix"])
    return parts._replace(query=rest).geturl(), prefix


class Link:
    """A thread's own binary connection: commands sent together, replies read in order (an error
    reply is returned as its exception, the other replies still read off the socket)."""

    def __init__(self, server: Server, connection: Any) -> None:
        self.server, self.connection = server, connection

    def send(self, commands: Sequence[Sequence[Arg]]) -> list[Any]:
        """Send ``commands`` in one write and read their replies (text stays bytes). The replies are
        parsed here rather than by redis-py's parser, which costs more per reply than the server
        takes to make it (``docs/decisions/0102-redis-transactions.md``)."""
        connection, errors = self.connection, self.server.errors
        try:
            if connection._sock is None:
                connection.connect()
                if self.server.on_connect is not None:
                    self.server.on_connect(self)
            sock = connection._sock
            if hiredis is not None:
                sock.sendall(b"".join(map(hiredis.pack_command, commands)))
                reader: _Reader | _CReader = _CReader(sock, errors)
            else:
                sock.sendall(packed(commands))
                reader = _Reader(sock, errors)
                if len(commands) > 2 and commands[0] == ("MULTI",) and commands[-1] == ("EXEC",):
                    queued = len(commands) - 2
                    if reader.skip(_QUEUED[:5] + _QUEUED[5:] * queued):  # +OK, then +QUEUED a command
                        return [b"OK", *[b"QUEUED"] * queued, reader.reply()]
            return [reader.reply() for _ in commands]
        except OSError as exc:  # socket.timeout included
            connection.disconnect()
            kind = errors.TimeoutError if isinstance(exc, TimeoutError) else errors.ConnectionError
            raise kind(f"{type(exc).__name__}: {exc}") from exc
        except BaseException:
            connection.disconnect()  # a half-read reply must not stay on the socket; the next call reconnects
            raise

    def read_fields(self, asked: Sequence[tuple[bytes, Sequence[bytes]]], before: Sequence[Sequence[Arg]] = ()
                    ) -> tuple[list[Any], list[bytes | None]]:
        """The replies of ``before`` (e.g. ``WATCH``, ``GET``), then the values of the fields asked of
        each hash (None: absent), by :data:`READ_SCRIPT`, in one write; the script is loaded again
        when the server lost it."""
        commands = list(before)
        if asked:
            argv: list[Arg] = []
            for _, fields in asked:
                argv.append(len(fields))
                argv += fields
            commands.append(("EVALSHA", self.server._sha, len(asked), *(k for k, _ in asked), *argv))
        replies = self.send(commands)
        if not asked:
            return replies, []
        blob = replies.pop()
        if isinstance(blob, self.server.errors.NoScriptError):
            self.send([("SCRIPT", "LOAD", self.server._script)])
            blob = self.send([commands[-1]])[0]
        if isinstance(blob, Exception):
            raise blob
        values: list[bytes | None] = []
        at, end = 0, len(blob)
        while at < end:
            n = int.from_bytes(blob[at : at + 4], "big")
            values.append(blob[at + 4 : at + 4 + n] if n else None)
            at += 4 + n
        return replies, values


class _Reader:
    """Replies off a socket (RESP2, and the RESP3 types a client may ask for): bulk strings as bytes,
    an error reply as its exception (``NOSCRIPT``: redis-py's ``NoScriptError``)."""

    def __init__(self, sock: Any, errors: Any) -> None:
        self.sock, self.errors, self.buf, self.pos = sock, errors, b"", 0

    def _fill(self) -> None:
        data = self.sock.recv(1 << 16)
        if not data:
            raise self.errors.ConnectionError("connection closed by the server")
        self.buf, self.pos = self.buf[self.pos :] + data, 0

    def skip(self, expected: bytes) -> bool:
        """Pass over replies that are exactly ``expected`` (True), or leave them to be read one by
        one (False: something else came, such as an error). Reads on only while what came agrees."""
        while True:
            have = self.buf[self.pos : self.pos + len(expected)]
            if not expected.startswith(have):
                return False
            if len(have) == len(expected):
                self.pos += len(expected)
                return True
            self._fill()

    def reply(self) -> Any:
        buf = self.buf
        end = buf.find(b"\r\n", self.pos)
        while end < 0:
            self._fill()
            buf = self.buf
            end = buf.find(b"\r\n", self.pos)
        kind, rest = buf[self.pos : self.pos + 1], buf[self.pos + 1 : end]
        self.pos = end + 2
        if kind == b"$" or kind == b"=":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) - self.pos < n + 2:
                self._fill()
            value = self.buf[self.pos : self.pos + n]
            self.pos += n + 2
            return value
        if kind == b":":
            return int(rest)
        if kind == b"+":
            return rest
        if kind in (b"*", b"~", b">", b"%"):
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(2 * n if kind == b"%" else n)]
        if kind == b"-":
            text = rest.decode("utf-8", "replace")
            return (self.errors.NoScriptError if text.startswith("NOSCRIPT") else self.errors.ResponseError)(text)
        if kind == b"_":
            return None
        if kind == b"#":
            return rest == b"t"
        if kind == b",":
            return float(rest)
        raise self.errors.InvalidResponse(f"unexpected reply type {kind!r}")


_MORE = object()
_QUEUED = b"+OK\r\n+QUEUED\r\n"


class _CReader:
    """:class:`_Reader`'s replies, parsed by hiredis."""

    def __init__(self, sock: Any, errors: Any) -> None:
        self.sock, self.errors = sock, errors
        self.reader = hiredis.Reader(replyError=errors.ResponseError, protocolError=errors.InvalidResponse,
                                     notEnoughData=_MORE)

    def reply(self) -> Any:
        reply = self.reader.gets()
        while reply is _MORE:
            data = self.sock.recv(1 << 16)
            if not data:
                raise self.errors.ConnectionError("connection closed by the server")
            self.reader.feed(data)
            reply = self.reader.gets()
        if type(reply) is self.errors.ResponseError and str(reply).startswith("NOSCRIPT"):
            return self.errors.NoScriptError(str(reply))
        return reply


class Server:
    """A connected client, the read script and the retry policy of one index (see the module)."""

    def __init__(
        self, url: str, *, busy_timeout: float, redis_params: Mapping[str, Any] | None, readonly: bool,
        retries: int, retry_delay: float,
    ) -> None:
        self.location = redacted(url)
        self.readonly = readonly
        self.client: Any = None
        self._retries = max(0, int(retries))
        self._retry_delay = max(0.0, float(retry_delay))
        self._lock = threading.Lock()
        self._local = threading.local()  # per thread: (pid, connection), see link()
        self._connections: list[Any] = []
        self._password = urlsplit(url).password
        #: Called with a link each time its connection is made (again): the index checks there
        #: that the server still holds what it held (a restart may have taken it back in time).
        self.on_connect: Callable[[Link], None] | None = None
        try:
            import redis
            import redis.exceptions
        except ImportError as exc:
            raise IndexOpenError(
                f"cannot open {self.location}: the Redis index needs the redis client "
                "(pip install 'scrapy-simhash[redis]')"
            ) from exc
        self.errors = redis.exceptions
        self._script = READ_SCRIPT
        self._sha = hashlib.sha1(READ_SCRIPT.encode("utf-8")).hexdigest()
        client_url, self.prefix = split_prefix(url)
        kwargs: dict[str, Any] = {"socket_connect_timeout": 10.0, "socket_timeout": busy_timeout}
        try:  # our own bounded retries (idempotent through request tokens) instead of redis-py's
            from redis.backoff import NoBackoff
            from redis.retry import Retry

            kwargs["retry"] = Retry(NoBackoff(), 0)
        except ImportError:  # pragma: no cover - every redis>=4.5 has them
            pass
        kwargs.update(redis_params or {})
        # RESP2 whatever the client's default (redis-py speaks RESP3 where hiredis is installed): the
        # index's own reads take a hash's fields as a flat list, as RESP2 sends them
        kwargs.update(decode_responses=True, encoding="utf-8", protocol=2)
        self._opening(lambda: setattr(self, "client", redis.Redis.from_url(client_url, **kwargs)))

    def _opening(self, step: Callable[[], Any]) -> Any:
        """Run a step of opening; a failure closes the client and is an :class:`IndexOpenError`."""
        try:
            return step()
        except IndexOpenError:
            self.close()
            raise
        except (self.errors.RedisError, OSError, TypeError, ValueError) as exc:
            self.close()
            text = str(exc)
            if self._password:
                text = text.replace(self._password, "***")
            raise IndexOpenError(f"cannot open Redis index {self.location}: {text}") from exc
        except BaseException:
            self.close()
            raise

    def open(self, verify: Callable[[Any], None]) -> None:
        """Ping, check the server's version, ``verify(client)`` (the index's record), load the read script."""

        def steps() -> None:
            self.client.ping()
            _check_version(self.client)
            verify(self.client)
            self.client.script_load(self._script)

        self._opening(steps)

    def forgetful(self) -> list[str]:
        """Why this server may forget entries, or lose writes it acknowledged (empty: no known
        reason): an eviction policy that may remove any key; no append-only file (RDB snapshots
        only: a crash loses what came after the last one, and the restart takes the index back in
        time; or no persistence at all); an append-only file the server never syncs itself
        (``appendfsync no``). Read with ``CONFIG GET``; where a managed server disables ``CONFIG``,
        ``INFO`` tells the eviction policy and whether the AOF is on
        (``docs/decisions/0110-redis-forgets.md``)."""
        client = self.live()
        config: dict[str, Any] = {}
        try:
            for name in ("maxmemory-policy", "appendonly", "appendfsync", "save"):
                config.update(client.config_get(name))
        except self.errors.ResponseError:
            info = client.info("memory") | client.info("persistence")
            config = {"maxmemory-policy": info.get("maxmemory_policy"),
                      "appendonly": "yes" if info.get("aof_enabled") else "no"}
        problems = []
        policy = str(config.get("maxmemory-policy") or "")
        if policy.startswith("allkeys-"):
            problems.append(f"maxmemory-policy is {policy}: when memory is full the server evicts any key, "
                            "entries included (set it to noeviction, or a volatile-* policy)")
        if config.get("appendonly") != "yes":
            save = str(config.get("save") or "").strip()
            if "save" in config and not save:
                problems.append("it does not persist (appendonly no, no RDB snapshots): a restart empties the "
                                "index (turn on appendonly yes)")
            else:
                problems.append(
                    f"it persists by RDB snapshots only (appendonly no{f', save {save!r}' if save else ''}): a "
                    "crash loses every entry added since the last snapshot, and the restart takes the index back "
                    "to it, so those stories are let in again (turn on appendonly yes)")
        elif str(config.get("appendfsync") or "").lower() == "no":
            problems.append("appendfsync is no: the operating system decides when the append-only file reaches "
                            "the disk, so a machine crash or power loss loses the last ~30 s of entries the "
                            "server acknowledged (set appendfsync everysec or always)")
        return problems

    def live(self) -> Any:
        client = self.client
        if client is None:
            raise SimhashIndexError(f"index {self.location} is closed")
        return client

    def writable(self) -> Any:
        client = self.live()
        if self.readonly:
            raise IndexWriteError(f"index {self.location} was opened read-only: cannot write to it")
        return client

    def retrying(self, doing: str, call: Callable[[Any], Any], *, write: bool, retry: bool = True) -> Any:
        """Run ``call(client)``; connection errors and timeouts are retried ``retries`` times with a
        doubling delay (redis-py reconnects), then raised as ours, naming the index. ``retry=False``
        for calls that must not run twice (bulk add: a lost reply would add the batch again)."""
        client = self.writable() if write else self.live()
        errors = self.errors
        error = IndexWriteError if write else SimhashIndexError
        attempt, limit = 0, self._retries if retry else 0
        while True:
            try:
                return call(client)
            except (errors.ConnectionError, errors.TimeoutError) as exc:
                if attempt >= limit:
                    raise error(
                        f"index {self.location}: {doing} failed after {attempt + 1} attempt"
                        f"{'s' if attempt else ''}: {exc}"
                    ) from exc
                time.sleep(self._retry_delay * 2**attempt)
                attempt += 1
            except errors.RedisError as exc:
                raise error(f"index {self.location}: {doing} failed: {exc}") from exc
            except UnicodeDecodeError as exc:  # someone else's binary value under our keys
                raise SimhashIndexError(
                    f"index {self.location}: {doing} read a value that is not UTF-8 text: {exc}") from exc

    def link(self) -> Link:
        """This thread's own binary connection (made with the client's settings: URL, password, TLS,
        ``redis_params``); a forked child makes its own instead of sharing its parent's socket."""
        return Link(self, self._connection(self.live()))

    def attempts(self, doing: str, run: Callable[[Link], Any], *, write: bool, retry: bool = True) -> Any:
        """``run(link)`` on this thread's connection, connection errors and timeouts retried as
        :meth:`retrying` does (``run`` must be safe to run again: the index's calls are, by request
        tokens and optimistic transactions)."""
        return self.retrying(doing, lambda _client: run(self.link()), write=write, retry=retry)

    def _connection(self, client: Any) -> Any:
        """This thread's own connection (see :meth:`link`); its replies are bytes, not text."""
        held = getattr(self._local, "held", None)
        if held is not None and held[0] == os.getpid():
            return held[1]
        pool = client.connection_pool
        connection = pool.connection_class(**{**pool.connection_kwargs, "decode_responses": False})
        self._local.held = (os.getpid(), connection)
        with self._lock:
            self._connections.append(connection)
        return connection

    def close(self) -> None:
        """Close every connection (idempotent)."""
        with self._lock:
            client, self.client = self.client, None
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.disconnect()
        if client is not None:
            client.close()


def command(name: str, *args: Any) -> Callable[[Any], Any]:
    """A call of the redis-py client's method ``name`` with ``args`` (for :meth:`Server.retrying`)."""
    return lambda client: getattr(client, name)(*args)


def packed(commands: Sequence[Sequence[Arg]]) -> bytes:
    """``commands`` in the Redis protocol (text as UTF-8): what redis-py's ``pack_commands`` sends,
    without its per-argument checks, which cost more than the round trip on a hot path."""
    out: list[bytes] = []
    add = out.append
    for command in commands:
        add(b"*%d\r\n" % len(command))
        for arg in command:
            if type(arg) is not bytes:
                arg = (arg if type(arg) is str else str(arg)).encode("utf-8")
            add(b"$%d\r\n%b\r\n" % (len(arg), arg))
    return b"".join(out)


def _check_version(client: Any) -> tuple[int, ...] | None:
    """Refuse a server older than :data:`MIN_SERVER` at open, rather than fail every check-and-add;
    its version (None: unreadable)."""
    version = str(client.info("server").get("redis_version", ""))
    try:
        parts = tuple(int(p) for p in version.split(".")[:3])
    except ValueError:
        return None  # not a version we can read (a compatible server that reports its own): let it run
    if parts and parts < MIN_SERVER:
        raise ValueError(f"the server is Redis {version}; the index needs Redis "
                         f"{'.'.join(map(str, MIN_SERVER))} or newer (SET KEEPTTL, HSET of several fields)")
    return parts or None
