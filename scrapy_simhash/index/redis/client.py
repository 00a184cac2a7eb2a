"""One Redis server as the Redis index talks to it: connecting, the script, retries, errors.

Nothing here knows the index's keys or its rule (:mod:`.redis`, ``redis_rule.lua``): this is how a
call reaches the server. On Redis 7 and later the script is a library of Redis functions (``FUNCTION
LOAD``, called with ``FCALL``, reads with ``FCALL_RO``): a library stays loaded, so its ~100 Lua
functions and the decoded layout of the limits are made once, not at every call as an ``EVALSHA``
script makes them. Its name holds the script's SHA-1: a process never calls another version's
library. Older servers, or a server that refuses ``FUNCTION``, get the script itself (``SCRIPT
LOAD``, ``EVALSHA``). Either is called on a connection of the calling thread's own and loaded again
when the server lost it (``NOSCRIPT``, "Function not found": a restart without persistence, ``SCRIPT
FLUSH``, ``FUNCTION FLUSH``); several calls can go in one write. Connection errors and timeouts are retried a bounded
number of times with a doubling delay, then raised as the index's errors naming the server, whose
password is never shown.
"""

from __future__ import annotations

import hashlib
import os
import string
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from ..base import IndexError_, IndexOpenError, IndexWriteError

DEFAULT_PREFIX = "simhash"
#: Call the script as a Redis function where the server has them (Redis >= 7); False: ``EVALSHA``
#: always (tests run both).
FUNCTIONS = True
#: The oldest server with functions.
FUNCTION_SERVER = (7, 0, 0)
#: Compare-and-set of one key (``EVAL SWAP 1 key expected new``): a record rewritten only if nobody
#: changed it since it was read; 1 when it was.
SWAP = "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) return 1 end return 0"


def script_texts(script: str) -> tuple[str, str, tuple[str, str]]:
    """``script`` (which defines ``main(argv)``) as the text ``EVALSHA`` runs, as a library of Redis
    functions, and the names of that library's two functions (writing, read-only). The library runs
    the script's text once, at its first call (while it loads, a library sees no Lua globals), and
    keeps the ``main`` it made."""
    digest = hashlib.sha1(script.encode("utf-8")).hexdigest()
    names = (f"simhash_w_{digest}", f"simhash_r_{digest}")
    library = (
        f"#!lua name=simhash_{digest}\n"
        "local main\n"
        "local function call(_, argv)\n"
        "  if not main then main = (function()\n"
        f"{script}\n"
        "return main\n"
        "end)() end\n"
        "  return main(argv)\n"
        "end\n"
        f"redis.register_function('{names[0]}', call)\n"
        f"redis.register_function{{function_name = '{names[1]}', callback = call, flags = {{'no-writes'}}}}\n"
    )
    return f"{script}\nreturn main(ARGV)\n", library, names


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


class Server:
    """A connected client, the loaded script and the retry policy of one index (see the module)."""

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
        self._local = threading.local()  # per thread: (pid, connection) for the script calls
        self._connections: list[Any] = []
        self._password = urlsplit(url).password
        try:
            import redis
            import redis.exceptions
        except ImportError as exc:
            raise IndexOpenError(
                f"cannot open {self.location}: the Redis index needs the redis client "
                "(pip install 'scrapy-simhash[redis]')"
            ) from exc
        self.errors = redis.exceptions
        client_url, self.prefix = split_prefix(url)
        kwargs: dict[str, Any] = {"socket_connect_timeout": 10.0, "socket_timeout": busy_timeout}
        try:  # our own bounded retries (idempotent through request tokens) instead of redis-py's
            from redis.backoff import NoBackoff
            from redis.retry import Retry

            kwargs["retry"] = Retry(NoBackoff(), 0)
        except ImportError:  # pragma: no cover - every redis>=4.5 has them
            pass
        kwargs.update(redis_params or {})
        kwargs.update(decode_responses=True, encoding="utf-8")
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

    def open(self, verify: Callable[[Any], None], script: str, seq_key: str) -> None:
        """Ping, ``verify(client)`` (the index's record), load ``script``; its calls route by ``seq_key``."""

        def steps() -> None:
            self.client.ping()
            version = _check_version(self.client)
            verify(self.client)
            self._seq_key = seq_key
            self._script, self._library, names = script_texts(script)
            self._sha = self.client.script_load(self._script)
            self._functions: tuple[str, str] | None = None
            if FUNCTIONS and version is not None and version >= FUNCTION_SERVER and self._load_library(self.client):
                self._functions = names

        self._opening(steps)

    def _load_library(self, client: Any) -> bool:
        """``FUNCTION LOAD`` the library (loaded already: fine); False when the server refuses it
        (``FUNCTION`` renamed, disabled, or not allowed to this user): the script is called instead."""
        try:
            client.execute_command("FUNCTION", "LOAD", self._library)
        except self.errors.ResponseError as exc:
            return "already exists" in str(exc)
        return True

    def drop_other_libraries(self) -> int:
        """Delete the function libraries other versions of the script loaded (``simhash_<SHA-1>``
        but this one's: ~1 MB each, kept with the data; nothing else removes them); a process still
        running one loads it again at its next call, as after ``FUNCTION FLUSH``. How many went (0
        where the server runs the script with ``EVALSHA`` or refuses ``FUNCTION``)."""
        if self._functions is None:
            return 0
        own = self._library.split("\n", 1)[0].removeprefix("#!lua name=")
        gone = 0
        client = self.writable()
        try:
            for library in client.function_list(library="simhash_*"):
                fields = library if isinstance(library, dict) else dict(zip(library[::2], library[1::2], strict=False))
                name = fields.get("library_name")
                if isinstance(name, str) and name != own and _is_library_name(name):
                    gone += bool(client.function_delete(name))
        except self.errors.ResponseError:  # FUNCTION not allowed to this user (a version may be gone)
            pass
        return gone

    def forgetful(self) -> list[str]:
        """Why this server may forget entries (empty: no known reason): an eviction policy that may
        remove any key, or neither AOF nor RDB snapshots. Read with ``CONFIG GET``; where a managed
        server disables ``CONFIG``, ``INFO`` tells the eviction policy and AOF only."""
        client = self.live()
        config: dict[str, Any] = {}
        try:
            for name in ("maxmemory-policy", "appendonly", "save"):
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
        if config.get("appendonly") != "yes" and "save" in config and not str(config["save"]).strip():
            problems.append("it does not persist (appendonly no, no RDB snapshots): a restart empties the index "
                            "(turn on appendonly yes, or RDB snapshots)")
        return problems

    def live(self) -> Any:
        client = self.client
        if client is None:
            raise IndexError_(f"index {self.location} is closed")
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
        error = IndexWriteError if write else IndexError_
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
                raise IndexError_(f"index {self.location}: {doing} read a value that is not UTF-8 text: {exc}") from exc

    def _connection(self, client: Any) -> Any:
        """This thread's own connection for script calls, made with the client's settings (URL,
        password, TLS, ``redis_params``). The hot path skips the client's pool and command
        machinery, which cost more than the round trip itself (about 100 µs a call); a forked
        child makes its own instead of sharing its parent's socket. Its replies are bytes, not
        text: the script returns binary records."""
        held = getattr(self._local, "held", None)
        if held is not None and held[0] == os.getpid():
            return held[1]
        pool = client.connection_pool
        connection = pool.connection_class(**{**pool.connection_kwargs, "decode_responses": False})
        self._local.held = (os.getpid(), connection)
        with self._lock:
            self._connections.append(connection)
        return connection

    def _evalsha_many(self, client: Any, calls: Sequence[tuple[str, str]], route: str, write: bool) -> list[Any]:
        """``FCALL`` (reads: ``FCALL_RO``) or ``EVALSHA`` calls in one write, their replies read in
        order; a reply that is an error is returned as the exception (the other replies must still
        be read off the socket)."""
        connection = self._connection(client)
        if self._functions is not None:
            head: tuple[Any, ...] = ("FCALL", self._functions[0]) if write else ("FCALL_RO", self._functions[1])
        else:
            head = ("EVALSHA", self._sha)
        try:
            connection.send_packed_command([_packed(connection, [(*head, "1", route, *args) for args in calls])])
            replies: list[Any] = []
            for _ in calls:
                try:
                    replies.append(connection.read_response())
                except self.errors.ResponseError as exc:
                    replies.append(exc)
            return replies
        except (self.errors.ConnectionError, self.errors.TimeoutError):
            connection.disconnect()  # the next call reconnects
            raise

    def _lost(self, reply: Any) -> bool:
        """Is ``reply`` the server's answer that it has not (or no longer) the script or library?"""
        if self._functions is not None:
            return isinstance(reply, self.errors.ResponseError) and str(reply).startswith("Function not found")
        return isinstance(reply, self.errors.NoScriptError)

    def script(
        self, doing: str, calls: Sequence[tuple[str, str]], *, write: bool = True, retry: bool = True,
        per_call: bool = False, route: str | None = None,
    ) -> list[Any]:
        """The script's replies (bytes) to ``calls`` (two JSON arguments each: the call's own, and
        what every call of the index repeats; ``route``: the key that routes them in a cluster, by
        default this index's namespace), sent in one write; the lot is sent again after the server
        lost the script (loaded again) or a broken connection. An error reply raises, or with
        ``per_call`` is returned in its place as an :class:`~.base.IndexError_` (each call is atomic
        on its own: the others stand)."""

        def call(client: Any) -> list[Any]:
            replies = self._evalsha_many(client, calls, route or self._seq_key, write)
            if any(self._lost(r) for r in replies):
                if self._functions is not None and not self._load_library(client):
                    self._functions = None  # FUNCTION refused since the open: the script instead
                self._sha = client.script_load(self._script)
                replies = self._evalsha_many(client, calls, route or self._seq_key, write)
            if per_call:
                return [IndexError_(f"index {self.location}: {doing} failed: {r}") if isinstance(r, Exception) else r
                        for r in replies]
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
            return replies

        return self.retrying(doing, call, write=write, retry=retry)

    def close(self) -> None:
        """Close every connection (idempotent)."""
        with self._lock:
            client, self.client = self.client, None
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.disconnect()
        if client is not None:
            client.close()


def _is_library_name(name: str) -> bool:
    """Is ``name`` one :func:`script_texts` gives a library (``simhash_`` and a SHA-1), of any version?"""
    return len(name) == 48 and name.startswith("simhash_") and set(name[8:]) <= _HEX


_HEX = frozenset(string.hexdigits.lower())

#: The oldest server the index's scripts run on (``LPOS`` 6.0.6, ``SET … KEEPTTL`` 6.0).
MIN_SERVER = (6, 0, 6)


def _packed(connection: Any, commands: Sequence[Sequence[str]]) -> bytes:
    """``commands`` (text arguments only) in the Redis protocol, encoded as ``connection`` encodes
    text: what its ``pack_commands`` sends, without its per-argument checks and chunking (about
    25 µs a call in Python, half the client's CPU of a check-and-add; hiredis is not a dependency)."""
    encoding, errors = connection.encoder.encoding, connection.encoder.encoding_errors
    out = []
    for command in commands:
        out.append(b"*%d\r\n" % len(command))
        for arg in command:
            data = arg.encode(encoding, errors)
            out.append(b"$%d\r\n%s\r\n" % (len(data), data))
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
                         f"{'.'.join(map(str, MIN_SERVER))} or newer (its scripts use LPOS and SET KEEPTTL)")
    return parts or None
