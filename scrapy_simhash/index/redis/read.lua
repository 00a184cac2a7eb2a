-- Read-only: the fields asked of each hash in KEYS, returned as one string, because parsing one
-- reply in Python costs far less than parsing a reply per field. No part of the dedup rule is here.
-- ARGV[i] lists the fields asked of KEYS[i], each preceded by its length in one byte.
-- The answer: per field asked, in order, the length of its value (4 bytes, big-endian; 0 when the
-- field is absent) and the value.
local out = {}
for i, key in ipairs(KEYS) do
  local spec, fields, at = ARGV[i], {}, 1
  while at <= #spec do
    local n = string.byte(spec, at)
    fields[#fields + 1] = string.sub(spec, at + 1, at + n)
    at = at + 1 + n
  end
  local values = redis.call('HMGET', key, unpack(fields))
  for j = 1, #fields do
    local v = values[j]
    if v then
      out[#out + 1] = struct.pack('>I4', #v) .. v
    else
      out[#out + 1] = '\0\0\0\0'
    end
  end
end
return table.concat(out)
