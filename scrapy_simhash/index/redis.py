"""The Redis band index: one index shared by crawlers on many machines (``redis://``, ``rediss://``).

Same protocol, same verdicts as the SQLite index (:mod:`.sqlite`) for the same inputs; what differs is
where the data lives and how atomicity is obtained.

Atomicity: one round trip
-------------------------
A check-and-add is one ``EVALSHA`` of the Lua script :data:`SCRIPT` (loaded once per connection
with ``SCRIPT LOAD``, reloaded on ``NOSCRIPT``, e.g. after a server restart or ``SCRIPT FLUSH``).
Redis runs a script alone, so the title tier, the body tier and the insert are one atomic step: N
crawler processes on N machines carrying one story admit exactly one copy, and no lock is ever held
across the network. Each call carries a request token (the query's ``request_id``, which the
pipeline keeps per item across its retries, else a random one); an *added* outcome is remembered
under it for two minutes, so a call retried after a lost reply, or a batch retried after it was
applied in part, returns the same entry instead of finding itself as its own duplicate.

Keys (plain strings and integers only, never pickle)
----------------------------------------------------
``<prefix>`` is ``simhash`` unless the URL says ``?prefix=…``; ``<ns>`` is the namespace,
percent-encoded, in braces (a Redis Cluster hash tag: every key of a namespace lives in one slot).

``<prefix>:meta``
    JSON string describing the index: ``format``, ``schema_version``, :class:`~.base.IndexParams`,
    band layouts, fingerprint storage, creation time and version. Written once with ``SET NX`` (of
    several processes creating the index at once, one wins and all check against its record);
    other parameters at open are a :class:`~.base.ParameterMismatch` naming the URL and fields.
``<prefix>:namespaces``
    Hash: namespace name → creation time (for ``stats``).
``<prefix>:{<ns>}:seq``
    Entry id counter (``INCR``): ids are never reused, so a decision cannot point at a newer entry.
``<prefix>:{<ns>}:e:<id>``
    Hash per entry; ``<id>`` is zero-padded to 15 digits so that string order is id order. Fields
    ``s`` first seen (the float's ``repr``), ``t``/``b`` title/body fingerprint (fixed-width lower-case
    hex, absent when that text was too short), ``u`` URL and ``n`` title (absent when None), ``m``
    number signature (:func:`~.base.numbers_agree`) and ``x`` sentence hashes (space-separated),
    each absent when the entry was added without one.
``<prefix>:{<ns>}:seen``
    Sorted set of entry ids scored by first-seen time: expiry (``not_before``), purge, stats, export.
``<prefix>:{<ns>}:tf:<hex>`` / ``bf:<hex>``
    Sorted set of the entries holding this title/body fingerprint, scored by first-seen time: the
    earliest non-expired holder is one ``ZRANGEBYSCORE … LIMIT 0 1`` however many share it.
``<prefix>:{<ns>}:tb:<band>:<value>`` / ``bb:…``
    The pigeonhole bands (:func:`~scrapy_simhash.simhash.band_layout`): a set of the fingerprints
    (hex) whose band ``<band>`` has this value (hex). A fingerprint is a member once however many
    entries share it, so boilerplate does not grow buckets. It leaves the band sets when its last
    entry goes (forget, purge, reset). ``<prefix>:{<ns>}:nbands`` counts band members for ``stats``.
``<prefix>:{<ns>}:sh:<hash>``
    The opt-in sentence tier: sorted set of the entries holding this sentence hash, scored by
    first-seen time.
``<prefix>:{<ns>}:r:<token>``
    The id an *added* outcome returned for a request token (expires after :data:`TOKEN_TTL`).
``<prefix>:{<ns>}:u:<url>``
    Set of the entry ids with this URL (``forget(url)``).
``<prefix>:{<ns>}:d:<url>`` and ``<prefix>:{<ns>}:decided``
    The latest decision about a non-new URL (hash: status, tier, distance, original id, time, title),
    and the decided URLs scored by decision time (``decisions``, purge).

Exactness in Lua
----------------
Lua 5.1 numbers are doubles, so fingerprints never become Lua numbers: they travel as fixed-width
hex strings, band keys are computed here in Python, and the script computes Hamming distances 32
bits at a time (``tonumber`` of 8 hex digits, ``bit.bxor`` and a SWAR popcount of the 32-bit
halves). Every candidate is verified by its exact distance, as in SQLite. The tier rule is the
SQLite index's, step for step and inside the one script: title tier (nearest, then earliest, then
lowest id; with ``title_numbers`` only entries whose number signatures agree), else body tier, else
the opt-in sentence tier, else insert. ``tests/test_index_redis.py`` feeds both backends the same
random stream and compares every outcome.

Expiry is ``not_before`` against the sorted-set scores plus :meth:`RedisIndex.purge` (no native key
expiry: an entry must leave its band sets and URL set together with its hash).

Failures: an unreachable server, a wrong password or a missing ``redis`` package is an
:class:`~.base.IndexOpenError` at open. A connection error or timeout later is retried a bounded
number of times (``retries``, a short doubling delay, reconnecting each time), then raised as
:class:`~.base.IndexWriteError` (reads: :class:`~.base.IndexError_`). The password is never shown:
:attr:`RedisIndex.location` replaces it with ``***``.

``reset`` deletes the namespace's keys with ``SCAN`` + ``UNLINK`` in batches (not one atomic step:
run it when no crawler is writing to that namespace, as with the SQLite index's maintenance).
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from ..__version__ import __version__
from ..simhash import SUPPORTED_BITS, band_layout, split_bands
from .base import (
    NUMBERS_MAX,
    SENTENCE_BODY_DISTANCE,
    SENTENCE_MAX_HOLDERS,
    SENTENCES_STORED,
    Decision,
    Entry,
    IndexError_,
    IndexOpenError,
    IndexParams,
    IndexWriteError,
    Match,
    Outcome,
    ParameterMismatch,
    Query,
    QueryChecks,
    Tier,
)

FORMAT = "scrapy-simhash-index"
SCHEMA_VERSION = 1
DEFAULT_PREFIX = "simhash"
TITLE_CHARS = 300
#: Seconds an *added* outcome is remembered under its request token (retries after a lost reply
#: come within seconds; a short life keeps the tokens of a fast crawl to a few MB).
TOKEN_TTL = 120
#: Entries per ``EVALSHA`` in :meth:`RedisIndex.add` and per purge batch.
ADD_BATCH = 500
_ID_WIDTH = 15  # zero-padded ids: string order is numeric order, and 10**15 < 2**53 (exact in Lua)
_TIER_CHAR: dict[Tier, str] = {"title": "t", "body": "b"}
_CHAR_TIER: dict[str, Tier] = {"t": "title", "b": "body", "s": "sentence"}

#: The server-side half of the index. ``KEYS[1]`` is the namespace's ``seq`` key (it routes the call
#: in a cluster; every other key shares its hash tag). ``ARGV[1]`` is the operation, ``ARGV[2]``
#: the namespace's key base (``<prefix>:{<ns>}:``).
SCRIPT = r"""
local op, B = ARGV[1], ARGV[2]

local function dist(a, b, limit)
  -- Hamming distance of two equal-length hex strings, 32 bits at a time; stops once past limit
  if #a ~= #b then return limit + 1 end  -- not one of our fingerprints: never a candidate
  local d = 0
  for i = 1, #a, 8 do
    local x = bit.bxor(tonumber(string.sub(a, i, i + 7), 16), tonumber(string.sub(b, i, i + 7), 16))
    x = bit.band(x - bit.band(bit.rshift(x, 1), 0x55555555), 0xFFFFFFFF)
    x = bit.band(x, 0x33333333) + bit.band(bit.rshift(x, 2), 0x33333333)
    x = bit.band(x + bit.rshift(x, 4), 0x0F0F0F0F)
    d = d + bit.band(x, 0xFF) + bit.band(bit.rshift(x, 8), 0xFF)
          + bit.band(bit.rshift(x, 16), 0xFF) + bit.rshift(x, 24)
    if d > limit then return d end
  end
  return d
end

local function split(text)
  local words = {}
  for w in string.gmatch(text, '%S+') do words[#words + 1] = w end
  return words
end

local function numbers_agree(a, b, pct, nmax, empty_agrees)
  -- base.numbers_agree, word for word: overlap of two bottom-k number signatures (hex strings)
  if pct <= 0 or not a or not b then return true end
  local xs, ys = split(a), split(b)
  if #xs == 0 or #ys == 0 then return empty_agrees or (#xs == 0 and #ys == 0) end
  local top = 'g'
  if #xs >= nmax and xs[#xs] < top then top = xs[#xs] end
  if #ys >= nmax and ys[#ys] < top then top = ys[#ys] end
  local inx, nx, ny, shared = {}, 0, 0, 0
  for _, x in ipairs(xs) do if x <= top and not inx[x] then inx[x] = true; nx = nx + 1 end end
  local iny = {}
  for _, y in ipairs(ys) do
    if y <= top and not iny[y] then
      iny[y] = true; ny = ny + 1
      if inx[y] then shared = shared + 1 end
    end
  end
  if nx == 0 or ny == 0 then return nx == 0 and ny == 0 end
  return 100 * shared >= pct * math.min(nx, ny)
end

local function nearest(tc, fp, k, nb, limit, first, n, accept)
  -- nearest non-expired entries: {distance, id} by distance, then first seen, then id; with
  -- accept(id), only accepted entries count, so every holder of a candidate fingerprint is read
  local seen, cands = {}, {}
  for i = first, first + n - 1 do
    for _, m in ipairs(redis.call('SMEMBERS', B .. ARGV[i])) do
      if not seen[m] then
        seen[m] = true
        local d = dist(m, fp, k)
        if d <= k then cands[#cands + 1] = {d, m} end
      end
    end
  end
  table.sort(cands, function(x, y) return x[1] < y[1] end)
  local out, i = {}, 1
  while i <= #cands and #out < limit do
    local d, group = cands[i][1], {}
    while i <= #cands and cands[i][1] == d do
      local rows
      if accept then
        rows = redis.call('ZRANGEBYSCORE', B .. tc .. 'f:' .. cands[i][2], nb, '+inf', 'WITHSCORES')
      else
        rows = redis.call('ZRANGEBYSCORE', B .. tc .. 'f:' .. cands[i][2], nb, '+inf',
                          'WITHSCORES', 'LIMIT', 0, limit - #out)
      end
      for j = 1, #rows, 2 do
        if not accept or accept(rows[j]) then group[#group + 1] = {tonumber(rows[j + 1]), rows[j]} end
      end
      i = i + 1
    end
    table.sort(group, function(x, y)
      if x[1] ~= y[1] then return x[1] < y[1] end
      return x[2] < y[2]
    end)
    for j = 1, math.min(#group, limit - #out) do out[#out + 1] = {d, group[j][2]} end
  end
  return out
end

local function sentence_match(first, n, percent, nb, numbers, pct, nmax, bfp, maxbd, maxholders)
  -- the opt-in sentence tier: earliest non-expired entry holding some of the query's sentence
  -- hashes (ARGV[first..first+n-1]) that matches as base.sentences_match says and whose numbers
  -- agree (a side without numbers agreeing): {{stored hashes the query lacks, id}} or {}; a hash
  -- held by maxholders entries or more is boilerplate and ignored
  local count, score, cands = {}, {}, {}
  for i = first, first + n - 1 do
    local key = B .. 'sh:' .. ARGV[i]
    if redis.call('ZCARD', key) < maxholders then
      local rows = redis.call('ZRANGEBYSCORE', key, nb, '+inf', 'WITHSCORES')
      for j = 1, #rows, 2 do
        count[rows[j]] = (count[rows[j]] or 0) + 1
        score[rows[j]] = tonumber(rows[j + 1])
      end
    end
  end
  for m, c in pairs(count) do cands[#cands + 1] = {score[m], m, c} end
  table.sort(cands, function(x, y)
    if x[1] ~= y[1] then return x[1] < y[1] end
    return x[2] < y[2]
  end)
  for _, c in ipairs(cands) do
    local f = redis.call('HMGET', B .. 'e:' .. c[2], 'm', 'x', 'b')
    local stored, shared = #split(f[2] or ''), c[3]
    local ok = shared >= 2 and 100 * shared > percent * stored
    if not ok and bfp ~= '' and f[3] then ok = dist(bfp, f[3], maxbd) <= maxbd end
    if ok and numbers_agree(numbers, f[1], pct, nmax, true) then return {{stored - shared, c[2]}} end
  end
  return {}
end

local function insert(tfp, bfp, url, has_url, title, has_title, s, tkeys, nt, bkeys, nb, numbers, sfirst, nsh)
  local id = redis.call('INCR', B .. 'seq')
  local member = string.format('%015d', id)
  local ek = B .. 'e:' .. member
  redis.call('HSET', ek, 's', s)
  if has_url then redis.call('HSET', ek, 'u', url); redis.call('SADD', B .. 'u:' .. url, member) end
  if has_title then redis.call('HSET', ek, 'n', title) end
  if numbers then redis.call('HSET', ek, 'm', numbers) end
  if nsh > 0 then
    redis.call('HSET', ek, 'x', table.concat(ARGV, ' ', sfirst, sfirst + nsh - 1))
    for i = sfirst, sfirst + nsh - 1 do redis.call('ZADD', B .. 'sh:' .. ARGV[i], s, member) end
  end
  redis.call('ZADD', B .. 'seen', s, member)
  local new_bands = 0
  if tfp ~= '' then
    redis.call('HSET', ek, 't', tfp)
    redis.call('ZADD', B .. 'tf:' .. tfp, s, member)
    for i = tkeys, tkeys + nt - 1 do new_bands = new_bands + redis.call('SADD', B .. ARGV[i], tfp) end
  end
  if bfp ~= '' then
    redis.call('HSET', ek, 'b', bfp)
    redis.call('ZADD', B .. 'bf:' .. bfp, s, member)
    for i = bkeys, bkeys + nb - 1 do new_bands = new_bands + redis.call('SADD', B .. ARGV[i], bfp) end
  end
  if new_bands > 0 then redis.call('INCRBY', B .. 'nbands', new_bands) end
  return id
end

local function remove(member, emptied)
  local ek = B .. 'e:' .. member
  local f = redis.call('HMGET', ek, 't', 'b', 'u', 'x')
  if redis.call('DEL', ek) == 0 then return 0 end
  if f[4] then
    for _, h in ipairs(split(f[4])) do redis.call('ZREM', B .. 'sh:' .. h, member) end
  end
  redis.call('ZREM', B .. 'seen', member)
  for j, tc in ipairs({'t', 'b'}) do
    if f[j] then
      local zk = B .. tc .. 'f:' .. f[j]
      redis.call('ZREM', zk, member)
      if redis.call('EXISTS', zk) == 0 then emptied[#emptied + 1] = tc; emptied[#emptied + 1] = f[j] end
    end
  end
  if f[3] then redis.call('SREM', B .. 'u:' .. f[3], member) end
  return 1
end

local function forget_decision(url)
  redis.call('DEL', B .. 'd:' .. url)
  redis.call('ZREM', B .. 'decided', url)
end

if op == 'check' then
  -- 3 token, 4 title fp, 5 body fp, 6 title k, 7 body k, 8 not_before, 9 seen_at, 10/11 url flag/url,
  -- 12/13 title flag/title, 14/15 title/body status, 16/17 number of title/body band keys,
  -- 18/19 numbers flag/number signature, 20 title_numbers, 21 NUMBERS_MAX, 22 sentences_shared,
  -- 23 sentence status, 24 number of (distinct, sorted) sentence hashes, 25 how many of them to store,
  -- 26… band keys, sentence hashes, TTL of request tokens, sentence tier body distance and max holders
  local token, tfp, bfp = ARGV[3], ARGV[4], ARGV[5]
  local nt, nbk, nsh, nstore = tonumber(ARGV[16]), tonumber(ARGV[17]), tonumber(ARGV[24]), tonumber(ARGV[25])
  local sfirst = 26 + nt + nbk
  local numbers = ARGV[18] == '1' and ARGV[19] or nil
  local pct, nmax = tonumber(ARGV[20]), tonumber(ARGV[21])
  local accept = nil
  if pct > 0 and numbers then
    accept = function(member)
      return numbers_agree(numbers, redis.call('HGET', B .. 'e:' .. member, 'm'), pct, nmax)
    end
  end
  if token ~= '' then
    local prev = redis.call('GET', B .. 'r:' .. token)
    if prev then return {'added', tonumber(prev)} end
  end
  local found, tier = {}, 't'
  if tfp ~= '' then found = nearest('t', tfp, tonumber(ARGV[6]), ARGV[8], 1, 26, nt, accept) end
  if #found == 0 and bfp ~= '' then
    tier = 'b'
    found = nearest('b', bfp, tonumber(ARGV[7]), ARGV[8], 1, 26 + nt, nbk, nil)
  end
  if #found == 0 and tonumber(ARGV[22]) > 0 and nsh > 0 then
    tier = 's'
    found = sentence_match(sfirst, nsh, tonumber(ARGV[22]), ARGV[8], numbers, pct, nmax, bfp,
                           tonumber(ARGV[sfirst + nsh + 1]), tonumber(ARGV[sfirst + nsh + 2]))
  end
  local has_url, has_title = ARGV[10] == '1', ARGV[12] == '1'
  if #found > 0 then
    local d, member = found[1][1], found[1][2]
    if has_url then
      local dk = B .. 'd:' .. ARGV[11]
      redis.call('DEL', dk)
      local status = ARGV[23]
      if tier == 't' then status = ARGV[14] elseif tier == 'b' then status = ARGV[15] end
      redis.call('HSET', dk, 'status', status, 'tier', tier,
                 'distance', d, 'original', member, 'decided_at', ARGV[9])
      if has_title then redis.call('HSET', dk, 'title', ARGV[13]) end
      redis.call('ZADD', B .. 'decided', ARGV[9], ARGV[11])
    end
    return {'match', tier, d, member, redis.call('HGETALL', B .. 'e:' .. member)}
  end
  local id = insert(tfp, bfp, ARGV[11], has_url, ARGV[13], has_title, ARGV[9], 26, nt, 26 + nt, nbk, numbers,
                    sfirst, nstore)
  if token ~= '' then redis.call('SET', B .. 'r:' .. token, id, 'EX', tonumber(ARGV[sfirst + nsh])) end
  return {'added', id}
elseif op == 'lookup' then
  -- 3 title fp, 4 body fp, 5 title k, 6 body k, 7 not_before, 8 limit, 9/10 key counts, keys...
  local nt, nbk, limit, out = tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[8]), {}
  for _, spec in ipairs({{'t', ARGV[3], ARGV[5], 11, nt}, {'b', ARGV[4], ARGV[6], 11 + nt, nbk}}) do
    if spec[2] ~= '' then
      for _, m in ipairs(nearest(spec[1], spec[2], tonumber(spec[3]), ARGV[7], limit, spec[4], spec[5], nil)) do
        out[#out + 1] = {spec[1], m[1], m[2], redis.call('HGETALL', B .. 'e:' .. m[2])}
      end
    end
  end
  return out
elseif op == 'add' then
  -- 3/4 key counts, then per entry: title fp, body fp, url flag, url, title flag, title, first seen,
  -- title band keys (or ''), body band keys (or '')
  local nt, nbk = tonumber(ARGV[3]), tonumber(ARGV[4])
  local stride, n = 7 + nt + nbk, 0
  for i = 5, #ARGV, stride do
    insert(ARGV[i], ARGV[i + 1], ARGV[i + 3], ARGV[i + 2] == '1', ARGV[i + 5], ARGV[i + 4] == '1',
           ARGV[i + 6], i + 7, nt, i + 7 + nt, nbk, nil, 0, 0)
    n = n + 1
  end
  return n
elseif op == 'remove' then
  -- 3 how ('older', 'id', 'url'), 4 value, 5 batch: {removed, {tier char, hex, ...} of emptied fps}
  local how, value, emptied, n = ARGV[3], ARGV[4], {}, 0
  if how == 'older' then
    local doomed = redis.call('ZRANGEBYSCORE', B .. 'seen', '-inf', '(' .. value, 'LIMIT', 0, tonumber(ARGV[5]))
    for _, member in ipairs(doomed) do n = n + remove(member, emptied) end
    if #doomed < tonumber(ARGV[5]) then
      for _, url in ipairs(redis.call('ZRANGEBYSCORE', B .. 'decided', '-inf', '(' .. value)) do
        forget_decision(url)
      end
    end
  elseif how == 'id' then
    n = remove(value, emptied)
  else
    for _, member in ipairs(redis.call('SMEMBERS', B .. 'u:' .. value)) do n = n + remove(member, emptied) end
    forget_decision(value)
  end
  return {n, emptied}
elseif op == 'dropbands' then
  -- per fingerprint: tier char, hex, number of band keys, keys; dropped only if no entry holds it
  local i, dropped = 3, 0
  while i <= #ARGV do
    local tc, fp, n = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
    if redis.call('EXISTS', B .. tc .. 'f:' .. fp) == 0 then
      for j = i + 3, i + 2 + n do dropped = dropped + redis.call('SREM', B .. ARGV[j], fp) end
    end
    i = i + 3 + n
  end
  if dropped > 0 then redis.call('DECRBY', B .. 'nbands', dropped) end
  return dropped
end
return redis.error_reply('scrapy-simhash: unknown operation ' .. tostring(op))
"""


# -- URLs ------------------------------------------------------------------------------------------


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


def _split_prefix(url: str) -> tuple[str, str]:
    """``(url without ?prefix=…, prefix)``: the prefix is ours, redis-py must not see it."""
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    prefixes = [v for k, v in pairs if k == "prefix"]
    prefix = prefixes[-1] if prefixes else DEFAULT_PREFIX
    if not prefix or any(c in prefix for c in "{}"):
        raise IndexOpenError(f"{redacted(url)}: prefix must be non-empty, without braces, not {prefix!r}")
    rest = urlencode([(k, v) for k, v in pairs if k != "prefix"])
    return parts._replace(query=rest).geturl(), prefix


# -- the index -------------------------------------------------------------------------------------


def _check_params(params: IndexParams) -> None:
    if params.bits not in SUPPORTED_BITS:
        raise ValueError(f"fingerprint size must be one of {SUPPORTED_BITS} bits, not {params.bits!r}")
    for name in ("title_bands", "body_bands"):
        bands = getattr(params, name)
        if not isinstance(bands, int) or isinstance(bands, bool) or not 1 <= bands <= min(params.bits, 64):
            raise ValueError(f"{name} must be between 1 and {min(params.bits, 64)}, not {bands!r}")


def _layouts(params: IndexParams) -> dict[Tier, tuple[tuple[int, int], ...]]:
    return {
        "title": band_layout(params.bits, params.title_bands - 1),
        "body": band_layout(params.bits, params.body_bands - 1),
    }


def _member(entry_id: int) -> str:
    return f"{entry_id:0{_ID_WIDTH}d}"


def _score(value: float) -> str:
    """A float as Redis parses it back exactly (``repr`` is the shortest exact form)."""
    value = float(value)
    if math.isnan(value):
        raise ValueError("time must be a number, not NaN")
    return "-inf" if value == -math.inf else "+inf" if value == math.inf else repr(value)


def _pairs(flat: list[Any]) -> dict[str, str]:
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


class RedisIndex(QueryChecks):
    """A :class:`~.base.BandIndex` on a Redis server (see the module docstring for keys and script).

    Open it with :func:`scrapy_simhash.index.open_index` or :meth:`RedisIndex.open`. The client is
    thread-safe (a connection pool), so methods may be called from several threads.
    """

    location: str
    namespace: str
    params: IndexParams

    def __init__(self) -> None:  # use RedisIndex.open()
        self._client: Any = None
        self._lock = threading.Lock()
        self._local = threading.local()  # per thread: (pid, connection) for the script calls
        self._connections: list[Any] = []

    # -- opening -----------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        url: str,
        *,
        namespace: str = "default",
        params: IndexParams | None = None,
        create: bool = True,
        readonly: bool = False,
        busy_timeout: float = 30.0,
        redis_params: Mapping[str, Any] | None = None,
        retries: int = 2,
        retry_delay: float = 0.05,
    ) -> RedisIndex:
        """Connect to the Redis index at ``url``, creating its record (``params`` or the defaults)
        if absent. ``busy_timeout`` is the socket timeout of a command; ``redis_params`` go to
        ``redis.Redis`` (``SIMHASH_REDIS_PARAMS``) and override it; connection failures are retried
        ``retries`` times, ``retry_delay`` seconds apart, doubling."""
        if not isinstance(namespace, str) or not namespace:
            raise ValueError("namespace must be a non-empty string")
        if params is not None:
            _check_params(params)
        self = cls()
        self.location = redacted(url)
        self.namespace = namespace
        self._readonly = readonly
        self._retries = max(0, int(retries))
        self._retry_delay = max(0.0, float(retry_delay))
        try:
            import redis
            import redis.exceptions
        except ImportError as exc:
            raise IndexOpenError(
                f"cannot open {self.location}: the Redis index needs the redis client "
                "(pip install 'scrapy-simhash[redis]')"
            ) from exc
        self._errors = redis.exceptions
        client_url, prefix = _split_prefix(url)
        self.prefix = prefix
        password = urlsplit(url).password
        kwargs: dict[str, Any] = {"socket_connect_timeout": 10.0, "socket_timeout": busy_timeout}
        try:  # our own bounded retries (idempotent through request tokens) instead of redis-py's
            from redis.backoff import NoBackoff
            from redis.retry import Retry

            kwargs["retry"] = Retry(NoBackoff(), 0)
        except ImportError:  # pragma: no cover - every redis>=4.5 has them
            pass
        kwargs.update(redis_params or {})
        kwargs.update(decode_responses=True, encoding="utf-8")
        try:
            self._client = redis.Redis.from_url(client_url, **kwargs)
            self._client.ping()
            self._verify(params, create)
            self._sha = self._client.script_load(SCRIPT)
        except (redis.exceptions.RedisError, OSError, TypeError, ValueError) as exc:
            self.close()
            if isinstance(exc, IndexOpenError):
                raise
            text = str(exc)
            if password:
                text = text.replace(password, "***")
            raise IndexOpenError(f"cannot open Redis index {self.location}: {text}") from exc
        except BaseException:
            self.close()
            raise
        return self

    def _verify(self, requested: IndexParams | None, create: bool) -> None:
        client, meta_key = self._client, f"{self.prefix}:meta"
        try:
            try:
                raw = client.get(meta_key)
            except UnicodeDecodeError as exc:
                raise IndexOpenError(
                    f"{self.location}: unreadable key {meta_key!r} (binary, not JSON text: not a "
                    f"scrapy-simhash index): {exc}"
                ) from exc
            if raw is None:
                if self._readonly or not create:
                    why = "opened read-only" if self._readonly else "create=False"
                    raise IndexOpenError(f"index {self.location} does not exist (no key {meta_key!r}; {why})")
                client.set(meta_key, json.dumps(self._new_meta(requested or IndexParams()), sort_keys=True), nx=True)
                raw = client.get(meta_key)
        except self._errors.ResponseError as exc:
            if "WRONGTYPE" in str(exc):
                raise IndexOpenError(
                    f"{self.location}: key {meta_key!r} holds something else: not a scrapy-simhash index"
                ) from exc
            raise
        try:
            meta = json.loads(raw)
            if not isinstance(meta, dict):
                raise TypeError(f"a JSON {type(meta).__name__}, not an object")
        except (ValueError, TypeError) as exc:
            raise IndexOpenError(
                f"{self.location}: unreadable key {meta_key!r} (not a scrapy-simhash index?): {exc}"
            ) from exc
        if meta.get("format") != FORMAT:
            raise IndexOpenError(f"{self.location} is not a scrapy-simhash index (format {meta.get('format')!r})")
        version = meta.get("schema_version")
        if version != SCHEMA_VERSION:
            newer = isinstance(version, int) and version > SCHEMA_VERSION
            raise IndexOpenError(
                f"index {self.location} has schema version {version!r}; this scrapy-simhash reads version "
                f"{SCHEMA_VERSION}" + (" (upgrade scrapy-simhash)" if newer else "")
            )
        try:
            stored = IndexParams(**meta["params"])
            _check_params(stored)
        except (KeyError, TypeError, ValueError) as exc:
            raise IndexOpenError(f"index {self.location} records unreadable parameters: {exc}") from exc
        problems = [] if requested is None else stored.incompatibilities(requested)
        if problems:
            raise ParameterMismatch(
                f"index {self.location} was built with other parameters ({'; '.join(problems)}); it cannot "
                "answer these queries: open it with compatible parameters, or use a new index (another "
                "database or ?prefix=)"
            )
        self.params = stored
        self._meta = meta
        self._bits = stored.bits
        self._hex_width = stored.bits // 4
        self._layouts = _layouts(stored)
        self._base = f"{self.prefix}:{{{quote(self.namespace, safe='')}}}:"
        self._seq_key = self._base + "seq"
        if not self._readonly:
            client.hsetnx(f"{self.prefix}:namespaces", self.namespace, repr(time.time()))

    def _new_meta(self, params: IndexParams) -> dict[str, Any]:
        _check_params(params)
        layouts = _layouts(params)
        return {
            "format": FORMAT,
            "backend": "redis",
            "schema_version": SCHEMA_VERSION,
            "params": params.as_dict(),
            "title_layout": [list(b) for b in layouts["title"]],
            "body_layout": [list(b) for b in layouts["body"]],
            "fingerprint_storage": "hex",
            "created": time.time(),
            "created_by": f"scrapy-simhash {__version__}",
        }

    # -- helpers -----------------------------------------------------------------------------------

    def _hex(self, fp: int) -> str:
        return format(fp, f"0{self._hex_width}x")

    def _band_keys(self, tier: Tier, fp: int) -> list[str]:
        c = _TIER_CHAR[tier]
        return [f"{c}b:{n}:{v:x}" for n, v in enumerate(split_bands(fp, self._layouts[tier]))]

    def _live(self) -> Any:
        client = self._client
        if client is None:
            raise IndexError_(f"index {self.location} is closed")
        return client

    def _writable(self) -> Any:
        client = self._live()
        if self._readonly:
            raise IndexWriteError(f"index {self.location} was opened read-only: cannot write to it")
        return client

    def _retrying(self, doing: str, call: Callable[[Any], Any], *, write: bool, retry: bool = True) -> Any:
        """Run ``call(client)``; connection errors and timeouts are retried ``retries`` times with a
        doubling delay (redis-py reconnects), then raised as ours, naming the index. ``retry=False``
        for calls that must not run twice (bulk add: a lost reply would add the batch again)."""
        client = self._writable() if write else self._live()
        errors = self._errors
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
        child makes its own instead of sharing its parent's socket."""
        held = getattr(self._local, "held", None)
        if held is not None and held[0] == os.getpid():
            return held[1]
        pool = client.connection_pool
        connection = pool.connection_class(**pool.connection_kwargs)
        self._local.held = (os.getpid(), connection)
        with self._lock:
            self._connections.append(connection)
        return connection

    def _evalsha(self, client: Any, args: tuple[Any, ...]) -> Any:
        connection = self._connection(client)
        try:
            connection.send_command("EVALSHA", self._sha, 1, self._seq_key, *args)
            return connection.read_response()
        except (self._errors.ConnectionError, self._errors.TimeoutError):
            connection.disconnect()  # the next call reconnects
            raise

    def _evalsha_many(self, client: Any, calls: Sequence[Sequence[Any]]) -> list[Any]:
        """Several ``EVALSHA`` calls in one write, their replies read in order; a reply that is an
        error is returned as the exception (the other replies must still be read off the socket)."""
        connection = self._connection(client)
        try:
            connection.send_packed_command(
                connection.pack_commands([("EVALSHA", self._sha, 1, self._seq_key, *args) for args in calls])
            )
            replies: list[Any] = []
            for _ in calls:
                try:
                    replies.append(connection.read_response())
                except self._errors.ResponseError as exc:
                    replies.append(exc)
            return replies
        except (self._errors.ConnectionError, self._errors.TimeoutError):
            connection.disconnect()  # the next call reconnects
            raise

    def _script(self, doing: str, *args: Any, write: bool = True, retry: bool = True) -> Any:
        """One ``EVALSHA`` of :data:`SCRIPT` (reloaded once on ``NOSCRIPT``), retried on connection errors."""
        def call(client: Any) -> Any:
            try:
                return self._evalsha(client, args)
            except self._errors.NoScriptError:
                self._sha = client.script_load(SCRIPT)
                return self._evalsha(client, args)

        return self._retrying(doing, call, write=write, retry=retry)

    def _entry(self, member: str | int, fields: Mapping[str, str]) -> Entry:
        """An entry from its hash; values not written by us are an :class:`IndexError_` naming it."""
        t, b = fields.get("t"), fields.get("b")
        try:
            return Entry(
                id=int(member),
                namespace=self.namespace,
                url=fields.get("u"),
                title=fields.get("n"),
                first_seen=float(fields["s"]),
                title_fp=None if t is None else int(t, 16),
                body_fp=None if b is None else int(b, 16),
                numbers=fields.get("m"),
            )
        except (KeyError, ValueError, TypeError) as exc:
            raise IndexError_(f"index {self.location}: entry {member} is unreadable ({exc!r})") from exc

    def _fp_args(self, tfp: int | None, bfp: int | None) -> list[Any]:
        tkeys = [] if tfp is None else self._band_keys("title", tfp)
        bkeys = [] if bfp is None else self._band_keys("body", bfp)
        return [len(tkeys), len(bkeys), *tkeys, *bkeys]

    # -- the protocol --------------------------------------------------------------------------------

    def check_and_add(self, query: Query) -> Outcome:
        """Title tier, else body tier, else add: one ``EVALSHA`` (one round trip), atomic on the server."""
        return self.check_and_add_many([query])[0]

    def check_and_add_many(self, queries: Sequence[Query]) -> list[Outcome]:
        """One ``EVALSHA`` per query, in order, sent together (one round trip for the batch): each
        is atomic, the batch is not one transaction. A batch broken off is sent again whole with the
        same request tokens, so the part already applied returns what it added."""
        for query in queries:
            self._check_query(query)
        if len(queries) <= 1:
            return [self._check(query, query.request_id or os.urandom(12).hex()) for query in queries]
        calls = [self._check_args(query, query.request_id or os.urandom(12).hex()) for query in queries]

        def call(client: Any) -> list[Any]:
            replies = self._evalsha_many(client, calls)
            if any(isinstance(r, self._errors.NoScriptError) for r in replies):
                self._sha = client.script_load(SCRIPT)
                replies = self._evalsha_many(client, calls)
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
            return replies

        return [self._outcome(reply) for reply in self._retrying("check-and-add", call, write=True)]

    def _check(self, query: Query, token: str) -> Outcome:
        return self._outcome(self._script("check-and-add", *self._check_args(query, token)))

    def _check_args(self, query: Query, token: str) -> list[Any]:
        """The script's arguments for one check-and-add (see the ``check`` branch of :data:`SCRIPT`)."""
        tfp, bfp = query.title_fp, query.body_fp
        seen = query.seen_at or time.time()
        title = None if query.title is None else query.title[:TITLE_CHARS]
        numbers = query.numbers
        sentences = sorted(set(query.sentences))
        fp_args = self._fp_args(tfp, bfp)
        return [
            "check", self._base, token,
            "" if tfp is None else self._hex(tfp), "" if bfp is None else self._hex(bfp),
            query.title_k, query.body_k,
            "-inf" if query.not_before is None else _score(query.not_before), _score(seen),
            "0" if query.url is None else "1", query.url or "",
            "0" if title is None else "1", title or "",
            query.statuses.get("title", "duplicate"), query.statuses.get("body", "duplicate"),
            *fp_args[:2],
            "0" if numbers is None else "1", numbers or "", int(query.title_numbers),
            NUMBERS_MAX, int(query.sentences_shared),
            query.statuses.get("sentence", "duplicate"), len(sentences), min(len(sentences), SENTENCES_STORED),
            *fp_args[2:], *sentences, TOKEN_TTL, SENTENCE_BODY_DISTANCE, SENTENCE_MAX_HOLDERS,
        ]

    def _outcome(self, reply: Any) -> Outcome:
        if reply[0] == "added":
            return Outcome(match=None, entry_id=int(reply[1]))
        _, tc, distance, member, fields = reply
        return Outcome(match=Match(_CHAR_TIER[tc], int(distance), self._entry(member, _pairs(fields))), entry_id=None)

    def lookup(
        self,
        title_fp: int | None,
        body_fp: int | None,
        *,
        title_k: int,
        body_k: int,
        not_before: float | None = None,
        limit: int = 5,
    ) -> list[Match]:
        """Nearest entries per tier within the distances, title tier first, each tier nearest first."""
        self._check_fp(title_fp, "title_fp")
        self._check_fp(body_fp, "body_fp")
        self._check_k(title_k, body_k)
        if limit <= 0 or (title_fp is None and body_fp is None):
            self._live()
            return []
        reply = self._script(
            "lookup",
            "lookup", self._base,
            "" if title_fp is None else self._hex(title_fp), "" if body_fp is None else self._hex(body_fp),
            title_k, body_k, "-inf" if not_before is None else _score(not_before), int(limit),
            *self._fp_args(title_fp, body_fp),
            write=False,
        )
        return [Match(_CHAR_TIER[tc], int(d), self._entry(member, _pairs(fields))) for tc, d, member, fields in reply]

    def add(self, entries: list[tuple[int | None, int | None, str | None, str | None, float]]) -> int:
        """Bulk-add ``(title_fp, body_fp, url, title, first_seen)`` unchecked, ``ADD_BATCH`` per call."""
        self._writable()
        nt, nb = len(self._layouts["title"]), len(self._layouts["body"])
        batches: list[list[Any]] = []
        for start in range(0, len(entries), ADD_BATCH):
            args: list[Any] = []
            for tfp, bfp, url, title, first_seen in entries[start : start + ADD_BATCH]:
                if tfp is None and bfp is None:
                    raise ValueError("an entry needs a title or a body fingerprint")
                self._check_fp(tfp, "title_fp")
                self._check_fp(bfp, "body_fp")
                args += [
                    "" if tfp is None else self._hex(tfp), "" if bfp is None else self._hex(bfp),
                    "0" if url is None else "1", url or "",
                    "0" if title is None else "1", "" if title is None else title[:TITLE_CHARS],
                    _score(first_seen),
                    *(self._band_keys("title", tfp) if tfp is not None else [""] * nt),
                    *(self._band_keys("body", bfp) if bfp is not None else [""] * nb),
                ]
            batches.append(args)
        total = 0
        for args in batches:  # everything is validated before the first write
            total += int(self._script("bulk add", "add", self._base, nt, nb, *args, retry=False))
        return total

    def _remove(self, doing: str, how: str, value: str, batch: int = ADD_BATCH) -> tuple[int, bool]:
        """Remove entries, then the band members of fingerprints no entry holds any more."""
        n, emptied = self._script(doing, "remove", self._base, how, value, batch)
        if emptied:
            args: list[Any] = []
            for i in range(0, len(emptied), 2):
                tier = _CHAR_TIER[emptied[i]]
                keys = self._band_keys(tier, int(emptied[i + 1], 16))
                args += [emptied[i], emptied[i + 1], len(keys), *keys]
            self._script(doing, "dropbands", self._base, *args)
        return int(n), int(n) >= batch

    def explain(self, url: str) -> Decision | None:
        """The latest decision recorded for ``url`` in this namespace (None if it was new or unseen)."""
        found = self._decisions([url])
        return found[0] if found else None

    def decisions(self, limit: int = 1000) -> list[Decision]:
        """The ``limit`` most recent decisions of this namespace, newest first."""
        if limit <= 0:
            return []
        urls = self._retrying(
            "decisions", lambda c: c.zrevrange(self._base + "decided", 0, limit - 1), write=False
        )
        return self._decisions(urls)

    def _decisions(self, urls: list[str]) -> list[Decision]:
        base = self._base

        def fetch(client: Any) -> list[tuple[str, dict[str, str], dict[str, str]]]:
            pipe = client.pipeline(transaction=False)
            for url in urls:
                pipe.hgetall(base + "d:" + url)
            decided = pipe.execute()
            pipe = client.pipeline(transaction=False)
            for d in decided:
                pipe.hgetall(base + "e:" + d["original"] if d.get("original") else base + "e:")
            return list(zip(urls, decided, pipe.execute(), strict=True))

        rows = self._retrying("explain", fetch, write=False) if urls else []
        try:
            return [
                Decision(
                    url=url,
                    status=d["status"],
                    tier=_CHAR_TIER[d["tier"]],
                    distance=int(d["distance"]),
                    original=self._entry(d["original"], e) if e else None,
                    decided_at=float(d["decided_at"]),
                    title=d.get("title"),
                )
                for url, d, e in rows
                if d
            ]
        except (KeyError, ValueError, TypeError) as exc:
            raise IndexError_(f"index {self.location}: a stored decision is unreadable ({exc!r})") from exc

    def forget(self, key: int | str) -> int:
        """Remove the entry with this id (int) or every entry with this URL (str), and the URL's
        decision; returns how many entries went."""
        if isinstance(key, bool) or not isinstance(key, int | str):
            raise TypeError(f"forget() takes an entry id or a URL, not {key!r}")
        if isinstance(key, int):
            if not 0 < key < 10**_ID_WIDTH:
                self._writable()
                return 0
            return self._remove("forget", "id", _member(key))[0]
        return self._remove("forget", "url", key)[0]

    def purge(self, older_than: float, *, batch: int = 5000) -> int:
        """Remove entries (and decisions) first seen before ``older_than`` (POSIX seconds), ``batch``
        entries per script call so crawlers sharing the server are never blocked long."""
        total = 0
        while True:
            n, more = self._remove("purge", "older", _score(older_than), max(1, int(batch)))
            total += n
            if not more:
                return total

    def reset(self) -> int:
        """Remove every entry, band member and decision of this namespace (others are untouched).

        ``SCAN`` + ``UNLINK`` in batches: run it while no crawler writes to this namespace."""
        pattern = "".join("\\" + c if c in "*?[]\\" else c for c in self._base) + "*"

        def run(client: Any) -> int:
            n = int(client.zcard(self._base + "seen"))
            batch: list[str] = []
            for key in client.scan_iter(match=pattern, count=1000):
                batch.append(key)
                if len(batch) >= 1000:
                    client.unlink(*batch)
                    batch = []
            if batch:
                client.unlink(*batch)
            return n

        return int(self._retrying("reset", run, write=True))

    def count(self) -> int:
        """Entries in this namespace."""
        return int(self._retrying("count", lambda c: c.zcard(self._base + "seen"), write=False))

    def stats(self) -> dict[str, Any]:
        """Location, server, parameters, layouts, and per namespace: entries, oldest/newest first
        seen, decisions. The keys ``entries``/``oldest``/``newest``/``decisions`` at the top level
        are this namespace's; ``band_rows`` counts band-set members over all namespaces."""

        def run(client: Any) -> tuple[set[str], list[str], list[Any], dict[str, Any]]:
            registered = set(client.hkeys(f"{self.prefix}:namespaces"))
            names = sorted(registered | {self.namespace})
            pipe = client.pipeline(transaction=False)
            for name in names:
                base = f"{self.prefix}:{{{quote(name, safe='')}}}:"
                pipe.zcard(base + "seen")
                pipe.zrange(base + "seen", 0, 0, withscores=True)
                pipe.zrange(base + "seen", -1, -1, withscores=True)
                pipe.zcard(base + "decided")
                pipe.get(base + "nbands")
            return registered, names, pipe.execute(), client.info("server") | client.info("memory")

        registered, names, replies, info = self._retrying("stats", run, write=False)
        per: dict[str, dict[str, Any]] = {}
        band_rows = 0
        for i, name in enumerate(names):
            n, first, last, decisions, bands = replies[5 * i : 5 * i + 5]
            band_rows += int(bands or 0)
            if name in registered or n or decisions:
                per[name] = {
                    "entries": int(n),
                    "oldest": first[0][1] if first else None,
                    "newest": last[0][1] if last else None,
                    "decisions": int(decisions),
                }
        mine = per.get(self.namespace, {"entries": 0, "oldest": None, "newest": None, "decisions": 0})
        return {
            "backend": "redis",
            "location": self.location,
            "prefix": self.prefix,
            "format": self._meta.get("format"),
            "schema_version": self._meta.get("schema_version"),
            "created": self._meta.get("created"),
            "created_by": self._meta.get("created_by"),
            "redis_version": info.get("redis_version"),
            "used_memory": info.get("used_memory"),
            "params": self.params.as_dict(),
            "title_layout": [list(b) for b in self._layouts["title"]],
            "body_layout": [list(b) for b in self._layouts["body"]],
            "readonly": self._readonly,
            "namespace": self.namespace,
            "entries": mine["entries"],
            "oldest": mine["oldest"],
            "newest": mine["newest"],
            "decisions": mine["decisions"],
            "band_rows": band_rows,
            "namespaces": per,
        }

    def entries(self) -> Iterator[Entry]:
        """Every entry of this namespace, oldest first (ties: by id), fetched in pages of 1000."""
        seen_key, base = self._base + "seen", self._base
        last: float = -math.inf
        at_last = 0  # entries already yielded whose first-seen time equals ``last``

        def page(client: Any) -> tuple[list[tuple[str, float]], list[dict[str, str]]]:
            rows = client.zrangebyscore(seen_key, _score(last), "+inf", start=at_last, num=1000, withscores=True)
            pipe = client.pipeline(transaction=False)
            for member, _ in rows:
                pipe.hgetall(base + "e:" + member)
            return rows, pipe.execute()

        while True:
            rows, hashes = self._retrying("export", page, write=False)
            for (member, _), fields in zip(rows, hashes, strict=True):
                if fields:
                    yield self._entry(member, fields)
            if len(rows) < 1000:
                return
            for _, score in rows:
                if score == last:
                    at_last += 1
                else:
                    last, at_last = score, 1

    def close(self) -> None:
        """Close every connection (idempotent)."""
        with self._lock:
            client, self._client = self._client, None
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.disconnect()
        if client is not None:
            client.close()

    def __enter__(self) -> RedisIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._client is None else ("read-only" if self._readonly else "open")
        return f"<RedisIndex {self.location} namespace={self.namespace!r} {state}>"


__all__ = [
    "SCRIPT",
    "RedisIndex",
    "redacted",
]


