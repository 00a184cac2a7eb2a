--[[ scrapy-simhash: the server-side half of the Redis index (see redis.py for the keys).

The tier rule here is a section-by-section PORT of scrapy_simhash/index/rule.py: each section
marked "rule.py: <name>" does what the Python function of that name does, in the same order with
the same ties, and tests/test_rule.py runs both on one verdict table. Sections marked "store" are
the rule's Store operations as Redis holds them; sections marked "redis" exist only here (request
tokens, maintenance). Change rule.py first, then its port here.

Called as EVALSHA <sha> 1 <prefix>:{<ns>}:seq <json>: KEYS[1] routes the call in a cluster (every
key of a namespace shares its hash tag), ARGV[1] is one JSON object, decoded once:
  op      'check' | 'peek' | 'lookup' | 'add' | 'remove' | 'dropbands' | 'deliver' | 'release' |
          'heartbeat'
  base    the namespace's key base, '<prefix>:{<ns>}:'
  limits  the constants of rule.py/signatures.py: numbers_max, sentences_stored,
          sentence_body_distance, sentence_max_holders, title_body_distance
  marked  true: the namespace's marker key ('<base>meta', set at open) must exist
  q       (check, peek) the query: title_fp/body_fp (fixed-width hex, absent when None), title_k,
          body_k, not_before/seen_at (scores as strings: Lua numbers are doubles), url, title,
          numbers (absent when None), title_numbers, sentences (sorted, distinct),
          sentences_shared, short_body (absent when None), figures (boolean),
          keys = {t = {band keys}, b = {band keys}} (computed in Python)
  flagged (check) {t = true, b = true, s = true}: tiers recorded as 'flagged'
  token, token_ttl (check) the request token and how long an added outcome is remembered
Fingerprints never become Lua numbers: distances are computed 32 bits at a time from hex.
]]

local A = cjson.decode(ARGV[1])
local B, L = A.base, A.limits or {}

-- redis: the namespace's marker (set at open) is gone: the server lost the index's keys
if A.marked and redis.call('EXISTS', B .. 'meta') == 0 then
  return redis.error_reply('scrapy-simhash: the index lost its keys (the server was restarted without '
    .. 'persistence, or evicted keys): its answers would be wrong; reopen it')
end

-- store: helpers -------------------------------------------------------------------------------

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

local function by_seen(x, y)  -- earliest first seen, then lowest id (ids are zero-padded)
  if x.seen ~= y.seen then return x.seen < y.seen end
  return x.id < y.id
end

-- store: candidates, holders, sentence_holders, insert, record ----------------------------------

local function candidates(keys)
  -- stored fingerprints sharing a band with the query's (each band key once; members may repeat)
  local out = {}
  for _, key in ipairs(keys) do
    for _, m in ipairs(redis.call('SMEMBERS', B .. key)) do out[#out + 1] = m end
  end
  return out
end

local function holders(tc, fp, nb, limit)
  -- entries holding exactly fp, first seen >= nb, earliest first: {id, seen}; all when limit is nil
  local rows
  if limit then
    rows = redis.call('ZRANGEBYSCORE', B .. tc .. 'f:' .. fp, nb, '+inf', 'WITHSCORES', 'LIMIT', 0, limit)
  else
    rows = redis.call('ZRANGEBYSCORE', B .. tc .. 'f:' .. fp, nb, '+inf', 'WITHSCORES')
  end
  local out = {}
  for j = 1, #rows, 2 do out[#out + 1] = {id = rows[j], seen = tonumber(rows[j + 1])} end
  return out
end

local function sentence_holders(hashes, nb)
  -- {id, seen, shared, stored} of entries holding some of hashes, earliest first; a hash held by
  -- sentence_max_holders entries or more (expired ones included) is left out
  local count, seen, out = {}, {}, {}
  for _, h in ipairs(hashes) do
    local key = B .. 'sh:' .. h
    if redis.call('ZCARD', key) < L.sentence_max_holders then
      local rows = redis.call('ZRANGEBYSCORE', key, nb, '+inf', 'WITHSCORES')
      for j = 1, #rows, 2 do
        count[rows[j]] = (count[rows[j]] or 0) + 1
        seen[rows[j]] = tonumber(rows[j + 1])
      end
    end
  end
  for id, c in pairs(count) do
    local x = redis.call('HGET', B .. 'e:' .. id, 'x')
    out[#out + 1] = {id = id, seen = seen[id], shared = c, stored = #split(x or '')}
  end
  table.sort(out, by_seen)
  return out
end

local function insert(e, seen_at, nstore)
  -- add an entry {title_fp, body_fp, url, title, numbers, sentences, keys}; returns its id
  local id = redis.call('INCR', B .. 'seq')
  local member = string.format('%015d', id)
  local ek = B .. 'e:' .. member
  redis.call('HSET', ek, 's', seen_at)
  if e.url then redis.call('HSET', ek, 'u', e.url); redis.call('SADD', B .. 'u:' .. e.url, member) end
  if e.title then redis.call('HSET', ek, 'n', e.title) end
  if e.numbers then redis.call('HSET', ek, 'm', e.numbers) end
  if e.short_body then redis.call('HSET', ek, 'h', e.short_body) end
  if e.owner then  -- pending until its item is delivered (or released)
    redis.call('HSET', ek, 'o', e.owner)
    redis.call('SADD', B .. 'pending:' .. e.owner, member)
    redis.call('SADD', B .. 'owners', e.owner)
  end
  local stored = {}
  for i = 1, math.min(#(e.sentences or {}), nstore) do stored[i] = e.sentences[i] end
  if #stored > 0 then
    redis.call('HSET', ek, 'x', table.concat(stored, ' '))
    for _, h in ipairs(stored) do redis.call('ZADD', B .. 'sh:' .. h, seen_at, member) end
  end
  redis.call('ZADD', B .. 'seen', seen_at, member)
  local new_bands = 0
  for _, tier in ipairs({{'t', e.title_fp}, {'b', e.body_fp}}) do
    local tc, fp = tier[1], tier[2]
    if fp then
      redis.call('HSET', ek, tc, fp)
      redis.call('ZADD', B .. tc .. 'f:' .. fp, seen_at, member)
      for _, key in ipairs(e.keys[tc]) do new_bands = new_bands + redis.call('SADD', B .. key, fp) end
    end
  end
  if new_bands > 0 then redis.call('INCRBY', B .. 'nbands', new_bands) end
  return id
end

local function record(q, tc, m, status, seen_at)
  -- the latest decision about q.url
  local dk = B .. 'd:' .. q.url
  redis.call('DEL', dk)
  redis.call('HSET', dk, 'status', status, 'tier', tc, 'distance', m.d, 'original', m.id, 'decided_at', seen_at)
  if q.title then redis.call('HSET', dk, 'title', q.title) end
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
  local f = redis.call('HMGET', B .. 'e:' .. id, 'b', 'x', 'h')
  local eb, ex, eh = f[1] or nil, f[2] or nil, f[3] or nil
  if q.body_fp and eb then
    if dist(q.body_fp, eb, L.title_body_distance) <= L.title_body_distance then return true end
    if not ex then return false end
    local mine = {}
    for _, h in ipairs(q.sentences) do mine[h] = true end
    for _, h in ipairs(split(ex)) do if mine[h] then return true end end
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
  return shared >= 1 and body_distance ~= nil and body_distance <= L.sentence_body_distance
end

-- rule.py: nearest -----------------------------------------------------------------------------

local function nearest(tc, fp, k, nb, limit, keys, accept)
  -- the limit nearest entries within k: {d, id}, by distance, then first seen, then id; with
  -- accept(id), only accepted entries count, so every holder of a candidate fingerprint is read
  local distances, cands = {}, {}
  for _, other in ipairs(candidates(keys)) do
    if distances[other] == nil then
      distances[other] = dist(other, fp, k)
      if distances[other] <= k then cands[#cands + 1] = {distances[other], other} end
    end
  end
  table.sort(cands, function(x, y) return x[1] < y[1] end)
  local out, i = {}, 1
  while i <= #cands and #out < limit do
    local d, group = cands[i][1], {}
    while i <= #cands and cands[i][1] == d do
      if accept then
        for _, e in ipairs(holders(tc, cands[i][2], nb, nil)) do
          if accept(e.id) then group[#group + 1] = e end
        end
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

-- rule.SENTENCES_FIGURES (until redis.py passes it as a limit)
local sentences_figures = L.sentences_figures or 3

local function sentence_tier(q, nb)
  local last, mine = q.sentences[#q.sentences], {}
  for _, h in ipairs(q.sentences) do mine[h] = true end
  for _, e in ipairs(sentence_holders(q.sentences, nb)) do
    local f = redis.call('HMGET', B .. 'e:' .. e.id, 'm', 'b', 'x')
    local distance, item = nil, nil
    if q.body_fp and f[2] then distance = dist(q.body_fp, f[2], 64 * 4) end
    local x = split(f[3] or '')
    -- the entry's sample is all its sentences, or covers the range of all of the item's
    if e.stored < L.sentences_stored or last <= x[#x] then item = #q.sentences end
    -- shared sentences that are not lines (signatures.is_line: the top bit set)
    local sentences = e.shared
    for _, h in ipairs(x) do
      if mine[h] and string.sub(h, 1, 1) >= '8' then sentences = sentences - 1 end
    end
    if sentences_match(e.shared, e.stored, q.sentences_shared, distance, item)
        and (sentences >= sentences_figures or numbers_agree(q.numbers, f[1] or nil, q.title_numbers, true)) then
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
    return numbers_agree(q.numbers, redis.call('HGET', B .. 'e:' .. id, 'm') or nil, q.title_numbers, false)
  end
  if q.title_fp then
    local accept = function(id)
      return bodies_agree(q, id) and (not guarded or numbers_of(id))
    end
    local found = nearest('t', q.title_fp, q.title_k, nb, 1, q.keys.t, accept)
    if #found > 0 then return 't', found[1] end
  end
  if q.body_fp then
    local accept = nil
    if guarded and q.figures then accept = numbers_of end
    local found = nearest('b', q.body_fp, q.body_k, nb, 1, q.keys.b, accept)
    if #found > 0 then return 'b', found[1] end
  end
  if q.sentences_shared > 0 and #q.sentences > 0 then
    local m = sentence_tier(q, nb)
    if m then return 's', m end
  end
  return nil, nil
end

local function match_reply(tc, m)
  return {'match', tc, m.d, m.id, redis.call('HGETALL', B .. 'e:' .. m.id)}
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
      for _, m in ipairs(nearest(spec[1], spec[2], spec[3], a.not_before or '-inf', a.limit, a.keys[spec[1]], nil)) do
        out[#out + 1] = {spec[1], m.d, m.id, redis.call('HGETALL', B .. 'e:' .. m.id)}
      end
    end
  end
  return out
end

-- redis: maintenance ---------------------------------------------------------------------------

local function remove(member, emptied)
  local ek = B .. 'e:' .. member
  local f = redis.call('HMGET', ek, 't', 'b', 'u', 'x', 'o')
  if redis.call('DEL', ek) == 0 then return 0 end
  if f[5] then redis.call('SREM', B .. 'pending:' .. f[5], member) end
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

-- redis: operations ----------------------------------------------------------------------------

local op = A.op
if op == 'check' then
  -- an added outcome is remembered under the request token: a retry gets its entry back
  if A.token then
    local prev = redis.call('GET', B .. 'r:' .. A.token)
    if prev then return {'added', tonumber(prev)} end
  end
  if A.q.owner then redis.call('SET', B .. 'alive:' .. A.q.owner, '1', 'EX', A.lease) end
  local reply = check_and_add(A.q, A.flagged or {})
  if A.token and reply[1] == 'added' then redis.call('SET', B .. 'r:' .. A.token, reply[2], 'EX', A.token_ttl) end
  return reply
elseif op == 'peek' then
  local tc, m = peek(A.q)
  if not tc then return {'new'} end
  return match_reply(tc, m)
elseif op == 'lookup' then
  return lookup(A)
elseif op == 'add' then
  -- unchecked bulk add (warm-up, benchmarks): entries {title_fp, body_fp, url, title, seen_at, keys}
  for _, e in ipairs(A.entries) do insert(e, e.seen_at, 0) end
  return #A.entries
elseif op == 'remove' then
  -- how 'older' (value: a score, batch), 'id' (value: a member) or 'url':
  -- {removed, {tier char, hex, ...} of fingerprints no entry holds any more}
  local emptied, n = {}, 0
  if A.how == 'older' then
    local doomed = redis.call('ZRANGEBYSCORE', B .. 'seen', '-inf', '(' .. A.value, 'LIMIT', 0, A.batch)
    for _, member in ipairs(doomed) do n = n + remove(member, emptied) end
    if #doomed < A.batch then
      for _, url in ipairs(redis.call('ZRANGEBYSCORE', B .. 'decided', '-inf', '(' .. A.value)) do
        forget_decision(url)
      end
    end
  elseif A.how == 'id' then
    n = remove(A.value, emptied)
  else
    for _, member in ipairs(redis.call('SMEMBERS', B .. 'u:' .. A.value)) do n = n + remove(member, emptied) end
    forget_decision(A.value)
  end
  return {n, emptied}
elseif op == 'deliver' then
  -- ids: members whose items reached storage; no longer pending
  local n = 0
  for _, member in ipairs(A.ids) do
    local ek = B .. 'e:' .. member
    local owner = redis.call('HGET', ek, 'o')
    if owner then
      redis.call('HDEL', ek, 'o')
      redis.call('SREM', B .. 'pending:' .. owner, member)
      n = n + 1
    end
  end
  return n
elseif op == 'release' then
  -- ids: pending members whose items were dropped downstream; or owner: every pending member of
  -- a dead owner. {removed, emptied fingerprints} as 'remove'
  local emptied, n = {}, 0
  if A.owner then
    for _, member in ipairs(redis.call('SMEMBERS', B .. 'pending:' .. A.owner)) do n = n + remove(member, emptied) end
    redis.call('DEL', B .. 'pending:' .. A.owner)
    redis.call('SREM', B .. 'owners', A.owner)
  else
    for _, member in ipairs(A.ids) do
      if redis.call('HEXISTS', B .. 'e:' .. member, 'o') == 1 then n = n + remove(member, emptied) end
    end
  end
  return {n, emptied}
elseif op == 'heartbeat' then
  redis.call('SET', B .. 'alive:' .. A.owner, '1', 'EX', A.lease)
  return 1
elseif op == 'dropbands' then
  -- fps {tier char, hex, band keys}: band members dropped only if no entry holds the fingerprint
  local dropped = 0
  for _, f in ipairs(A.fps) do
    if redis.call('EXISTS', B .. f[1] .. 'f:' .. f[2]) == 0 then
      for _, key in ipairs(f[3]) do dropped = dropped + redis.call('SREM', B .. key, f[2]) end
    end
  end
  if dropped > 0 then redis.call('DECRBY', B .. 'nbands', dropped) end
  return dropped
end
return redis.error_reply('scrapy-simhash: unknown operation ' .. tostring(op))
