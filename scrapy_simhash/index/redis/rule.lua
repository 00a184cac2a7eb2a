--[[ scrapy-simhash: the server-side half of the Redis index (see redis_keys.py for the layout).

The tier rule here is a section-by-section PORT of scrapy_simhash/index/rule.py: each section
marked "rule.py: <name>" does what the Python function of that name does, in the same order with
the same ties, and tests/test_rule.py runs both on one verdict table. Sections marked "store" are
the rule's Store operations as Redis holds them; sections marked "redis" exist only here (request
tokens, maintenance). Change rule.py first, then its port here.

This text defines main(argv); redis_client.py calls it as EVALSHA <sha> 1 <prefix>:{<ns>}:seq <json>
<common json> (appending 'return main(ARGV)'), or on Redis 7 as FCALL of a library of functions that
runs this text once, at its first call, and keeps main (and with it the layouts begin decoded).
KEYS[1] routes the call in a cluster (every key of a namespace shares its hash tag); argv[1] is the
call's JSON object, argv[2] the one every call of an index repeats (base, limits, mark: decoded
once a text while the script stays loaded):
  op      'check' | 'peek' | 'lookup' | 'add' | 'remove' | 'deliver' | 'release' |
          'heartbeat' | 'records' | 'bucket' | 'span' | 'bands' | 'reband'
  base    (common) the namespace's key base, '<prefix>:{<ns>}:'
  limits  (common) the constants of rule.py/signatures.py: numbers_max, sentences_stored, sentence_body_distance,
          sentence_body_part, sentence_max_holders, title_body_distance; and of the layout:
          fp_bytes (bits / 8), load (records a table bucket averages before it splits), bands
          ({t = {{shift, width}, ...}, b = ...}: the band layouts), tag_bits (the quotient bits a
          keyed record's tag holds: 7; tests force fewer), band_split, band_node, band_depth
          (when a crowded band key leaves its page, splits, and how deep: 32, 128, 3; see the
          split band keys), band_gen (the layout's generation, in its tables' names: 0 for an index
          never re-banded; see redis_reband.py)
  mark    (common) the value of the namespace's marker key ('<base>meta') at open: it must still
          hold it (gone: the keys were lost; another value: the index is being or was re-banded)
  q       (check, peek) the query: title_fp/body_fp (fixed-width hex, absent when None), title_k,
          body_k, not_before/seen_at (scores as strings: Lua numbers are doubles), url, title,
          numbers (absent when None), title_numbers, sentences (sorted, distinct, 16 hex digits),
          sentences_shared, short_body (absent when None), figures (boolean),
          probe = {t = {{band number, key}, ...}, b = ...}: the band keys to read candidates from
          (fingerprints masked to a band, fixed-width hex, computed in Python: a layout that
          probes neighbours sends more than the pigeonhole bands' own; absent: the bands' own,
          masked here); a new entry is filed under its fingerprints masked to each band, by the
          script
  flagged (check) {t = true, b = true, s = true}: tiers recorded as 'flagged'
  token, token_ttl (check) the request token and how long an added outcome is remembered
Fingerprints never become Lua numbers: they are raw bytes, compared 32 bits at a time.
Replies carry entries as their raw records (decoded by redis_keys.py).
]]

-- library functions as locals: an upvalue read is one VM step, a global table's field two lookups
local sbyte, ssub, sfind, schar, tconcat = string.byte, string.sub, string.find, string.char, table.concat
local bit_band, bit_bor, bit_bxor, bit_rshift, floor, spack, sunpack = bit.band, bit.bor, bit.bxor, bit.rshift, math.floor, struct.pack, struct.unpack
local sformat = string.format
local rcall  -- redis.call, set by begin (a Redis function's library has no redis.call while it loads)

-- the call's state, set by begin (below) before each call: its argument A, the namespace's key base
-- B, the limits L, the fingerprints' bytes W, the value the namespace's marker must hold (or nil)
local A, B, L, W, MARK

-- redis: the namespace's marker (set at open) no longer holds what it held then (a check with a
-- request token reads the marker with its tokens, in one MGET): gone, the server lost the index's
-- keys; changed, the index is being or was re-banded (redis_reband.py), a layout its limits lack
local function lost(now)
  if now then
    return redis.error_reply('scrapy-simhash: the index is being or was re-banded since it was opened: '
      .. 'its calls would file entries under the old band layout; reopen it')
  end
  return redis.error_reply('scrapy-simhash: the index lost its keys (the server was restarted without '
    .. 'persistence, or evicted keys): its answers would be wrong; reopen it')
end

-- store: bytes -----------------------------------------------------------------------------------

local function p32(n)  -- 0 <= n < 2^32 as 4 bytes, big-endian
  return spack('>I4', n)
end

local function unhex(s)
  -- hex digits (a multiple of 8 of them) as raw bytes (one pack a fingerprint of 64 bits)
  if #s == 16 then return spack('>I4I4', tonumber(ssub(s, 1, 8), 16), tonumber(ssub(s, 9, 16), 16)) end
  if #s == 8 then return spack('>I4', tonumber(s, 16)) end
  local out = {}
  for i = 1, #s, 8 do out[#out + 1] = spack('>I4', tonumber(ssub(s, i, i + 7), 16)) end
  return tconcat(out)
end

local function tohex(s)
  return (string.gsub(s, '.', function(c) return string.format('%02x', sbyte(c)) end))
end

local function u32(s, i)
  local a, b, c, d = sbyte(s, i, i + 3)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

local function popcount(x)
  x = bit_band(x - bit_band(bit_rshift(x, 1), 0x55555555), 0xFFFFFFFF)
  x = bit_band(x, 0x33333333) + bit_band(bit_rshift(x, 2), 0x33333333)
  x = bit_band(x + bit_rshift(x, 4), 0x0F0F0F0F)
  return bit_band(x, 0xFF) + bit_band(bit_rshift(x, 8), 0xFF) + bit_band(bit_rshift(x, 16), 0xFF) + bit_rshift(x, 24)
end

local function bits_upto(x, limit)
  -- the set bits of a 32-bit word, or limit + 1 once past limit: a bit at a time, so a far
  -- candidate costs limit + 1 steps, not a whole popcount (~5x faster at a threshold of 2-3)
  if limit >= 16 then return popcount(x) end
  local d = 0
  while x ~= 0 do
    d = d + 1
    if d > limit then return d end
    x = bit_band(x, x - 1)  -- clears the lowest set bit (bit ops wrap x - 1 to 32 bits)
  end
  return d
end

local function dist(a, b, limit)
  -- Hamming distance of two raw fingerprints, 32 bits at a time; past limit, some number above it
  if #a ~= #b then return limit + 1 end  -- not one of our fingerprints: never a candidate
  local d = 0
  for i = 1, #a, 4 do
    d = d + bits_upto(bit_bxor(u32(a, i), u32(b, i)), limit - d)
    if d > limit then return d end
  end
  return d
end

local function distance_to(fp, limit)
  -- dist(other, fp, limit) as a function of other, fp's words unpacked once
  if #fp ~= 8 then return function(other) return dist(other, fp, limit) end end
  local f1, f2 = sunpack('>I4I4', fp)
  if limit >= 16 then
    return function(other)
      if #other ~= 8 then return limit + 1 end
      local o1, o2 = sunpack('>I4I4', other)
      local d = bits_upto(bit_bxor(o1, f1), limit)
      if d > limit then return d end
      return d + bits_upto(bit_bxor(o2, f2), limit - d)
    end
  end
  return function(other)  -- bits_upto inline: most candidates are far, and a call costs more than a bit
    if #other ~= 8 then return limit + 1 end
    local o1, o2 = sunpack('>I4I4', other)
    local d, x = 0, bit_bxor(o1, f1)
    while x ~= 0 do
      d = d + 1
      if d > limit then return d end
      x = bit_band(x, x - 1)
    end
    x = bit_bxor(o2, f2)
    while x ~= 0 do
      d = d + 1
      if d > limit then return d end
      x = bit_band(x, x - 1)
    end
    return d
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
    local i = sfind(s, rec, init, true)
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
-- field names as strings: a number passed to redis.call, or joined to a string, is formatted by
-- sprintf (~2-4k instructions; a table read is ~0.1k)
local FIELDS = {[0] = '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11', '12', '13', '14', '15', '16', '17', '18', '19', '20', '21', '22', '23', '24', '25', '26', '27', '28', '29', '30', '31', '32', '33', '34', '35', '36', '37', '38', '39', '40', '41', '42', '43', '44', '45', '46', '47', '48', '49', '50', '51', '52', '53', '54', '55', '56', '57', '58', '59', '60', '61', '62', '63', '64', '65', '66', '67', '68', '69', '70', '71', '72', '73', '74', '75', '76', '77', '78', '79', '80', '81', '82', '83', '84', '85', '86', '87', '88', '89', '90', '91', '92', '93', '94', '95', '96', '97', '98', '99', '100', '101', '102', '103', '104', '105', '106', '107', '108', '109', '110', '111', '112', '113', '114', '115', '116', '117', '118', '119', '120', '121', '122', '123', '124', '125', '126', '127'}
local function fname(n) return FIELDS[n] or n end
-- a table's tag and payload bytes and the payloads a key holds before they spill: the keyed
-- tables' here, the band tables' added by the layout (layout_of)
local TAG0 = {th = 1, bh = 1, sh = 1, u = 1}
local PAY0 = {th = 4, bh = 4, sh = 4, u = 4}
local KEYED = {th = true, bh = true, sh = true, u = true}
local SPILL0 = {th = 4, bh = 4, sh = 4, u = 4}
local TAG, PAY, SPILL
-- BAND[table] = its mask words, BANDW[table] those it touches; BANDS[tier char] = table names
-- (a layout's, from the limits: see layout_of; TAG, PAY and SPILL also hold its band tables');
-- MASK[table] its bits, PARTS[table] the parts a split key of it files into, KIDS[table] those
-- child masks (see kids: defined as tables are, named '<table>.<part>'), DEPTH[table] 0 for a band's
-- table, 1 for its children, ...
local BAND, BANDW, BANDS, FINDB, MASK, PARTS, KIDS, DEPTH, LAYOUT

local function define(y, t, bits, parts, findb, depth)
  -- band table (or child mask) t of the layout y (layout_of): a key is a fingerprint masked to bits
  -- (positions, 0 the lowest), a split key files under parts child masks; findb: see layout_of;
  -- depth: 0 a band's table, 1 its children, ...
  local w = y.W
  local words, touched = {}, {}
  for i = 1, w / 4 do words[i] = 0 end
  for _, b in ipairs(bits) do  -- word i holds bits 32 * (w / 4 - i) and up
    local i = w / 4 - (b - b % 32) / 32
    words[i] = words[i] + 2 ^ (b % 32)
  end
  for i = 1, w / 4 do
    if words[i] ~= 0 then touched[#touched + 1] = {4 * i - 4, words[i]} end  -- {position in a record, mask}
  end
  y.band[t], y.bandw[t], y.tag[t], y.pay[t], y.spill[t] = words, touched, 0, w, y.split_at
  y.mask[t], y.parts[t], y.findb[t], y.depth[t] = bits, parts, findb, depth
end

local function layout_of(lim)
  -- the tables of the limits lim's band layout (BAND, BANDW, ... as fields)
  local w = lim.fp_bytes or 8
  local y = {W = w, band = {}, bandw = {}, bands = {t = {}, b = {}}, findb = {}, tag = {}, pay = {}, spill = {},
             mask = {}, parts = {}, kids = {}, depth = {}, split_at = lim.band_split or 32,
             node_at = lim.band_node or 128, max_depth = lim.band_depth or 3}
  for t, v in pairs(TAG0) do y.tag[t], y.pay[t], y.spill[t] = v, PAY0[t], SPILL0[t] end
  local gen = (lim.band_gen or 0) > 0 and 'g' .. lim.band_gen or ''
  for tc, layout in pairs(lim.bands or {}) do
    for n = 1, #layout do
      local shift, nbits = layout[n][1], layout[n][2]
      local t, bits = tc .. 'b' .. fname(n - 1) .. gen, {}  -- redis_keys.band_table
      for b = shift, shift + nbits - 1 do bits[#bits + 1] = b end
      -- the whole bytes inside the band (bits 8m .. 8m + 7 are byte w - m of a record): a page is
      -- searched for them (string.find) instead of testing every record's band; exact when the band
      -- is those bytes
      local m_lo, m_hi = (shift + 7 - (shift + 7) % 8) / 8, (shift + nbits - (shift + nbits) % 8) / 8 - 1
      local findb = nil
      if m_hi >= m_lo then findb = {w - 1 - m_hi, m_hi - m_lo + 1, shift % 8 == 0 and nbits % 8 == 0} end
      define(y, t, bits, #layout, findb, 0)
      y.bands[tc][n] = t
    end
  end
  return y
end
local PAGES, PAGE = 16, 64
local LH
local holds  -- holds(t, id, key): does entry id hold key (a keyed table's verification; see the entries)
local keys_of  -- keys_of(t, id): the keys entry id files in keyed table t (see the entries)

local function state(t)
  -- a table's linear-hashing state; every table's is read at the first use (one HGETALL of lh)
  if next(LH) == nil then
    local flat = rcall('HGETALL', B .. 'lh')
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

local function mul32(a, c)  -- a * c mod 2^32, exactly in doubles (no call: % and / are VM steps)
  local a0, c0 = a % 65536, c % 65536
  local a1, c1 = (a - a0) / 65536, (c - c0) / 65536
  return ((a1 * c0 + a0 * c1) % 65536 * 65536 + a0 * c0) % 4294967296
end

local function fmix(h)  -- MurmurHash3's finalizer: every bit of h moves every bit of the result
  h = mul32(bit_bxor(h, bit_rshift(h, 16)) % 4294967296, 0x85ebca6b)
  h = mul32(bit_bxor(h, bit_rshift(h, 13)) % 4294967296, 0xc2b2ae35)
  return bit_bxor(h, bit_rshift(h, 16)) % 4294967296
end

local function masked(t, fp)
  -- the key fingerprint fp is filed under in band table t: fp masked to the band's bits
  if W == 8 then
    local m, a, b = BAND[t], sunpack('>I4I4', fp)
    return spack('>I4I4', bit_band(a, m[1]) % 4294967296, bit_band(b, m[2]) % 4294967296)
  end
  local out = {}
  for j, m in ipairs(BAND[t]) do out[j] = p32(bit_band(u32(fp, 4 * j - 3), m) % 4294967296) end
  return tconcat(out)
end

local function bandhash(t, s, i)
  -- 32 bits of the band key of the record (or key) at position i of s in band table t: the words
  -- the band touches, masked, folded and mixed by one multiplication (no string made: a split
  -- hashes every record it moves)
  local h, words = 0, BANDW[t]
  for j = 1, #words do
    local w = words[j]
    local x = bit_band(u32(s, i + w[1]), w[2])
    h = bit_bxor(h, x, bit_rshift(x, 15)) % 4294967296
  end
  h = mul32(h, 0x9e3779b1)
  return bit_bxor(h, bit_rshift(h, 16)) % 4294967296
end

local function taghash(tag)
  -- 32 bits of a keyed table's key for its bucket (low bits): longer than 4 bytes, it may be a
  -- fingerprint, whose bits cluster, so it is mixed (a 32-bit fingerprint is taken as it is)
  if #tag < 8 then return u32(tag, 1) end
  return fmix(bit_bxor(u32(tag, 1), fmix(u32(tag, #tag - 3))) % 4294967296)
end

local function address(t, h)
  local s = state(t)
  local m = 2 ^ s.L
  local a = h % m
  if a < s.p then a = h % (2 * m) end
  return a
end

local function page_of(h) return (h - h % 16777216) / 16777216 % PAGES end

-- keyed tables: the second half of a key's mix, its page, the quotient bits above a bucket's address

local function width(t, h)  -- the number of address bits of h's bucket
  local s = state(t)
  if h % 2 ^ s.L < s.p then return s.L + 1 end
  return s.L
end

local function mix2(h) return fmix(bit_bxor(h, 0x9e3779b9) % 4294967296) end

local QB, QTOP  -- the quotient bits a keyed record's tag holds when written (tests: fewer), 2 ^ QB

local function quotient(h, h2, a)
  -- the QB bits of the 64-bit mix h2 * 2^32 + h from bit a up, as a record's tag: sentinel bit QB set
  local q
  if a + QB <= 32 then q = floor(h / 2 ^ a) % QTOP
  elseif a >= 32 then q = floor(h2 / 2 ^ (a - 32)) % QTOP
  else q = floor(h / 2 ^ a) + (h2 % 2 ^ (a + QB - 32)) * 2 ^ (32 - a) end
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
    local s, pay = sbyte(recs, i), ssub(recs, i + 1, i + 4)
    if pay == ZERO4 then
      each(i, s, pay, u32(recs, i + 5))
      i = i + 10
    else
      each(i, s, pay, nil)
      i = i + 5
    end
  end
end

local PAGED  -- this call's chains read or written: PAGED[key][page] = {records, fields}

local function chain(key, page, R)
  -- the records of a page and its continuations (each full but the last): {string, fields}.
  -- One HGET a field (an HMGET of several costs as much a field: the listpack scan is most of a
  -- lookup, and a field asked for and absent is a whole scan)
  local known = PAGED[key] and PAGED[key][page]
  if known then return known[1], known[2] end
  local per = floor(PAGE / R) * R
  local parts, j = {}, 0
  while true do
    local v = rcall('HGET', key, fname(page + PAGES * j))
    if not v then break end
    parts[j + 1], j = v, j + 1
    if #v < per then break end
  end
  local recs = tconcat(parts)
  PAGED[key] = PAGED[key] or {}
  PAGED[key][page] = {recs, j, {}}
  return recs, j
end

local function memo(key, page)
  -- the lookups this call made in a chain as it is now ({} when unread; a write replaces it)
  local known = PAGED[key] and PAGED[key][page]
  return known and known[3] or {}
end

local function paged(key, page, recs, fields)
  -- a chain as this call wrote it
  PAGED[key] = PAGED[key] or {}
  PAGED[key][page] = {recs, fields, {}}
end

local function pack(recs, R)
  -- a page's records as the values of its fields: whole records, PAGE // R a field
  local per, out = floor(PAGE / R) * R, {}
  for i = 1, #recs, per do out[#out + 1] = ssub(recs, i, i + per - 1) end
  return out
end

local function write_chain(key, page, recs, R, had)
  -- store a page's records (one string) in fields page, page + 16, ... (had: its fields before)
  local values, args = pack(recs, R), {}
  for j, v in ipairs(values) do args[#args + 1] = fname(page + PAGES * (j - 1)); args[#args + 1] = v end
  if #args > 0 then rcall('HSET', key, unpack(args)) end
  if had > #values then
    local gone = {}
    for j = #values, had - 1 do gone[#gone + 1] = fname(page + PAGES * j) end
    rcall('HDEL', key, unpack(gone))
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
    chains[pg][floor(f / PAGES) + 1] = flat[i + 1]
  end
  local function put(side, pg, rec)
    side[pg] = side[pg] or {}
    side[pg][#side[pg] + 1] = rec
  end
  local function fresh(h, pay, pg, ext)
    -- the record of a key of mix h in the half it goes to, its tag at the width after the split
    local side = sides[(h % (2 * m) == s.p) and old or new]
    put(side, pg, schar(quotient(h, mix2(h), s.L + 1)) .. pay .. (ext or ''))
  end
  local used = {}  -- keys of an entry already given to a record whose bits ran out
  for pg, parts in pairs(chains) do
    scan_keyed(tconcat(parts), function(_, tag, pay, mark)
      if mark then
        fresh(mark, pay, pg, p32(mark) .. '\0')
      elseif tag >= 2 then
        put(sides[(tag % 2 == 0) and old or new], pg, schar(floor(tag / 2)) .. pay)
      else
        local id = u32(pay, 1)
        for _, k in ipairs(keys_of(t, id)) do
          local h = taghash(k)
          local u = id .. ':' .. k
          if not used[u] and h % m == s.p and floor(mix2(h) / 268435456) == pg then
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
  local flat = rcall('HGETALL', old)
  local sides = {[old] = {}, [new] = {}}
  if KEYED[t] then
    split_keyed(t, s, flat, sides, old, new)
  else
    for i = 2, #flat, 2 do
      local v = flat[i]
      for j = 1, #v, R do
        local rec = ssub(v, j, j + R - 1)
        local h = bandhash(t, v, j)
        local side = sides[(h % (2 * m) == s.p) and old or new]
        local pg = page_of(h)
        side[pg] = side[pg] or {}
        side[pg][#side[pg] + 1] = rec
      end
    end
  end
  rcall('DEL', old)
  PAGED[old], PAGED[new] = nil, nil
  for key, pages in pairs(sides) do
    for pg, recs in pairs(pages) do write_chain(key, pg, tconcat(recs), R, 0) end
  end
  s.p = s.p + 1
  if s.p == m then s.L, s.p = s.L + 1, 0 end
end

local DIRTY  -- the tables whose state this call changed

local function save(t)
  local s = LH[t]
  rcall('HSET', B .. 'lh', t, sformat('%d %d %d', s.L, s.p, s.n))
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
    args[#args + 1] = t; args[#args + 1] = sformat('%d %d %d', s.L, s.p, s.n)
  end
  if #args > 0 then rcall('HSET', B .. 'lh', unpack(args)) end
  return reply
end

local function spill_key(t, k) return B .. 'Z' .. t .. ':' .. tohex(k) end

local BANDED  -- BANDED[t][k]: {bucket key, page, banded, level, split pointer} of this call

local function band_page(t, k)
  -- a band table's bucket key, page, chain and fields for key k, and banded(s, i): is the band of
  -- the record at position i of s k? (kept for the call while the table does not split)
  local st, by = state(t), BANDED[t]
  if not by then by = {}; BANDED[t] = by end
  local c = by[k]
  if c and c[4] == st.L and c[5] == st.p then
    local recs, had = chain(c[1], c[2], W)
    return c[1], c[2], recs, had, c[3]
  end
  local h = bandhash(t, k, 1)
  local key, page = B .. t .. ':' .. address(t, h), page_of(h)
  local recs, had = chain(key, page, W)
  local words, banded = BANDW[t], nil
  local o1, m1 = words[1][1], words[1][2]
  local k1 = bit_band(u32(k, o1 + 1), m1)
  if #words == 1 then
    banded = function(s, i) return bit_band(u32(s, i + o1), m1) == k1 end
  else
    local ks = {}
    for j, w in ipairs(words) do ks[j] = bit_band(u32(k, w[1] + 1), w[2]) end
    banded = function(s, i)
      for j, w in ipairs(words) do
        if bit_band(u32(s, i + w[1]), w[2]) ~= ks[j] then return false end
      end
      return true
    end
  end
  by[k] = {key, page, banded, st.L, st.p}
  return key, page, recs, had, banded
end

local function locate(t, k)
  -- the bucket key, page, its chain {records, fields}, the payloads filed under k there and their
  -- positions, the tag a new record of k starts with ('' in a band table), and a keyed k's mix
  local R, found, at = TAG[t] + PAY[t], {}, {}
  if KEYED[t] then
    local h = taghash(k)
    local a, h2 = width(t, h), mix2(h)
    local key, page, q = B .. t .. ':' .. h % 2 ^ a, floor(h2 / 268435456), quotient(h, h2, a)
    local recs, had = chain(key, page, R)
    local known = memo(key, page)[k]
    if known then return key, page, recs, had, known[1], known[2], known[3], h end
    local i = 1
    while i + 4 <= #recs do
      local a, c, d, e, f = sbyte(recs, i, i + 4)
      if c + d + e + f == 0 then  -- a mark: two records, the second its mix
        if u32(recs, i + 5) == h then found[#found + 1] = ZERO4; at[#at + 1] = i end
        i = i + 10
      else
        -- tag_matches(a, q) inline (no call a record): a whole tag is q, or its known bits, those
        -- below its sentinel bit (top, found by comparisons: a is a byte), agree with q's
        local top = a
        if a < QTOP then
          if a >= 16 then
            if a >= 64 then top = a >= 128 and 128 or 64 else top = a >= 32 and 32 or 16 end
          elseif a >= 4 then top = a >= 8 and 8 or 4
          else top = a >= 2 and 2 or 1 end
        end
        if (a >= QTOP and a == q) or (a < QTOP and a - top == q % top) then found[#found + 1] = ssub(recs, i + 1, i + 4); at[#at + 1] = i end
        i = i + 5
      end
    end
    local tag = schar(q)
    memo(key, page)[k] = {found, at, tag}
    return key, page, recs, had, found, at, tag, h
  end
  local key, page, recs, had, banded = band_page(t, k)
  local known = memo(key, page)[k]
  if known then return key, page, recs, had, known[1], known[2], '' end
  local fb = FINDB[t]
  if fb then  -- the records holding the band's whole bytes where k has them (at a record's offset)
    local o, bytes, init = fb[1], ssub(k, fb[1] + 1, fb[1] + fb[2]), 1
    while true do
      local i = sfind(recs, bytes, init, true)
      if not i then break end
      local r = i - o
      if r >= 1 and (r - 1) % R == 0 and (fb[3] or banded(recs, r)) then
        found[#found + 1] = ssub(recs, r, r + R - 1); at[#at + 1] = r
      end
      init = i + 1
    end
  else
    for i = 1, #recs - R + 1, R do
      if banded(recs, i) then found[#found + 1] = ssub(recs, i, i + R - 1); at[#at + 1] = i end
    end
  end
  memo(key, page)[k] = {found, at}
  return key, page, recs, had, found, at, ''
end

local function spilled(t, k, found)
  -- k's payloads are in its sorted set (its mark is among found)
  for i = 1, #found do
    if found[i] == ZERO4 then return rcall('EXISTS', spill_key(t, k)) == 1 end
  end
  return false
end

local function inline(t, k, found, skip)
  -- the indices of found that are k's own ids in keyed table t: those (not the marks: ids start at
  -- 1) whose entries hold k; skip: an index left out
  local out = {}
  for i = 1, #found do
    local f = found[i]
    if i ~= skip and f ~= ZERO4 and holds(t, u32(f, 1), k) then out[#out + 1] = i end
  end
  return out
end

local function list(t, k)
  -- keyed k's ids: inline ones as one string, or nil and the key of the sorted set they spilled to
  local _, _, _, _, found = locate(t, k)
  if spilled(t, k, found) then return nil, spill_key(t, k) end
  local out = {}
  for _, i in ipairs(inline(t, k, found)) do out[#out + 1] = found[i] end
  return tconcat(out), nil
end

local function records(s, r)
  local out = {}
  for i = 1, #s, r do out[#out + 1] = ssub(s, i, i + r - 1) end
  return out
end

local function append(t, key, page, recs, had, rec)
  -- add record rec (its tag included) at the end of a chain of table t read by locate
  local per = floor(PAGE / (TAG[t] + PAY[t])) * (TAG[t] + PAY[t])  -- every field of a chain but its last is full
  local last = #recs - per * math.max(had - 1, 0)
  if had > 0 and last + #rec <= per then
    rcall('HSET', key, fname(page + PAGES * (had - 1)), ssub(recs, #recs - last + 1) .. rec)
  else
    rcall('HSET', key, fname(page + PAGES * had), rec)
    had = had + 1
  end
  paged(key, page, recs .. rec, had)
  grew(t, 1)
end

local function list_add(t, k, rec, score, scores)
  -- file id rec under keyed k (once); scores(recs) gives the scores of inline ids when they
  -- spill. Returns whether k had no ids before, and whether rec was added
  local key, page, recs, had, found, at, tag, h = locate(t, k)
  if spilled(t, k, found) then return false, rcall('ZADD', spill_key(t, k), 'NX', score, rec) == 1 end
  local mine = inline(t, k, found)
  for j = 1, #mine do if found[mine[j]] == rec then return false, false end end
  local R = TAG[t] + PAY[t]
  if #mine >= SPILL[t] then  -- spill: k's ids go to a sorted set, a mark stays
    local own = {}
    for j, i in ipairs(mine) do own[j] = found[i] end
    local args, s = {}, scores(own)
    for j, x in ipairs(own) do args[#args + 1] = s[j]; args[#args + 1] = x end
    args[#args + 1] = score; args[#args + 1] = rec
    rcall('ZADD', spill_key(t, k), unpack(args))
    for j = #mine, 1, -1 do
      local i = at[mine[j]]
      recs = ssub(recs, 1, i - 1) .. ssub(recs, i + R)
    end
    local mark = tag .. ZERO4 .. p32(h) .. '\0'
    write_chain(key, page, recs .. mark, R, had)
    grew(t, 1 - #mine)
    return false, true
  end
  append(t, key, page, recs, had, tag .. rec)
  return #mine == 0, true
end

local function list_remove(t, k, rec)
  -- remove id rec from keyed k's list: whether k has no ids now, whether rec was in it
  local key, page, recs, had, found, at = locate(t, k)
  local R, zero = TAG[t] + PAY[t], ZERO4
  local removed = nil
  if spilled(t, k, found) then
    local z = spill_key(t, k)
    removed = rcall('ZREM', z, rec) == 1
    if rcall('EXISTS', z) == 1 then return false, removed end
    rec = zero  -- the sorted set is gone: so is its mark
  end
  for i, f in ipairs(found) do
    if f == rec then
      local len = f == zero and 2 * R or R  -- a mark is two records
      write_chain(key, page, ssub(recs, 1, at[i] - 1) .. ssub(recs, at[i] + len), R, had)
      grew(t, -1)
      return rec == zero or #inline(t, k, found, i) == 0, removed == nil or removed
    end
  end
  return #found == 0, false
end

local function zeros(recs)
  local out = {}
  for i = 1, #recs do out[i] = 0 end
  return out
end

-- store: band tables, split -----------------------------------------------------------------------
-- A band key holding SPILL[t] fingerprints (limits.band_split, 32: clustered fingerprints sharing a
-- band) that gets one more moves them out of its page, where a mark (the key itself) stays, to the
-- sorted set '<base>Z<t>:<hex key>' (read whole, as schema 5 kept every crowded key). Once it holds
-- limits.band_node (128) it is split, if that spreads them (spreads: a tight crowd, a bit or two
-- apart, agrees on most parts: filed in every child, it would be read more, not less; asked again
-- each time they double), into a split node, the hash of the same name. Its children are masks
-- (kids): t's bits and one of PARTS[t] parts of the bits left. Two fingerprints within the
-- layout's distance (PARTS - 1) that agree on t's bits agree on one of those parts (pigeonhole),
-- so a fingerprint is filed under each child, in the field (child number, its key there) of the
-- node, and a query reads the field of each child under its own bits (one HGET each) and finds
-- every one. A field that fills up splits the same way: it becomes '' and its fingerprints go to
-- a node of its own, '<node>/<hex field>', down to limits.band_depth (3) levels below the band
-- (each level files a crowded fingerprint PARTS times: few levels, and only where a crowd is). A
-- crowd is read a few small fields deep instead of whole; a node or sorted set goes with its last
-- fingerprint (Redis deletes an emptied hash), and so does its mark.

local function kids(t)
  -- the child masks of band table (or mask) t (false: t is limits.band_depth (3) levels below a
  -- band, or fewer bits are left than parts), defined once a layout
  local c = KIDS[t]
  if c ~= nil then return c end
  local mine, rest, parts = {}, {}, PARTS[t]
  for _, b in ipairs(MASK[t]) do mine[b] = true end
  for b = 0, 8 * W - 1 do if not mine[b] then rest[#rest + 1] = b end end
  c = #rest >= parts and DEPTH[t] < LAYOUT.max_depth and {}
  local from = 1
  for j = 1, c and parts or 0 do  -- parts of the bits left, their widths differing by one at most
    local n = floor(#rest / parts) + (j <= #rest % parts and 1 or 0)
    local bits = {unpack(MASK[t])}
    for i = from, from + n - 1 do bits[#bits + 1] = rest[i] end
    from = from + n
    c[j] = t .. '.' .. (j - 1)
    define(LAYOUT, c[j], bits, parts, nil, DEPTH[t] + 1)
  end
  KIDS[t] = c
  return c
end

local function spreads(c, fps)
  -- would children c spread fingerprints fps: a query equal to one of them read, on average, less
  -- than half as many from the children (the sum over them of its key's count) as from the key? A
  -- tight crowd (fingerprints a bit or two apart) agrees on most parts: split, it would be read more
  -- and filed PARTS times over
  local sq = 0
  for _, ct in ipairs(c) do
    local n = {}
    for _, f in ipairs(fps) do
      local m = masked(ct, f)
      n[m] = (n[m] or 0) + 1
    end
    for _, v in pairs(n) do sq = sq + v * v end
  end
  return 2 * sq < #fps * #fps
end

local function due(n)
  -- is a key or field of n fingerprints, kept whole, to be asked whether a split spreads them? At
  -- limits.band_node (128), twice that, four times...
  local m = n / LAYOUT.node_at
  while m > 1 and m % 2 == 0 do m = m / 2 end
  return m == 1
end

local function subkey(c, t, k, q)
  -- the key of child c of t under which fingerprints within reach of key k (a probe: the query's
  -- band, or a neighbour of it) and query fingerprint q are filed: k's bits and q's in c's part
  local out, mc, mt = {}, BAND[c], BAND[t]
  for j = 1, #mc do
    local qw = u32(q, 4 * j - 3)
    out[j] = p32(bit_bor(bit_bxor(bit_band(qw, mc[j]), bit_band(qw, mt[j])), u32(k, 4 * j - 3)) % 4294967296)
  end
  return tconcat(out)
end

local function split_of(t, fps)
  -- the children of t if fps, kept whole under one of its keys, should split now
  local c = kids(t)
  return c and spreads(c, fps) and c
end

local node_add
node_add = function(node, t, fp)
  -- file fp in split node node (of a key of t) under each child: whether it was not there
  local added = false
  for j, c in ipairs(kids(t)) do
    local f = schar(j) .. masked(c, fp)
    local v = rcall('HGET', node, f)
    if v == '' then
      added = node_add(node .. '/' .. tohex(f), c, fp)
    elseif not (v and find_aligned(v, fp)) then
      v = (v or '') .. fp
      local all = due(#v / W - 1) and records(v, W)
      if all and split_of(c, all) then
        local sub = node .. '/' .. tohex(f)
        for _, g in ipairs(all) do node_add(sub, c, g) end
        v = ''
      end
      rcall('HSET', node, f, v)
      added = true
    end
  end
  return added
end

local function node_remove(node, t, fp)
  -- remove fp from split node node (of a key of t): whether it was there
  local removed = false
  for j, c in ipairs(kids(t)) do
    local f = schar(j) .. masked(c, fp)
    local v = rcall('HGET', node, f)
    if v == '' then
      local sub = node .. '/' .. tohex(f)
      removed = node_remove(sub, c, fp)
      if rcall('EXISTS', sub) == 0 then rcall('HDEL', node, f) end
    elseif v then
      local i = find_aligned(v, fp)
      if i then
        v = ssub(v, 1, i - 1) .. ssub(v, i + W)
        if v == '' then rcall('HDEL', node, f) else rcall('HSET', node, f, v) end
        removed = true
      end
    end
  end
  return removed
end

local UNPACK = {}  -- UNPACK[m]: the struct format of m 64-bit fingerprints as 2m big-endian words

local function scan(v, q, near, limit, out)
  -- the fingerprints packed in v within limit of query fingerprint q (near: their distance) into
  -- out, all of them without near; 64-bit ones compared by their words, unpacked 100 at a time, and
  -- a string made only for those kept (most of a crowd's field is farther than limit)
  if not near or W ~= 8 then
    for i = 1, #v, W do
      local fp = ssub(v, i, i + W - 1)
      if not near or near(fp) <= limit then out[#out + 1] = fp end
    end
    return
  end
  local f1, f2 = sunpack('>I4I4', q)
  local i, left = 1, #v / 8
  while left > 0 do
    local m = left < 100 and left or 100
    if not UNPACK[m] then UNPACK[m] = '>' .. string.rep('I4', 2 * m) end
    local w = {sunpack(UNPACK[m], v, i)}
    for j = 1, 2 * m, 2 do
      local d, x = 0, bit_bxor(w[j], f1)
      while x ~= 0 and d <= limit do d, x = d + 1, bit_band(x, x - 1) end
      x = bit_bxor(w[j + 1], f2)
      while x ~= 0 and d <= limit do d, x = d + 1, bit_band(x, x - 1) end
      if d <= limit then out[#out + 1] = ssub(v, i + 4 * (j - 1), i + 4 * j + 3) end
    end
    i, left = i + 8 * m, left - m
  end
end

local function node_read(node, t, k, q, near, limit, out)
  -- the fingerprints of split node node (of key k of t) a query for q reads: each child's field
  -- under q's bits; into out as band_read
  for j, c in ipairs(kids(t)) do
    local ck = subkey(c, t, k, q)
    local f = schar(j) .. ck
    local v = rcall('HGET', node, f)
    if v == '' then
      node_read(node .. '/' .. tohex(f), c, ck, q, near, limit, out)
    elseif v then
      scan(v, q, near, limit, out)
    end
  end
end

local function moved(t, k, found)
  -- have band key k's fingerprints moved (its mark among found), and where: 'hash' (its split
  -- node) or 'zset' (its sorted set); nil when not. A fingerprint equal to its key (no bit
  -- outside the band) is told from the mark by the absence of both
  for i = 1, #found do
    if found[i] == k then
      local kind = rcall('TYPE', spill_key(t, k)).ok
      if kind == 'hash' or kind == 'zset' then return kind end
      return nil
    end
  end
  return nil
end

local function band_add(t, k, fp)
  -- file fingerprint fp under key k of band table t, once: whether it was added
  local key, page, recs, had, found, at = locate(t, k)
  local to = moved(t, k, found)
  if not to then  -- most keys: a record in the page (its spill key not even named: tohex costs)
    for i = 1, #found do if found[i] == fp then return false end end
    if #found < SPILL[t] then
      append(t, key, page, recs, had, fp)
      return true
    end
  end
  local z = spill_key(t, k)
  if to == 'hash' then return node_add(z, t, fp) end
  local all
  if to == 'zset' then
    if rcall('ZADD', z, 'NX', 0, fp) == 0 then return false end
    if not due(rcall('ZCARD', z) - 1) then return true end
    all = rcall('ZRANGE', z, 0, -1)
  else  -- the key's fingerprints leave its page for its sorted set (or a node, if that many split)
    all = {fp}
    for i = #found, 1, -1 do
      all[#all + 1] = found[i]
      recs = ssub(recs, 1, at[i] - 1) .. ssub(recs, at[i] + W)
    end
    write_chain(key, page, recs .. k, W, had)
    grew(t, 1 - #found)
  end
  if due(#all - 1) and split_of(t, all) then
    if to then rcall('DEL', z) end
    for _, f in ipairs(all) do node_add(z, t, f) end
  elseif not to then
    local args = {}
    for _, f in ipairs(all) do args[#args + 1] = 0; args[#args + 1] = f end
    rcall('ZADD', z, unpack(args))
  end
  return true
end

local function band_remove(t, k, fp)
  -- remove fingerprint fp from key k of band table t: whether it was there
  local key, page, recs, had, found, at = locate(t, k)
  local to, removed = moved(t, k, found), false
  if to then
    local z = spill_key(t, k)
    if to == 'zset' then removed = rcall('ZREM', z, fp) == 1 else removed = node_remove(z, t, fp) end
    if rcall('EXISTS', z) == 1 then return removed end
  end
  for i = 1, #found do  -- fp, or the mark of a key whose last fingerprint went
    if found[i] == (to and k or fp) then
      write_chain(key, page, ssub(recs, 1, at[i] - 1) .. ssub(recs, at[i] + W), W, had)
      grew(t, -1)
      return true
    end
  end
  return removed
end

local function band_read(t, k, q, near, limit, out)
  -- the fingerprints under key k of band table t into out (with near(fp), only those within limit);
  -- a split key's from its node, under query fingerprint q's bits
  local _, _, _, _, found = locate(t, k)
  local to = moved(t, k, found)
  if to == 'hash' then return node_read(spill_key(t, k), t, k, q, near, limit, out) end
  if to == 'zset' then found = rcall('ZRANGE', spill_key(t, k), 0, -1) end
  for i = 1, #found do
    local fp = found[i]
    if not near or (#fp == W and near(fp) <= limit) then out[#out + 1] = fp end
  end
end

-- store: entries --------------------------------------------------------------------------------
-- An entry is one binary record (see redis_keys.py), element id % 64 of the list '<base>e:<id // 64>'
-- (a removed entry's element is empty; a list left without records is deleted).

local SLOTS = 64  -- entries a list
local F_T, F_B, F_NUM, F_NUMTEXT, F_H, F_U, F_N, F_PENDING = 1, 2, 4, 8, 16, 32, 64, 128
-- the URL's scheme a record leaves out (byte 10, bits 5-6; bit 7: the title in UTF-16-BE)
local SCHEMES = {[0] = '', 'https://', 'http://'}

local function ekey(id) return B .. 'e:' .. floor(id / SLOTS) end

local FIRST  -- entries' records read or written in this call (false: none)

local function first_chunk(id)
  -- the entry's record (raw bytes), or nil (a removed entry's element is empty)
  local first = FIRST[id]
  if first == nil then
    first = rcall('LINDEX', ekey(id), id % SLOTS) or false
    if first == '' then first = false end
    FIRST[id] = first
  end
  return first or nil
end

local raw_record = first_chunk

local function put_record(id, r)
  -- the entry's record as element id % SLOTS of its list (padded with empty elements up to it)
  -- Ids come in order, so the list mostly holds the elements before it: one RPUSH, and only when
  -- the list was shorter (ids used by failed calls) or longer is the element taken back and placed
  local key, slot = ekey(id), id % SLOTS
  local n = rcall('RPUSH', key, r) - 1  -- the elements it held
  if n ~= slot then
    rcall('RPOP', key)
    if n > slot then
      rcall('LSET', key, slot, r)
    else
      local args = {}
      for i = 1, slot - n do args[i] = '' end
      args[#args + 1] = r
      rcall('RPUSH', key, unpack(args))
    end
  end
  FIRST[id] = r
end

local function drop_record(id)
  -- empty the entry's element; a list left with no record is deleted
  local key = ekey(id)
  rcall('LSET', key, id % SLOTS, '')
  FIRST[id] = false
  if #rcall('LPOS', key, '', 'COUNT', 0) == rcall('LLEN', key) then rcall('DEL', key) end
end

local function bad(id)
  return redis.error_reply('scrapy-simhash: entry ' .. id .. ' is unreadable (not a record of ours)')
end

local function flag(flags, f) return bit_band(flags, f) ~= 0 end

local function decode(id, r)
  -- {seen, flags, nsent, t, b, m (text), x (raw hashes), h, u}; raises when r is not ours
  if #r < 10 then error(bad(id)) end
  local e = {id = id}
  local ok, err = pcall(function()
    local seen, flags, nsent, pos = sunpack('>dBB', r)
    e.seen, e.flags = seen, flags
    if flag(flags, F_T) then e.t = ssub(r, pos, pos + W - 1); pos = pos + W end
    if flag(flags, F_B) then e.b = ssub(r, pos, pos + W - 1); pos = pos + W end
    if flag(flags, F_NUM) then
      local n = sbyte(r, pos); pos = pos + 1
      local words = {}
      for i = 1, n do words[i] = string.format('%08x', u32(r, pos)); pos = pos + 4 end
      e.m = tconcat(words, ' ')
    elseif flag(flags, F_NUMTEXT) then
      local n = sbyte(r, pos) * 256 + sbyte(r, pos + 1)
      e.m = ssub(r, pos + 2, pos + 1 + n); pos = pos + 2 + n
    end
    local more = nsent  -- the byte also holds the URL's scheme and the title's encoding
    nsent = more % 32
    e.nsent = nsent
    e.x = {}
    for i = 1, nsent do e.x[i] = ssub(r, pos, pos + 7); pos = pos + 8 end
    if flag(flags, F_H) then e.h = ssub(r, pos, pos + 7); pos = pos + 8 end
    if flag(flags, F_U) then
      local n = sbyte(r, pos)
      if n >= 128 then n = (n - 128) * 256 + sbyte(r, pos + 1); pos = pos + 1 end
      e.u = SCHEMES[floor(more / 32) % 4] .. ssub(r, pos + 1, pos + n); pos = pos + 1 + n
    end
    if pos - 1 > #r then error('truncated') end
  end)
  if not ok then error(bad(id)) end
  return e
end

local CACHE

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
  return (sunpack('>d', first))
end

local function seens(recs)
  local out = {}
  for i, rec in ipairs(recs) do out[i] = seen_of(u32(rec, 1)) end
  return out
end

local function url_tag(url) return unhex(ssub(redis.sha1hex(url), 1, 16)) end

holds = function(t, id, k)
  -- a keyed table's verification: the title/body fingerprint (in the record's first chunk), a
  -- sampled sentence hash, or the URL digest of entry id is k (false when the entry is gone)
  if t == 'th' or t == 'bh' then
    local first = first_chunk(id)
    if not first then return false end
    if #first < 10 then error(bad(id)) end
    local flags, pos = sbyte(first, 9), 11
    if t == 'bh' then
      if flag(flags, F_T) then pos = pos + W end
      if not flag(flags, F_B) then return false end
    elseif not flag(flags, F_T) then
      return false
    end
    return ssub(first, pos, pos + W - 1) == k
  end
  if t == 'sh' then  -- most ids found under a 1-byte tag are others': a plain search rules them out
    local r = first_chunk(id)
    if not r then return false end
    if not sfind(r, k, 11, true) then return false end
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
  return string.format('%.0f', floor(num(seen) / 3600))
end

-- store: candidates, holders, sentence_holders, insert, record ----------------------------------

local function candidates(probes, fp, near, k)
  -- stored fingerprints sharing a band with query fingerprint fp (each probe {band table, key}
  -- once; members may repeat); with near(fp) (its distance), only those within k. The band's
  -- records are found by locate, which keeps them for this call: an insert that follows files the
  -- new fingerprint under the same keys and finds them there, not by a second scan of the page
  local out = {}
  for j = 1, #probes do band_read(probes[j][1], probes[j][2], fp, near, k, out) end
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
    rows = rcall('ZRANGEBYSCORE', z, nb, '+inf', 'WITHSCORES', 'LIMIT', offset, limit)
  else
    rows = rcall('ZRANGEBYSCORE', z, nb, '+inf', 'WITHSCORES', 'LIMIT', offset, -1)
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
    elseif rcall('ZCARD', z) < L.sentence_max_holders then
      local flat = rcall('ZRANGEBYSCORE', z, nb, '+inf', 'WITHSCORES')
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
    local c, a, b, d = sbyte(s, i, i + 3)
    local cp
    if c < 128 then cp, i = c, i + 1
    elseif c < 224 then cp, i = (c % 32) * 64 + a % 64, i + 2
    elseif c < 240 then cp, i = ((c % 16) * 64 + a % 64) * 64 + b % 64, i + 3
    else cp, i = (((c % 8) * 64 + a % 64) * 64 + b % 64) * 64 + d % 64, i + 4 end
    if cp >= 65536 then
      cp = cp - 65536
      out[#out + 1] = spack('>HH', 55296 + floor(cp / 1024), 56320 + cp % 1024)
    else
      out[#out + 1] = spack('>H', cp)
    end
  end
  return tconcat(out)
end

local function encode(e, seen_at, stored, pending)
  -- the record of a new entry (layout: redis_keys.py)
  local flags, parts = 0, {}
  if e.title_fp then flags = flags + F_T; parts[#parts + 1] = e.title_fp end
  if e.body_fp then flags = flags + F_B; parts[#parts + 1] = e.body_fp end
  if e.numbers then
    local words = split(e.numbers)
    local packed = #words < 256
    for _, w in ipairs(words) do packed = packed and #w == 8 and sfind(w, '^[0-9a-f]+$') ~= nil end
    if packed then
      flags = flags + F_NUM
      parts[#parts + 1] = schar(#words)
      for _, w in ipairs(words) do parts[#parts + 1] = unhex(w) end
    else
      flags = flags + F_NUMTEXT
      parts[#parts + 1] = spack('>H', #e.numbers) .. e.numbers
    end
  end
  for _, h in ipairs(stored) do parts[#parts + 1] = h end
  if e.short_body then flags = flags + F_H; parts[#parts + 1] = e.short_body end
  local more = #stored  -- byte 10: the sentence hashes stored (< 32), the URL's scheme, the title's encoding
  if more >= 32 then error(redis.error_reply('scrapy-simhash: at most 31 sentence hashes an entry')) end
  if e.url then
    local url = e.url
    for code = 1, 2 do
      if ssub(url, 1, #SCHEMES[code]) == SCHEMES[code] then
        url, more = ssub(url, #SCHEMES[code] + 1), more + 32 * code
        break
      end
    end
    if #url >= 32768 then error(redis.error_reply('scrapy-simhash: a URL of ' .. #url .. ' bytes is too long')) end
    flags = flags + F_U
    parts[#parts + 1] = (#url < 128 and schar(#url) or spack('>H', 32768 + #url)) .. url
  end
  if e.title then  -- the record's last field: its length is the record's
    local wide = utf16(e.title)
    flags = flags + F_N
    if #wide < #e.title then parts[#parts + 1], more = wide, more + 128 else parts[#parts + 1] = e.title end
  end
  if pending then flags = flags + F_PENDING end
  local body = tconcat(parts)
  if #body > 65525 then error(redis.error_reply('scrapy-simhash: an entry of ' .. #body .. ' bytes is too long')) end
  return spack('>dBB', num(seen_at), flags, more) .. body
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

local function own_probes(q)
  -- a check's probes when the query has none (its layout probes its own bands: redis_keys.py):
  -- {band table, key} for each band of each fingerprint, the key it is filed under
  local out = {t = {}, b = {}}
  for _, tier in ipairs({{'t', q.title_fp}, {'b', q.body_fp}}) do
    local tc, fp = tier[1], tier[2]
    if fp then
      local tables = BANDS[tc]
      for n = 1, #tables do out[tc][n] = {tables[n], masked(tables[n], fp)} end
    end
  end
  return out
end

local function insert(e, seen_at, nstore)
  -- add an entry {title_fp, body_fp, url, title, numbers, sentences, short_body, owner}; returns its id
  local id = rcall('INCR', B .. 'seq')
  if id >= 4294967296 then return error(redis.error_reply('scrapy-simhash: the namespace ran out of entry ids')) end
  local idb = p32(id)
  local stored = {}
  for i = 1, math.min(#(e.sentences or {}), nstore) do stored[i] = e.sentences[i] end
  put_record(id, encode(e, seen_at, stored, e.owner ~= nil))
  rcall('INCR', B .. 'n')
  local hour = hour_of(seen_at)
  if rcall('APPEND', B .. 't:' .. hour, idb) == 4 then
    rcall('ZADD', B .. 'hours', hour, hour)
    -- the hour before is complete: written again at its length (APPEND leaves up to as much again free)
    local before = rcall('ZREVRANGEBYSCORE', B .. 'hours', '(' .. hour, '-inf', 'LIMIT', 0, 1)[1]
    if before then
      local v = rcall('GET', B .. 't:' .. before)
      if v then rcall('SET', B .. 't:' .. before, v) end
    end
  end
  if e.url then list_add('u', url_tag(e.url), idb, 0, zeros) end
  if e.owner then  -- pending until its item is delivered (or released)
    rcall('SADD', B .. 'pending:' .. e.owner, id)
    rcall('SADD', B .. 'owners', e.owner)
  end
  for _, h in ipairs(stored) do list_add('sh', h, idb, seen_at, seens) end
  local new_bands = 0
  for _, tier in ipairs({{'t', e.title_fp}, {'b', e.body_fp}}) do
    local tc, fp = tier[1], tier[2]
    if fp and list_add(tc .. 'h', fp, idb, seen_at, seens) then
      for _, t in ipairs(BANDS[tc]) do
        if band_add(t, masked(t, fp), fp) then new_bands = new_bands + 1 end
      end
    end
  end
  if new_bands > 0 then rcall('INCRBY', B .. 'nbands', new_bands) end
  return id
end

local function record(q, tc, m, status, seen_at)
  -- the latest decision about q.url
  local dk = B .. 'd:' .. q.url
  rcall('DEL', dk)
  local args = {'status', status, 'tier', tc, 'distance', m.d, 'original', m.id, 'decided_at', seen_at}
  if q.title then args[#args + 1] = 'title'; args[#args + 1] = q.title end
  rcall('HSET', dk, unpack(args))
  rcall('ZADD', B .. 'decided', seen_at, q.url)
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
  for _, other in ipairs(candidates(keys, fp, d, k)) do  -- one distance function (a closure) for both
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
      if mine[h] and sbyte(h, 1) >= 128 then sentences = sentences - 1 end
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
  local v = rcall('GET', key)
  local i = v and find_aligned(v, idb)
  if not i then return end
  v = ssub(v, 1, i - 1) .. ssub(v, i + 4)
  if v == '' then
    rcall('DEL', key)
    rcall('ZREM', B .. 'hours', hour)
  else
    rcall('SET', key, v)
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
  rcall('DECR', B .. 'n')
  if flag(e.flags, F_PENDING) then
    for _, owner in ipairs(rcall('SMEMBERS', B .. 'owners')) do rcall('SREM', B .. 'pending:' .. owner, id) end
  end
  for _, h in ipairs(e.x) do list_remove('sh', h, idb) end
  local dropped = 0
  for _, tier in ipairs({{'t', e.t}, {'b', e.b}}) do
    local fp = tier[2]
    if fp and (list_remove(tier[1] .. 'h', fp, idb)) then
      for _, t in ipairs(BANDS[tier[1]]) do
        if band_remove(t, masked(t, fp), fp) then dropped = dropped + 1 end
      end
    end
  end
  if dropped > 0 then rcall('DECRBY', B .. 'nbands', dropped) end
  if e.u then list_remove('u', url_tag(e.u), idb) end
  if not whole_hour then drop_from_hour(hour_of(e.seen), idb) end
  return 1
end

local function forget_decision(url)
  rcall('DEL', B .. 'd:' .. url)
  rcall('ZREM', B .. 'decided', url)
end

local function url_ids(url)
  -- ids of the entries with this URL
  local v, z = list('u', url_tag(url))
  local out = {}
  for _, rec in ipairs(v and records(v, 4) or rcall('ZRANGE', z, 0, -1)) do
    local e = fields(u32(rec, 1))
    if e and e.u == url then out[#out + 1] = e.id end
  end
  return out
end

local function purge(older, batch)
  -- remove up to batch entries first seen before older: whole time buckets first (oldest first),
  -- then the entries of the bucket older falls in. Returns {removed, more}
  local n, last = 0, hour_of(older)
  for _, hour in ipairs(rcall('ZRANGEBYSCORE', B .. 'hours', '-inf', last)) do
    local key = B .. 't:' .. hour
    local v = rcall('GET', key) or ''
    if hour ~= last then
      local take = math.min(#v / 4, batch - n)
      for i = #v - 4 * take + 1, #v, 4 do n = n + remove(u32(v, i), true) end
      if take == #v / 4 then
        rcall('DEL', key)
        rcall('ZREM', B .. 'hours', hour)
      else
        rcall('SET', key, ssub(v, 1, #v - 4 * take))
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
          keep[#keep + 1] = ssub(v, i, i + 3)
        end
      end
      if #keep == 0 then
        rcall('DEL', key)
        rcall('ZREM', B .. 'hours', hour)
      elseif #keep < #v / 4 then
        rcall('SET', key, tconcat(keep))
      end
    end
    if n >= batch then return {n, 1} end
  end
  return {n, 0}
end

local function query(q, checked)
  -- the query with its fingerprints, sentence hashes, digest and probe keys as raw bytes (checked:
  -- a check's query, whose probes are its bands' keys when it sends none)
  if q.title_fp then q.title_fp = unhex(q.title_fp) end
  if q.body_fp then q.body_fp = unhex(q.body_fp) end
  if q.short_body then q.short_body = unhex(q.short_body) end
  local sentences = {}
  for i, h in ipairs(q.sentences or {}) do sentences[i] = unhex(h) end
  q.sentences = sentences
  if checked and not q.probe then q.probe = own_probes(q) else q.probe = probes(q.probe) end
  return q
end

local function token_keys(token, ttl)
  -- the time buckets of request tokens that may hold token (newest first), and its record tag: the
  -- token's SHA-1 bytes 2-7 (byte 1 picks the bucket's 1/16: 52 bits of the digest in all)
  local digest = unhex(ssub(redis.sha1hex(token), 1, 16))
  local now = tonumber(rcall('TIME')[1])
  local keys = {}
  for m = floor(now / 60), floor((now - ttl) / 60), -1 do
    keys[#keys + 1] = B .. 'r:' .. m .. ':' .. sbyte(digest, 1) % 16
  end
  return keys, ssub(digest, 2, 7)
end

-- redis: operations ----------------------------------------------------------------------------

local COMMON, NCOMMON = {}, 0  -- decoded common arguments and their layouts, by their exact text

local function begin(argv)
  -- a call's state: its own argument (argv[1]) and the common one (argv[2]: base, limits, mark),
  -- decoded once a text when the script stays loaded (a Redis function), each call's tables fresh
  rcall = redis.call
  A = cjson.decode(argv[1])
  local c = COMMON[argv[2]]
  if not c then
    local h = cjson.decode(argv[2])
    local lim = h.limits or {}
    c = {h.base, lim, h.mark, layout_of(lim)}
    if NCOMMON >= 16 then COMMON, NCOMMON = {}, 0 end
    COMMON[argv[2]], NCOMMON = c, NCOMMON + 1
  end
  B, L, MARK = c[1], c[2], c[3]
  W, QB = L.fp_bytes or 8, L.tag_bits or 7
  QTOP = 2 ^ QB
  local y = c[4]
  BAND, BANDW, BANDS, FINDB, TAG, PAY, SPILL = y.band, y.bandw, y.bands, y.findb, y.tag, y.pay, y.spill
  MASK, PARTS, KIDS, DEPTH, LAYOUT = y.mask, y.parts, y.kids, y.depth, y
  LH, PAGED, DIRTY, BANDED, FIRST, CACHE = {}, {}, {}, {}, {}, {}
end

local function run()
local op = A.op
if MARK and not (op == 'check' and A.token) then
  local now = rcall('GET', B .. 'meta')
  if now ~= MARK then return lost(now) end
end
if op == 'check' then
  -- an added outcome is remembered under the request token: a retry gets its entry back
  local tkeys, tag, tokens
  if A.token then
    tkeys, tag = token_keys(A.token, A.token_ttl)
    local got = rcall('MGET', B .. 'meta', unpack(tkeys))
    if MARK and got[1] ~= MARK then return lost(got[1]) end
    for j = 1, #tkeys do
      local v = got[j + 1]
      local i = v and find_aligned(v, tag, 10)
      if i then return {'added', u32(v, i + 6)} end
    end
    tokens = got[2]
  end
  if A.q.owner then rcall('SET', B .. 'alive:' .. A.q.owner, '1', 'EX', A.lease) end
  local reply = check_and_add(query(A.q, true), A.flagged or {})
  if A.token and reply[1] == 'added' then
    -- written whole at its length (APPEND would leave up to as much again free)
    -- (the bucket's expiry set when it is made, kept when it grows)
    if tokens then rcall('SET', tkeys[1], tokens .. tag .. p32(reply[2]), 'KEEPTTL')
    else rcall('SET', tkeys[1], tag .. p32(reply[2]), 'EX', A.token_ttl + 60) end
  end
  return flush(reply)
elseif op == 'peek' then
  local tc, m = peek(query(A.q, true))
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
      for _, url in ipairs(rcall('ZRANGEBYSCORE', B .. 'decided', '-inf', '(' .. A.value)) do
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
  local n, owners = 0, rcall('SMEMBERS', B .. 'owners')
  for _, id in ipairs(A.ids) do
    for _, owner in ipairs(owners) do n = n + rcall('SREM', B .. 'pending:' .. owner, id) end
  end
  return n
elseif op == 'release' then
  -- ids: pending entries whose items were dropped downstream; or owner: every pending entry of
  -- a dead owner. {removed, 0} as 'remove'
  local n = 0
  if A.owner then
    for _, id in ipairs(rcall('SMEMBERS', B .. 'pending:' .. A.owner)) do n = n + remove(tonumber(id)) end
    rcall('DEL', B .. 'pending:' .. A.owner)
    rcall('SREM', B .. 'owners', A.owner)
  else
    local owners = rcall('SMEMBERS', B .. 'owners')
    for _, id in ipairs(A.ids) do
      for _, owner in ipairs(owners) do
        if rcall('SISMEMBER', B .. 'pending:' .. owner, id) == 1 then n = n + remove(id); break end
      end
    end
  end
  return flush({n, 0})
elseif op == 'heartbeat' then
  rcall('SET', B .. 'alive:' .. A.owner, '1', 'EX', A.lease)
  return 1
elseif op == 'records' then
  -- ids -> {id, record or false, ...}
  local out = {}
  for _, id in ipairs(A.ids) do out[#out + 1] = id; out[#out + 1] = raw_record(id) or false end
  return out
elseif op == 'bucket' then
  -- the time bucket hour: {id, first seen (repr-exact: 8 bytes), ...} packed as 12-byte records
  local v = rcall('GET', B .. 't:' .. A.hour) or ''
  local out = {}
  for i = 1, #v, 4 do
    local id = u32(v, i)
    local first = first_chunk(id)
    if first then out[#out + 1] = ssub(v, i, i + 3) .. ssub(first, 1, 8) end
  end
  return tconcat(out)
elseif op == 'span' then
  -- {oldest, newest} first-seen times (8-byte doubles), or {} when empty
  local hours = rcall('ZRANGE', B .. 'hours', 0, 0)
  if #hours == 0 then return {} end
  local out = {}
  for j, hour in ipairs({hours[1], rcall('ZRANGE', B .. 'hours', -1, -1)[1]}) do
    local v = rcall('GET', B .. 't:' .. hour) or ''
    local best = nil
    for i = 1, #v, 4 do
      local s = seen_of(u32(v, i))
      if best == nil or (j == 1 and s < best) or (j == 2 and s > best) then best = s end
    end
    out[j] = spack('>d', best)
  end
  return out
elseif op == 'reband' then
  -- the fingerprints of entries A.from .. A.to (ids; removed ones skipped) filed under the band
  -- tables of this call's layout (redis_reband.py builds a new generation's, the old one serving
  -- until it is done): {entries read, band members added}
  local n, added = 0, 0
  for id = A.from, A.to do
    local e = fields(id)
    if e then
      n = n + 1
      for _, tier in ipairs({{'t', e.t}, {'b', e.b}}) do
        local fp = tier[2]
        if fp then
          for _, t in ipairs(BANDS[tier[1]]) do
            if band_add(t, masked(t, fp), fp) then added = added + 1 end
          end
        end
      end
    end
  end
  return flush({n, added})
elseif op == 'bands' then
  -- how many band members the tier's probes of fingerprint fp find (tests: one member per
  -- fingerprint, not per entry)
  return #candidates(query({probe = {[A.tc] = A.probes}}).probe[A.tc], unhex(A.fp))
end
return redis.error_reply('scrapy-simhash: unknown operation ' .. tostring(op))
end

-- redis: the entry point, as redis.py appends it: 'return main(ARGV)' for EVAL, or the
-- registration of a Redis function (whose library keeps COMMON between calls)
local function main(argv)
  begin(argv)
  return run()
end
