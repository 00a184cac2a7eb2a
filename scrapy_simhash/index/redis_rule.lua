--[[ scrapy-simhash: the server-side half of the Redis index (see redis_keys.py for the layout).

The tier rule here is a section-by-section PORT of scrapy_simhash/index/rule.py: each section
marked "rule.py: <name>" does what the Python function of that name does, in the same order with
the same ties, and tests/test_rule.py runs both on one verdict table. Sections marked "store" are
the rule's Store operations as Redis holds them; sections marked "redis" exist only here (request
tokens, maintenance). Change rule.py first, then its port here.

Called as EVALSHA <sha> 1 <prefix>:{<ns>}:seq <json>: KEYS[1] routes the call in a cluster (every
key of a namespace shares its hash tag), ARGV[1] is one JSON object, decoded once:
  op      'check' | 'peek' | 'lookup' | 'add' | 'remove' | 'deliver' | 'release' |
          'heartbeat' | 'records' | 'bucket' | 'span' | 'bands'
  base    the namespace's key base, '<prefix>:{<ns>}:'
  limits  the constants of rule.py/signatures.py: numbers_max, sentences_stored, sentence_body_distance,
          sentence_body_part, sentence_max_holders, title_body_distance; and of the layout:
          fp_bytes (bits / 8), load (records a table bucket averages before it splits), bands
          ({t = {{shift, width}, ...}, b = ...}: the band layouts), tag_bits (the quotient bits a
          keyed record's tag holds: 7; tests force fewer)
  marked  true: the namespace's marker key ('<base>meta', set at open) must exist
  q       (check, peek) the query: title_fp/body_fp (fixed-width hex, absent when None), title_k,
          body_k, not_before/seen_at (scores as strings: Lua numbers are doubles), url, title,
          numbers (absent when None), title_numbers, sentences (sorted, distinct, 16 hex digits),
          sentences_shared, short_body (absent when None), figures (boolean),
          probe = {t = {{band number, key}, ...}, b = ...}: the band keys to read candidates from
          (fingerprints masked to a band, fixed-width hex, computed in Python: a layout that
          probes neighbours sends more than the pigeonhole bands' own); a new entry is filed
          under its fingerprints masked to each band, by the script
  flagged (check) {t = true, b = true, s = true}: tiers recorded as 'flagged'
  token, token_ttl (check) the request token and how long an added outcome is remembered
Fingerprints never become Lua numbers: they are raw bytes, compared 32 bits at a time.
Replies carry entries as their raw records (decoded by redis_keys.py).
]]

local A = cjson.decode(ARGV[1])
local B, L = A.base, A.limits or {}
local W = L.fp_bytes or 8

-- redis: the namespace's marker (set at open) is gone: the server lost the index's keys (a
-- check with a request token reads the marker with its tokens, in one MGET)
local function lost()
  return redis.error_reply('scrapy-simhash: the index lost its keys (the server was restarted without '
    .. 'persistence, or evicted keys): its answers would be wrong; reopen it')
end
if A.marked and not (A.op == 'check' and A.token) and redis.call('EXISTS', B .. 'meta') == 0 then return lost() end

-- store: bytes -----------------------------------------------------------------------------------

local function p32(n)
  return string.char(bit.rshift(n, 24), bit.band(bit.rshift(n, 16), 255), bit.band(bit.rshift(n, 8), 255),
    bit.band(n, 255))
end

local function unhex(s)
  -- hex digits (a multiple of 8 of them) as raw bytes
  if #s == 8 then return p32(tonumber(s, 16)) end
  local out = {}
  for i = 1, #s, 8 do out[#out + 1] = p32(tonumber(string.sub(s, i, i + 7), 16)) end
  return table.concat(out)
end

local function tohex(s)
  return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end))
end

local function u32(s, i)
  local a, b, c, d = string.byte(s, i, i + 3)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

local function popcount(x)
  x = bit.band(x - bit.band(bit.rshift(x, 1), 0x55555555), 0xFFFFFFFF)
  x = bit.band(x, 0x33333333) + bit.band(bit.rshift(x, 2), 0x33333333)
  x = bit.band(x + bit.rshift(x, 4), 0x0F0F0F0F)
  return bit.band(x, 0xFF) + bit.band(bit.rshift(x, 8), 0xFF) + bit.band(bit.rshift(x, 16), 0xFF) + bit.rshift(x, 24)
end

local function bits_upto(x, limit)
  -- the set bits of a 32-bit word, or limit + 1 once past limit: a bit at a time, so a far
  -- candidate costs limit + 1 steps, not a whole popcount (~5x faster at a threshold of 2-3)
  if limit >= 16 then return popcount(x) end
  local d = 0
  while x ~= 0 do
    d = d + 1
    if d > limit then return d end
    x = bit.band(x, x - 1)  -- clears the lowest set bit (bit ops wrap x - 1 to 32 bits)
  end
  return d
end

local function dist(a, b, limit)
  -- Hamming distance of two raw fingerprints, 32 bits at a time; past limit, some number above it
  if #a ~= #b then return limit + 1 end  -- not one of our fingerprints: never a candidate
  local d = 0
  for i = 1, #a, 4 do
    d = d + bits_upto(bit.bxor(u32(a, i), u32(b, i)), limit - d)
    if d > limit then return d end
  end
  return d
end

local function distance_to(fp, limit)
  -- dist(other, fp, limit) as a function of other, fp's words unpacked once
  if #fp ~= 8 then return function(other) return dist(other, fp, limit) end end
  local f1, f2 = struct.unpack('>I4I4', fp)
  return function(other)
    if #other ~= 8 then return limit + 1 end
    local o1, o2 = struct.unpack('>I4I4', other)
    local d = bits_upto(bit.bxor(o1, f1), limit)
    if d > limit then return d end
    return d + bits_upto(bit.bxor(o2, f2), limit - d)
  end
end

local function distance_at(fp, limit)
  -- dist(the fingerprint at position i of s, fp, limit) as a function of s and i, in place
  if #fp ~= 8 then return function(s, i) return dist(string.sub(s, i, i + #fp - 1), fp, limit) end end
  local f1, f2 = struct.unpack('>I4I4', fp)
  return function(s, i)
    local o1, o2 = struct.unpack('>I4I4', s, i)
    local d = bits_upto(bit.bxor(o1, f1), limit)
    if d > limit then return d end
    return d + bits_upto(bit.bxor(o2, f2), limit - d)
  end
end

local function split(text)
  local words = {}
  for w in string.gmatch(text, '%S+') do words[#words + 1] = w end
  return words
end

local function num(score)  -- a score string ('-inf', '1.5') as a number
  if score == '-inf' then return -math.huge elseif score == '+inf' then return math.huge end
  return tonumber(score)
end

local function by_seen(x, y)  -- earliest first seen, then lowest id
  if x.seen ~= y.seen then return x.seen < y.seen end
  return x.id < y.id
end

local function find_aligned(s, rec, stride)
  -- 1-based position of rec in s at a multiple of stride (default #rec) from its start, or nil
  local r, init = stride or #rec, 1
  while true do
    local i = string.find(s, rec, init, true)
    if not i then return nil end
    if (i - 1) % r == 0 then return i end
    init = i + 1
  end
end

-- store: tables (linear hashing over small hashes of packed records) -----------------------------
-- A table maps a key (raw bytes) to a list of fixed-size payloads (ids, fingerprints). It holds
-- fixed-size records packed into pages of at most 64 bytes: the fields of the hashes
-- '<base><t>:<a>' (a: the bucket). A key's page is 0..15 (from its mix), continued in fields
-- page + 16, page + 32, ... when full. A bucket splits (linear hashing) when the table averages
-- L.load records a bucket, so that every bucket stays small enough for Redis's compact listpack
-- encoding whatever the index's size, and costs a byte or so a record beyond the record. A key
-- with more than SPILL[t] payloads (a recurring headline, boilerplate, clustered fingerprints
-- sharing a band) keeps them in the sorted set '<base>Z<t>:<hex key>' (members: payloads;
-- scores: first seen, or 0) and a mark in the page, which the sorted set's existence tells from
-- a real record.

-- Tables looked up by a longer key (a fingerprint, a sentence hash, a URL digest: 'keyed') file its
-- ids under 1 byte of the key's mix instead of the key: a record repeats nothing the entry holds.
-- The mix is 64 bits, h (taghash: the bucket, from its low bits) and h2 (a mix of h: the page, its
-- top 4 bits). A record's 1-byte tag holds the up to 7 bits of the mix just above its bucket's
-- address bits, and a sentinel bit above them (quotienting): a split sends a record by the lowest
-- of them and keeps the rest, one bit fewer; a record whose bits ran out (its bucket split 7
-- times since it was written) is sent by its entry's key, read from the entry. Ids found under a
-- tag are verified against their entries (holds), so answers stay exact. A key whose ids spilled
-- has its own sorted set (named by the whole key) and a mark of two records: tag and the zero id,
-- then h and a zero byte (its whole mix: a mark is found exactly and never runs out of bits).
-- Band tables, one a band ('tb0', 'tb1', ..., 'bb0', ...: tier, band number): the key is the
-- fingerprint masked to the band's bits (limits.bands: {shift, width} a band, as Python's layout),
-- and a record is the fingerprint alone: its key is the record masked, so the script files an
-- entry's fingerprint under its bands itself, a split places a record by itself, and a lookup
-- keeps the records whose band equals the key. A spilled band's mark is the key itself.
local TAG = {th = 1, bh = 1, sh = 1, u = 1}
local PAY = {th = 4, bh = 4, sh = 4, u = 4}
local KEYED = {th = true, bh = true, sh = true, u = true}
local SPILL = {th = 4, bh = 4, sh = 4, u = 4}
-- BAND[table] = its mask words, BANDW[table] those it touches; BANDS[tier char] = table names
local BAND, BANDW, BANDS = {}, {}, {t = {}, b = {}}
for tc, layout in pairs(L.bands or {}) do
  for n, band in ipairs(layout) do
    local t, words = tc .. 'b' .. (n - 1), {}
    for i = 1, W / 4 do  -- word i holds bits 32 * (W / 4 - i) and up: the band's bits among them
      local lo = 32 * (W / 4 - i)
      local from, to = math.max(lo, band[1]), math.min(lo + 32, band[1] + band[2])
      words[i] = to > from and 2 ^ (to - lo) - 2 ^ (from - lo) or 0
    end
    local touched = {}  -- {position in a record, mask} of the words the band touches
    for i, m in ipairs(words) do
      if m ~= 0 then touched[#touched + 1] = {4 * i - 4, m} end
    end
    BAND[t], BANDW[t], TAG[t], PAY[t], SPILL[t] = words, touched, 0, W, 32
    BANDS[tc][n] = t
  end
end
local PAGES, PAGE = 16, 64
local LH = {}
local holds  -- holds(t, id, key): does entry id hold key (a keyed table's verification; see the entries)
local keys_of  -- keys_of(t, id): the keys entry id files in keyed table t (see the entries)

local function state(t)
  -- a table's linear-hashing state; every table's is read at the first use (one HGETALL of lh)
  if next(LH) == nil then
    local flat = redis.call('HGETALL', B .. 'lh')
    for i = 1, #flat, 2 do
      local l, p, n = string.match(flat[i + 1], '^(%d+) (%d+) (%d+)$')
      if not n then error(redis.error_reply('scrapy-simhash: table state ' .. flat[i] .. ' is unreadable')) end
      LH[flat[i]] = {L = tonumber(l), p = tonumber(p), n = tonumber(n)}
    end
    LH[''] = true  -- read: tables absent from lh are empty
  end
  local s = LH[t]
  if not s then s = {L = 0, p = 0, n = 0}; LH[t] = s end
  return s
end

local function mul32(a, c)  -- a * c mod 2^32, exactly in doubles
  local a1, a0 = math.floor(a / 65536), a % 65536
  local c1, c0 = math.floor(c / 65536), c % 65536
  return ((a1 * c0 + a0 * c1) % 65536 * 65536 + a0 * c0) % 4294967296
end

local function fmix(h)  -- MurmurHash3's finalizer: every bit of h moves every bit of the result
  h = mul32(bit.bxor(h, bit.rshift(h, 16)) % 4294967296, 0x85ebca6b)
  h = mul32(bit.bxor(h, bit.rshift(h, 13)) % 4294967296, 0xc2b2ae35)
  return bit.bxor(h, bit.rshift(h, 16)) % 4294967296
end

local function masked(t, fp)
  -- the key fingerprint fp is filed under in band table t: fp masked to the band's bits
  local out = {}
  for j, m in ipairs(BAND[t]) do out[j] = p32(bit.band(u32(fp, 4 * j - 3), m) % 4294967296) end
  return table.concat(out)
end

local function bandhash(t, s, i)
  -- 32 bits of the band key of the record (or key) at position i of s in band table t: the words
  -- the band touches, masked, folded and mixed by one multiplication (no string made: a split
  -- hashes every record it moves)
  local h = 0
  for _, w in ipairs(BANDW[t]) do
    local x = bit.band(u32(s, i + w[1]), w[2])
    h = bit.bxor(h, x, bit.rshift(x, 15)) % 4294967296
  end
  h = mul32(h, 0x9e3779b1)
  return bit.bxor(h, bit.rshift(h, 16)) % 4294967296
end

local function taghash(tag)
  -- 32 bits of a keyed table's key for its bucket (low bits): longer than 4 bytes, it may be a
  -- fingerprint, whose bits cluster, so it is mixed (a 32-bit fingerprint is taken as it is)
  if #tag < 8 then return u32(tag, 1) end
  return fmix(bit.bxor(u32(tag, 1), fmix(u32(tag, #tag - 3))) % 4294967296)
end

local function address(t, h)
  local s = state(t)
  local m = 2 ^ s.L
  local a = h % m
  if a < s.p then a = h % (2 * m) end
  return a
end

local function page_of(h) return math.floor(h / 16777216) % PAGES end

-- keyed tables: the second half of a key's mix, its page, the quotient bits above a bucket's address

local function width(t, h)  -- the number of address bits of h's bucket
  local s = state(t)
  if h % 2 ^ s.L < s.p then return s.L + 1 end
  return s.L
end

local function mix2(h) return fmix(bit.bxor(h, 0x9e3779b9) % 4294967296) end

local QB = L.tag_bits or 7  -- the quotient bits a keyed record's tag holds when written (tests: fewer)
local QTOP = 2 ^ QB

local function quotient(h, h2, a)
  -- the QB bits of the 64-bit mix h2 * 2^32 + h from bit a up, as a record's tag: sentinel bit QB set
  local q
  if a + QB <= 32 then q = math.floor(h / 2 ^ a) % QTOP
  elseif a >= 32 then q = math.floor(h2 / 2 ^ (a - 32)) % QTOP
  else q = math.floor(h / 2 ^ a) + (h2 % 2 ^ (a + QB - 32)) * 2 ^ (32 - a) end
  return q + QTOP
end

local function tag_matches(s, q)
  -- does stored tag s (its known bits below its highest set bit) agree with the full tag q?
  if s >= QTOP then return s == q end
  local _, e = math.frexp(s)
  local top = 2 ^ (e - 1)  -- s's sentinel bit: s holds e - 1 known bits
  return s - top == q % top
end


local ZERO4 = '\0\0\0\0'

local function scan_keyed(recs, each)
  -- each(position, tag, payload, mark h or nil) for the records of a keyed chain (a mark: two)
  local i = 1
  while i + 4 <= #recs do
    local s, pay = string.byte(recs, i), string.sub(recs, i + 1, i + 4)
    if pay == ZERO4 then
      each(i, s, pay, u32(recs, i + 5))
      i = i + 10
    else
      each(i, s, pay, nil)
      i = i + 5
    end
  end
end

local PAGED = {}  -- this call's chains read or written: PAGED[key][page] = {records, fields}

local function chain(key, page, R)
  -- the records of a page and its continuations (each full but the last): {string, fields}.
  -- One HGET a field (an HMGET of several costs as much a field, and most chains are one field)
  local known = PAGED[key] and PAGED[key][page]
  if known then return known[1], known[2] end
  local per = math.floor(PAGE / R) * R
  local parts, j = {}, 0
  while true do
    local v = redis.call('HGET', key, page + PAGES * j)
    if not v then break end
    parts[j + 1], j = v, j + 1
    if #v < per then break end
  end
  local recs = table.concat(parts)
  PAGED[key] = PAGED[key] or {}
  PAGED[key][page] = {recs, j}
  return recs, j
end

local function paged(key, page, recs, fields)
  -- a chain as this call wrote it
  PAGED[key] = PAGED[key] or {}
  PAGED[key][page] = {recs, fields}
end

local function pack(recs, R)
  -- a page's records as the values of its fields: whole records, PAGE // R a field
  local per, out = math.floor(PAGE / R) * R, {}
  for i = 1, #recs, per do out[#out + 1] = string.sub(recs, i, i + per - 1) end
  return out
end

local function write_chain(key, page, recs, R, had)
  -- store a page's records (one string) in fields page, page + 16, ... (had: its fields before)
  local values, args = pack(recs, R), {}
  for j, v in ipairs(values) do args[#args + 1] = page + PAGES * (j - 1); args[#args + 1] = v end
  if #args > 0 then redis.call('HSET', key, unpack(args)) end
  if had > #values then
    local gone = {}
    for j = #values, had - 1 do gone[#gone + 1] = page + PAGES * j end
    redis.call('HDEL', key, unpack(gone))
  end
  paged(key, page, recs, #values)
end

local function split_keyed(t, s, flat, sides, old, new)
  -- a keyed bucket's records to the two sides of a split (see the tables): by their tags' lowest
  -- known bit, marks by their mix, records whose bits ran out by their entries' keys
  local m, chains = 2 ^ s.L, {}
  for i = 1, #flat, 2 do
    local f = tonumber(flat[i])
    local pg = f % PAGES
    chains[pg] = chains[pg] or {}
    chains[pg][math.floor(f / PAGES) + 1] = flat[i + 1]
  end
  local function put(side, pg, rec)
    side[pg] = side[pg] or {}
    side[pg][#side[pg] + 1] = rec
  end
  local function fresh(h, pay, pg, ext)
    -- the record of a key of mix h in the half it goes to, its tag at the width after the split
    local side = sides[(h % (2 * m) == s.p) and old or new]
    put(side, pg, string.char(quotient(h, mix2(h), s.L + 1)) .. pay .. (ext or ''))
  end
  local used = {}  -- keys of an entry already given to a record whose bits ran out
  for pg, parts in pairs(chains) do
    scan_keyed(table.concat(parts), function(_, tag, pay, mark)
      if mark then
        fresh(mark, pay, pg, p32(mark) .. '\0')
      elseif tag >= 2 then
        put(sides[(tag % 2 == 0) and old or new], pg, string.char(math.floor(tag / 2)) .. pay)
      else
        local id = u32(pay, 1)
        for _, k in ipairs(keys_of(t, id)) do
          local h = taghash(k)
          local u = id .. ':' .. k
          if not used[u] and h % m == s.p and math.floor(mix2(h) / 268435456) == pg then
            used[u] = true
            fresh(h, pay, pg)
            break
          end
        end  -- an id whose entry holds no such key is not kept: it could never be verified
      end
    end)
  end
end

local function split_bucket(t, s)
  local m, R = 2 ^ s.L, TAG[t] + PAY[t]
  local old, new = B .. t .. ':' .. s.p, B .. t .. ':' .. (s.p + m)
  local flat = redis.call('HGETALL', old)
  local sides = {[old] = {}, [new] = {}}
  if KEYED[t] then
    split_keyed(t, s, flat, sides, old, new)
  else
    for i = 2, #flat, 2 do
      local v = flat[i]
      for j = 1, #v, R do
        local rec = string.sub(v, j, j + R - 1)
        local h = bandhash(t, v, j)
        local side = sides[(h % (2 * m) == s.p) and old or new]
        local pg = page_of(h)
        side[pg] = side[pg] or {}
        side[pg][#side[pg] + 1] = rec
      end
    end
  end
  redis.call('DEL', old)
  PAGED[old], PAGED[new] = nil, nil
  for key, pages in pairs(sides) do
    for pg, recs in pairs(pages) do write_chain(key, pg, table.concat(recs), R, 0) end
  end
  s.p = s.p + 1
  if s.p == m then s.L, s.p = s.L + 1, 0 end
end

local DIRTY = {}

local function save(t)
  local s = LH[t]
  redis.call('HSET', B .. 'lh', t, s.L .. ' ' .. s.p .. ' ' .. s.n)
  DIRTY[t] = nil
end

local function grew(t, by)
  -- the table holds by more records: its count is saved at the end of the call (flush), a split at once
  local s = state(t)
  s.n = s.n + by
  DIRTY[t] = true
  if by > 0 and s.n > (L.load or 48) * (2 ^ s.L + s.p) then
    split_bucket(t, s)
    save(t)
  end
end

local function flush(reply)
  -- save the record counts of the tables this call changed (one write), then reply
  local args = {}
  for t in pairs(DIRTY) do
    local s = LH[t]
    args[#args + 1] = t; args[#args + 1] = s.L .. ' ' .. s.p .. ' ' .. s.n
  end
  if #args > 0 then redis.call('HSET', B .. 'lh', unpack(args)) end
  return reply
end

local function spill_key(t, k) return B .. 'Z' .. t .. ':' .. tohex(k) end

local function band_page(t, k)
  -- a band table's bucket key, page, chain and fields for key k, and banded(s, i): is the band of
  -- the record at position i of s k?
  local h = bandhash(t, k, 1)
  local key, page = B .. t .. ':' .. address(t, h), page_of(h)
  local recs, had = chain(key, page, W)
  local words = BANDW[t]
  local o1, m1 = words[1][1], words[1][2]
  local k1 = bit.band(u32(k, o1 + 1), m1)
  if #words == 1 then return key, page, recs, had, function(s, i) return bit.band(u32(s, i + o1), m1) == k1 end end
  local ks = {}
  for j, w in ipairs(words) do ks[j] = bit.band(u32(k, w[1] + 1), w[2]) end
  return key, page, recs, had, function(s, i)
    for j, w in ipairs(words) do
      if bit.band(u32(s, i + w[1]), w[2]) ~= ks[j] then return false end
    end
    return true
  end
end

local function locate(t, k)
  -- the bucket key, page, its chain {records, fields}, the payloads filed under k there and their
  -- positions, the tag a new record of k starts with ('' in a band table), and a keyed k's mix
  local h = taghash(k)
  local R, found, at = TAG[t] + PAY[t], {}, {}
  if KEYED[t] then
    local a, h2 = width(t, h), mix2(h)
    local key, page, q = B .. t .. ':' .. h % 2 ^ a, math.floor(h2 / 268435456), quotient(h, h2, a)
    local recs, had = chain(key, page, R)
    local i = 1
    while i + 4 <= #recs do
      local a, c, d, e, f = string.byte(recs, i, i + 4)
      if c + d + e + f == 0 then  -- a mark: two records, the second its mix
        if u32(recs, i + 5) == h then found[#found + 1] = ZERO4; at[#at + 1] = i end
        i = i + 10
      else
        if tag_matches(a, q) then found[#found + 1] = string.sub(recs, i + 1, i + 4); at[#at + 1] = i end
        i = i + 5
      end
    end
    return key, page, recs, had, found, at, string.char(q), h
  end
  local key, page, recs, had, banded = band_page(t, k)
  for i = 1, #recs - R + 1, R do
    if banded(recs, i) then found[#found + 1] = string.sub(recs, i, i + R - 1); at[#at + 1] = i end
  end
  return key, page, recs, had, found, at, ''
end

local function mark_of(t, k)  -- the payload of k's mark: the zero id, or a band's key
  return BAND[t] and k or ZERO4
end

local function spilled(t, k, found)
  -- k's payloads are in its sorted set (its mark is among found)
  local zero = mark_of(t, k)
  for _, f in ipairs(found) do
    if f == zero then return redis.call('EXISTS', spill_key(t, k)) == 1 end
  end
  return false
end

local function inline(t, k, found, skip)
  -- the indices of found that are k's own payloads: all of them, or in a keyed table the ids (not
  -- the marks: ids start at 1) whose entries hold k; skip: an index left out
  local zero, out = string.rep('\0', PAY[t]), {}
  for i, f in ipairs(found) do
    if i ~= skip and (not KEYED[t] or (f ~= zero and holds(t, u32(f, 1), k))) then out[#out + 1] = i end
  end
  return out
end

local function list(t, k)
  -- k's payloads: inline ones as one string, or nil and the key of the sorted set they spilled to
  local _, _, _, _, found = locate(t, k)
  if spilled(t, k, found) then return nil, spill_key(t, k) end
  if not KEYED[t] then return table.concat(found), nil end
  local out = {}
  for _, i in ipairs(inline(t, k, found)) do out[#out + 1] = found[i] end
  return table.concat(out), nil
end

local function records(s, r)
  local out = {}
  for i = 1, #s, r do out[#out + 1] = string.sub(s, i, i + r - 1) end
  return out
end

local function list_add(t, k, rec, score, scores)
  -- file payload rec under k (once); scores(recs) gives the scores of inline payloads when they
  -- spill. Returns whether k had no payloads before, and whether rec was added
  local key, page, recs, had, found, at, tag, h = locate(t, k)
  if spilled(t, k, found) then return false, redis.call('ZADD', spill_key(t, k), 'NX', score, rec) == 1 end
  local mine = inline(t, k, found)
  for _, i in ipairs(mine) do if found[i] == rec then return false, false end end
  local R = TAG[t] + PAY[t]
  if SPILL[t] and #mine >= SPILL[t] then  -- spill: k's payloads go to a sorted set, a mark stays
    local own = {}
    for j, i in ipairs(mine) do own[j] = found[i] end
    local args, s = {}, scores(own)
    for j, x in ipairs(own) do args[#args + 1] = s[j]; args[#args + 1] = x end
    args[#args + 1] = score; args[#args + 1] = rec
    redis.call('ZADD', spill_key(t, k), unpack(args))
    for j = #mine, 1, -1 do
      local i = at[mine[j]]
      recs = string.sub(recs, 1, i - 1) .. string.sub(recs, i + R)
    end
    local mark = tag .. mark_of(t, k) .. (KEYED[t] and p32(h) .. '\0' or '')
    write_chain(key, page, recs .. mark, R, had)
    grew(t, 1 - #mine)
    return false, true
  end
  local per = math.floor(PAGE / R) * R  -- every field of a chain but its last is full
  local last = #recs - per * math.max(had - 1, 0)
  if had > 0 and last + R <= per then
    redis.call('HSET', key, page + PAGES * (had - 1), string.sub(recs, #recs - last + 1) .. tag .. rec)
  else
    redis.call('HSET', key, page + PAGES * had, tag .. rec)
    had = had + 1
  end
  paged(key, page, recs .. tag .. rec, had)
  grew(t, 1)
  return #mine == 0, true
end

local function list_remove(t, k, rec)
  -- remove payload rec from k's list: whether k has no payloads now, whether rec was in it
  local key, page, recs, had, found, at = locate(t, k)
  local R, zero = TAG[t] + PAY[t], mark_of(t, k)
  local removed = nil
  if spilled(t, k, found) then
    local z = spill_key(t, k)
    removed = redis.call('ZREM', z, rec) == 1
    if redis.call('EXISTS', z) == 1 then return false, removed end
    rec = zero  -- the sorted set is gone: so is its mark
  end
  for i, f in ipairs(found) do
    if f == rec then
      local len = (KEYED[t] and f == zero) and 2 * R or R  -- a keyed table's mark is two records
      write_chain(key, page, string.sub(recs, 1, at[i] - 1) .. string.sub(recs, at[i] + len), R, had)
      grew(t, -1)
      local empty = #found == 1
      if KEYED[t] then empty = rec == zero or #inline(t, k, found, i) == 0 end
      return empty, removed == nil or removed
    end
  end
  return #found == 0, false
end

local function zeros(recs)
  local out = {}
  for i = 1, #recs do out[i] = 0 end
  return out
end

-- store: entries --------------------------------------------------------------------------------
-- An entry is one binary record (see redis_keys.py), element id % 64 of the list '<base>e:<id // 64>'
-- (a removed entry's element is empty; a list left without records is deleted).

local SLOTS = 64  -- entries a list
local F_T, F_B, F_NUM, F_NUMTEXT, F_H, F_U, F_N, F_PENDING = 1, 2, 4, 8, 16, 32, 64, 128
-- the URL's scheme a record leaves out (byte 10, bits 5-6; bit 7: the title in UTF-16-BE)
local SCHEMES = {[0] = '', 'https://', 'http://'}

local function ekey(id) return B .. 'e:' .. math.floor(id / SLOTS) end

local FIRST = {}  -- entries' records read or written in this call (false: none)

local function first_chunk(id)
  -- the entry's record (raw bytes), or nil (a removed entry's element is empty)
  local first = FIRST[id]
  if first == nil then
    first = redis.call('LINDEX', ekey(id), id % SLOTS) or false
    if first == '' then first = false end
    FIRST[id] = first
  end
  return first or nil
end

local raw_record = first_chunk

local function put_record(id, r)
  -- the entry's record as element id % SLOTS of its list (padded with empty elements up to it)
  local key, slot = ekey(id), id % SLOTS
  local n = redis.call('LLEN', key)
  if n > slot then
    redis.call('LSET', key, slot, r)
  else
    local args = {}
    for i = 1, slot - n do args[i] = '' end
    args[#args + 1] = r
    redis.call('RPUSH', key, unpack(args))
  end
  FIRST[id] = r
end

local function drop_record(id)
  -- empty the entry's element; a list left with no record is deleted
  local key = ekey(id)
  redis.call('LSET', key, id % SLOTS, '')
  FIRST[id] = false
  if #redis.call('LPOS', key, '', 'COUNT', 0) == redis.call('LLEN', key) then redis.call('DEL', key) end
end

local function bad(id)
  return redis.error_reply('scrapy-simhash: entry ' .. id .. ' is unreadable (not a record of ours)')
end

local function flag(flags, f) return bit.band(flags, f) ~= 0 end

local function decode(id, r)
  -- {seen, flags, nsent, t, b, m (text), x (raw hashes), h, u}; raises when r is not ours
  if #r < 10 then error(bad(id)) end
  local e = {id = id}
  local ok, err = pcall(function()
    local seen, flags, nsent, pos = struct.unpack('>dBB', r)
    e.seen, e.flags = seen, flags
    if flag(flags, F_T) then e.t = string.sub(r, pos, pos + W - 1); pos = pos + W end
    if flag(flags, F_B) then e.b = string.sub(r, pos, pos + W - 1); pos = pos + W end
    if flag(flags, F_NUM) then
      local n = string.byte(r, pos); pos = pos + 1
      local words = {}
      for i = 1, n do words[i] = string.format('%08x', u32(r, pos)); pos = pos + 4 end
      e.m = table.concat(words, ' ')
    elseif flag(flags, F_NUMTEXT) then
      local n = string.byte(r, pos) * 256 + string.byte(r, pos + 1)
      e.m = string.sub(r, pos + 2, pos + 1 + n); pos = pos + 2 + n
    end
    local more = nsent  -- the byte also holds the URL's scheme and the title's encoding
    nsent = more % 32
    e.nsent = nsent
    e.x = {}
    for i = 1, nsent do e.x[i] = string.sub(r, pos, pos + 7); pos = pos + 8 end
    if flag(flags, F_H) then e.h = string.sub(r, pos, pos + 7); pos = pos + 8 end
    if flag(flags, F_U) then
      local n = string.byte(r, pos)
      if n >= 128 then n = (n - 128) * 256 + string.byte(r, pos + 1); pos = pos + 1 end
      e.u = SCHEMES[math.floor(more / 32) % 4] .. string.sub(r, pos + 1, pos + n); pos = pos + 1 + n
    end
    if pos - 1 > #r then error('truncated') end
  end)
  if not ok then error(bad(id)) end
  return e
end

local CACHE = {}

local function fields(id)
  -- the entry's decoded record (cached for this call), or nil when gone
  local e = CACHE[id]
  if e == nil then
    local r = raw_record(id)
    e = r and decode(id, r) or false
    CACHE[id] = e
  end
  return e or nil
end

local function seen_of(id)
  local e = CACHE[id]
  if e then return e.seen end
  local first = first_chunk(id)
  if not first or #first < 8 then error(bad(id)) end
  return (struct.unpack('>d', first))
end

local function seens(recs)
  local out = {}
  for i, rec in ipairs(recs) do out[i] = seen_of(u32(rec, 1)) end
  return out
end

local function url_tag(url) return unhex(string.sub(redis.sha1hex(url), 1, 16)) end

holds = function(t, id, k)
  -- a keyed table's verification: the title/body fingerprint (in the record's first chunk), a
  -- sampled sentence hash, or the URL digest of entry id is k (false when the entry is gone)
  if t == 'th' or t == 'bh' then
    local first = first_chunk(id)
    if not first then return false end
    if #first < 10 then error(bad(id)) end
    local flags, pos = string.byte(first, 9), 11
    if t == 'bh' then
      if flag(flags, F_T) then pos = pos + W end
      if not flag(flags, F_B) then return false end
    elseif not flag(flags, F_T) then
      return false
    end
    return string.sub(first, pos, pos + W - 1) == k
  end
  if t == 'sh' then  -- most ids found under a 1-byte tag are others': a plain search rules them out
    local r = first_chunk(id)
    if not r then return false end
    if not string.find(r, k, 11, true) then return false end
  end
  local e = fields(id)
  if not e then return false end
  if t == 'u' then return e.u ~= nil and url_tag(e.u) == k end
  for _, h in ipairs(e.x) do if h == k then return true end end
  return false
end

keys_of = function(t, id)
  -- the keys entry id files in keyed table t (none when it is gone)
  local e = fields(id)
  if not e then return {} end
  if t == 'th' then return {e.t} elseif t == 'bh' then return {e.b} end
  if t == 'u' then return {e.u and url_tag(e.u)} end
  return e.x
end

local function hour_of(seen)
  return string.format('%.0f', math.floor(num(seen) / 3600))
end

-- store: candidates, holders, sentence_holders, insert, record ----------------------------------

local function candidates(tc, probes, near, k)
  -- stored fingerprints sharing a band with the query's (each probe {band table, key} once;
  -- members may repeat); with near(s, i) (the distance of the fingerprint at position i of s),
  -- only those within k: the page is read in place, a substring made for the near ones only
  local out = {}
  for _, probe in ipairs(probes) do
    local t, key = probe[1], probe[2]
    local _, _, recs, _, banded = band_page(t, key)
    if find_aligned(recs, key, W) and redis.call('EXISTS', spill_key(t, key)) == 1 then  -- its mark
      for _, fp in ipairs(redis.call('ZRANGE', spill_key(t, key), 0, -1)) do
        if not near or (#fp == W and near(fp, 1) <= k) then out[#out + 1] = fp end
      end
    else
      for i = 1, #recs - W + 1, W do
        if banded(recs, i) and (not near or near(recs, i) <= k) then out[#out + 1] = string.sub(recs, i, i + W - 1) end
      end
    end
  end
  return out
end

local function holders(tc, fp, nb, limit, offset)
  -- entries holding exactly fp, first seen >= nb, earliest first: {id, seen}; limit of them (all
  -- when nil) after the first offset (nil: 0)
  offset = offset or 0
  local v, z = list(tc .. 'h', fp)
  local out = {}
  if v then
    local all = {}
    for _, rec in ipairs(records(v, 4)) do
      local id = u32(rec, 1)
      local seen = seen_of(id)
      if seen >= num(nb) then all[#all + 1] = {id = id, seen = seen} end
    end
    table.sort(all, by_seen)
    for j = offset + 1, limit and math.min(#all, offset + limit) or #all do out[#out + 1] = all[j] end
    return out
  end
  local rows
  if limit then
    rows = redis.call('ZRANGEBYSCORE', z, nb, '+inf', 'WITHSCORES', 'LIMIT', offset, limit)
  else
    rows = redis.call('ZRANGEBYSCORE', z, nb, '+inf', 'WITHSCORES', 'LIMIT', offset, -1)
  end
  for j = 1, #rows, 2 do out[#out + 1] = {id = u32(rows[j], 1), seen = tonumber(rows[j + 1])} end
  return out
end

local function sentence_holders(hashes, nb)
  -- {id, seen, shared, stored} of entries holding some of hashes, earliest first; a hash held by
  -- sentence_max_holders entries or more (expired ones included) is left out
  local count, seen, out = {}, {}, {}
  for _, h in ipairs(hashes) do
    local v, z = list('sh', h)
    local rows = {}
    if v then
      for _, rec in ipairs(records(v, 4)) do
        local id = u32(rec, 1)
        local s = seen_of(id)
        if s >= num(nb) then rows[#rows + 1] = {id, s} end
      end
    elseif redis.call('ZCARD', z) < L.sentence_max_holders then
      local flat = redis.call('ZRANGEBYSCORE', z, nb, '+inf', 'WITHSCORES')
      for j = 1, #flat, 2 do rows[#rows + 1] = {u32(flat[j], 1), tonumber(flat[j + 1])} end
    end
    if v == nil or #v / 4 < L.sentence_max_holders then
      for _, row in ipairs(rows) do
        count[row[1]] = (count[row[1]] or 0) + 1
        seen[row[1]] = row[2]
      end
    end
  end
  for id, c in pairs(count) do
    out[#out + 1] = {id = id, seen = seen[id], shared = c, stored = fields(id).nsent}
  end
  table.sort(out, by_seen)
  return out
end

local function utf16(s)
  -- UTF-8 text (as JSON decodes it) in UTF-16-BE: two bytes a CJK character instead of three
  local out, i = {}, 1
  while i <= #s do
    local c, a, b, d = string.byte(s, i, i + 3)
    local cp
    if c < 128 then cp, i = c, i + 1
    elseif c < 224 then cp, i = (c % 32) * 64 + a % 64, i + 2
    elseif c < 240 then cp, i = ((c % 16) * 64 + a % 64) * 64 + b % 64, i + 3
    else cp, i = (((c % 8) * 64 + a % 64) * 64 + b % 64) * 64 + d % 64, i + 4 end
    if cp >= 65536 then
      cp = cp - 65536
      out[#out + 1] = struct.pack('>HH', 55296 + math.floor(cp / 1024), 56320 + cp % 1024)
    else
      out[#out + 1] = struct.pack('>H', cp)
    end
  end
  return table.concat(out)
end

local function encode(e, seen_at, stored, pending)
  -- the record of a new entry (layout: redis_keys.py)
  local flags, parts = 0, {}
  if e.title_fp then flags = flags + F_T; parts[#parts + 1] = e.title_fp end
  if e.body_fp then flags = flags + F_B; parts[#parts + 1] = e.body_fp end
  if e.numbers then
    local words = split(e.numbers)
    local packed = #words < 256
    for _, w in ipairs(words) do packed = packed and #w == 8 and string.find(w, '^[0-9a-f]+$') ~= nil end
    if packed then
      flags = flags + F_NUM
      parts[#parts + 1] = string.char(#words)
      for _, w in ipairs(words) do parts[#parts + 1] = unhex(w) end
    else
      flags = flags + F_NUMTEXT
      parts[#parts + 1] = struct.pack('>H', #e.numbers) .. e.numbers
    end
  end
  for _, h in ipairs(stored) do parts[#parts + 1] = h end
  if e.short_body then flags = flags + F_H; parts[#parts + 1] = e.short_body end
  local more = #stored  -- byte 10: the sentence hashes stored (< 32), the URL's scheme, the title's encoding
  if more >= 32 then error(redis.error_reply('scrapy-simhash: at most 31 sentence hashes an entry')) end
  if e.url then
    local url = e.url
    for code = 1, 2 do
      if string.sub(url, 1, #SCHEMES[code]) == SCHEMES[code] then
        url, more = string.sub(url, #SCHEMES[code] + 1), more + 32 * code
        break
      end
    end
    if #url >= 32768 then error(redis.error_reply('scrapy-simhash: a URL of ' .. #url .. ' bytes is too long')) end
    flags = flags + F_U
    parts[#parts + 1] = (#url < 128 and string.char(#url) or struct.pack('>H', 32768 + #url)) .. url
  end
  if e.title then  -- the record's last field: its length is the record's
    local wide = utf16(e.title)
    flags = flags + F_N
    if #wide < #e.title then parts[#parts + 1], more = wide, more + 128 else parts[#parts + 1] = e.title end
  end
  if pending then flags = flags + F_PENDING end
  local body = table.concat(parts)
  if #body > 65525 then error(redis.error_reply('scrapy-simhash: an entry of ' .. #body .. ' bytes is too long')) end
  return struct.pack('>dBB', num(seen_at), flags, more) .. body
end

local function probes(set)
  -- probes {t = {{band number, hex key}, ...}, b = ...} as {band table, raw key}
  local out = {}
  for _, tc in ipairs({'t', 'b'}) do
    out[tc] = {}
    for i, p in ipairs((set or {})[tc] or {}) do
      local t = BANDS[tc][p[1] + 1]
      if not t then error(redis.error_reply('scrapy-simhash: no band ' .. tostring(p[1]) .. ' in tier ' .. tc)) end
      out[tc][i] = {t, unhex(p[2])}
    end
  end
  return out
end

local function insert(e, seen_at, nstore)
  -- add an entry {title_fp, body_fp, url, title, numbers, sentences, short_body, owner}; returns its id
  local id = redis.call('INCR', B .. 'seq')
  if id >= 4294967296 then return error(redis.error_reply('scrapy-simhash: the namespace ran out of entry ids')) end
  local idb = p32(id)
  local stored = {}
  for i = 1, math.min(#(e.sentences or {}), nstore) do stored[i] = e.sentences[i] end
  put_record(id, encode(e, seen_at, stored, e.owner ~= nil))
  redis.call('INCR', B .. 'n')
  local hour = hour_of(seen_at)
  if redis.call('APPEND', B .. 't:' .. hour, idb) == 4 then
    redis.call('ZADD', B .. 'hours', hour, hour)
    -- the hour before is complete: written again at its length (APPEND leaves up to as much again free)
    local before = redis.call('ZREVRANGEBYSCORE', B .. 'hours', '(' .. hour, '-inf', 'LIMIT', 0, 1)[1]
    if before then
      local v = redis.call('GET', B .. 't:' .. before)
      if v then redis.call('SET', B .. 't:' .. before, v) end
    end
  end
  if e.url then list_add('u', url_tag(e.url), idb, 0, zeros) end
  if e.owner then  -- pending until its item is delivered (or released)
    redis.call('SADD', B .. 'pending:' .. e.owner, id)
    redis.call('SADD', B .. 'owners', e.owner)
  end
  for _, h in ipairs(stored) do list_add('sh', h, idb, seen_at, seens) end
  local new_bands = 0
  for _, tier in ipairs({{'t', e.title_fp}, {'b', e.body_fp}}) do
    local tc, fp = tier[1], tier[2]
    if fp and list_add(tc .. 'h', fp, idb, seen_at, seens) then
      for _, t in ipairs(BANDS[tc]) do
        local _, added = list_add(t, masked(t, fp), fp, 0, zeros)
        if added then new_bands = new_bands + 1 end
      end
    end
  end
  if new_bands > 0 then redis.call('INCRBY', B .. 'nbands', new_bands) end
  return id
end

local function record(q, tc, m, status, seen_at)
  -- the latest decision about q.url
  local dk = B .. 'd:' .. q.url
  redis.call('DEL', dk)
  local args = {'status', status, 'tier', tc, 'distance', m.d, 'original', m.id, 'decided_at', seen_at}
  if q.title then args[#args + 1] = 'title'; args[#args + 1] = q.title end
  redis.call('HSET', dk, unpack(args))
  redis.call('ZADD', B .. 'decided', seen_at, q.url)
end

-- rule.py: numbers_agree -----------------------------------------------------------------------

local function numbers_agree(a, b, pct, empty_agrees)
  if pct <= 0 or not a or not b then return true end
  local xs, ys = split(a), split(b)
  if #xs == 0 or #ys == 0 then return empty_agrees or (#xs == 0 and #ys == 0) end
  local top = 'g'  -- above every hex string
  if #xs >= L.numbers_max and xs[#xs] < top then top = xs[#xs] end
  if #ys >= L.numbers_max and ys[#ys] < top then top = ys[#ys] end
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

-- rule.py: bodies_agree ------------------------------------------------------------------------

local function bodies_agree(q, id)
  local f = fields(id)
  local eb, ex, eh = f.b, #f.x > 0 and f.x or nil, f.h
  if q.body_fp and eb then
    if dist(q.body_fp, eb, L.title_body_distance) <= L.title_body_distance then return true end
    if not ex then return false end
    local mine = {}
    for _, h in ipairs(q.sentences) do mine[h] = true end
    for _, h in ipairs(ex) do if mine[h] then return true end end
    return false
  end
  if (not q.body_fp and not q.short_body) or (not eb and not eh) then return true end
  return q.short_body ~= nil and q.short_body == eh
end

-- rule.py: sentences_match ---------------------------------------------------------------------

local function sentences_match(shared, stored, percent, body_distance, item)
  if shared >= 2 and (100 * shared > percent * stored or (item and 100 * shared > percent * item)) then
    return true
  end
  return shared >= 1 and L.sentence_body_part * shared >= stored
    and body_distance ~= nil and body_distance <= L.sentence_body_distance
end

-- rule.py: accepted ----------------------------------------------------------------------------

local function accepted(tc, fp, nb, need, accept)
  -- the earliest need holders of fp that accept takes, read in pages of holders_page, twice that...
  local found, offset, size = {}, 0, L.holders_page
  while #found < need do
    local page = holders(tc, fp, nb, size, offset)
    for _, e in ipairs(page) do if accept(e.id) then found[#found + 1] = e end end
    if #page < size then break end
    offset, size = offset + size, size * 2
  end
  for j = #found, need + 1, -1 do found[j] = nil end
  return found
end

-- rule.py: nearest -----------------------------------------------------------------------------

local function nearest(tc, fp, k, nb, limit, keys, accept)
  -- the limit nearest entries within k: {d, id}, by distance, then first seen, then id; with
  -- accept(id), only accepted entries count, so every holder of a candidate fingerprint is read
  local distances, cands, d = {}, {}, distance_to(fp, k)
  for _, other in ipairs(candidates(tc, keys, distance_at(fp, k), k)) do
    if distances[other] == nil then
      distances[other] = d(other)
      if distances[other] <= k then cands[#cands + 1] = {distances[other], other} end
    end
  end
  table.sort(cands, function(x, y) return x[1] < y[1] end)
  local out, i = {}, 1
  while i <= #cands and #out < limit do
    local d, group = cands[i][1], {}
    while i <= #cands and cands[i][1] == d do
      if accept then
        for _, e in ipairs(accepted(tc, cands[i][2], nb, limit - #out, accept)) do group[#group + 1] = e end
      else
        for _, e in ipairs(holders(tc, cands[i][2], nb, limit - #out)) do group[#group + 1] = e end
      end
      i = i + 1
    end
    table.sort(group, by_seen)
    for j = 1, math.min(#group, limit - #out) do out[#out + 1] = {d = d, id = group[j].id} end
  end
  return out
end

-- rule.py: sentence_tier -----------------------------------------------------------------------

local function sentence_tier(q, nb)
  local last, mine = q.sentences[#q.sentences], {}
  for _, h in ipairs(q.sentences) do mine[h] = true end
  for _, e in ipairs(sentence_holders(q.sentences, nb)) do
    local f = fields(e.id)
    local distance, item = nil, nil
    if q.body_fp and f.b then distance = dist(q.body_fp, f.b, 64 * 4) end
    local x = f.x
    -- the entry's sample is all its sentences, or covers the range of all of the item's (raw
    -- big-endian bytes sort as the numbers do)
    if e.stored < L.sentences_stored or last <= x[#x] then item = #q.sentences end
    -- shared sentences that are not lines (signatures.is_line: the top bit set)
    local sentences = e.shared
    for _, h in ipairs(x) do
      if mine[h] and string.byte(h, 1) >= 128 then sentences = sentences - 1 end
    end
    if sentences_match(e.shared, e.stored, q.sentences_shared, distance, item)
        and (sentences >= L.sentences_figures or numbers_agree(q.numbers, f.m, q.title_numbers, true)) then
      return {d = e.stored - e.shared, id = e.id}
    end
  end
  return nil
end

-- rule.py: peek --------------------------------------------------------------------------------

local function peek(q)
  -- the tier ('t', 'b', 's') and match {d, id} that decide q, or nil: new
  local nb = q.not_before or '-inf'
  local guarded = q.title_numbers > 0 and q.numbers ~= nil
  local function numbers_of(id)
    return numbers_agree(q.numbers, fields(id).m, q.title_numbers, false)
  end
  if q.title_fp then
    local accept = function(id)
      return bodies_agree(q, id) and (not guarded or numbers_of(id))
    end
    local found = nearest('t', q.title_fp, q.title_k, nb, 1, q.probe.t, accept)
    if #found > 0 then return 't', found[1] end
  end
  if q.body_fp then
    local accept = nil
    if guarded and q.figures then accept = numbers_of end
    local found = nearest('b', q.body_fp, q.body_k, nb, 1, q.probe.b, accept)
    if #found > 0 then return 'b', found[1] end
  end
  if q.sentences_shared > 0 and #q.sentences > 0 then
    local m = sentence_tier(q, nb)
    if m then return 's', m end
  end
  return nil, nil
end

local function match_reply(tc, m)
  return {'match', tc, m.d, m.id, raw_record(m.id)}
end

-- rule.py: check_and_add -----------------------------------------------------------------------

local function check_and_add(q, flagged)
  local tc, m = peek(q)
  if not tc then return {'added', insert(q, q.seen_at, L.sentences_stored)} end
  if q.url then record(q, tc, m, flagged[tc] and 'flagged' or 'duplicate', q.seen_at) end
  return match_reply(tc, m)
end

-- rule.py: lookup ------------------------------------------------------------------------------

local function lookup(a)
  local out = {}
  for _, spec in ipairs({{'t', a.title_fp, a.title_k}, {'b', a.body_fp, a.body_k}}) do
    if spec[2] then
      for _, m in ipairs(nearest(spec[1], spec[2], spec[3], a.not_before or '-inf', a.limit, a.probe[spec[1]], nil)) do
        out[#out + 1] = {spec[1], m.d, m.id, raw_record(m.id)}
      end
    end
  end
  return out
end

-- redis: maintenance ---------------------------------------------------------------------------

local function drop_from_hour(hour, idb)
  local key = B .. 't:' .. hour
  local v = redis.call('GET', key)
  local i = v and find_aligned(v, idb)
  if not i then return end
  v = string.sub(v, 1, i - 1) .. string.sub(v, i + 4)
  if v == '' then
    redis.call('DEL', key)
    redis.call('ZREM', B .. 'hours', hour)
  else
    redis.call('SET', key, v)
  end
end

local function remove(id, whole_hour)
  -- remove an entry from every list, and the band records of its fingerprints no entry holds any
  -- more. whole_hour: its time bucket is being dropped whole by the caller
  local e = fields(id)
  if not e then return 0 end
  local idb = p32(id)
  drop_record(id)
  CACHE[id] = false
  redis.call('DECR', B .. 'n')
  if flag(e.flags, F_PENDING) then
    for _, owner in ipairs(redis.call('SMEMBERS', B .. 'owners')) do redis.call('SREM', B .. 'pending:' .. owner, id) end
  end
  for _, h in ipairs(e.x) do list_remove('sh', h, idb) end
  local dropped = 0
  for _, tier in ipairs({{'t', e.t}, {'b', e.b}}) do
    local fp = tier[2]
    if fp and (list_remove(tier[1] .. 'h', fp, idb)) then
      for _, t in ipairs(BANDS[tier[1]]) do
        local _, gone = list_remove(t, masked(t, fp), fp)
        if gone then dropped = dropped + 1 end
      end
    end
  end
  if dropped > 0 then redis.call('DECRBY', B .. 'nbands', dropped) end
  if e.u then list_remove('u', url_tag(e.u), idb) end
  if not whole_hour then drop_from_hour(hour_of(e.seen), idb) end
  return 1
end

local function forget_decision(url)
  redis.call('DEL', B .. 'd:' .. url)
  redis.call('ZREM', B .. 'decided', url)
end

local function url_ids(url)
  -- ids of the entries with this URL
  local v, z = list('u', url_tag(url))
  local out = {}
  for _, rec in ipairs(v and records(v, 4) or redis.call('ZRANGE', z, 0, -1)) do
    local e = fields(u32(rec, 1))
    if e and e.u == url then out[#out + 1] = e.id end
  end
  return out
end

local function purge(older, batch)
  -- remove up to batch entries first seen before older: whole time buckets first (oldest first),
  -- then the entries of the bucket older falls in. Returns {removed, more}
  local n, last = 0, hour_of(older)
  for _, hour in ipairs(redis.call('ZRANGEBYSCORE', B .. 'hours', '-inf', last)) do
    local key = B .. 't:' .. hour
    local v = redis.call('GET', key) or ''
    if hour ~= last then
      local take = math.min(#v / 4, batch - n)
      for i = #v - 4 * take + 1, #v, 4 do n = n + remove(u32(v, i), true) end
      if take == #v / 4 then
        redis.call('DEL', key)
        redis.call('ZREM', B .. 'hours', hour)
      else
        redis.call('SET', key, string.sub(v, 1, #v - 4 * take))
        return {n, 1}
      end
    else
      local keep = {}
      for i = 1, #v, 4 do
        local id = u32(v, i)
        local e = fields(id)
        if e and e.seen < num(older) and n < batch then
          n = n + remove(id, true)
        elseif e then
          keep[#keep + 1] = string.sub(v, i, i + 3)
        end
      end
      if #keep == 0 then
        redis.call('DEL', key)
        redis.call('ZREM', B .. 'hours', hour)
      elseif #keep < #v / 4 then
        redis.call('SET', key, table.concat(keep))
      end
    end
    if n >= batch then return {n, 1} end
  end
  return {n, 0}
end

local function query(q)
  -- the query with its fingerprints, sentence hashes, digest and probe keys as raw bytes
  if q.title_fp then q.title_fp = unhex(q.title_fp) end
  if q.body_fp then q.body_fp = unhex(q.body_fp) end
  if q.short_body then q.short_body = unhex(q.short_body) end
  local sentences = {}
  for i, h in ipairs(q.sentences or {}) do sentences[i] = unhex(h) end
  q.sentences = sentences
  q.probe = probes(q.probe)
  return q
end

local function token_keys(token, ttl)
  -- the time buckets of request tokens that may hold token (newest first), and its record tag: the
  -- token's SHA-1 bytes 2-7 (byte 1 picks the bucket's 1/16: 52 bits of the digest in all)
  local digest = unhex(string.sub(redis.sha1hex(token), 1, 16))
  local now = tonumber(redis.call('TIME')[1])
  local keys = {}
  for m = math.floor(now / 60), math.floor((now - ttl) / 60), -1 do
    keys[#keys + 1] = B .. 'r:' .. m .. ':' .. string.byte(digest, 1) % 16
  end
  return keys, string.sub(digest, 2, 7)
end

-- redis: operations ----------------------------------------------------------------------------

local op = A.op
if op == 'check' then
  -- an added outcome is remembered under the request token: a retry gets its entry back
  local tkeys, tag, tokens
  if A.token then
    tkeys, tag = token_keys(A.token, A.token_ttl)
    local got = redis.call('MGET', B .. 'meta', unpack(tkeys))
    if A.marked and not got[1] then return lost() end
    for j = 1, #tkeys do
      local v = got[j + 1]
      local i = v and find_aligned(v, tag, 10)
      if i then return {'added', u32(v, i + 6)} end
    end
    tokens = got[2]
  end
  if A.q.owner then redis.call('SET', B .. 'alive:' .. A.q.owner, '1', 'EX', A.lease) end
  local reply = check_and_add(query(A.q), A.flagged or {})
  if A.token and reply[1] == 'added' then
    -- written whole at its length (APPEND would leave up to as much again free)
    -- (the bucket's expiry set when it is made, kept when it grows)
    if tokens then redis.call('SET', tkeys[1], tokens .. tag .. p32(reply[2]), 'KEEPTTL')
    else redis.call('SET', tkeys[1], tag .. p32(reply[2]), 'EX', A.token_ttl + 60) end
  end
  return flush(reply)
elseif op == 'peek' then
  local tc, m = peek(query(A.q))
  if not tc then return {'new'} end
  return match_reply(tc, m)
elseif op == 'lookup' then
  A.title_fp = A.title_fp and unhex(A.title_fp)
  A.body_fp = A.body_fp and unhex(A.body_fp)
  A.probe = query({probe = A.probe}).probe
  return lookup(A)
elseif op == 'add' then
  -- unchecked bulk add (warm-up, benchmarks): entries {title_fp, body_fp, url, title, seen_at, store}
  for _, e in ipairs(A.entries) do
    insert(query(e), e.seen_at, 0)
    for key in pairs(PAGED) do PAGED[key] = nil end  -- not every chain of a bulk add held at once
  end
  return flush(#A.entries)
elseif op == 'remove' then
  -- how 'older' (value: a score, batch), 'id' (value: an id) or 'url':
  -- {removed, more to purge}
  local n, more = 0, 0
  if A.how == 'older' then
    local done = purge(A.value, A.batch)
    n, more = done[1], done[2]
    if more == 0 then
      for _, url in ipairs(redis.call('ZRANGEBYSCORE', B .. 'decided', '-inf', '(' .. A.value)) do
        forget_decision(url)
      end
    end
  elseif A.how == 'id' then
    n = remove(A.value)
  else
    for _, id in ipairs(url_ids(A.value)) do n = n + remove(id) end
    forget_decision(A.value)
  end
  return flush({n, more})
elseif op == 'deliver' then
  -- ids: entries whose items reached storage; no longer pending
  local n, owners = 0, redis.call('SMEMBERS', B .. 'owners')
  for _, id in ipairs(A.ids) do
    for _, owner in ipairs(owners) do n = n + redis.call('SREM', B .. 'pending:' .. owner, id) end
  end
  return n
elseif op == 'release' then
  -- ids: pending entries whose items were dropped downstream; or owner: every pending entry of
  -- a dead owner. {removed, 0} as 'remove'
  local n = 0
  if A.owner then
    for _, id in ipairs(redis.call('SMEMBERS', B .. 'pending:' .. A.owner)) do n = n + remove(tonumber(id)) end
    redis.call('DEL', B .. 'pending:' .. A.owner)
    redis.call('SREM', B .. 'owners', A.owner)
  else
    local owners = redis.call('SMEMBERS', B .. 'owners')
    for _, id in ipairs(A.ids) do
      for _, owner in ipairs(owners) do
        if redis.call('SISMEMBER', B .. 'pending:' .. owner, id) == 1 then n = n + remove(id); break end
      end
    end
  end
  return flush({n, 0})
elseif op == 'heartbeat' then
  redis.call('SET', B .. 'alive:' .. A.owner, '1', 'EX', A.lease)
  return 1
elseif op == 'records' then
  -- ids -> {id, record or false, ...}
  local out = {}
  for _, id in ipairs(A.ids) do out[#out + 1] = id; out[#out + 1] = raw_record(id) or false end
  return out
elseif op == 'bucket' then
  -- the time bucket hour: {id, first seen (repr-exact: 8 bytes), ...} packed as 12-byte records
  local v = redis.call('GET', B .. 't:' .. A.hour) or ''
  local out = {}
  for i = 1, #v, 4 do
    local id = u32(v, i)
    local first = first_chunk(id)
    if first then out[#out + 1] = string.sub(v, i, i + 3) .. string.sub(first, 1, 8) end
  end
  return table.concat(out)
elseif op == 'span' then
  -- {oldest, newest} first-seen times (8-byte doubles), or {} when empty
  local hours = redis.call('ZRANGE', B .. 'hours', 0, 0)
  if #hours == 0 then return {} end
  local out = {}
  for j, hour in ipairs({hours[1], redis.call('ZRANGE', B .. 'hours', -1, -1)[1]}) do
    local v = redis.call('GET', B .. 't:' .. hour) or ''
    local best = nil
    for i = 1, #v, 4 do
      local s = seen_of(u32(v, i))
      if best == nil or (j == 1 and s < best) or (j == 2 and s > best) then best = s end
    end
    out[j] = struct.pack('>d', best)
  end
  return out
elseif op == 'bands' then
  -- how many band members the tier's probes find (tests: one member per fingerprint, not per entry)
  return #candidates(A.tc, query({probe = {[A.tc] = A.probes}}).probe[A.tc])
end
return redis.error_reply('scrapy-simhash: unknown operation ' .. tostring(op))
