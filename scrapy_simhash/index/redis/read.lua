-- Read-only: the fields asked of each hash in KEYS, returned as one string, because parsing one
-- reply in Python costs far less than parsing a reply per field. No part of the dedup rule is here.
-- ARGV: for each key in turn, how many fields are asked of it, then those fields.
-- The answer: per field asked, in order, the length of its value (4 bytes, big-endian; 0 when the
-- field is absent) and the value.
local out, at, none, pack = {}, 1, '\0\0\0\0', struct.pack
for _, key in ipairs(KEYS) do
  local n = tonumber(ARGV[at])
  local values = redis.call('HMGET', key, unpack(ARGV, at + 1, at + n))
  at = at + n + 1
  for j = 1, n do
    local v = values[j]
    if v then
      out[#out + 1] = pack('>I4', #v)
      out[#out + 1] = v
    else
      out[#out + 1] = none
    end
  end
end
return table.concat(out)
